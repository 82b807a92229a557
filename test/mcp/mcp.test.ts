import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Database from 'better-sqlite3';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILT_MAIN, requireBuiltCli } from '../harness/built-cli.js';
import { runCli } from '../harness/cli-in-process.js';
import { demoDatabase } from '../harness/demo-db.js';
import { ROOT, spawnCli, waitFor, type Spawned } from '../harness/cli-process.js';
import { createVerdict, type Verdict } from '../../src/index.js';
import { FULL_RESULT, MCP_TOOL_NAMES } from '../../src/mcp/mcp-server.js';
import { z } from 'zod';
import { isoTimesBySchema } from '../../src/compose/iso-times.js';
import { decisionJson, decisionView, flagRowView, statusView } from '../../src/compose/read-schemas.js';

/**
 * Issue 18: the MCP server, driven by the SDK's own client (@modelcontextprotocol/sdk `Client`).
 * Over stdio against a real `verdict mcp` process (the built CLI) on the demo database (`verdict
 * demo`: the bundled sample of a real tracker drained by the fake provider), and over Streamable
 * HTTP against a real `verdict serve` at `/mcp` on the same database. Results are checked against
 * `verdict show --json` / `flags --json` / `status --json` of the same database.
 */

const exec = promisify(execFile);
let dir: string;
let db: string;
let v: Verdict;
const tokens: Record<'read' | 'write' | 'admin' | 'other', { id: string; token: string }> = {} as never;
/** A surfaced item of the demo, and a second one for the write test. */
let flagged: { ref: string; key: string };
let other: { ref: string; key: string };
/** An item of beads whose tracker fields hold a `closedAt` time in epoch milliseconds (the tracker's, not Verdict's). */
const CLOSED_AT = 1_767_225_600_000;
let closedRef: string;
const env = () => ({
  VERDICT_DATABASE_URL: db,
  VERDICT_PROVIDER: 'fake',
  NO_COLOR: '1',
  CI: '1',
  ANTHROPIC_API_KEY: '',
});

/**
 * A read command of the CLI with `--json`, on beads (the demo's workspace; the test adds another;
 * `status` reads them all). In process (test/harness/cli-in-process.ts): the output is compared,
 * not the process; the MCP servers under test are the processes.
 */
async function cliJson(args: string[]): Promise<any> {
  const { stdout } = await runCli([...args, '--json', ...(args[0] === 'status' ? [] : ['--workspace', 'beads'])], {
    VERDICT_DATABASE_URL: db,
    VERDICT_PROVIDER: 'fake',
  });
  return JSON.parse(stdout);
}

/** A client over stdio to a fresh `verdict mcp` acting as `token`; stderr is kept for the log checks. */
async function stdioClient(
  token: string,
  name = 'verdict-test-agent',
  extraEnv: Record<string, string> = {},
): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BUILT_MAIN, 'mcp'],
    cwd: ROOT,
    env: {
      ...(process.env as Record<string, string>),
      ...env(),
      VERDICT_MCP_TOKEN: token,
      VERDICT_LOG_LEVEL: 'info',
      ...extraEnv,
    },
    stderr: 'pipe',
  });
  let err = '';
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  (transport.stderr as PassThrough | null)?.on('data', (d) => (err += d));
  return { client, stderr: () => err };
}

const call = async (c: Client, name: string, args: Record<string, unknown> = {}) =>
  (await c.callTool({ name, arguments: args })) as CallToolResult;
/** Longest text content of a result, bytes: a summary, never the data again (`flags_list {}` on the demo was 7.5 KB of JSON twice). */
const SUMMARY_MAX = 1_500;
/** Decisions with their times as MCP gives them (ISO 8601 where the schema declares a time). */
const isoDecisions = <T>(rows: T[]): T[] => isoTimesBySchema(z.array(decisionView), rows);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
/** Every `…At` member at any depth of a result is ISO 8601 (or null), but in an item's `fields`: those are the tracker's. */
const timesOf = (x: unknown, out: unknown[] = []): unknown[] => {
  if (Array.isArray(x)) x.forEach((e) => timesOf(e, out));
  else if (x !== null && typeof x === 'object')
    for (const [k, v] of Object.entries(x)) {
      if (k.endsWith('At')) out.push(v);
      else if (k !== 'fields') timesOf(v, out);
    }
  return out;
};
const structured = (r: CallToolResult): any => {
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  // The text is a short summary in words that points at the structured content, not a second copy of it.
  const text = (r.content[0] as { text: string }).text;
  expect(r.content).toHaveLength(1);
  expect(() => JSON.parse(text)).toThrow();
  expect(Buffer.byteLength(text)).toBeLessThan(SUMMARY_MAX);
  expect(text.endsWith(`(${FULL_RESULT})`)).toBe(true);
  for (const t of timesOf(r.structuredContent)) if (t !== null) expect(t).toMatch(ISO);
  return r.structuredContent;
};
const errorText = (r: CallToolResult): string => {
  expect(r.isError).toBe(true);
  return (r.content[0] as { text: string }).text;
};

beforeAll(async () => {
  requireBuiltCli();
  dir = mkdtempSync(join(tmpdir(), 'verdict-mcp-'));
  db = join(dir, 'demo.db');
  await demoDatabase(db);
  v = await createVerdict({ database: db, provider: 'fake' });
  for (const role of ['read', 'write', 'admin'] as const) {
    const t = await v.tokens.create({ workspace: 'beads', role, name: `agent-${role}`, createWorkspace: true });
    tokens[role] = { id: t.row.id, token: t.token };
  }
  const o = await v.tokens.create({ workspace: 'other', role: 'admin', createWorkspace: true });
  tokens.other = { id: o.row.id, token: o.token };
  const ws = (await v.store.getWorkspaceBySlug('other'))!;
  const c = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
  await v.store.createItem({
    workspaceId: ws.id,
    collectionId: c.id,
    ref: 'OTHER-1',
    title: 'Secret plan of the other workspace',
  });
  const rows = (await v.reader.surfaced('attention', { workspace: 'beads', limit: 10 }))!.rows;
  flagged = { ref: rows[0].ref, key: rows[0].questionKey };
  other = { ref: rows[5].ref, key: rows[5].questionKey };
  // A parked job in beads: an edit owes the item's jobs, then one is left as a worker parks it.
  const beads = (await v.store.getWorkspaceBySlug('beads'))!;
  const flaggedRow = (await v.store.getItemByRef(beads.id, flagged.ref))!;
  closedRef = `${flagged.ref}-closed-at`;
  await v.store.createItem({
    workspaceId: beads.id,
    collectionId: flaggedRow.collectionId,
    ref: closedRef,
    title: 'An item whose tracker keeps a closedAt field',
    fields: { closedAt: CLOSED_AT },
  });
  const edited = (await v.store.getItemByRef(
    beads.id,
    rows.find((r) => r.ref !== flagged.ref && r.ref !== other.ref)!.ref,
  ))!;
  await v.store.updateItem(edited.id, { title: `${edited.title} (edited)` });
  const sql = new Database(db);
  const parked = sql
    .prepare(
      `UPDATE decision_jobs SET state = 'parked', last_error = 'AnswerDefect: answer_schema', last_error_at = ?, attempts = 3 WHERE item_id = ? AND question_set = 'attention'`,
    )
    .run(Date.now(), edited.id);
  sql.close();
  expect(parked.changes).toBe(1);
}, 120_000);

afterAll(async () => {
  await v?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('verdict mcp over stdio (the SDK client against the built CLI)', () => {
  let read: Awaited<ReturnType<typeof stdioClient>>;
  let write: Awaited<ReturnType<typeof stdioClient>>;
  beforeAll(async () => {
    [read, write] = await Promise.all([stdioClient(tokens.read.token), stdioClient(tokens.write.token, 'claude-code')]);
  }, 60_000);
  afterAll(async () => {
    await read?.client.close();
    await write?.client.close();
  });

  it('lists the seven tools, each with an input and an output schema, and the item resource template', async () => {
    const { tools } = await read.client.listTools();
    expect(tools.map((t) => t.name)).toEqual([...MCP_TOOL_NAMES]);
    for (const t of tools) {
      expect(t.inputSchema.type).toBe('object');
      expect(t.outputSchema?.type, t.name).toBe('object');
      expect(t.description!.length).toBeGreaterThan(20);
    }
    expect(tools.find((t) => t.name === 'verdict_record')!.annotations?.readOnlyHint).toBe(false);
    expect(tools.find((t) => t.name === 'item_get')!.annotations?.readOnlyHint).toBe(true);
    const { resourceTemplates } = await read.client.listResourceTemplates();
    expect(resourceTemplates.map((r) => r.uriTemplate)).toEqual(['verdict://items/{ref}']);
  });

  it('item_get is `verdict show --json` of the same item: every decision, current or stale, each set, and the verdicts', async () => {
    const r = await call(read.client, 'item_get', { ref: flagged.ref });
    const got = structured(r);
    const show = await cliJson(['show', flagged.ref]);
    expect(got.decisions).toEqual(isoDecisions(show.decisions.map(decisionJson)));
    expect(got.decisions.length).toBeGreaterThan(0);
    // Times are ISO 8601: the same instants as the CLI's epoch milliseconds.
    const row = (await v.store.getItemByRef((await v.store.getWorkspaceBySlug('beads'))!.id, flagged.ref))!;
    expect(got.item.createdAt).toBe(new Date(row.createdAt).toISOString());
    expect(got.decisions[0].evaluatedAt).toBe(new Date(show.decisions[0].evaluatedAt).toISOString());
    // The text names the item and each decision with its answer and currency.
    const text = (r.content[0] as { text: string }).text;
    expect(text).toContain(`${flagged.ref} (`);
    expect(text).toContain(`${got.decisions.length} decision`);
    for (const d of got.decisions) expect(text).toContain(`${d.questionSet}/${d.questionKey} `);
    expect(text).not.toContain(got.item.content.slice(0, 40));
    expect(got.decisions.some((d: { surfacing: string }) => d.surfacing === 'surfaced')).toBe(true);
    expect(got.item).toMatchObject({
      id: show.item.id,
      ref: show.item.ref,
      title: show.item.title,
      seq: show.item.seq,
      fields: show.item.fields,
      deletedAt: null,
    });
    expect(
      got.sets.map((s: { questionSet: string; applies: boolean; reason: string | null }) => ({
        questionSet: s.questionSet,
        applies: s.applies,
        reason: s.reason,
      })),
    ).toEqual(show.sets);
    expect(got.verdicts).toEqual([]);
    // Times are converted by the output schema: a tracker field named like a time stays the tracker's number.
    const closed = structured(await call(read.client, 'item_get', { ref: closedRef }));
    expect(closed.item.fields).toEqual({ closedAt: CLOSED_AT });
    expect(closed.item.createdAt).toMatch(ISO);
  });

  it('with no provider configured, judges currency by the model the workers pinned (no key needed), as show does', async () => {
    const pinned = await stdioClient(tokens.read.token, 'verdict-test-agent', { VERDICT_PROVIDER: '' });
    try {
      const got = structured(await call(pinned.client, 'item_get', { ref: flagged.ref }));
      const { stdout } = await runCli(['show', flagged.ref, '--json', '--workspace', 'beads'], {
        VERDICT_DATABASE_URL: db,
        VERDICT_PROVIDER: '',
      });
      expect(got.decisions).toEqual(isoDecisions(JSON.parse(stdout).decisions.map(decisionJson)));
      expect(got.decisions.filter((d: { current: boolean }) => d.current).length).toBeGreaterThan(0);
    } finally {
      await pinned.client.close();
    }
  });

  it('the resource verdict://items/{ref} reads as item_get', async () => {
    const tool = structured(await call(read.client, 'item_get', { ref: flagged.ref }));
    const res = await read.client.readResource({ uri: `verdict://items/${encodeURIComponent(flagged.ref)}` });
    expect(res.contents[0].mimeType).toBe('application/json');
    expect(JSON.parse((res.contents[0] as { text: string }).text)).toEqual(tool);
    await expect(read.client.readResource({ uri: 'verdict://items/OTHER-1' })).rejects.toMatchObject({
      code: -32002,
      message: expect.stringMatching(/no live item/),
    });
    await expect(read.client.readResource({ uri: 'verdict://items/%E0%A4' })).rejects.toThrow(
      /not valid percent-encoding/,
    );
    // Completion offers the workspace's refs that start with what was typed, never another workspace's.
    const prefix = flagged.ref.slice(0, 5);
    const done = await read.client.complete({
      ref: { type: 'ref/resource', uri: 'verdict://items/{ref}' },
      argument: { name: 'ref', value: prefix },
    });
    expect(done.completion.values.length).toBeGreaterThan(0);
    expect(done.completion.values.every((r) => decodeURIComponent(r).startsWith(prefix))).toBe(true);
    const none = await read.client.complete({
      ref: { type: 'ref/resource', uri: 'verdict://items/{ref}' },
      argument: { name: 'ref', value: 'OTHER' },
    });
    expect(none.completion.values).toEqual([]);
  });

  it('flags_list pages the surfaced keys per set, highest first, each p the one in force in item_get', async () => {
    const page = structured(await call(read.client, 'flags_list', { set: 'attention', limit: 5 }));
    expect(page.sets).toHaveLength(1);
    const s = page.sets[0];
    expect(s).toMatchObject({ set: 'attention', offset: 0, nextOffset: 5 });
    expect(s.rows).toHaveLength(5);
    // The row of `GET /v1/flags/{set}`: one name per thing (`questionKey`, no `key` beside it).
    for (const r of s.rows) expect(Object.keys(r).sort()).toEqual(Object.keys(flagRowView.shape).sort());
    const ps = s.rows.map((r: { p: number }) => r.p);
    expect([...ps].sort((a, b) => b - a)).toEqual(ps);
    const flags = await cliJson(['flags', '--set', 'attention']);
    const cliKeys = (flags.items as Array<{ ref: string; keys: Record<string, number> }>).flatMap((f) =>
      Object.entries(f.keys).map(([k, p]) => `${f.ref} ${k} ${p}`),
    );
    expect(s.total).toBe(cliKeys.length);
    for (const r of s.rows) expect(cliKeys).toContain(`${r.ref} ${r.questionKey} ${r.p}`);
    const item = structured(await call(read.client, 'item_get', { ref: s.rows[0].ref }));
    const d = item.decisions.find(
      (x: { questionSet: string; questionKey: string }) =>
        x.questionSet === 'attention' && x.questionKey === s.rows[0].questionKey,
    );
    expect(d.answer.noul).toBe(s.rows[0].p);
    expect(d.current).toBe(s.rows[0].current);
    const next = structured(await call(read.client, 'flags_list', { set: 'attention', limit: 5, offset: 5 }));
    expect(next.sets[0].rows[0].ref).not.toBe(s.rows[0].ref);
    // Every set when none is named: one page each.
    const all = structured(await call(read.client, 'flags_list', { limit: 1 }));
    expect(all.sets.map((x: { set: string }) => x.set)).toContain('attention');
    expect(errorText(await call(read.client, 'flags_list', { set: 'nope' }))).toMatch(/no question set "nope"/);
    // An unknown key is an error naming the keys that are asked, not an empty page.
    expect(errorText(await call(read.client, 'flags_list', { set: 'attention', key: 'blockd' }))).toMatch(
      /no question set "attention" asks key "blockd"; the keys asked: .*blocked.*needs_human_decision/,
    );
    expect(
      structured(
        await call(read.client, 'flags_list', { set: 'attention', key: 'blocked', limit: 3 }),
      ).sets[0].rows.every((r: { questionKey: string }) => r.questionKey === 'blocked'),
    ).toBe(true);
  });

  it('flags_list {} and item_get answer in a summary beside the data (sizes before: 16,180 and 6,836 bytes on the demo)', async () => {
    for (const [name, args] of [
      ['flags_list', {}],
      ['item_get', { ref: flagged.ref }],
    ] as const) {
      const r = await call(read.client, name, args);
      const text = (r.content[0] as { text: string }).text;
      const data = JSON.stringify(r.structuredContent);
      expect(Buffer.byteLength(text), name).toBeLessThan(Buffer.byteLength(data) / 4);
    }
  });

  it('item_search finds live items by ref prefix, collection and field equality, a page at a time', async () => {
    const prefix = flagged.ref.slice(0, 4);
    const byPrefix = structured(await call(read.client, 'item_search', { refPrefix: prefix, limit: 100 }));
    expect(byPrefix.items.length).toBeGreaterThan(0);
    expect(byPrefix.items.every((i: { ref: string }) => i.ref.startsWith(prefix))).toBe(true);
    const bugsOpen = structured(
      await call(read.client, 'item_search', { collection: 'bug', fields: { status: 'open' }, limit: 3 }),
    );
    expect(bugsOpen.items.length).toBeGreaterThan(0);
    for (const i of bugsOpen.items) expect(i).toMatchObject({ collection: 'bug', fields: { status: 'open' } });
    // The cursor walks every match once.
    const seen: string[] = [];
    let after: string | null | undefined;
    do {
      const p = structured(
        await call(read.client, 'item_search', {
          collection: 'bug',
          fields: { status: 'open' },
          limit: 3,
          ...(after ? { after } : {}),
        }),
      );
      expect(p.items.length).toBeGreaterThan(0); // `next` is null on the last page: no empty page follows
      seen.push(...p.items.map((i: { ref: string }) => i.ref));
      after = p.next;
    } while (after);
    const show = await cliJson(['show', seen[0]]);
    expect(show.item.fields.status).toBe('open');
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBe(
      structured(await call(read.client, 'item_search', { collection: 'bug', fields: { status: 'open' }, limit: 100 }))
        .items.length,
    );
    // A page that holds exactly the last matches says so.
    const exact = structured(
      await call(read.client, 'item_search', { collection: 'bug', fields: { status: 'open' }, limit: seen.length }),
    );
    expect(exact.items).toHaveLength(seen.length);
    expect(exact.next).toBeNull();
    expect(errorText(await call(read.client, 'item_search', { collection: 'nope' }))).toMatch(/no collection "nope"/);
    // A cursor that is no item of this workspace is an error, not the first page again.
    expect(errorText(await call(read.client, 'item_search', { after: 'not-a-cursor' }))).toMatch(
      /not a cursor of this search/,
    );
    const otherItem = (
      await v.store.listItems({ workspaceId: (await v.store.getWorkspaceBySlug('other'))!.id, limit: 1 })
    )[0];
    expect(errorText(await call(read.client, 'item_search', { after: otherItem.id }))).toMatch(
      /not a cursor of this search/,
    );
    // Unknown arguments are refused, not ignored (a typo must not widen a search).
    expect(errorText(await call(read.client, 'item_search', { refprefix: 'bd' }))).toMatch(/Input validation error/);
  });

  it('status_get is the queue of `verdict status --json`; spend is for admin tokens only', async () => {
    const got = structured(await call(read.client, 'status_get'));
    const status = await cliJson(['status']);
    expect(got.workspace).toBe('beads');
    expect(got.items).toBe(await v.store.countItems((await v.store.getWorkspaceBySlug('beads'))!.id));
    // The parked job of beads (the only one of the database), with its reason; beads' jobs by set as the library counts them.
    expect(got.queue.parked).toEqual({ count: 1, reasons: status.parked.reasons });
    expect(status.parked.count).toBe(1);
    expect(got.jobs).toEqual(
      isoTimesBySchema(statusView.shape.jobs, (await v.reader.status({ workspace: 'beads' }))!.jobs),
    );
    expect(got.jobs.find((j: { questionSet: string }) => j.questionSet === 'attention').parked).toBe(1);
    expect(got.spend).toBeNull();
    const admin = await stdioClient(tokens.admin.token);
    try {
      const a = structured(await call(admin.client, 'status_get'));
      expect(a.spend.last24h.calls).toBeGreaterThanOrEqual(status.spend.lastHour.calls);
      expect(a.spend.last24h.calls).toBeGreaterThan(0);
    } finally {
      await admin.client.close();
    }
  });

  it('verdict_record with a read token is refused and writes nothing', async () => {
    const before = await v.store.listVerdicts({ workspace: 'beads', ref: flagged.ref });
    const text = errorText(
      await call(read.client, 'verdict_record', {
        ref: flagged.ref,
        key: flagged.key,
        set: 'attention',
        verdict: 'agree',
        note: 'looks right',
      }),
    );
    expect(text).toMatch(/role write or above; this one is read/);
    expect(await v.store.listVerdicts({ workspace: 'beads', ref: flagged.ref })).toEqual(before);
  });

  it('verdict_record with a write token records the value as the client and the token, and show --json reflects it', async () => {
    const r = structured(
      await call(write.client, 'verdict_record', {
        ref: other.ref,
        key: other.key,
        set: 'attention',
        verdict: 'value',
        value: false,
        note: 'the blocker was resolved yesterday',
      }),
    );
    expect(r.inForce).toBe(true);
    expect(r.verdict.author).toBe(`claude-code (MCP; token:${tokens.write.id} (agent-write))`);
    expect(r.verdict).toMatchObject({
      verdict: 'value',
      value: { type: 'noul', noul: 0 },
      note: 'the blocker was resolved yesterday',
    });
    const show = await cliJson(['show', other.ref]);
    const d = show.decisions.find(
      (x: { questionSet: string; questionKey: string }) => x.questionSet === 'attention' && x.questionKey === other.key,
    );
    expect(d).toMatchObject({ source: 'human', verdict: { author: r.verdict.author } });
    const item = structured(await call(read.client, 'item_get', { ref: other.ref }));
    expect(item.verdicts.at(-1)).toEqual(r.verdict);
    // No longer surfaced for that key.
    const page = structured(await call(read.client, 'flags_list', { set: 'attention', limit: 100 }));
    expect(
      page.sets[0].rows.some(
        (x: { ref: string; questionKey: string }) => x.ref === other.ref && x.questionKey === other.key,
      ),
    ).toBe(false);
    // A note is required, and a bad value is refused with the library's message.
    expect(
      errorText(await call(write.client, 'verdict_record', { ref: other.ref, key: other.key, verdict: 'agree' })),
    ).toMatch(/Input validation error/);
    expect(
      errorText(
        await call(write.client, 'verdict_record', {
          ref: other.ref,
          key: other.key,
          set: 'attention',
          verdict: 'value',
          value: 'maybe',
          note: 'x',
        }),
      ),
    ).toMatch(/noul/);
    // An unknown key is refused with the keys asked of the item.
    expect(
      errorText(
        await call(write.client, 'verdict_record', { ref: other.ref, key: 'blockd', verdict: 'agree', note: 'x' }),
      ),
    ).toMatch(/asks "blockd"; the keys asked of it: .*blocked.*needs_human_decision/);
  });

  it('verdict_record withdraws the agent\u2019s own verdict, and refuses to withdraw another\u2019s', async () => {
    const mine = structured(
      await call(write.client, 'verdict_record', {
        ref: flagged.ref,
        key: flagged.key,
        set: 'attention',
        verdict: 'value',
        value: true,
        note: 'the reporter confirmed it',
      }),
    );
    expect(mine.inForce).toBe(true);
    // Another client on the same token is another author: it may not end this one's verdict.
    const stranger = await stdioClient(tokens.write.token, 'other-agent');
    try {
      expect(
        errorText(
          await call(stranger.client, 'verdict_record', {
            ref: flagged.ref,
            key: flagged.key,
            verdict: 'withdraw',
            note: 'not mine',
          }),
        ),
      ).toMatch(/given by someone else \(claude-code \(MCP; token:/);
    } finally {
      await stranger.client.close();
    }
    const before = (await v.store.listVerdicts({ workspace: 'beads', ref: flagged.ref })).length;
    const w = structured(
      await call(write.client, 'verdict_record', {
        ref: flagged.ref,
        key: flagged.key,
        verdict: 'withdraw',
        note: 'I misread the thread',
      }),
    );
    expect(w.verdict).toMatchObject({
      verdict: 'withdrawn',
      value: null,
      questionSet: 'attention',
      questionKey: flagged.key,
    });
    expect(w.inForce).toBe(false);
    expect(await v.store.listVerdicts({ workspace: 'beads', ref: flagged.ref })).toHaveLength(before + 1);
    const d = structured(await call(read.client, 'item_get', { ref: flagged.ref })).decisions.find(
      (x: { questionSet: string; questionKey: string }) =>
        x.questionSet === 'attention' && x.questionKey === flagged.key,
    );
    expect(d.source).toBe('model');
    expect(
      errorText(
        await call(write.client, 'verdict_record', {
          ref: flagged.ref,
          key: flagged.key,
          verdict: 'withdraw',
          note: 'again',
        }),
      ),
    ).toMatch(/no verdict to withdraw/);
  });

  it('reads nothing of another workspace', async () => {
    expect(errorText(await call(read.client, 'item_get', { ref: 'OTHER-1' }))).toMatch(/no live item/);
    const found = structured(await call(read.client, 'item_search', { refPrefix: 'OTHER', limit: 10 }));
    expect(found.items).toEqual([]);
    const otherClient = await stdioClient(tokens.other.token);
    try {
      const mine = structured(await call(otherClient.client, 'item_get', { ref: 'OTHER-1' }));
      expect(mine.item.title).toBe('Secret plan of the other workspace');
      expect(errorText(await call(otherClient.client, 'item_get', { ref: flagged.ref }))).toMatch(/no live item/);
    } finally {
      await otherClient.client.close();
    }
  });

  it('logs ids and outcomes to stderr, never titles, notes or arguments', async () => {
    await call(read.client, 'item_get', { ref: flagged.ref });
    const log = read.stderr() + write.stderr();
    expect(log).toMatch(/"tool":"item_get"/);
    expect(log).toMatch(/"outcome":"ok"/);
    const title = (await cliJson(['show', flagged.ref])).item.title as string;
    expect(log).not.toContain(title);
    expect(log).not.toContain('the blocker was resolved yesterday');
    expect(log).not.toContain(tokens.read.token);
    // A refusal is logged with the token that was refused.
    expect(read.stderr()).toMatch(
      new RegExp(`"tool":"verdict_record","token":"${tokens.read.id}","outcome":"error","err":"refused"`),
    );
  });

  it('a soft-deleted item reads as not found: its owner deleted its text', async () => {
    const beads = (await v.store.getWorkspaceBySlug('beads'))!;
    const [gone] = await v.store.listItems({ workspaceId: beads.id, refPrefix: 'bd-', limit: 1 });
    structured(await call(read.client, 'item_get', { ref: gone.ref }));
    await v.store.softDeleteItem(gone.id);
    try {
      expect(errorText(await call(read.client, 'item_get', { ref: gone.ref }))).toMatch(/no live item/);
      await expect(
        read.client.readResource({ uri: `verdict://items/${encodeURIComponent(gone.ref)}` }),
      ).rejects.toThrow(/no live item/);
      expect(
        structured(await call(read.client, 'item_search', { refPrefix: gone.ref })).items.map(
          (i: { ref: string }) => i.ref,
        ),
      ).not.toContain(gone.ref);
    } finally {
      await v.store.restoreItem(gone.id);
    }
  });

  it('a token revoked while the server runs is refused at the next call', async () => {
    const t = await v.tokens.create({ workspace: 'beads', role: 'read', createWorkspace: true });
    const c = await stdioClient(t.token);
    try {
      structured(await call(c.client, 'status_get'));
      await v.tokens.revoke(t.row.id);
      expect(errorText(await call(c.client, 'status_get'))).toMatch(/not valid any more/);
    } finally {
      await c.client.close();
    }
  });

  it('shuts down cleanly (exit 0, no stack) when the host closes its end of stdout mid-session', async () => {
    const child = spawn(process.execPath, [BUILT_MAIN, 'mcp'], {
      cwd: ROOT,
      env: { ...process.env, ...env(), VERDICT_MCP_TOKEN: tokens.read.token },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const send = (m: unknown) => child.stdin.write(`${JSON.stringify(m)}\n`);
    const first = new Promise((resolve) => child.stdout.once('data', resolve));
    send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'gone', version: '1' } },
    });
    await first;
    child.stdout.destroy();
    for (let i = 2; i < 8; i++)
      send({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'flags_list', arguments: { limit: 100 } } });
    expect(await exited).toBe(0);
    expect(err).not.toMatch(/EPIPE|Unhandled/);
  }, 30_000);

  it("the README's mcpServers entry, run as an agent host would (npx), serves the tools", async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const block = /```json\n(\{\s*"mcpServers"[\s\S]*?)```/.exec(readme)![1];
    const entry = (
      JSON.parse(block) as { mcpServers: { verdict: { command: string; args: string[]; env: Record<string, string> } } }
    ).mcpServers.verdict;
    expect(entry.command).toBe('npx');
    expect(entry.args.slice(0, 3)).toEqual(['--no', 'verdict', 'mcp']);
    expect(Object.keys(entry.env)).toEqual(['VERDICT_MCP_TOKEN']);
    const args = entry.args.map((a) => (a === '/path/to/verdict.db' ? db : a));
    // npx links this checkout once per path (the package has no `prepare`, so nothing is built or deleted).
    const transport = new StdioClientTransport({
      command: 'npx',
      args,
      cwd: ROOT,
      env: {
        ...(process.env as Record<string, string>),
        VERDICT_PROVIDER: 'fake',
        VERDICT_MCP_TOKEN: tokens.read.token,
        npm_config_ignore_scripts: 'true',
      },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'readme-host', version: '1' });
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual([...MCP_TOOL_NAMES]);
      expect(structured(await call(client, 'item_get', { ref: flagged.ref })).item.ref).toBe(flagged.ref);
    } finally {
      await client.close();
    }
  }, 60_000);

  it('refuses to start without a token, with one the database does not know, or on a missing database (exit 2, stdout empty)', async () => {
    const typo = join(dir, 'typo.db');
    const cases = [
      ['', /^verdict: verdict mcp needs VERDICT_MCP_TOKEN/m, db],
      ['vdt_notatoken', /^verdict: VERDICT_MCP_TOKEN is not a live token of /m, db],
      [tokens.read.token, /^verdict: no database at .*typo\.db; give the path/m, typo],
    ] as const;
    // Three processes side by side; each checked on its own exit and output.
    const runs = await Promise.all(
      cases.map(([token, , database]) =>
        exec(process.execPath, [BUILT_MAIN, 'mcp'], {
          cwd: ROOT,
          env: { ...process.env, ...env(), VERDICT_DATABASE_URL: database, VERDICT_MCP_TOKEN: token },
        }).then(
          () => ({ code: 0, stdout: '', stderr: '' }),
          (e: { code: number; stdout: string; stderr: string }) => e,
        ),
      ),
    );
    cases.forEach(([, line], i) => {
      expect(runs[i].code).toBe(2);
      expect(runs[i].stderr).toMatch(line);
      expect(runs[i].stdout).toBe('');
    });
    expect(existsSync(typo)).toBe(false); // a mistyped path starts no empty tracker
  });
});

describe('the same over Streamable HTTP at /mcp of verdict serve', () => {
  let serve: Spawned;
  let base: string;
  const httpClient = async (token: string, name = 'verdict-test-agent') => {
    const client = new Client({ name, version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    });
    await client.connect(transport);
    return { client, transport };
  };
  beforeAll(async () => {
    serve = spawnCli(['serve', '--no-dashboard'], { ...env(), VERDICT_HTTP_PORT: '0' });
    base = (await waitFor(() => /listening on (http:\/\/\S+)/.exec(serve.stdout())?.[1], 30_000))!;
  }, 60_000);
  afterAll(async () => {
    if (serve) {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
  });

  it('refuses a request without a token, or with a wrong one (401, before any MCP)', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const none = await fetch(`${base}/mcp`, { method: 'POST', headers, body: JSON.stringify(init) });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    const wrong = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { ...headers, authorization: 'Bearer vdt_wrong' },
      body: JSON.stringify(init),
    });
    expect(wrong.status).toBe(401);
    const client = new Client({ name: 'x', version: '1' });
    await expect(client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)))).rejects.toThrow(
      /a valid bearer token is required/,
    );
  });

  it('lists the tools and answers every one as stdio does, with a token; the resource too', async () => {
    const { client } = await httpClient(tokens.read.token);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual([...MCP_TOOL_NAMES]);
      const got = structured(await call(client, 'item_get', { ref: flagged.ref }));
      const show = await cliJson(['show', flagged.ref]);
      expect(got.decisions).toEqual(isoDecisions(show.decisions.map(decisionJson)));
      expect(structured(await call(client, 'flags_list', { set: 'attention', limit: 2 })).sets[0].rows).toHaveLength(2);
      expect(
        structured(await call(client, 'item_search', { refPrefix: flagged.ref })).items.map(
          (i: { ref: string }) => i.ref,
        ),
      ).toContain(flagged.ref);
      expect(structured(await call(client, 'status_get')).spend).toBeNull();
      expect(
        errorText(
          await call(client, 'verdict_record', {
            ref: flagged.ref,
            key: flagged.key,
            set: 'attention',
            verdict: 'agree',
            note: 'x',
          }),
        ),
      ).toMatch(/role write or above; this one is read/);
      expect(errorText(await call(client, 'item_get', { ref: 'OTHER-1' }))).toMatch(/no live item/);
      const res = await client.readResource({ uri: `verdict://items/${encodeURIComponent(flagged.ref)}` });
      expect(JSON.parse((res.contents[0] as { text: string }).text).decisions).toEqual(
        isoDecisions(show.decisions.map(decisionJson)),
      );
    } finally {
      await client.close();
    }
  });

  it('records a verdict with a write token, authored by the HTTP client', async () => {
    const { client } = await httpClient(tokens.write.token, 'cursor-agent');
    try {
      const r = structured(
        await call(client, 'verdict_record', {
          ref: flagged.ref,
          key: flagged.key,
          set: 'attention',
          verdict: 'agree',
          note: 'confirmed with the reporter',
        }),
      );
      expect(r.verdict.author).toBe(`cursor-agent (MCP; token:${tokens.write.id} (agent-write))`);
      expect(r.verdict.verdict).toBe('agree');
    } finally {
      await client.close();
    }
  });

  it('binds a session to its token: another token presenting the id is told the session is not found', async () => {
    const { client, transport } = await httpClient(tokens.read.token);
    try {
      const sid = transport.sessionId!;
      expect(sid).toMatch(/^[0-9a-f-]{36}$/);
      const list = { jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} };
      const headers = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sid,
        'mcp-protocol-version': '2025-06-18',
      };
      const stolen = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { ...headers, authorization: `Bearer ${tokens.admin.token}` },
        body: JSON.stringify(list),
      });
      expect(stolen.status).toBe(404);
      const own = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { ...headers, authorization: `Bearer ${tokens.read.token}` },
        body: JSON.stringify(list),
      });
      expect(own.status).toBe(200);
      expect(((await own.json()) as { result: { tools: unknown[] } }).result.tools).toHaveLength(MCP_TOOL_NAMES.length);
      // GET offers no stream (405); an Origin that is not this server is refused.
      const get = await fetch(`${base}/mcp`, { headers: { ...headers, authorization: `Bearer ${tokens.read.token}` } });
      expect(get.status).toBe(405);
      const evil = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { ...headers, authorization: `Bearer ${tokens.read.token}`, origin: 'http://evil.example' },
        body: JSON.stringify(list),
      });
      expect(evil.status).toBe(403);
      // A request with no session that is not an initialize is a 400.
      const { 'mcp-session-id': _drop, ...noSession } = headers;
      const orphan = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { ...noSession, authorization: `Bearer ${tokens.read.token}` },
        body: JSON.stringify(list),
      });
      expect(orphan.status).toBe(400);
      // DELETE ends the session; the id is unknown afterwards.
      await transport.terminateSession();
      const after = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { ...headers, authorization: `Bearer ${tokens.read.token}` },
        body: JSON.stringify(list),
      });
      expect(after.status).toBe(404);
    } finally {
      await client.close();
    }
  });
});
