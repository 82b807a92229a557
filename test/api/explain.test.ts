import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { choice, createVerdict, defineQuestionSet, InvalidInput, noul, type Verdict } from '../../src/index.js';
import { startFakeAnthropicServer, type FakeAnthropicServer } from '../../src/testing.js';
import { captureLog } from '../harness/log-capture.js';

/**
 * "Why did it say that" (`Verdict.explain`, src/compose/explain.ts): the prompt it shows is the one
 * the Anthropic provider sent for that state, byte for byte (the real SDK against the fake
 * server), stored answers say whether they were asked about it, rationales are shown for a set
 * that asks for them, and nothing of it reaches the log.
 */

const ROOT = join(import.meta.dirname, '../..');
const sample = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as { id: string; title: string; description?: string; status: string })
  .filter((r) => (r.description ?? '').length > 200)
  .slice(0, 2);

const triage = defineQuestionSet({
  name: 'triage',
  questions: {
    blocked: noul('Is the item blocked on something outside the team?'),
    kind: choice('What kind of work is it?', { bug: 'a defect', feature: 'new behaviour' }),
  },
  quietPeriodMs: 0,
  explain: true,
});
const plain = defineQuestionSet({
  name: 'plain',
  questions: { stale: noul('Has nobody touched this in a month?') },
  quietPeriodMs: 0,
});

let server: FakeAnthropicServer;
let v: Verdict;
const log = captureLog();

beforeAll(async () => {
  server = await startFakeAnthropicServer();
  v = await createVerdict({
    database: ':memory:',
    sets: [triage, plain],
    provider: 'anthropic',
    logger: log.logger,
    env: { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: 'test-key' },
  });
  const ws = await v.store.createWorkspace({ slug: 'beads' });
  const col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
  for (const r of sample)
    await v.store.createItem({
      workspaceId: ws.id,
      collectionId: col.id,
      ref: r.id,
      title: r.title,
      content: r.description ?? '',
      fields: { status: r.status },
    });
});
afterAll(async () => {
  await v?.close();
  await server?.close();
});

describe('explain', () => {
  it('shows byte for byte the system prompt and user message the provider received, and the stored answers asked about that state', async () => {
    const ref = sample[0].id;
    await v.worker({ concurrency: 1 }).runUntilIdle();
    const report = (await v.explain(ref, { workspace: 'beads' }))!;
    expect(report.ref).toBe(ref);
    expect(report.sets.map((s) => s.questionSet)).toEqual(['plain', 'triage']);

    const item = (await v.reader.item(ref, { workspace: 'beads' }))!.item;
    const sent = server
      .requestsTo('/v1/messages')
      .filter((r) => r.body.messages[0].content.includes(JSON.stringify(item.title).slice(1, -1)));
    expect(sent).toHaveLength(2); // one call per set
    for (const set of report.sets) {
      expect(set.applies).toBe(true);
      const [t] = set.targets;
      const call = sent.find((r) => r.body.system[0].text === t.system);
      expect(call, `a request with ${set.questionSet}'s system prompt`).toBeDefined();
      expect(call!.body.messages).toEqual([{ role: 'user', content: t.user }]);
      expect(t.stored.map((a) => [a.questionKey, a.matchesState, a.current])).toEqual(
        t.questionKeys.map((k) => [k, true, true]),
      );
    }
    // The set that asks for reasons shows them; the other shows none.
    const [plainSet, triageSet] = report.sets;
    expect(triageSet.rationale).toBe(true);
    expect(triageSet.targets[0].stored.every((a) => typeof a.rationale === 'string' && a.rationale.length > 0)).toBe(
      true,
    );
    expect(plainSet.targets[0].stored.every((a) => a.rationale === null)).toBe(true);
  });

  it('after an edit: the prompt of the new state, and stored answers that no longer match it', async () => {
    const ref = sample[1].id;
    await v.worker({ concurrency: 1 }).runUntilIdle();
    const before = (await v.explain(ref, { workspace: 'beads', set: 'plain' }))!;
    expect(before.sets.map((s) => s.questionSet)).toEqual(['plain']);
    const ws = (await v.store.getWorkspaceBySlug('beads'))!;
    const item = (await v.store.getItemByRef(ws.id, ref))!;
    await v.store.updateItem(item.id, { title: `${item.title} (edited)` });
    const after = (await v.explain(ref, { workspace: 'beads', set: 'plain' }))!;
    const [t0, t1] = [before.sets[0].targets[0], after.sets[0].targets[0]];
    expect(t1.stateHash).not.toBe(t0.stateHash);
    expect(t1.user).toContain('(edited)');
    expect(t1.stored.map((a) => [a.matchesState, a.current, a.staleReason])).toEqual([[false, false, 'state_changed']]);
    expect(t1.stored[0].stateHash).toBe(t0.stateHash);
  });

  it('null for an unknown item or workspace; an unknown set is InvalidInput naming `set`', async () => {
    expect(await v.explain('nope', { workspace: 'beads' })).toBeNull();
    expect(await v.explain(sample[0].id, { workspace: 'nope' })).toBeNull();
    const err = await v.explain(sample[0].id, { workspace: 'beads', set: 'nope' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInput);
    expect((err as InvalidInput).param).toBe('set');
  });

  it('logs none of the prompt, the item text or the answers', () => {
    const text = log.lines.join('\n');
    expect(log.lines.length).toBeGreaterThan(0);
    for (const r of sample) {
      expect(text).not.toContain(r.title);
      expect(text).not.toContain(r.description!.slice(0, 60));
    }
    expect(text).not.toContain('blocked on something outside');
  });
});

describe('GET /v1/items/{ref}/explain', () => {
  it('serves the report to an admin token, refuses a read token', async () => {
    const { createApiServer } = await import('../../src/server/create-api-server.js');
    const app = await createApiServer(v);
    try {
      const admin = (await v.tokens.create({ workspace: 'beads', role: 'admin', createWorkspace: true })).token;
      const reader = (await v.tokens.create({ workspace: 'beads', role: 'read', createWorkspace: true })).token;
      const url = `/v1/items/${encodeURIComponent(sample[0].id)}/explain?set=triage`;
      const ok = await app.inject({ url, headers: { authorization: `Bearer ${admin}` } });
      expect(ok.statusCode).toBe(200);
      // The same report, its times as ISO 8601 (the HTTP API's convention).
      const report = JSON.parse(JSON.stringify(await v.explain(sample[0].id, { workspace: 'beads', set: 'triage' })));
      for (const set of report.sets)
        for (const t of set.targets) for (const a of t.stored) a.evaluatedAt = new Date(a.evaluatedAt).toISOString();
      expect(ok.json()).toEqual(report);
      expect((await app.inject({ url, headers: { authorization: `Bearer ${reader}` } })).statusCode).toBe(403);
    } finally {
      await app.close();
    }
  });
});
