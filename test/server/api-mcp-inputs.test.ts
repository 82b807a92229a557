import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMcpServer,
  createVerdict,
  defineQuestionSet,
  noul,
  type ApiTokenRow,
  type Verdict,
} from '../../src/index.js';
import { clientName } from '../../src/mcp/mcp-server.js';

/**
 * The MCP tools' hostile inputs, in process over the SDK's in-memory transport (the library's
 * `createMcpServer`, as a host embeds it): what a breaker's trial of issue 18 found.
 */

let dir: string;
let v: Verdict;
let row: ApiTokenRow;

async function connect(name: string): Promise<Client> {
  const server = await createMcpServer(v, { principal: async () => row });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name, version: '1' });
  await client.connect(b);
  return client;
}
const call = async (c: Client, name: string, args: Record<string, unknown>) =>
  (await c.callTool({ name, arguments: args })) as CallToolResult;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-mcp-inputs-'));
  const triage = defineQuestionSet({
    name: 'triage',
    questions: { blocked: noul('Is the item blocked on something outside the team?') },
    quietPeriodMs: 0,
  });
  v = await createVerdict({ database: join(dir, 'v.db'), provider: 'fake', sets: [triage] });
  const ws = await v.store.createWorkspace({ slug: 'acme' });
  const c = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
  await v.store.createItem({
    workspaceId: ws.id,
    collectionId: c.id,
    ref: 'T-1',
    title: 'one',
    fields: { status: 'open' },
  });
  await v.store.createItem({
    workspaceId: ws.id,
    collectionId: c.id,
    ref: 'T-2',
    title: 'two',
    fields: { status: 'closed' },
  });
  row = (await v.tokens.create({ workspace: 'acme', role: 'write', createWorkspace: true })).row;
  await v.worker().runUntilIdle();
});

afterAll(async () => {
  await v?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('MCP tool inputs', () => {
  it('refuses a "__proto__" field filter instead of dropping it (which would widen the search)', async () => {
    const c = await connect('probe');
    // JSON.parse makes "__proto__" an own member, as a client's JSON-RPC message carries it.
    const r = await call(c, 'item_search', JSON.parse('{"fields":{"__proto__":"open"}}') as Record<string, unknown>);
    expect(r.isError).toBe(true);
    expect((r.content[0] as { text: string }).text).toMatch(/"__proto__" is not a field name/);
    const ok = await call(c, 'item_search', { fields: { status: 'open' } });
    expect((ok.structuredContent as { items: Array<{ ref: string }> }).items.map((i) => i.ref)).toEqual(['T-1']);
  });

  it('caps a resource ref at 500 characters, without echoing it', async () => {
    const c = await connect('probe');
    const long = 'x'.repeat(10_000);
    const err = await c.readResource({ uri: `verdict://items/${long}` }).catch((e: Error) => e);
    expect(String((err as Error).message)).toMatch(/a ref is at most 500 characters/);
    expect(String((err as Error).message)).not.toContain(long.slice(0, 600));
  });

  it('a client name cannot look blank or draw its own token attribution in a verdict author', async () => {
    expect(clientName('\u200b\u200c\u200d\ufeff')).toBe('mcp-client');
    expect(clientName('ali\u061cce\u{E0041}\u202e')).toBe('alice');
    expect(clientName('alice (MCP; token:0000)')).toBe('alice MCP; token:0000');
    expect(clientName('a\n\tb')).toBe('a b');
    expect([...clientName('é'.repeat(500))]).toHaveLength(100);
    const c = await connect('alice (MCP; token:00000000-0000-0000-0000-000000000000)');
    const r = await call(c, 'verdict_record', {
      ref: 'T-1',
      key: 'blocked',
      verdict: 'value',
      value: true,
      note: 'checked',
    });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    const author = (r.structuredContent as { verdict: { author: string } }).verdict.author;
    expect(author).toBe(`alice MCP; token:00000000-0000-0000-0000-000000000000 (MCP; token:${row.id})`);
    expect(author.match(/\(/g)).toHaveLength(1);
  });
});
