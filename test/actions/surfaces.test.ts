import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createVerdict, type Verdict } from '../../src/index.js';
import { createMcpServer } from '../../src/mcp/mcp-server.js';
import { createApiServer } from '../../src/server/api-server.js';
import type { ApiTokenRow } from '../../src/store/access-store.js';
import { actionsConfigText, blockedProvider, LABEL, REPO } from '../harness/actions-fixture.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * DESIGN §17 through the public API's thin users: `/v1/proposals` and `/v1/actions`, the MCP tools
 * `proposals_list` and `proposal_decide`, the dashboard's proposals page. Actions on propose, no
 * token: proposals are made and decided, nothing is written.
 */

const t = tempDir('verdict-actions-surfaces-');
let v: Verdict;
let app: FastifyInstance;
let token: string;
let row: ApiTokenRow;
const issue = (number: number, body: string) => ({
  number,
  title: `Issue ${number}`,
  body,
  state: 'open',
  labels: [],
  user: { login: 'alice' },
  created_at: '2026-01-05T10:00:00Z',
  updated_at: '2026-01-05T10:00:00Z',
});

beforeAll(async () => {
  const configFile = join(t.dir, 'verdict.config.yaml');
  writeFileSync(configFile, actionsConfigText('propose'));
  v = await createVerdict({
    database: join(t.dir, 'v.db'),
    configFile,
    sets: [],
    provider: blockedProvider(new ManualClock()),
  });
  for (const [n, body] of [
    [1, 'BLOCKED on the vendor'],
    [2, 'BLOCKED on legal'],
    [3, 'Rename a button'],
  ] as const) {
    await v.github.applyWebhook({
      event: 'issues',
      deliveryId: randomUUID(),
      payload: { action: 'opened', issue: issue(n, body), repository: { full_name: REPO }, sender: { login: 'alice' } },
    });
  }
  await v.worker({ tickMs: 50 }).runUntilIdle();
  const created = await v.tokens.create({
    workspace: 'github',
    role: 'write',
    name: 'surfaces',
    createWorkspace: true,
  });
  token = created.token;
  row = (await v.tokens.authenticate(token))!;
  app = await createApiServer(v, {});
}, 120_000);
afterAll(async () => {
  await app?.close();
  await v?.close();
  t.cleanup();
});

const api = async (method: 'GET' | 'POST', url: string, payload?: object) => {
  const r = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    ...(payload ? { payload } : {}),
  });
  return { status: r.statusCode, body: r.json() as Record<string, any> };
};

describe('actions on the API, MCP and the dashboard', () => {
  it('GET /v1/proposals lists the model\u2019s label changes under the gate; POST /v1/proposals/apply is an agree', async () => {
    const list = await api('GET', '/v1/proposals');
    expect(list.status).toBe(200);
    expect(list.body.proposals.map((p: { ref: string }) => p.ref)).toEqual(['#1', '#2']);
    expect(list.body.proposals[0]).toMatchObject({
      set: 'triage',
      key: 'blocked',
      labels: [LABEL],
      reason: 'mode',
      decision: 'yes (p=0.95)',
    });
    const applied = await api('POST', '/v1/proposals/apply', { ref: '#1', set: 'triage', key: 'blocked' });
    expect(applied.status).toBe(200);
    expect(applied.body).toMatchObject({
      verdict: { verdict: 'agree', author: `token:${row.id} (surfaces)` },
      queued: 1,
    });
    expect((await api('POST', '/v1/proposals/apply', { ref: '#3', set: 'triage', key: 'blocked' })).status).toBe(400); // no proposal there
    const keys = (await api('GET', '/v1/actions')).body.keys;
    expect(keys[0]).toMatchObject({
      set: 'triage',
      key: 'blocked',
      mode: 'propose',
      proposed: 1,
      pending: 1,
      gate: { passes: false, labels: 1 },
    });
  });

  it('MCP: proposals_list and proposal_decide (dismiss is a disagree)', async () => {
    const server = createMcpServer(v, { principal: async () => row });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    const client = new Client({ name: 'actions-test', version: '1.0.0' });
    await client.connect(b);
    const listed = (await client.callTool({ name: 'proposals_list', arguments: {} })) as CallToolResult;
    expect((listed.structuredContent as { proposals: Array<{ ref: string }> }).proposals.map((p) => p.ref)).toEqual([
      '#2',
    ]);
    const decided = (await client.callTool({
      name: 'proposal_decide',
      arguments: { ref: '#2', set: 'triage', key: 'blocked', decision: 'dismiss' },
    })) as CallToolResult;
    expect(decided.isError).toBeFalsy();
    expect((decided.structuredContent as { verdict: { verdict: string } }).verdict.verdict).toBe('disagree');
    expect(
      ((await client.callTool({ name: 'proposals_list', arguments: {} })) as CallToolResult).structuredContent,
    ).toEqual({ proposals: [] });
    await client.close();
  });

  it('the dashboard\u2019s proposals page shows each key\u2019s gate and counts', async () => {
    const session = (await v.sessions.open(token))!;
    const r = await app.inject({
      method: 'GET',
      url: '/ui/proposals',
      headers: { cookie: `verdict_session=${session.sessionId}` },
    });
    expect(r.statusCode).toBe(200);
    expect(r.body).toContain('<h1>Proposals</h1>');
    // One apply (agree) and one dismiss (disagree): 2 labels at precision 0.5.
    expect(r.body).toContain(
      '<td>triage/blocked</td><td>propose</td><td>not met: 28 more labelled items, precision 0.50 &lt; 0.9</td><td>50.0% (≥ 90.0%)</td><td>2 / 30 (verdicts)</td>',
    );
    expect(r.body).toContain('No proposal is open.');
  });
});
