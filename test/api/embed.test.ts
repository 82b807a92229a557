import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  choice,
  createVerdict,
  defineQuestionSet,
  noul,
  VerdictError,
  type OutcomeEvent,
  type Verdict,
} from '../../src/index.js';
import { FakeProvider, startFakeAnthropicServer } from '../../src/testing.js';
import { captureLog } from '../harness/log-capture.js';

/** The README "Embedding Verdict" flow against the source entry (CI also runs it from the packed tarball). */

const triage = defineQuestionSet({
  name: 'triage',
  questions: {
    blocked: noul('Is the item blocked on something outside the team?'),
    kind: choice('What kind of work is it?', { bug: 'a defect', feature: 'new behaviour' }),
  },
  quietPeriodMs: 0,
});

describe('createVerdict', () => {
  let v: Verdict | undefined;
  afterEach(async () => {
    await v?.close();
    v = undefined;
  });

  async function seed(verdict: Verdict) {
    const ws = await verdict.store.createWorkspace({ slug: 'acme' });
    await verdict.store.transaction(async (tx) => {
      const col = await tx.createCollection({ workspaceId: ws.id, slug: 'task' });
      const it = await tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'Ship it' });
      await tx.addComment({ itemId: it.row.id, author: 'ann', body: 'Blocked on review' });
    });
  }

  it('writes, drains with runUntilIdle (outcome and idle events) and reads current decisions', async () => {
    v = await createVerdict({ database: ':memory:', sets: [triage], provider: 'fake' });
    await seed(v);
    const worker = v.worker({ concurrency: 2 });
    const outcomes: OutcomeEvent[] = [];
    let idle = 0;
    worker.on('outcome', (e) => outcomes.push(e));
    worker.on('idle', () => idle++);
    const summary = await worker.runUntilIdle();
    expect(summary).toMatchObject({ claimed: 1, calls: 1, answersStored: 2 });
    expect(outcomes.map((o) => [o.questionSet, o.outcome.kind, o.recorded])).toEqual([
      ['triage', 'complete', 'applied'],
    ]);
    expect(idle).toBe(1);
    const read = await v.reader.item('T-1', { workspace: 'acme' });
    expect(read?.decisions.map((d) => [d.questionKey, d.current, d.provider])).toEqual([
      ['blocked', true, 'fake'],
      ['kind', true, 'fake'],
    ]);
    expect(await v.reader.item('T-404', { workspace: 'acme' })).toBeNull();
    expect(await v.reader.item('T-1', { workspace: 'nope' })).toBeNull();
  });

  it('start() runs until stop({ graceMs }), emitting idle once the owed work is done', async () => {
    const provider = new FakeProvider();
    v = await createVerdict({ database: ':memory:', sets: [triage], provider });
    await seed(v);
    const worker = v.worker({ concurrency: 1, tickMs: 20 });
    const idle = new Promise<void>((r) => worker.once('idle', () => r()));
    await worker.start();
    expect(worker.isRunning).toBe(true);
    await idle;
    const summary = await worker.stop({ graceMs: 5_000 });
    expect(summary?.claimed).toBe(1);
    expect(provider.requests).toHaveLength(1);
    expect(worker.isRunning).toBe(false);
  });

  it("a provider-wide error reaches the host as an 'error' event with code provider_misconfigured; the job stays owed", async () => {
    v = await createVerdict({
      database: ':memory:',
      sets: [triage],
      provider: new FakeProvider({ faults: [{ status: 401 }] }),
    });
    await seed(v);
    const worker = v.worker({ concurrency: 1 });
    const errors: Error[] = [];
    worker.on('error', (e) => errors.push(e));
    const summary = await worker.runUntilIdle();
    expect(summary.misconfigured).toMatch(/provider_misconfigured/);
    expect(errors.map((e) => (e as VerdictError).code)).toEqual(['provider_misconfigured']);
    expect(errors[0]).toBeInstanceOf(VerdictError);
    expect(await v.reader.item('T-1', { workspace: 'acme' })).toMatchObject({ decisions: [] });
  });

  it('a listener that throws never reaches the worker: logged as such, no slot error, every owed job still done', async () => {
    const log = captureLog('info');
    v = await createVerdict({ database: ':memory:', sets: [triage], provider: 'fake', logger: log.logger });
    await seed(v);
    const ws = (await v.store.getWorkspaceBySlug('acme'))!;
    const [col] = await v.store.listCollections(ws.id);
    await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-2', title: 'Second' });
    const worker = v.worker({ concurrency: 1 });
    let calls = 0;
    worker.on('outcome', () => {
      calls++;
      throw new Error('host listener bug');
    });
    const summary = await worker.runUntilIdle();
    expect(calls).toBe(2);
    expect(summary.outcomes).toEqual({ complete: 2 });
    const msgs = log.records().map((r) => r.msg);
    expect(msgs.filter((m) => m === 'a worker event listener threw')).toHaveLength(2);
    expect(msgs).not.toContain('claim failed');
    expect(log.lines.join('\n')).not.toContain('host listener bug');
  });

  it("provider 'none': nothing is owed, reads are empty, and a worker is refused with a VerdictError", async () => {
    v = await createVerdict({ database: ':memory:', sets: [triage] });
    const ws = await v.store.createWorkspace({ slug: 'acme' });
    const col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
    expect((await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'x' })).owed).toBe(
      0,
    );
    expect(() => v!.worker()).toThrow(VerdictError);
  });

  it("provider 'pinned': reads judge currency by the workers' pinned model, writes owe, no worker runs", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'verdict-pinned-'));
    const file = join(dir, 'v.db');
    try {
      v = await createVerdict({ database: file, sets: [triage], provider: 'fake' });
      await seed(v);
      await v.worker().runUntilIdle(); // the worker pins fake's model
      await v.close();
      v = await createVerdict({ database: file, sets: [triage], provider: 'pinned' });
      const read = await v.reader.item('T-1', { workspace: 'acme' });
      expect(read?.decisions.map((d) => [d.questionKey, d.current])).toEqual([
        ['blocked', true],
        ['kind', true],
      ]);
      const ws = (await v.store.getWorkspaceBySlug('acme'))!;
      const col = (await v.store.listCollections(ws.id))[0];
      expect(
        (await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-2', title: 'next' })).owed,
      ).toBe(1);
      expect(() => v!.worker()).toThrow(/pinned/);
      // A person's verdict is taken: the reads are live, not off.
      const rec = await v.store.recordVerdict({
        workspace: 'acme',
        ref: 'T-1',
        key: 'blocked',
        verdict: 'agree',
        author: 'ann',
      });
      expect(rec.row.verdict).toBe('agree');
    } finally {
      await v?.close();
      v = undefined;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('bad input is a VerdictError with a stable code', async () => {
    v = await createVerdict({ database: ':memory:', sets: [triage], provider: 'fake' });
    const err = await v.store.updateItem('missing', { title: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VerdictError);
    expect((err as VerdictError).code).toBe('not_found');
    expect(() => defineQuestionSet({ name: '' })).toThrow(expect.objectContaining({ code: 'invalid_question_set' }));
  });

  it("provider 'anthropic' with env pointing at verdict/testing's fake server: the real provider answers through it, process.env untouched", async () => {
    const server = await startFakeAnthropicServer();
    const before = process.env.ANTHROPIC_BASE_URL;
    try {
      v = await createVerdict({
        database: ':memory:',
        sets: [triage],
        provider: 'anthropic',
        env: { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: 'test-key' },
      });
      await seed(v);
      const summary = await v.worker({ concurrency: 1 }).runUntilIdle();
      expect(summary.outcomes).toEqual({ complete: 1 });
      expect(server.requests.length).toBeGreaterThanOrEqual(1);
      const read = await v.reader.item('T-1', { workspace: 'acme' });
      expect(read?.decisions.map((d) => d.provider)).toEqual(['anthropic', 'anthropic']);
      expect(process.env.ANTHROPIC_BASE_URL).toBe(before);
    } finally {
      await server.close();
    }
  });

  it('a driver error reaches the host as a VerdictError: a duplicate slug or ref is conflict, a closed store is store_failure', async () => {
    v = await createVerdict({ database: ':memory:', sets: [triage], provider: 'fake' });
    const ws = await v.store.createWorkspace({ slug: 'acme' });
    const col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
    await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'x' });
    const dupSlug = await v.store.createWorkspace({ slug: 'acme' }).catch((e: unknown) => e);
    expect(dupSlug).toBeInstanceOf(VerdictError);
    expect(dupSlug).toMatchObject({ code: 'conflict', message: 'already exists: workspaces.slug' });
    const dupRef = await v.store
      .transaction((tx) => tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'again' }))
      .catch((e: unknown) => e);
    expect(dupRef).toMatchObject({ code: 'conflict' });
    expect(String((dupRef as Error).message)).not.toContain('again');
    await v.close();
    const closed = await v.store.createWorkspace({ slug: 'other' }).catch((e: unknown) => e);
    expect(closed).toBeInstanceOf(VerdictError);
    expect(closed).toMatchObject({ code: 'store_failure' });
    const closedRead = await v.reader.item('T-1', { workspace: 'acme' }).catch((e: unknown) => e);
    expect(closedRead).toMatchObject({ code: 'store_failure' });
    v = undefined;
  });
});
