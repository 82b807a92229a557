import { createHash } from 'node:crypto';
import { LosslessNumber } from 'lossless-json';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet, Registry, type QuestionSet } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { Provider } from '../../src/providers/provider.js';
import { runOnce, type RunnerOptions, type RunReport } from '../../src/runner/job-life.js';
import type { Claim, NewDecision } from '../../src/store/store.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import type { CollectionRow, WorkspaceRow } from '../../src/store/tracker-reads.js';
import type { Store } from '../../src/store/whole-store.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import {
  endDashboardSession,
  findDashboardSession,
  openDashboardSession,
  pruneDashboardSessions,
  SESSION_IDLE_MS,
  SESSION_MAX_AGE_MS,
} from '../../src/access/sessions.js';
import { authenticateApiToken, createApiToken } from '../../src/access/tokens.js';
import { Actions, ACTIONS_CURSOR_META_KEY } from '../../src/actions/actions.js';
import { parseActionsConfig } from '../../src/actions/config.js';
import { openReader } from '../../src/compose/reader.js';
import { githubWorkspaceMetaKey } from '../../src/integrations/github/mapping.js';
import type { ItemActionRow, PlannedAction } from '../../src/store/actions.js';
import type { OpenedStore, StoreBackend, TestStore } from './conformance-backends.js';

/**
 * The store conformance suite (DESIGN §13: one store interface, every backend held to one suite).
 * Each backend's test file calls `runStoreConformance`; SQLite, PGlite and a real PostgreSQL
 * server must all pass the same assertions. Times are never compared with a clock read taken in
 * another statement (on Postgres the database clock moves on its own); they are compared with
 * times the same write stored (`updatedAt`, `enqueuedAt`, `lastErrorAt`, `evaluatedAt`).
 */

const linkSet = defineQuestionSet({ name: 'linked', questions: { k: noul('x') }, withLinks: true, noTrail: true });
const signal = new AbortController().signal;

interface Fx {
  store: TestStore;
  registry: Registry;
  ws: WorkspaceRow;
  tasks: CollectionRow;
  opened: OpenedStore;
  advance(ms: number): void;
}

export function runStoreConformance(backend: StoreBackend): void {
  let fx: Fx;

  async function open(sets: QuestionSet[]): Promise<Fx> {
    let n = 0;
    const registry = new Registry(sets);
    const opened = await backend.open(registry, () => `id-${(++n).toString().padStart(6, '0')}`);
    const ws = await opened.store.createWorkspace({ slug: 'acme' });
    const tasks = await opened.store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
    return { store: opened.store, registry, ws, tasks, opened, advance: opened.advance };
  }

  async function reopen(sets: QuestionSet[]) {
    await fx.opened.cleanup();
    fx = await open(sets);
  }

  async function item(ref: string, extra: Record<string, unknown> = {}) {
    return (
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref,
        title: `title ${ref}`,
        content: 'waiting for legal sign-off',
        fields: { status: 'open' },
        ...extra,
      })
    ).row;
  }

  /**
   * Items T-0 … T-(n−1) through the create door, one after another where the backend has one
   * connection, and 16 at a time on a server (where each door's round trips, not the server's work,
   * set the pace): the tests that use them need many items, in no order, before what they check.
   */
  async function plainItems(n: number): Promise<void> {
    const create = (i: number) =>
      fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: `T-${i}`,
        title: `t${i}`,
        fields: { status: 'open' },
      });
    const lanes = backend.concurrentConnections ? 16 : 1;
    await Promise.all(
      Array.from({ length: lanes }, async (_, lane) => {
        for (let i = lane; i < n; i += lanes) await create(i);
      }),
    );
  }

  function runner(provider: Provider, over: Partial<RunnerOptions> = {}): RunnerOptions {
    return {
      store: fx.store,
      registry: fx.registry,
      provider,
      logger: silentLogger,
      workerId: 'runner-a',
      leaseMs: 60_000,
      random: () => 0.5,
      ...over,
    };
  }

  async function drain(opts: RunnerOptions, max = 1000): Promise<RunReport[]> {
    const out: RunReport[] = [];
    for (let i = 0; i < max; i++) {
      const r = await runOnce(opts, signal);
      if (!r) return out;
      out.push(r);
    }
    throw new Error('drain: did not drain');
  }

  beforeAll(() => backend.setup(), 60_000);
  afterAll(() => backend.teardown(), 60_000);
  beforeEach(async () => {
    fx = await open([attentionSet, effortSet, linkSet]);
  });
  afterEach(async () => fx.opened.cleanup());

  describe(`${backend.name}: text sorts in byte order, as on every backend`, () => {
    // Mixed case and non-ASCII: byte order (SQLite BINARY, Postgres COLLATE "C") puts upper case
    // before lower case and accents last; a linguistic collation (en_US, ICU) would interleave them.
    const names = ['b', 'Zeta', 'a', 'été', 'B', 'ä', 'Alpha', 'e'];
    const byteOrder = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));

    it('lists workspaces and collections by slug in byte order', async () => {
      for (const n of names) {
        const w = await fx.store.createWorkspace({ slug: `ws-${n}` });
        await fx.store.createCollection({ workspaceId: fx.ws.id, slug: `c-${n}` });
        expect(w.slug).toBe(`ws-${n}`);
      }
      const ws = (await fx.store.listWorkspaces()).map((w) => w.slug).filter((s) => s.startsWith('ws-'));
      expect(ws).toEqual(byteOrder.map((n) => `ws-${n}`));
      const cs = (await fx.store.listCollections(fx.ws.id)).map((c) => c.slug).filter((s) => s.startsWith('c-'));
      expect(cs).toEqual(byteOrder.map((n) => `c-${n}`));
    });

    it('lists jobs and per-set counts by set name in byte order', async () => {
      const sets = names.map((n) =>
        defineQuestionSet({ name: `set-${n}`, questions: { k: noul('x') }, quietPeriodMs: 0 }),
      );
      await reopen(sets);
      const ids = ['i-b', 'i-Zeta', 'i-a', 'i-été', 'i-B'];
      for (const id of ids)
        await fx.store.createItem({ id, workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: id, title: id });
      const stats = await fx.store.queueStats();
      expect(stats.bySet.map((r) => r.questionSet).filter((s, i, a) => a.indexOf(s) === i)).toEqual(
        byteOrder.map((n) => `set-${n}`),
      );
      // Same priority and enqueue time (one clock): the item id breaks the tie.
      const jobs = await fx.store.listJobs({ questionSet: 'set-a' });
      expect(jobs).toHaveLength(ids.length);
      const expected = [...jobs].sort(
        (x, y) =>
          x.priority - y.priority ||
          x.enqueuedAt - y.enqueuedAt ||
          Buffer.compare(Buffer.from(x.itemId), Buffer.from(y.itemId)),
      );
      expect(jobs.map((j) => j.itemId)).toEqual(expected.map((j) => j.itemId));
    });
  });

  describe(`${backend.name}: write doors owe jobs in the same transaction`, () => {
    it('a create owes one job per covering set, after the quiet period', async () => {
      const it1 = await item('T-1');
      const jobs = await fx.store.listJobs({ itemId: it1.id });
      expect(jobs.map((j) => j.questionSet).sort()).toEqual(['attention', 'effort', 'linked']);
      for (const j of jobs) {
        expect(j.notBefore - j.enqueuedAt).toBe(30_000);
        expect(j.enqueuedAt).toBe(it1.updatedAt);
        expect(j).toMatchObject({ state: 'owed', generation: 1, attempts: 0, priority: 0, claimToken: null });
      }
    });

    it('a burst of writes coalesces into one row: generation bumps, enqueued_at never moves', async () => {
      const it1 = await item('T-1');
      const before = (await fx.store.getJob(it1.id, 'attention'))!;
      fx.advance(10_000);
      await fx.store.updateItem(it1.id, { content: 'b2' });
      fx.advance(10_000);
      const last = await fx.store.updateItem(it1.id, { content: 'b3' });
      const after = (await fx.store.getJob(it1.id, 'attention'))!;
      expect(after.generation).toBe(before.generation + 2);
      expect(after.enqueuedAt).toBe(before.enqueuedAt);
      expect(after.notBefore).toBe(last.row.updatedAt + 30_000); // trailing quiet period
    });

    it('not_before is capped at enqueued_at + maxDelay under constant editing', async () => {
      const it1 = await item('T-1');
      const enq = (await fx.store.getJob(it1.id, 'attention'))!.enqueuedAt;
      for (let i = 0; i < 300; i++) {
        fx.advance(29_000);
        await fx.store.updateItem(it1.id, { content: `edit ${i}` });
      }
      expect((await fx.store.getJob(it1.id, 'attention'))!.notBefore).toBe(enq + 7_200_000);
    });

    it('a write that changes no stored value is a no-op: no seq bump, nothing owed', async () => {
      const it1 = await item('T-1');
      await fx.store.dropJobs({});
      const r = await fx.store.updateItem(it1.id, { title: it1.title, fields: it1.fields });
      expect(r.changed).toBe(false);
      expect(r.row.seq).toBe(it1.seq);
      expect(await fx.store.listJobs({})).toHaveLength(0);
      const real = await fx.store.updateItem(it1.id, { title: 'new' });
      expect(real.owed).toBeGreaterThan(0);
      expect(real.row.seq).toBe(it1.seq + 1);
    });

    it('a comment edit owes only when the body changes', async () => {
      const it1 = await item('T-1');
      const c = (await fx.store.addComment({ itemId: it1.id, author: 'amy', body: 'hi' })).row;
      await fx.store.dropJobs({});
      expect((await fx.store.editComment(c.id, 'hi')).changed).toBe(false);
      expect(await fx.store.listJobs({})).toHaveLength(0);
      expect((await fx.store.editComment(c.id, 'hello')).owed).toBe(2); // attention and effort read the trail; linked is NoTrail
    });

    it('a move owes the target collection sets; a move to the same collection is a no-op', async () => {
      const bugs = await fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'bug' });
      const it1 = await item('T-1');
      await fx.store.dropJobs({});
      expect((await fx.store.moveItem(it1.id, it1.collectionId)).changed).toBe(false);
      expect((await fx.store.moveItem(it1.id, bugs.id)).owed).toBe(3);
    });

    it('link add and remove owe both ends for sets that read links only; a duplicate link is a no-op', async () => {
      const a = await item('T-1');
      const b = await item('T-2');
      await fx.store.dropJobs({});
      const l = await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: b.id, linkType: 'blocks' });
      expect((await fx.store.listJobs({})).map((j) => `${j.itemId}:${j.questionSet}`).sort()).toEqual([
        `${a.id}:linked`,
        `${b.id}:linked`,
      ]);
      expect(
        (await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: b.id, linkType: 'blocks' })).changed,
      ).toBe(false);
      await expect(
        fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: a.id, linkType: 'blocks' }),
      ).rejects.toThrow(/itself/);
      await fx.store.dropJobs({});
      await fx.store.removeLink(l.row.id);
      expect(await fx.store.listJobs({})).toHaveLength(2);
      expect((await fx.store.removeLink(l.row.id)).changed).toBe(false);
    });

    it('a title edit owes the items whose state shows that title', async () => {
      const a = await item('T-1');
      const b = await item('T-2');
      await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: b.id, linkType: 'parent' });
      await fx.store.dropJobs({});
      await fx.store.updateItem(b.id, { title: 'renamed parent' });
      expect((await fx.store.listJobs({ itemId: a.id })).map((j) => j.questionSet)).toEqual(['linked']);
    });

    it('the re-ask debounce pushes not_before to the latest stored answer + 1 h', async () => {
      const it1 = await item('T-1');
      await fx.store.insertDecisions([decision(it1.id, 'attention', 'blocked', 'h')]);
      const answeredAt = (await fx.store.listDecisions(it1.id))[0].evaluatedAt;
      await fx.store.dropJobs({});
      fx.advance(60_000);
      const w = await fx.store.updateItem(it1.id, { content: 'changed' });
      expect((await fx.store.getJob(it1.id, 'attention'))!.notBefore).toBe(answeredAt + 3_600_000);
      expect((await fx.store.getJob(it1.id, 'effort'))!.notBefore).toBe(w.row.updatedAt + 30_000);
    });

    it('normalises lone surrogates and NUL and reports them', async () => {
      const r = await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-9',
        title: 'a\uD800b\u0000c',
        content: 'x\uDC00',
      });
      expect(r.row.title).toBe('a\uFFFDbc');
      expect(r.normalised).toEqual({ loneSurrogates: 2, nulsRemoved: 1 });
      expect((await fx.store.getItem(r.row.id))!.content).toBe('x\uFFFD');
    });

    it('refuses fields that are not a JSON object and writes nothing', async () => {
      await expect(
        fx.store.createItem({
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: 'T-9',
          title: 't',
          fields: '[1]',
        }),
      ).rejects.toThrow(/JSON object/);
      expect(await fx.store.getItemByRef(fx.ws.id, 'T-9')).toBeNull();
      expect(await fx.store.listJobs({})).toHaveLength(0);
    });

    it('keeps the bytes of stored fields, number literals included', async () => {
      const it1 = await item('T-1', { fields: '{"estimate":3.0, "n": 1e2}' });
      expect((await fx.store.getItem(it1.id))!.fields).toBe('{"estimate":3.0, "n": 1e2}');
    });

    it('a field edit keeps every byte it does not touch: number literals, escapes, spacing (DESIGN §3.2)', async () => {
      const stored = '{"estimate":3.0,"ext_id":12345678901234567890,"ratio":1e2,"status":"open"}';
      const it1 = await item('T-1', { fields: stored });
      const r = await fx.store.updateItem(it1.id, { setFields: { status: 'in_progress' } });
      expect(r.changed).toBe(true);
      expect((await fx.store.getItem(it1.id))!.fields).toBe(
        '{"estimate":3.0,"ext_id":12345678901234567890,"ratio":1e2,"status":"in_progress"}',
      );

      // the old edit path: parse the stored text, change one key, hand the whole object back
      const roundTripped = { ...(JSON.parse(r.row.fields) as Record<string, unknown>), status: 'closed' };
      await fx.store.updateItem(it1.id, { fields: roundTripped });
      expect((await fx.store.getItem(it1.id))!.fields).toBe(
        '{"estimate":3.0,"ext_id":12345678901234567890,"ratio":1e2,"status":"closed"}',
      );

      const spaced = await item('T-2', { fields: '{ "name" : "caf\\u00e9\\/x",\n  "n": 1.50 ,"status":"open" }' });
      await fx.store.updateItem(spaced.id, { setFields: { status: 'closed', added: new LosslessNumber('2.50') } });
      expect((await fx.store.getItem(spaced.id))!.fields).toBe(
        '{ "name" : "caf\\u00e9\\/x",\n  "n": 1.50 ,"status":"closed","added":2.50 }',
      );
      await fx.store.updateItem(spaced.id, { fields: { name: 'café/x', status: 'closed', added: 2.5 } });
      expect((await fx.store.getItem(spaced.id))!.fields).toBe(
        '{ "name" : "caf\\u00e9\\/x" ,"status":"closed","added":2.50 }',
      );
    });

    it('a field set to the value it has is a no-op: no seq bump, nothing owed (DESIGN §3.2)', async () => {
      const it1 = await item('T-1', {
        fields: '{"estimate":3.0,"ext_id":12345678901234567890,"ratio":1e2,"status":"open"}',
      });
      await fx.store.dropJobs({});
      const same = [
        { setFields: { status: 'open' } },
        { setFields: { estimate: 3, ratio: 100 } },
        { setFields: { estimate: new LosslessNumber('3.00'), ratio: new LosslessNumber('100.0') } },
        { setFields: { ext_id: new LosslessNumber('12345678901234567890') } },
        { fields: JSON.parse(it1.fields) as Record<string, unknown> },
      ];
      for (const patch of same) {
        const r = await fx.store.updateItem(it1.id, patch);
        expect(r).toMatchObject({ changed: false, owed: 0 });
        expect(r.row.seq).toBe(it1.seq);
      }
      expect(await fx.store.listJobs({})).toHaveLength(0);
      expect((await fx.store.getItem(it1.id))!.fields).toBe(it1.fields);
      // a different integer beyond 2^53, equal as a double, is a different value
      // the importer's door: the same values again, as a JS object, keep the stored bytes
      const up = {
        id: 'imp-1',
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'B-1',
        title: 'imported',
        content: 'c',
      };
      await fx.store.upsertItem({ ...up, fields: '{"priority":2.0, "status":"open"}' });
      const again = await fx.store.upsertItem({ ...up, fields: { status: 'open', priority: 2 } });
      expect(again).toMatchObject({ changed: false, owed: 0 });
      expect(again.row.fields).toBe('{"priority":2.0, "status":"open"}');
      const bigger = await fx.store.updateItem(it1.id, {
        setFields: { ext_id: new LosslessNumber('12345678901234567891') },
      });
      expect(bigger.changed).toBe(true);
      expect(bigger.row.fields).toBe('{"estimate":3.0,"ext_id":12345678901234567891,"ratio":1e2,"status":"open"}');
    });

    it('refuses bad field patches and writes nothing', async () => {
      const it1 = await item('T-1');
      await fx.store.dropJobs({});
      await expect(fx.store.updateItem(it1.id, { setFields: { n: Number.NaN } })).rejects.toThrow(/finite/);
      await expect(fx.store.updateItem(it1.id, { fields: {}, setFields: { a: 1 } })).rejects.toThrow(/not both/);
      expect((await fx.store.getItem(it1.id))!).toMatchObject({ fields: it1.fields, seq: it1.seq });
      expect(await fx.store.listJobs({})).toHaveLength(0);
    });

    it('a collection settings or schema patch with the value it has is a no-op: nothing owed', async () => {
      await item('T-1');
      await fx.store.dropJobs({});
      const c = (await fx.store.updateCollection(fx.tasks.id, { settings: { tracks_work: true, role: 'work' } })).row;
      await fx.store.dropJobs({});
      const r = await fx.store.updateCollection(fx.tasks.id, {
        settings: { role: 'work', tracks_work: true },
        schema: JSON.parse(JSON.stringify(c.schema)),
      });
      expect(r).toMatchObject({ changed: false, owed: 0 });
      expect(await fx.store.listJobs({})).toHaveLength(0);
    });

    it('a comment with replies becomes a blank tombstone; one without is removed', async () => {
      const it1 = await item('T-1');
      const parent = (await fx.store.addComment({ itemId: it1.id, author: 'a', body: 'p' })).row;
      await fx.store.addComment({ itemId: it1.id, author: 'b', body: 'r', parentCommentId: parent.id });
      const lone = (await fx.store.addComment({ itemId: it1.id, author: 'c', body: 'l' })).row;
      const tomb = (await fx.store.deleteComment(parent.id)).row!;
      expect(tomb.body).toBe('');
      expect(tomb.deletedAt).toBe(tomb.updatedAt);
      expect((await fx.store.deleteComment(lone.id)).row).toBeNull();
      const loaded = await fx.store.loadItemForEvaluation(it1.id);
      expect(loaded!.comments.map((c) => c.body)).toEqual(['r']);
    });

    it('the state load reads the links unless asked not to (links: false reads none)', async () => {
      const it1 = await item('T-1');
      const it2 = await item('T-2');
      await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: it2.id, targetId: it1.id, linkType: 'blocks' });
      const all = await fx.store.loadItemForEvaluation(it1.id);
      expect(all!.links).toEqual([{ relation: 'blocked_by', ref: 'T-2', title: it2.title }]);
      expect((await fx.store.loadItemForEvaluation(it1.id, { links: true }))!.links).toEqual(all!.links);
      const none = await fx.store.loadItemForEvaluation(it1.id, { links: false });
      expect(none!.links).toEqual([]);
      expect(none!.item).toEqual(all!.item);
      expect(none!.collection).toEqual(all!.collection);
      expect(none!.workspace).toEqual(all!.workspace);
    });

    it('a collection rename owes its live items at backfill priority; a soft delete and restore too', async () => {
      const it1 = await item('T-1');
      await fx.store.dropJobs({});
      const r = await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' });
      expect(r.owed).toBe(3);
      expect((await fx.store.listJobs({ itemId: it1.id })).every((j) => j.priority === PRIORITY_BACKFILL)).toBe(true);
      expect((await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' })).changed).toBe(false);
      expect((await fx.store.softDeleteCollection(fx.tasks.id)).row.deletedAt).not.toBeNull();
      expect((await fx.store.restoreCollection(fx.tasks.id)).row.deletedAt).toBeNull();
    });

    it('a collection change owes in chunks of 1,000 per transaction; a crash between chunks resumes and owes the rest once (DESIGN §3.3)', async () => {
      await reopen([attentionSet, effortSet]);
      const N = 2_100;
      fx.store.setRegistry(new Registry([])); // items first, owing nothing, so the change is the only owe
      await plainItems(N);
      fx.store.setRegistry(fx.registry);
      const r = await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' });
      expect(r.owed).toBe(2 * 1_000); // the door's transaction owes the first chunk only
      expect((await fx.store.listMeta('collection-owe:')).map((m) => m.key)).toEqual([`collection-owe:${fx.tasks.id}`]);
      expect(await fx.store.listJobs({ limit: 10_000 })).toHaveLength(2_000);
      const step = await fx.store.advanceCollectionOwes();
      expect(step).toEqual({ collectionId: fx.tasks.id, items: 1_000, owed: 2_000, pending: 1 });
      // The process dies here; another opens the same data and resumes from the committed cursor.
      const peer = await fx.opened.peer(fx.registry);
      expect(await peer.advanceCollectionOwes()).toEqual({
        collectionId: fx.tasks.id,
        items: 100,
        owed: 200,
        pending: 0,
      });
      expect(await peer.advanceCollectionOwes()).toEqual({ collectionId: null, items: 0, owed: 0, pending: 0 });
      const jobs = await fx.store.listJobs({ limit: 10_000 });
      expect(jobs).toHaveLength(2 * N);
      expect(jobs.every((j) => j.generation === 1 && j.priority === PRIORITY_BACKFILL)).toBe(true); // each owed exactly once
      expect(await fx.store.listMeta('collection-owe:')).toEqual([]);
    }, 120_000);

    it("a second change while a collection change is pending restarts the walk with both changes' sets", async () => {
      await reopen([attentionSet, effortSet]);
      fx.store.setRegistry(new Registry([]));
      await plainItems(1_500);
      // Only `effort` knows the first slug; after the rename only `attention` would apply.
      const onlyEffort = defineQuestionSet({ name: 'effort', questions: { effort: noul('x') }, collections: ['task'] });
      const onlyAttention = defineQuestionSet({
        name: 'attention',
        questions: { blocked: noul('x') },
        collections: ['tasks'],
      });
      const reg = new Registry([onlyEffort, onlyAttention]);
      fx.store.setRegistry(reg);
      expect((await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' })).owed).toBe(2 * 1_000);
      // The restart owes the first chunk again, for the pending change's sets as well as its own.
      expect((await fx.store.updateCollection(fx.tasks.id, { settings: { tracks_work: false } })).owed).toBe(2 * 1_000);
      const pending = JSON.parse((await fx.store.getMeta(`collection-owe:${fx.tasks.id}`))!) as {
        sets: string[];
        generation: number;
      };
      expect(pending).toMatchObject({ sets: ['attention', 'effort'], generation: 2 });
      // Two processes work it off at once: a chunk is owed by one of them, never by both.
      const peer = await fx.opened.peer(reg);
      for (;;) {
        const [a, b] = await Promise.all([fx.store.advanceCollectionOwes(), peer.advanceCollectionOwes()]);
        if (a.pending === 0 && b.pending === 0) break;
      }
      const jobs = await fx.store.listJobs({ limit: 10_000 });
      expect(jobs.filter((j) => j.questionSet === 'attention')).toHaveLength(1_500);
      expect(jobs.filter((j) => j.questionSet === 'effort')).toHaveLength(1_500);
      // The first chunk was owed by both changes (generation 2); the other 500 items once each.
      expect(jobs.filter((j) => j.generation === 2)).toHaveLength(2 * 1_000);
      expect(jobs.filter((j) => j.generation === 1)).toHaveLength(2 * 500);
    }, 120_000);

    it('upsertItem: creates, then changes nothing on the same values, then sets every value', async () => {
      const base = {
        id: 'imp-1',
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'B-1',
        title: 'imported',
        content: 'c',
        fields: { status: 'open' },
      };
      expect((await fx.store.upsertItem(base, { priority: PRIORITY_BACKFILL, quietPeriod: false })).owed).toBe(3);
      await fx.store.dropJobs({});
      const same = await fx.store.upsertItem(base);
      expect(same).toMatchObject({ changed: false, owed: 0 });
      const del = await fx.store.upsertItem({ ...base, deletedAt: 123 });
      expect(del.changed).toBe(true);
      expect(del.row.deletedAt).toBe(123);
      await expect(fx.store.upsertItem({ ...base, workspaceId: 'other' })).rejects.toThrow(/another workspace/);
    });

    it('the write doors refuse missing rows with NotFound', async () => {
      await expect(fx.store.updateItem('nope', { title: 'x' })).rejects.toMatchObject({ code: 'not_found' });
      await expect(fx.store.addComment({ itemId: 'nope', author: 'a', body: 'b' })).rejects.toMatchObject({
        code: 'not_found',
      });
      await expect(
        fx.store.createItem({ workspaceId: fx.ws.id, collectionId: 'nope', ref: 'X', title: 'x' }),
      ).rejects.toMatchObject({ code: 'not_found' });
    });

    it('storage health and upkeep (DESIGN §10.1, §10.2): a refused write is no storage problem; a checkpoint empties the log where there is one', async () => {
      await item('H-1');
      expect(fx.store.storageProblem()).toBeNull();
      await expect(fx.store.updateItem('nope', { title: 'x' })).rejects.toMatchObject({ code: 'not_found' });
      expect(fx.store.storageProblem()).toBeNull();
      const before = await fx.store.walBytes();
      const after = await fx.store.checkpoint();
      if (before === null) {
        expect(after).toBeNull(); // Postgres: the server keeps its own log
      } else {
        expect(before).toBeGreaterThan(0);
        expect(after).toBe(0);
        expect(await fx.store.walBytes()).toBe(0);
      }
    });
  });

  describe(`${backend.name}: store.transaction (DESIGN §16.1)`, () => {
    it('several write doors commit together, their owed jobs with them', async () => {
      await fx.store.transaction(async (tx) => {
        const a = await tx.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'TX-1', title: 'one' });
        await tx.addComment({ itemId: a.row.id, author: 'ann', body: 'first' });
        await tx.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'TX-2', title: 'two' });
      });
      expect(await fx.store.countItems(fx.ws.id)).toBe(2);
      expect((await fx.store.listJobs({})).length).toBe(6); // attention, effort and linked cover `task`, per item
    });

    it('a throw rolls every door back: no item, no comment, no owed job; the error is rethrown', async () => {
      const boom = new Error('host failed');
      await expect(
        fx.store.transaction(async (tx) => {
          const a = await tx.createItem({
            workspaceId: fx.ws.id,
            collectionId: fx.tasks.id,
            ref: 'TX-1',
            title: 'one',
          });
          await tx.addComment({ itemId: a.row.id, author: 'ann', body: 'first' });
          // A nested transaction on the handle joins the outer one.
          await (tx as Store).transaction(async (inner) =>
            inner.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'TX-2', title: 'two' }),
          );
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await fx.store.countItems(fx.ws.id)).toBe(0);
      expect(await fx.store.listJobs({})).toEqual([]);
      // The store works normally afterwards.
      await item('T-after');
      expect(await fx.store.countItems(fx.ws.id)).toBe(1);
    });
  });

  describe(`${backend.name}: reads`, () => {
    it('loads an item with its live comments in order and its links as the state reads them', async () => {
      const a = await item('T-1');
      const parent = await item('T-2');
      const blocker = await item('T-3');
      const gone = await item('T-4');
      await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: parent.id, linkType: 'parent' });
      await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: blocker.id, targetId: a.id, linkType: 'blocks' });
      await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: gone.id, linkType: 'blocks' });
      await fx.store.softDeleteItem(gone.id);
      await fx.store.addComment({ itemId: a.id, author: 'x', body: 'second', createdAt: 2_000 });
      await fx.store.addComment({ itemId: a.id, author: 'y', body: 'first', createdAt: 1_000 });
      const l = (await fx.store.loadItemForEvaluation(a.id))!;
      expect(l.item.id).toBe(a.id);
      expect(l.collection.schema).toEqual(TASK_SCHEMA);
      expect(l.workspace.slug).toBe('acme');
      expect(l.comments.map((c) => [c.body, c.createdAt])).toEqual([
        ['first', 1_000],
        ['second', 2_000],
      ]);
      expect(l.links.map((x) => `${x.relation}:${x.ref}`).sort()).toEqual(['blocked_by:T-3', 'parent:T-2']);
      expect(await fx.store.loadItemForEvaluation('nope')).toBeNull();
      expect(await fx.store.checkLiveness(a.id)).toBe('live');
      expect(await fx.store.checkLiveness(gone.id)).toBe('item_gone');
      await fx.store.softDeleteWorkspace(fx.ws.id);
      expect(await fx.store.checkLiveness(a.id)).toBe('workspace_gone');
    });

    it('lists and counts items and workspaces', async () => {
      await item('T-1');
      const b = await item('T-2');
      await fx.store.softDeleteItem(b.id);
      expect(await fx.store.countItems(fx.ws.id)).toBe(1);
      expect((await fx.store.listItems({ workspaceId: fx.ws.id })).map((i) => i.ref)).toEqual(['T-1']);
      expect(await fx.store.listItems({ workspaceId: fx.ws.id, includeDeleted: true })).toHaveLength(2);
      expect((await fx.store.getWorkspaceBySlug('acme'))!.id).toBe(fx.ws.id);
      expect(await fx.store.listWorkspaces()).toHaveLength(1);
      expect((await fx.store.listCollections(fx.ws.id)).map((c) => c.slug)).toEqual(['task']);
    });
  });

  describe(`${backend.name}: item search (listItems filters)`, () => {
    it('narrows by ref prefix code point by code point, case kept, and pages in id order', async () => {
      for (const ref of ['bd-1', 'bd-12', 'BD-3', 'bd_4', 'b%-5', 'é-6', 'éa-7']) await item(ref);
      const refs = async (q: Record<string, unknown>) =>
        (await fx.store.listItems({ workspaceId: fx.ws.id, ...q })).map((i) => i.ref);
      expect(await refs({ refPrefix: 'bd-1' })).toEqual(['bd-1', 'bd-12']);
      expect(await refs({ refPrefix: 'bd' })).toEqual(['bd-1', 'bd-12', 'bd_4']); // not BD-3: case matters
      expect(await refs({ refPrefix: 'b%' })).toEqual(['b%-5']); // no LIKE wildcards
      expect(await refs({ refPrefix: 'é' })).toEqual(['é-6', 'éa-7']);
      expect(await refs({ refPrefix: '' })).toHaveLength(7);
      const first = await fx.store.listItems({ workspaceId: fx.ws.id, refPrefix: 'bd', limit: 2 });
      expect(first.map((i) => i.ref)).toEqual(['bd-1', 'bd-12']);
      expect(await refs({ refPrefix: 'bd', afterId: first[1].id })).toEqual(['bd_4']);
    });

    it('narrows by top-level field equality, by JSON type, and leaves out deleted items', async () => {
      await item('S-1', { fields: { status: 'open', priority: 1, flag: true, owner: null, tags: ['open'] } });
      await item('S-2', { fields: { status: 'open', priority: 2.0, flag: false, 'we"ird key': 'x' } });
      await item('S-3', { fields: { status: 'closed', priority: '1' } });
      await item('S-5', { fields: { status: 'in_progress', priority: true } });
      const gone = await item('S-4', { fields: { status: 'open', priority: 1 } });
      await fx.store.softDeleteItem(gone.id);
      const refs = async (f: Record<string, string | number | boolean | null>, extra: Record<string, unknown> = {}) =>
        (await fx.store.listItems({ workspaceId: fx.ws.id, fieldsEqual: f, ...extra })).map((i) => i.ref);
      expect(await refs({ status: 'open' })).toEqual(['S-1', 'S-2']);
      expect(await refs({ status: 'open' }, { includeDeleted: true })).toEqual(['S-1', 'S-2', 'S-4']);
      expect(await refs({ priority: 1 })).toEqual(['S-1']); // not the string "1" of S-3, nor the true of S-5
      expect(await refs({ priority: true })).toEqual(['S-5']);
      expect(await refs({ priority: '1' })).toEqual(['S-3']);
      expect(await refs({ priority: 2 })).toEqual(['S-2']); // 2 equals 2.0
      expect(await refs({ flag: true })).toEqual(['S-1']);
      expect(await refs({ flag: false })).toEqual(['S-2']);
      expect(await refs({ owner: null })).toEqual(['S-1']); // present and null; a missing field is not null
      expect(await refs({ tags: 'open' })).toEqual([]); // an array never equals a scalar
      expect(await refs({ 'we"ird key': 'x' })).toEqual(['S-2']);
      expect(await refs({ status: 'open', priority: 2 })).toEqual(['S-2']);
      expect(await refs({ status: 'open' }, { refPrefix: 'S-2' })).toEqual(['S-2']);
      await expect(
        fx.store.listItems({ workspaceId: fx.ws.id, fieldsEqual: { priority: Number.NaN } }),
      ).rejects.toThrow(/finite number/);
      await expect(
        fx.store.listItems({ workspaceId: fx.ws.id, fieldsEqual: { priority: [1] as never } }),
      ).rejects.toThrow(/compare with a string/);
    });
  });

  describe(`${backend.name}: searchItems (the dashboard's items page)`, () => {
    it('finds by text in the ref or the title, ASCII case ignored, LIKE wildcards literal, and pages with the total', async () => {
      await item('bd-1', { title: 'Login page BLOCKED by auth' });
      await item('bd-2', { title: 'Search results' });
      await item('BD-3', { title: '100% done_soon' });
      await item('x-4', { title: 'Nothing to see' });
      const gone = await item('bd-5', { title: 'blocked, then deleted' });
      await fx.store.softDeleteItem(gone.id);
      const found = async (text: string, extra: Record<string, unknown> = {}) =>
        (await fx.store.searchItems({ workspaceId: fx.ws.id, text, offset: 0, limit: 50, ...extra })).rows
          .map((i) => i.ref)
          .sort();
      expect(await found('blocked')).toEqual(['bd-1']); // title, case ignored; the deleted one left out
      expect(await found('blocked', { deleted: 'deleted' })).toEqual(['bd-5']);
      expect(await found('blocked', { deleted: 'all' })).toEqual(['bd-1', 'bd-5']);
      expect(await found('bd-')).toEqual(['BD-3', 'bd-1', 'bd-2']); // ref, case ignored
      expect(await found('%')).toEqual(['BD-3']); // a literal percent sign, not "anything"
      expect(await found('_')).toEqual(['BD-3']);
      expect(await found('  search ')).toEqual(['bd-2']);
      expect(await found('')).toHaveLength(4);
      const page = await fx.store.searchItems({ workspaceId: fx.ws.id, text: 'bd', offset: 1, limit: 1 });
      expect(page.total).toBe(3);
      expect(page.rows).toHaveLength(1);
      const other = await fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'elsewhere' });
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: other.id,
        ref: 'bd-9',
        title: 'in another collection',
      });
      expect(await found('bd', { collectionId: other.id })).toEqual(['bd-9']);
    });
  });

  describe(`${backend.name}: answers and spend`, () => {
    it('an answer insert that conflicts on the idempotency key does nothing; answeredKeys sees exact keys only', async () => {
      const it1 = await item('T-1');
      const d = (key: string, hash: string) => decision(it1.id, 'attention', key, hash, fx.ws.id);
      expect(await fx.store.insertDecisions([d('a', 'h1'), d('b', 'h1')])).toBe(2);
      expect(await fx.store.insertDecisions([d('a', 'h1'), d('a', 'h2')])).toBe(1);
      expect(await fx.store.countDecisions()).toBe(3);
      const keys = await fx.store.answeredKeys(it1.id, 'attention', [
        { questionKey: 'a', stateHash: 'h1', questionHash: 'q', stateVersion: 1 },
        { questionKey: 'b', stateHash: 'h2', questionHash: 'q', stateVersion: 1 },
        { questionKey: 'a', stateHash: 'h2', questionHash: 'q', stateVersion: 2 },
      ]);
      expect([...keys]).toEqual(['a']);
      const rows = await fx.store.listDecisions(it1.id);
      expect(rows.map((r) => r.id)).toEqual([...rows.map((r) => r.id)].sort((x, y) => x - y));
      expect(rows[0]).toMatchObject({ confidence: null, stateTruncated: false, inputTokens: 1 });
      expect(await fx.store.listWorkspaceDecisions(fx.ws.id, 'attention')).toHaveLength(3);
    });

    it("answeredKeysOfSets: each set gets the exact keys stored for it, in the order asked, another set's rows never", async () => {
      const [it1, it2] = [await item('T-1'), await item('T-2')];
      await fx.store.insertDecisions([
        decision(it1.id, 'attention', 'a', 'h1', fx.ws.id),
        decision(it1.id, 'attention', 'b', 'h1', fx.ws.id),
      ]);
      await fx.store.insertDecisions([decision(it1.id, 'effort', 'a', 'h2', fx.ws.id)]);
      await fx.store.insertDecisions([decision(it2.id, 'effort', 'b', 'h1', fx.ws.id)]);
      const k = (questionKey: string, stateHash: string, stateVersion = 1) => ({
        questionKey,
        stateHash,
        questionHash: 'q',
        stateVersion,
      });
      const got = await fx.store.answeredKeysOfSets(it1.id, [
        { questionSet: 'effort', keys: [k('a', 'h1'), k('a', 'h2'), k('b', 'h1')] },
        { questionSet: 'attention', keys: [k('a', 'h1'), k('b', 'h1', 2), k('c', 'h1')] },
        { questionSet: 'link', keys: [] },
      ]);
      expect(got.map((s) => [...s].sort())).toEqual([['a'], ['a'], []]);
      expect(await fx.store.answeredKeysOfSets(it1.id, [])).toEqual([]);
    });

    it("listDecisions with a set lists that set's rows only, oldest first (the runner's read for a set with maxAge)", async () => {
      const [a, b] = [await item('T-1'), await item('T-2')];
      await fx.store.insertDecisions([
        decision(a.id, 'attention', 'k', 'h1', fx.ws.id),
        decision(a.id, 'effort', 'k', 'h1', fx.ws.id),
      ]);
      await fx.store.insertDecisions([
        decision(a.id, 'attention', 'k', 'h2', fx.ws.id),
        decision(b.id, 'attention', 'k', 'h1', fx.ws.id),
      ]);
      const all = await fx.store.listDecisions(a.id);
      expect(all.map((r) => [r.questionSet, r.stateHash])).toEqual([
        ['attention', 'h1'],
        ['effort', 'h1'],
        ['attention', 'h2'],
      ]);
      const only = await fx.store.listDecisions(a.id, 'attention');
      expect(only.map((r) => [r.questionSet, r.stateHash])).toEqual([
        ['attention', 'h1'],
        ['attention', 'h2'],
      ]);
      expect(only).toEqual(all.filter((r) => r.questionSet === 'attention'));
      expect(await fx.store.listDecisions(a.id, 'nope')).toEqual([]);
    });

    it("a set with maxAge on the store's clock: unexpired answers are skipped across days; past maxAge the re-ask is a new state hash beside the old row (DESIGN §5.2)", async () => {
      const aging = defineQuestionSet({
        name: 'aging',
        questions: { stale: noul('No progress in 14 days.') },
        maxAgeMs: 7 * 86_400_000,
      });
      await reopen([aging]);
      const it1 = await item('T-1');
      const fake = new FakeProvider();
      fx.advance(3_600_001);
      await drain(runner(fake));
      expect(fake.requests).toHaveLength(1);
      const owe = () =>
        fx.store.oweJobs([{ itemId: it1.id, questionSet: 'aging' }], {
          priority: PRIORITY_BACKFILL,
          quietPeriod: false,
          reaskDebounce: false,
        });
      fx.advance(6 * 86_400_000);
      await owe();
      expect((await drain(runner(fake))).map((r) => r.outcome.kind)).toEqual(['complete']);
      expect(fake.requests).toHaveLength(1); // 6 days old, another date: still answered
      fx.advance(2 * 86_400_000);
      await owe();
      await drain(runner(fake));
      expect(fake.requests).toHaveLength(2);
      const rows = await fx.store.listDecisions(it1.id, 'aging');
      expect(rows).toHaveLength(2);
      const asOf = rows.map((r) => (JSON.parse(r.stateParts) as { as_of: string }).as_of);
      expect(asOf[0]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(asOf[1] > asOf[0]).toBe(true);
      expect(rows[1].stateHash).not.toBe(rows[0].stateHash);
      expect(JSON.parse(fake.requests[1].state).as_of).toBe(asOf[1]);
    });

    it('spend adds up per hour bucket and is read back over a window', async () => {
      const usage = { inputTokens: 100, outputTokens: 10, cacheReadTokens: 1, cacheWriteTokens: 2 };
      await fx.store.recordSpend({
        questionSet: 'attention',
        provider: 'fake',
        model: 'm',
        outcome: 'ok',
        calls: 1,
        usage,
      });
      await fx.store.recordSpend({
        questionSet: 'attention',
        provider: 'fake',
        model: 'm',
        outcome: 'ok',
        calls: 1,
        usage,
      });
      expect(await fx.store.spendSince(3_600_000)).toEqual({
        calls: 2,
        inputTokens: 200,
        outputTokens: 20,
        cacheReadTokens: 2,
        cacheWriteTokens: 4,
      });
      fx.advance(3 * 3_600_000);
      expect((await fx.store.spendSince(3_600_000)).calls).toBe(0);
      expect((await fx.store.spendSince(5 * 3_600_000)).calls).toBe(2);
    });
  });

  describe(`${backend.name}: daily-token-cap reservations (DESIGN §10.3)`, () => {
    const spendOf = (inputTokens: number, outputTokens: number) => ({
      questionSet: 'attention',
      provider: 'fake',
      model: 'm',
      outcome: 'ok',
      calls: 1,
      usage: { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0 },
    });
    const reserve = (tokens: number, capTokens = 1_000, ttlMs = 60_000, store = fx.store) =>
      store.reserveSpend({ tokens, capTokens, ttlMs, holder: 'w/0' });
    const billed = async () => {
      const s = await fx.store.spendSince(86_400_000);
      return s.inputTokens + s.outputTokens + s.cacheReadTokens + s.cacheWriteTokens;
    };

    it('a reservation counts against the cap until it settles to the real usage', async () => {
      const a = await reserve(600);
      expect(a).toMatchObject({ granted: true, settledTokens: 0, reservedTokens: 0 });
      // 600 reserved + 500 > 1 000: refused, though nothing is billed yet.
      expect(await reserve(500)).toMatchObject({ granted: false, settledTokens: 0, reservedTokens: 600 });
      if (!a.granted) throw new Error('unreachable');
      expect(await fx.store.settleSpendReservation(a.id, spendOf(200, 100))).toBe(true);
      expect(await billed()).toBe(300);
      // Settled to 300 real tokens: 300 + 500 fits now.
      expect(await reserve(500)).toMatchObject({ granted: true, settledTokens: 300, reservedTokens: 0 });
      expect(await reserve(201)).toMatchObject({ granted: false, settledTokens: 300, reservedTokens: 500 });
      expect(await reserve(200)).toMatchObject({ granted: true });
      // A settlement is done once: a second one records nothing more and says the row was gone.
      expect(await fx.store.settleSpendReservation(a.id, null)).toBe(false);
      expect(await billed()).toBe(300);
    });

    it('a release (no call sent) frees the tokens without billing anything', async () => {
      const a = await reserve(900);
      if (!a.granted) throw new Error('expected a grant');
      expect((await reserve(200)).granted).toBe(false);
      expect(await fx.store.settleSpendReservation(a.id, null)).toBe(true);
      expect(await billed()).toBe(0);
      expect((await reserve(1_000)).granted).toBe(true);
    });

    it('a reservation whose holder died expires after its ttl; a late settlement still bills', async () => {
      const a = await reserve(900, 1_000, 5_000);
      if (!a.granted) throw new Error('expected a grant');
      expect((await reserve(200)).granted).toBe(false);
      fx.advance(4_000);
      expect((await reserve(200)).granted).toBe(false); // still within its ttl
      fx.advance(1_001);
      const b = await reserve(200);
      expect(b).toMatchObject({ granted: true, reservedTokens: 0 });
      expect(await fx.store.settleSpendReservation(a.id, spendOf(50, 10))).toBe(false);
      expect(await billed()).toBe(60);
    });

    it("yesterday's spend does not count; a call larger than the cap runs only on an untouched day", async () => {
      await fx.store.recordSpend(spendOf(1_000, 0));
      const r = await reserve(10);
      expect(r).toMatchObject({ granted: false, settledTokens: 1_000 });
      expect(r.windowEndsInMs).toBeGreaterThan(0);
      expect(r.windowEndsInMs).toBeLessThanOrEqual(86_400_000);
      fx.advance(r.windowEndsInMs);
      // A new UTC day: nothing billed or reserved, so even an oversize call may go, once.
      const big = await reserve(5_000);
      expect(big).toMatchObject({ granted: true, settledTokens: 0, reservedTokens: 0 });
      expect((await reserve(1)).granted).toBe(false);
    });

    it('concurrent reservers on several connections never pass the cap together', async () => {
      const stores = [fx.store, ...(await Promise.all([1, 2, 3].map(() => fx.opened.peer(fx.registry))))];
      // 4 connections × 10 attempts of 100 tokens against a cap of 1 000: exactly 10 fit.
      const results = await Promise.all(
        stores.flatMap((s) => Array.from({ length: 10 }, () => reserve(100, 1_000, 60_000, s))),
      );
      const granted = results.filter((r) => r.granted);
      expect(granted).toHaveLength(10);
      expect(new Set(granted.map((r) => (r.granted ? r.id : ''))).size).toBe(10);
      // Every grant saw room for itself: what it read plus its own tokens stayed within the cap.
      for (const r of granted) expect(r.settledTokens + r.reservedTokens + 100).toBeLessThanOrEqual(1_000);
    });
  });

  describe(`${backend.name}: the claim`, () => {
    /** Co-asking partners for the claims below: the item's attention and effort read the same state. */
    const coAsk = { attention: ['effort'], effort: ['attention'] };
    /** An item's jobs by set name (listJobs gives no order between the sets of one item). */
    const jobsOfItem = async (itemId: string) =>
      (await fx.store.listJobs({ itemId })).sort((x, y) => (x.questionSet < y.questionSet ? -1 : 1));

    it('claims live work before backfill, oldest first, and only when due', async () => {
      const a = await item('T-1', { fields: { status: 'open' } });
      await fx.store.dropJobs({});
      await fx.store.oweJobs([{ itemId: a.id, questionSet: 'effort' }], {
        priority: PRIORITY_BACKFILL,
        quietPeriod: false,
      });
      fx.advance(1_000);
      const b = await item('T-2');
      expect(await fx.store.claimNextJob('w', 60_000, 8)).toMatchObject({ itemId: a.id, questionSet: 'effort' }); // backfill, but the only due job
      fx.advance(30_000);
      const live = await fx.store.claimNextJob('w', 60_000, 8);
      expect(live).toMatchObject({ itemId: b.id, priority: 0, attempts: 1, abandons: 0 });
    });

    it('skips jobs in flight, not yet due, parked, or of a soft-deleted workspace', async () => {
      const other = await fx.store.createWorkspace({ slug: 'other' });
      const col = await fx.store.createCollection({ workspaceId: other.id, slug: 'task', schema: TASK_SCHEMA });
      await fx.store.createItem(
        { workspaceId: other.id, collectionId: col.id, ref: 'O-1', title: 'o', fields: { status: 'open' } },
        { quietPeriod: false },
      );
      await fx.store.softDeleteWorkspace(other.id);
      const a = await item('T-1');
      expect(await fx.store.claimNextJob('w', 60_000, 8)).toBeNull(); // quiet period; other workspace held
      fx.advance(30_000);
      const claims = [];
      for (let c = await fx.store.claimNextJob('w', 60_000, 8); c; c = await fx.store.claimNextJob('w', 60_000, 8))
        claims.push(c);
      expect(claims.map((c) => c.itemId)).toEqual([a.id, a.id, a.id]);
      await fx.store.parkJob(claims[0], 'parked for the test');
      expect((await fx.store.queueStats()).parked).toBe(1);
      await fx.store.restoreWorkspace(other.id);
      const held = await fx.store.claimNextJob('w', 60_000, 8);
      expect(held!.workspaceId).toBe(other.id);
    });

    it('several claims at once (claimNextJobs): each as claimNextJob claims, in order, never the same job twice', async () => {
      const a = await item('T-1');
      fx.advance(30_000);
      const owed = (await fx.store.listJobs({})).length;
      const req = (workerId: string) => ({ workerId, leaseMs: 60_000, abandonLimit: 8 });
      const got = await fx.store.claimNextJobs(Array.from({ length: owed + 1 }, (_, i) => req(`slot-${i}`)));
      expect(got.every((g) => g.ok)).toBe(true);
      const claims = got.map((g) => (g.ok ? g.claim : undefined));
      expect(claims.slice(0, owed).map((c) => c!.itemId)).toEqual(Array.from({ length: owed }, () => a.id));
      expect(new Set(claims.slice(0, owed).map((c) => c!.questionSet)).size).toBe(owed);
      expect(claims.slice(0, owed).map((c) => c!.claimedBy)).toEqual(
        Array.from({ length: owed }, (_, i) => `slot-${i}`),
      );
      expect(claims[owed]).toBeNull(); // one more request than owed jobs: none left for it
      for (const c of claims.slice(0, owed))
        expect((await fx.store.getJob(c!.itemId, c!.questionSet))!.claimToken).toBe(c!.claimToken);
    });

    it("claims an item's due siblings for co-asking under the same lease, and only those that are claimable", async () => {
      const a = await item('T-1');
      const b = await item('T-2');
      fx.advance(30_000);
      const first = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(first.itemId).toBe(a.id);
      // A sibling claimed once is under a live lease: a second sibling claim passes over it.
      const held = (await fx.store.claimSiblingJobs(first, ['effort'], { leaseMs: 60_000, abandonLimit: 8 }))[0];
      expect(held).toMatchObject({ itemId: a.id, questionSet: 'effort', attempts: 1 });
      const sets = (await fx.store.listJobs({}))
        .filter((j) => j.itemId === a.id)
        .map((j) => j.questionSet)
        .filter((s) => s !== first.questionSet);
      const again = await fx.store.claimSiblingJobs(first, sets, { leaseMs: 60_000, abandonLimit: 8 });
      expect(again.map((c) => c.questionSet)).toEqual(sets.filter((s) => s !== 'effort').sort());
      for (const c of again) {
        expect(c).toMatchObject({ itemId: a.id, claimedBy: first.claimedBy, attempts: 1 });
        expect(await fx.store.completeJob(c)).toBe('applied');
      }
      // Another item's jobs are never touched; a sibling not yet due is not taken.
      expect((await fx.store.listJobs({})).filter((j) => j.itemId === b.id).every((j) => j.claimToken === null)).toBe(
        true,
      );
      const c = await item('T-3');
      const cFirst = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(cFirst.itemId).toBe(b.id);
      await fx.store.oweJobs([{ itemId: c.id, questionSet: 'effort' }], {
        priority: PRIORITY_BACKFILL,
        quietPeriod: false,
      });
      const cJob = (await fx.store.listJobs({})).find((j) => j.itemId === c.id && j.questionSet === 'attention')!;
      expect(
        await fx.store.claimSiblingJobs({ ...cFirst, itemId: c.id, questionSet: 'effort' }, [cJob.questionSet], {
          leaseMs: 60_000,
          abandonLimit: 8,
        }),
      ).toEqual([]);
      expect(await fx.store.renewLease(held, 60_000)).toBe(true);
    });

    it('provider batches (DESIGN §7.3): backfill jobs claimed in bulk, batched, not claimable, then stored or re-owed', async () => {
      await reopen([attentionSet, effortSet]);
      const items = [];
      for (let i = 1; i <= 3; i++)
        items.push(
          await fx.store.createItem(
            { workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: `B-${i}`, title: 'b', fields: { status: 'open' } },
            { priority: PRIORITY_BACKFILL, quietPeriod: false },
          ),
        );
      const live = await item('L-1');
      fx.advance(30_000);
      const claims = await fx.store.claimBatchJobs('w', { leaseMs: 60_000, limit: 4, abandonLimit: 8 });
      expect(claims.map((c) => [c.priority, c.attempts])).toEqual(Array(4).fill([PRIORITY_BACKFILL, 1]));
      expect(claims.every((c) => c.itemId !== live.id)).toBe(true); // live work is the slots'
      const plan = {
        stateHash: 'h',
        stateVersion: 2,
        stateParts: {},
        stateTruncated: false,
        explain: false,
        itemSeq: 1,
        ref: 'B-1',
        estimate: { inputTokens: 1, maxOutputTokens: 1 },
        parts: [],
      };
      const requests = claims.map((c, i) => ({
        customId: `vbtest-${i}`,
        workspaceId: fx.ws.id,
        itemId: c.itemId,
        plan,
      }));
      await fx.store.recordBatch({ id: 'vbtest', provider: 'fake', model: 'm' }, requests, claims);
      expect((await fx.store.listJobs({ state: 'batched' })).map((j) => [j.batchId, j.claimToken])).toEqual(
        Array(4).fill(['vbtest', null]),
      );
      // Batched jobs are passed over by every claim: live-only claims take the live jobs and stop;
      // a plain claim then takes only the backfill jobs left owed, never a batched one.
      const liveClaims = [];
      for (
        let c = await fx.store.claimNextJob('w2', 60_000, 8, [], { liveOnly: true });
        c;
        c = await fx.store.claimNextJob('w2', 60_000, 8, [], { liveOnly: true })
      )
        liveClaims.push(c);
      expect(liveClaims.map((c) => [c.itemId, c.priority])).toEqual([
        [live.id, 0],
        [live.id, 0],
      ]);
      const batchedKeys = new Set(claims.map((c) => `${c.itemId}/${c.questionSet}`));
      const rest = [];
      for (let c = await fx.store.claimNextJob('w3', 60_000, 8); c; c = await fx.store.claimNextJob('w3', 60_000, 8))
        rest.push(c);
      expect(rest).toHaveLength(2);
      expect(rest.some((c) => batchedKeys.has(`${c.itemId}/${c.questionSet}`))).toBe(false);
      expect(await fx.store.listProviderBatches(['submitting'])).toMatchObject([
        { id: 'vbtest', status: 'submitting', requestCount: 4, providerBatchId: null },
      ]);
      await fx.store.updateProviderBatch('vbtest', {
        providerBatchId: 'msgbatch_1',
        status: 'in_progress',
        expiresAt: 123,
      });
      expect((await fx.store.listBatchRequests('vbtest')).map((r) => r.customId)).toEqual([
        'vbtest-0',
        'vbtest-1',
        'vbtest-2',
        'vbtest-3',
      ]);
      // One result completes its job; storing it again does nothing.
      const done = {
        itemId: claims[0].itemId,
        answers: [],
        spend: [
          {
            questionSet: claims[0].questionSet,
            provider: 'fake',
            model: 'm',
            outcome: 'batch',
            calls: 1,
            usage: { inputTokens: 10, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 },
          },
        ],
        jobs: [{ itemId: claims[0].itemId, questionSet: claims[0].questionSet, outcome: 'complete' as const }],
      };
      await fx.store.storeBatchResult('vbtest', 'vbtest-0', done);
      await fx.store.storeBatchResult('vbtest', 'vbtest-0', done);
      expect(await fx.store.getJob(claims[0].itemId, claims[0].questionSet)).toBeNull();
      expect((await fx.store.spendSince(3_600_000)).calls).toBe(1);
      // A write re-owes a batched job: its result then leaves it alone.
      await fx.store.updateItem(claims[1].itemId, { title: 'written' });
      await fx.store.storeBatchResult('vbtest', 'vbtest-1', {
        itemId: claims[1].itemId,
        answers: [],
        spend: [],
        jobs: [{ itemId: claims[1].itemId, questionSet: claims[1].questionSet, outcome: 'complete' }],
      });
      expect(await fx.store.getJob(claims[1].itemId, claims[1].questionSet)).toMatchObject({ state: 'owed' });
      expect((await fx.store.batchJobCounts('vbtest')).batched).toBe(2);
      // The re-owed job still names the batch (its result serves it): the batch is not left empty.
      expect((await fx.store.batchJobCounts('vbtest')).named).toBe(3);
      // Closing re-owes the rest without the attempt, after the hold.
      const before = await fx.store.now();
      expect(await fx.store.closeBatch('vbtest', 'expired', 'batch expired', 5_000)).toBe(2);
      const after = await fx.store.now();
      for (const c of claims.slice(2)) {
        const j = (await fx.store.getJob(c.itemId, c.questionSet))!;
        expect(j).toMatchObject({ state: 'owed', attempts: 0, batchId: null, lastError: 'batch expired' });
        expect(j.notBefore).toBeGreaterThanOrEqual(before + 5_000);
        expect(j.notBefore).toBeLessThanOrEqual(after + 5_000);
      }
      expect(await fx.store.listBatchRequests('vbtest')).toEqual([]);
      expect((await fx.store.listProviderBatches())[0]).toMatchObject({ status: 'done', outcome: 'expired' });
      // A lost claim aborts the whole record: nothing written.
      fx.advance(10_000);
      const again = await fx.store.claimBatchJobs('w', { leaseMs: 60_000, limit: 10, abandonLimit: 8 });
      expect(again.length).toBeGreaterThan(0);
      await expect(
        fx.store.recordBatch(
          { id: 'vblost', provider: 'fake', model: 'm' },
          [],
          [...again, { ...again[0], claimToken: 'stale' }],
        ),
      ).rejects.toMatchObject({ code: 'batch_claim_lost' });
      expect(await fx.store.listProviderBatches(['submitting'])).toEqual([]);
      expect(await fx.store.listJobs({ state: 'batched' })).toEqual([]);
    });

    it("interleaves workspaces: a busy workspace's backlog does not starve a quiet one (fair claim order)", async () => {
      await reopen([attentionSet]);
      const other = await fx.store.createWorkspace({ slug: 'quiet' });
      const col = await fx.store.createCollection({ workspaceId: other.id, slug: 'task', schema: TASK_SCHEMA });
      const busy = 150;
      for (let i = 0; i < busy; i++) {
        await fx.store.createItem(
          { workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: `A-${i}`, title: 'a', fields: { status: 'open' } },
          { priority: PRIORITY_BACKFILL, quietPeriod: false },
        );
      }
      fx.advance(1_000);
      const quiet = new Set<string>();
      for (let i = 0; i < 10; i++) {
        const r = await fx.store.createItem(
          { workspaceId: other.id, collectionId: col.id, ref: `B-${i}`, title: 'b', fields: { status: 'open' } },
          { priority: PRIORITY_BACKFILL, quietPeriod: false },
        );
        quiet.add(r.row.id);
      }
      let claims = 0;
      while (quiet.size > 0) {
        const c = (await fx.store.claimNextJob('w', 60_000, 8))!;
        claims++;
        quiet.delete(c.itemId);
        expect(await fx.store.completeJob(c)).toBe('applied');
      }
      // In (priority, enqueued_at) order it would take all 160 claims; interleaved, about 2 per quiet job.
      expect(claims).toBeLessThanOrEqual(21);
      // Live work still comes before all of it.
      const live = await item('L-1', {});
      fx.advance(30_000);
      expect((await fx.store.claimNextJob('w', 60_000, 8))!.itemId).toBe(live.id);
    });

    it("numbers each workspace's jobs on from its latest tag, in one statement for a batch; a re-enqueue keeps the tag", async () => {
      await reopen([attentionSet]);
      const other = await fx.store.createWorkspace({ slug: 'other' });
      const col = await fx.store.createCollection({ workspaceId: other.id, slug: 'task', schema: TASK_SCHEMA });
      const mine = [await item('T-1'), await item('T-2'), await item('T-3')];
      const theirs = [];
      for (const ref of ['O-1', 'O-2'])
        theirs.push(
          (
            await fx.store.createItem({
              workspaceId: other.id,
              collectionId: col.id,
              ref,
              title: 'o',
              fields: { status: 'open' },
            })
          ).row,
        );
      const tags = async (ids: string[]) =>
        (await Promise.all(ids.map((id) => fx.store.getJob(id, 'attention')))).map((j) => j!.fairTag);
      expect(await tags(mine.map((i) => i.id))).toEqual([1, 2, 3]);
      expect(await tags(theirs.map((i) => i.id))).toEqual([1, 2]);
      await fx.store.dropJobs({});
      const all = [...mine, ...theirs].map((i) => ({ itemId: i.id, questionSet: 'attention' }));
      expect(await fx.store.oweJobs(all, { priority: PRIORITY_BACKFILL, quietPeriod: false })).toBe(5);
      expect(await tags(mine.map((i) => i.id))).toEqual([1, 2, 3]);
      expect(await tags(theirs.map((i) => i.id))).toEqual([1, 2]);
      await fx.store.updateItem(mine[0].id, { content: 'edited' });
      expect((await fx.store.getJob(mine[0].id, 'attention'))!).toMatchObject({ fairTag: 1, generation: 2 });
    });

    it('concurrent claimers never share a job', async () => {
      await reopen([attentionSet]);
      const n = 60;
      for (let i = 0; i < n; i++) await item(`T-${i}`);
      fx.advance(30_000);
      const peers = [fx.store, ...(await Promise.all([1, 2, 3].map(() => fx.opened.peer(fx.registry))))];
      const seen = new Map<string, number>();
      await Promise.all(
        Array.from({ length: 12 }, async (_, w) => {
          const s = peers[w % peers.length];
          for (;;) {
            const c = await s.claimNextJob(`w${w}`, 60_000, 8);
            if (!c) return;
            seen.set(c.itemId, (seen.get(c.itemId) ?? 0) + 1);
            expect(await s.completeJob(c)).toBe('applied');
          }
        }),
      );
      expect(seen.size).toBe(n);
      expect([...seen.values()].every((v) => v === 1)).toBe(true);
    });

    it('the abandon limit parks a job whose claims keep dying, before any call, each abandon backing it off lease × 2^(abandons − 1)', async () => {
      const it1 = await item('T-1');
      await fx.store.dropJobs({ questionSet: 'effort' });
      await fx.store.dropJobs({ questionSet: 'linked' });
      fx.advance(30_000);
      for (let i = 0; i < 8; i++) {
        expect(await fx.store.claimNextJob(`dead-${i}`, 1_000, 8)).toMatchObject({ itemId: it1.id, abandons: i });
        const leaseEnd = (await fx.store.getJob(it1.id, 'attention'))!.leaseExpiresAt!;
        fx.advance(1_001); // the claimant died: its lease ends
        // The next claim counts the abandon: below the limit it puts the job back for its backoff.
        expect(await fx.store.claimNextJob('next', 1_000, 8)).toBeNull();
        if (i === 7) break;
        const job = (await fx.store.getJob(it1.id, 'attention'))!;
        expect(job).toMatchObject({
          state: 'owed',
          abandons: i + 1,
          claimToken: null,
          leaseExpiresAt: null,
          attempts: i + 1,
        });
        expect(job.notBefore).toBe(leaseEnd + 1_000 * 2 ** i);
        fx.advance(1_000 * 2 ** i - 1);
      }
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
        state: 'parked',
        abandons: 8,
        claimToken: null,
      });
      expect((await fx.store.getJob(it1.id, 'attention'))!.lastError).toMatch(/abandon limit/);
    });

    it('a job that only shared a killed worker is not claimed first again: it waits its abandon backoff while other work runs, and its co-asked group comes due as one', async () => {
      const a = await item('T-1');
      const b = await item('T-2');
      await fx.store.dropJobs({ questionSet: 'linked' });
      fx.advance(30_000);
      const dead = (await fx.store.claimNextJob('dead', 10_000, 8, [], { coAsk }))!;
      expect(dead).toMatchObject({
        itemId: a.id,
        questionSet: 'attention',
        coAsked: [expect.objectContaining({ questionSet: 'effort' })],
      });
      // The sibling's lease was renewed a moment later (renewals are one per claim), then the
      // worker was killed: both leases end, a few milliseconds apart.
      const leaseEnd = (await fx.store.getJob(a.id, 'attention'))!.leaseExpiresAt!;
      fx.advance(5);
      expect(await fx.store.renewLease(dead.coAsked![0], 10_000)).toBe(true);
      fx.advance(10_001);
      // The next claim passes over the abandoned group (each counted once) and takes other work.
      const other = (await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk }))!;
      expect(other).toMatchObject({
        itemId: b.id,
        questionSet: 'attention',
        abandons: 0,
        coAsked: [expect.objectContaining({ questionSet: 'effort' })],
      });
      const group = await jobsOfItem(a.id);
      expect(group.map((j) => [j.questionSet, j.abandons, j.attempts, j.claimToken])).toEqual([
        ['attention', 1, 1, null],
        ['effort', 1, 1, null],
      ]);
      expect(group.map((j) => j.notBefore)).toEqual([leaseEnd + 10_000, leaseEnd + 10_000]);
      fx.advance(8_000);
      expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toBeNull();
      fx.advance(2_000);
      const again = (await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk }))!;
      expect(again).toMatchObject({
        itemId: a.id,
        questionSet: 'attention',
        abandons: 1,
        coAsked: [expect.objectContaining({ questionSet: 'effort', abandons: 1 })],
      });
    });

    for (const late of ['effort', 'attention'] as const) {
      it(`a dead worker's co-asked group whose leases end seconds apart (${late} renewed later) comes due as one and is claimed in one claim`, async () => {
        const a = await item('T-1');
        await fx.store.dropJobs({ questionSet: 'linked' });
        fx.advance(30_000);
        const dead = (await fx.store.claimNextJob('dead', 10_000, 8, [], { coAsk }))!;
        expect(dead).toMatchObject({ questionSet: 'attention', coAsked: [{ questionSet: 'effort' }] });
        // The runner renews a call's parts one by one, each with its own now; this worker renewed
        // one part, stalled 3 s, renewed the other, and was killed.
        fx.advance(3_000);
        expect(await fx.store.renewLease(late === 'effort' ? dead.coAsked![0] : dead, 10_000)).toBe(true);
        const lateEnd = (await fx.store.getJob(a.id, late))!.leaseExpiresAt!;
        // Past the first part's lease: the claim that finds it puts it back for its backoff, the
        // other part's lease still live. Past the second's: that one is put back too, and the
        // group's not_before is one, the later of the two (the second's dead lease end + a lease).
        fx.advance(7_500);
        expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toBeNull();
        fx.advance(3_000);
        expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toBeNull();
        const group = await jobsOfItem(a.id);
        expect(group.map((j) => [j.questionSet, j.abandons, j.attempts, j.claimToken, j.notBefore])).toEqual([
          ['attention', 1, 1, null, lateEnd + 10_000],
          ['effort', 1, 1, null, lateEnd + 10_000],
        ]);
        // Before the group's time neither part is claimable, the first's own backoff over or not.
        fx.advance(8_500);
        expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toBeNull();
        fx.advance(1_000);
        expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toMatchObject({
          itemId: a.id,
          questionSet: 'attention',
          abandons: 1,
          coAsked: [expect.objectContaining({ questionSet: 'effort', abandons: 1 })],
        });
      });
    }

    it("a part put back after its partner, with a shorter backoff (fewer abandons), takes the partner's later not_before", async () => {
      const a = await item('T-1');
      await fx.store.dropJobs({ questionSet: 'linked' });
      fx.advance(30_000);
      // effort counts one abandon more than attention: it died once as a sibling of a claim that
      // gave attention back.
      const first = (await fx.store.claimNextJob('dead', 10_000, 8))!;
      expect(await fx.store.claimSiblingJobs(first, ['effort'], { leaseMs: 10_000, abandonLimit: 8 })).toHaveLength(1);
      expect(await fx.store.releaseJob(first)).toBe('applied');
      fx.advance(10_001);
      const dead = (await fx.store.claimNextJob('dead', 10_000, 8, [], { coAsk }))!;
      expect(dead).toMatchObject({ questionSet: 'attention', abandons: 0, coAsked: [{ abandons: 1 }] });
      // attention's lease renewed 3 s later, then the worker killed: effort is put back first, with
      // a backoff of two leases; attention 3 s later with one, and lifts itself to effort's.
      fx.advance(3_000);
      expect(await fx.store.renewLease(dead, 10_000)).toBe(true);
      const effortEnd = (await fx.store.getJob(a.id, 'effort'))!.leaseExpiresAt!;
      fx.advance(7_500);
      expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toBeNull();
      fx.advance(3_000);
      expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toBeNull();
      const group = await jobsOfItem(a.id);
      expect(group.map((j) => [j.questionSet, j.abandons, j.claimToken, j.notBefore])).toEqual([
        ['attention', 1, null, effortEnd + 20_000],
        ['effort', 2, null, effortEnd + 20_000],
      ]);
      fx.advance(16_000);
      expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toBeNull();
      fx.advance(1_000);
      expect(await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk })).toMatchObject({
        questionSet: 'attention',
        coAsked: [expect.objectContaining({ questionSet: 'effort' })],
      });
    });

    it("a sibling that still carries a dead worker's expired claim is claimed with its group, its abandon counted, and its not_before left", async () => {
      const a = await item('T-1');
      await fx.store.dropJobs({ questionSet: 'linked' });
      fx.advance(30_000);
      // effort claimed beside attention by a worker that then gave attention back and died.
      const first = (await fx.store.claimNextJob('dead', 10_000, 8))!;
      expect(first.questionSet).toBe('attention');
      expect(await fx.store.claimSiblingJobs(first, ['effort'], { leaseMs: 10_000, abandonLimit: 8 })).toHaveLength(1);
      expect(await fx.store.releaseJob(first)).toBe('applied');
      const notBefore = (await fx.store.getJob(a.id, 'effort'))!.notBefore;
      fx.advance(10_001);
      // attention is due and free; effort's claim is dead: one claim takes both, so one call asks
      // them (a sibling is not claimed first: its abandon is counted, the group is not split).
      const got = (await fx.store.claimNextJob('live', 10_000, 8, [], { coAsk }))!;
      expect(got).toMatchObject({
        itemId: a.id,
        questionSet: 'attention',
        abandons: 0,
        coAsked: [expect.objectContaining({ questionSet: 'effort', abandons: 1, attempts: 2 })],
      });
      expect((await fx.store.getJob(a.id, 'effort'))!).toMatchObject({
        claimToken: got.coAsked![0].claimToken,
        notBefore,
      });
    });

    it('retry re-owes parked jobs with counters at 0; drop leaves jobs in flight alone', async () => {
      const it1 = await item('T-1');
      fx.advance(30_000);
      const c = (await fx.store.claimNextJob('w', 60_000, 8))!;
      await fx.store.parkJob(c, 'test');
      expect(await fx.store.retryJobs({ state: 'parked' })).toBe(1);
      expect((await fx.store.getJob(c.itemId, c.questionSet))!).toMatchObject({
        state: 'owed',
        attempts: 0,
        refusals: 0,
        abandons: 0,
      });
      const inFlight = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(await fx.store.dropJobs({ itemId: it1.id })).toBe(2);
      expect(await fx.store.getJob(inFlight.itemId, inFlight.questionSet)).not.toBeNull();
      const q = await fx.store.queueStats();
      expect(q).toMatchObject({ owedDue: 0, owedWaiting: 0, inFlight: 1, parked: 0 });
    });
  });

  describe(`${backend.name}: fenced outcomes`, () => {
    it('a runner whose lease expired cannot complete, fail, drop, release or renew the new claim', async () => {
      const it1 = await item('T-1');
      fx.advance(30_000);
      const late = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
      fx.advance(121_000); // the lease (60 s) and the abandon backoff (one lease) run out
      const taker = (await fx.store.claimNextJob('runner-b', 60_000, 8))!;
      expect(taker).toMatchObject({ itemId: late.itemId, questionSet: late.questionSet, abandons: 1, attempts: 2 });
      expect(await fx.store.completeJob(late)).toBe('lost');
      expect(await fx.store.failJob(late, { backoffMs: 1000, error: 'x' })).toBe('lost');
      expect(await fx.store.dropJob(late, 'x')).toBe('lost');
      expect(await fx.store.releaseJob(late)).toBe('lost');
      expect(await fx.store.deferJob(late, { delayMs: 1000, reason: 'x', deferLimit: 20, failBackoffMs: 1000 })).toBe(
        'lost',
      );
      expect(await fx.store.parkJob(late, 'x')).toBe('lost');
      expect(await fx.store.refuseJob(late, { backoffMs: 1, error: 'x', refusalLimit: 5 })).toBe('lost');
      expect(await fx.store.renewLease(late, 60_000)).toBe(false);
      expect((await fx.store.getJob(late.itemId, late.questionSet))!.claimToken).toBe(taker.claimToken);
      expect(await fx.store.renewLease(taker, 60_000)).toBe(true);
      expect(await fx.store.completeJob(taker)).toBe('applied');
      expect(await fx.store.getJob(it1.id, late.questionSet)).toBeNull();
    });

    describe("finishJob: the completion, the last call's answers and spend, and the next claim in one transaction (issue 13)", () => {
      const usage = { inputTokens: 100, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 };
      const spend = (set: string) => ({
        questionSet: set,
        provider: 'fake',
        model: 'm',
        outcome: 'ok',
        calls: 1,
        usage,
      });
      const next = { workerId: 'runner-a', leaseMs: 60_000, abandonLimit: 8 };

      it('applied: the job is gone, its answers and spend are stored, and the next job is claimed for the same claimant', async () => {
        await reopen([attentionSet]);
        const a = await item('T-1');
        const b = await item('T-2');
        fx.advance(30_000);
        const c = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
        const f = await fx.store.finishJob(c, {
          answers: {
            decisions: [decision(c.itemId, 'attention', 'blocked', 'h', fx.ws.id)],
            spend: spend('attention'),
            reservationId: null,
          },
          claimNext: next,
        });
        expect(f).toMatchObject({ result: 'applied', answersStored: 1 });
        expect(await fx.store.getJob(c.itemId, 'attention')).toBeNull();
        const other = c.itemId === a.id ? b.id : a.id;
        expect(f.next).toMatchObject({ itemId: other, questionSet: 'attention', claimedBy: 'runner-a', attempts: 1 });
        expect((await fx.store.getJob(other, 'attention'))!.claimToken).toBe(f.next!.claimToken);
        expect(await fx.store.countDecisions()).toBe(1);
        expect((await fx.store.spendSince(3_600_000)).calls).toBe(1);
        // Nothing left to claim: the next is null, and the completion still applies.
        expect(await fx.store.finishJob(f.next!, { claimNext: next })).toEqual({
          result: 'applied',
          answersStored: 0,
          next: null,
        });
      });

      it('lost or superseded: the answers and spend are still stored (they were paid for), and the job is left to its holder or its newer generation', async () => {
        await reopen([attentionSet]);
        const it1 = await item('T-1');
        fx.advance(30_000);
        const late = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
        fx.advance(121_000); // the lease and the abandon backoff run out
        const taker = (await fx.store.claimNextJob('runner-b', 60_000, 8))!;
        const answers = {
          decisions: [decision(it1.id, 'attention', 'blocked', 'h1', fx.ws.id)],
          spend: spend('attention'),
          reservationId: null,
        };
        expect(await fx.store.finishJob(late, { answers, claimNext: next })).toEqual({
          result: 'lost',
          answersStored: 1,
          next: null,
        });
        expect((await fx.store.getJob(it1.id, 'attention'))!.claimToken).toBe(taker.claimToken);
        await fx.store.updateItem(it1.id, { content: 'edited while asking' });
        const superseded = await fx.store.finishJob(taker, {
          answers: { ...answers, decisions: [decision(it1.id, 'attention', 'blocked', 'h2', fx.ws.id)] },
        });
        expect(superseded).toMatchObject({ result: 'superseded', answersStored: 1 });
        expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
          state: 'owed',
          claimToken: null,
          generation: 2,
        });
        expect(await fx.store.countDecisions()).toBe(2);
        expect((await fx.store.spendSince(3_600_000)).calls).toBe(2);
      });

      it("settles the call's daily-cap reservation with its spend", async () => {
        await reopen([attentionSet]);
        await item('T-1');
        fx.advance(30_000);
        const c = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
        const r = await fx.store.reserveSpend({ tokens: 500, capTokens: 1_000, holder: 'runner-a', ttlMs: 60_000 });
        expect(r.granted).toBe(true);
        await fx.store.finishJob(c, {
          answers: { decisions: [], spend: spend('attention'), reservationId: (r as { id: string }).id },
        });
        // The reservation is gone and the real usage (110 tokens) counts: 890 tokens are left.
        expect(
          await fx.store.reserveSpend({ tokens: 890, capTokens: 1_000, holder: 'runner-a', ttlMs: 60_000 }),
        ).toMatchObject({ granted: true, settledTokens: 110, reservedTokens: 0 });
      });

      it('a failing write leaves everything as it was: the job still claimed, no answer, no spend, no next claim', async () => {
        await reopen([attentionSet]);
        const a = await item('T-1');
        const b = await item('T-2');
        fx.advance(30_000);
        const c = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
        // An answer with no kind breaks a NOT NULL constraint, after the spend upsert ran.
        const broken = {
          decisions: [
            { ...decision(c.itemId, 'attention', 'blocked', 'h', fx.ws.id), kind: null as unknown as 'noul' },
          ],
          spend: spend('attention'),
          reservationId: null,
        };
        await expect(fx.store.finishJob(c, { answers: broken, claimNext: next })).rejects.toThrow();
        expect((await fx.store.getJob(c.itemId, 'attention'))!.claimToken).toBe(c.claimToken);
        expect((await fx.store.getJob(c.itemId === a.id ? b.id : a.id, 'attention'))!.claimToken).toBeNull();
        expect(await fx.store.countDecisions()).toBe(0);
        expect((await fx.store.spendSince(3_600_000)).calls).toBe(0);
      });
    });

    it('liveness with a claim: live, superseded after a write, lost after another claim, item_gone after a delete', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const c = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
      expect(await fx.store.checkLiveness(it1.id, c)).toBe('live');
      await fx.store.updateItem(it1.id, { content: 'edited' });
      expect(await fx.store.checkLiveness(it1.id, c)).toBe('superseded');
      expect(await fx.store.checkLiveness(it1.id)).toBe('live'); // without a claim: only the rows
      await fx.store.releaseJob(c);
      fx.advance(3_700_000);
      const c2 = (await fx.store.claimNextJob('runner-b', 60_000, 8))!;
      expect(await fx.store.checkLiveness(it1.id, c)).toBe('lost');
      expect(await fx.store.checkLiveness(it1.id, c2)).toBe('live');
      await fx.store.softDeleteItem(it1.id);
      expect(await fx.store.checkLiveness(it1.id, c2)).toBe('item_gone');
    });

    it('checkClaim: liveness and the lease left in one read; no lease once released', async () => {
      await reopen([attentionSet]);
      await item('T-1');
      fx.advance(30_000);
      const c = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
      const held = await fx.store.checkClaim(c);
      expect(held.liveness).toBe('live');
      expect(held.leaseLeftMs).toBeGreaterThan(30_000);
      expect(held.leaseLeftMs).toBeLessThanOrEqual(60_000);
      await fx.store.releaseJob(c);
      expect(await fx.store.checkClaim(c)).toEqual({ liveness: 'lost', leaseLeftMs: -Infinity });
    });

    it('checkClaims: every claim of a call in one read, each judged as checkClaim judges it, in the order given', async () => {
      await reopen([attentionSet, effortSet]);
      const it1 = await item('T-1');
      const it2 = await item('T-2');
      fx.advance(30_000);
      const claims: Claim[] = [];
      for (let i = 0; i < 4; i++) claims.push((await fx.store.claimNextJob('runner-a', 60_000, 8, [], { coAsk: {} }))!);
      const ofItem = (id: string) => claims.filter((c) => c.itemId === id);
      const [a1, e1] = ofItem(it1.id);
      const [a2, e2] = ofItem(it2.id);
      const live = await fx.store.checkClaims([e2, a1, e1, a2]);
      expect(live.map((r) => r.liveness)).toEqual(['live', 'live', 'live', 'live']);
      for (const r of live) expect(r.leaseLeftMs).toBeGreaterThan(30_000);
      await fx.store.releaseJob(e1);
      await fx.store.softDeleteItem(it2.id);
      const after = await fx.store.checkClaims([a2, e1, a1, e2]);
      const one = await Promise.all([a2, e1, a1, e2].map((c) => fx.store.checkClaim(c)));
      expect(after.map((r) => r.liveness)).toEqual(one.map((r) => r.liveness));
      expect(after.map((r) => r.liveness)).toEqual(['item_gone', 'lost', 'live', 'item_gone']);
      expect(after[1].leaseLeftMs).toBe(-Infinity);
      expect(after[2].leaseLeftMs).toBeGreaterThan(30_000);
      const missing = { ...a1, itemId: 'no-such-item' };
      expect((await fx.store.checkClaims([missing, a1])).map((r) => r.liveness)).toEqual(['item_gone', 'live']);
      // Claims of one item (a co-asked call's parts), the job rows there, lost or gone.
      expect((await fx.store.checkClaims([e1, a1])).map((r) => r.liveness)).toEqual(['lost', 'live']);
      // One part's row gone, the other's there: the gone one reads no row of its partner's.
      const e1Again = (await fx.store.claimNextJob('runner-a', 60_000, 8, [], { coAsk: {} }))!;
      expect(e1Again).toMatchObject({ itemId: it1.id, questionSet: 'effort' });
      await fx.store.completeJob(e1Again);
      const [gone, there] = await fx.store.checkClaims([e1Again, a1]);
      expect(gone).toEqual({ liveness: 'lost', leaseLeftMs: -Infinity });
      expect(there!.liveness).toBe('live');
      expect(there!.leaseLeftMs).toBeGreaterThan(30_000);
      await fx.store.completeJob(a1);
      expect(await fx.store.checkClaims([a1, e1])).toEqual([
        { liveness: 'lost', leaseLeftMs: -Infinity },
        { liveness: 'lost', leaseLeftMs: -Infinity },
      ]);
      expect(await fx.store.checkClaims([])).toEqual([]);
    });

    it('a write landing during an evaluation: the job survives the completion and runs once more', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const fake = new FakeProvider();
      let wrote = false;
      fake.handler = async (req) => {
        if (!wrote) {
          wrote = true;
          await fx.store.updateItem(it1.id, { content: 'unblocked now' }); // lands while the call is out
        }
        return Object.fromEntries(req.keys.map((k) => [k, { probability: 0.4 }]));
      };
      const opts = runner(fake);
      const first = await runOnce(opts, signal);
      expect(first!.recorded).toBe('superseded');
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
        claimToken: null,
        state: 'owed',
        generation: 2,
      });
      fx.advance(3_600_000);
      const second = await runOnce(opts, signal);
      expect(second!.recorded).toBe('applied');
      expect(fake.requests).toHaveLength(2);
      expect(fake.requests[1].state).toContain('unblocked now');
      expect(await fx.store.getJob(it1.id, 'attention')).toBeNull();
    });

    it('constant editing for 3 hours, a write landing in every evaluation: at most one evaluation per hour (DESIGN §3.4)', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      let elapsed = 0;
      let edits = 0;
      const perHour = [0, 0, 0];
      const fake = new FakeProvider();
      fake.handler = async (req) => {
        perHour[Math.floor(elapsed / 3_600_000)]++;
        await fx.store.updateItem(it1.id, { content: `edit ${++edits}` }); // the editor does not pause for us
        return Object.fromEntries(req.keys.map((k) => [k, { probability: 0.4 }]));
      };
      const opts = runner(fake);
      let lastEditAt = 0;
      for (elapsed = 20_000; elapsed < 3 * 3_600_000; elapsed += 20_000) {
        fx.advance(20_000);
        lastEditAt = (await fx.store.updateItem(it1.id, { content: `edit ${++edits}` })).row.updatedAt;
        await runOnce(opts, signal);
      }
      // The first evaluation waits for the delay cap (2 h after the first write), then the
      // re-ask debounce spaces them an hour apart; before the fix hour 3 ran one per step.
      expect(perHour).toEqual([0, 0, 1]);
      expect(fake.requests).toHaveLength(1);
      const job = (await fx.store.getJob(it1.id, 'attention'))!;
      const answeredAt = Math.max(...(await fx.store.listDecisions(it1.id)).map((d) => d.evaluatedAt));
      expect(job.notBefore).toBe(Math.max(answeredAt + 3_600_000, lastEditAt + 30_000));
    });

    it('a job that survives its completion gets enqueued_at = the time of the write that landed during it (DESIGN §3.4)', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const claim = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
      fx.advance(5_000);
      const w = await fx.store.updateItem(it1.id, { content: 'edited mid-evaluation' });
      expect((await fx.store.getJob(it1.id, 'attention'))!.owedAt).toBe(w.row.updatedAt);
      fx.advance(5_000);
      expect(await fx.store.completeJob(claim)).toBe('superseded');
      const job = (await fx.store.getJob(it1.id, 'attention'))!;
      expect(job.enqueuedAt).toBe(w.row.updatedAt);
      expect(job.claimToken).toBeNull();
      // A failure that finds the generation moved keeps enqueued_at: its owed work is the old one.
      fx.advance(60_000);
      const c2 = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
      fx.advance(1_000);
      await fx.store.updateItem(it1.id, { content: 'edited again' });
      expect(await fx.store.failJob(c2, { backoffMs: 30_000, error: 'x' })).toBe('superseded');
      expect((await fx.store.getJob(it1.id, 'attention'))!.enqueuedAt).toBe(w.row.updatedAt);
    });

    it("a lease-expiry race: the late runner's outcome is fenced off and each key is answered once", async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let entered!: () => void;
      const inCall = new Promise<void>((r) => (entered = r));
      const slow = new FakeProvider({
        handler: async (req) => {
          entered();
          await gate;
          return Object.fromEntries(req.keys.map((k) => [k, { probability: 0.25 }]));
        },
      });
      const peer = await fx.opened.peer(fx.registry);
      const late = runOnce({ ...runner(slow), workerId: 'runner-late' }, signal);
      await inCall;
      fx.advance(121_000); // the late runner's lease, then its abandon backoff (one lease), run out mid-call
      const fast = new FakeProvider();
      const taker = await runOnce({ ...runner(fast), store: peer, workerId: 'runner-b' }, signal);
      expect(taker!.claim.abandons).toBe(1);
      expect(taker!.recorded).toBe('applied');
      release();
      const lateReport = (await late)!;
      expect(lateReport.recorded).toBe('lost');
      const rows = await fx.store.listDecisions(it1.id);
      expect(rows.map((r) => r.questionKey).sort()).toEqual(['blocked', 'needs_human_decision', 'waiting_on_external']);
      // The taker's answers are the record: the late runner's (all 0.25) were not stored over them.
      expect(rows.map((r) => (JSON.parse(r.answer) as { noul: number }).noul)).not.toContain(0.25);
      expect(slow.requests).toHaveLength(1);
      expect(fast.requests).toHaveLength(1);
      expect(await fx.store.getJob(it1.id, 'attention')).toBeNull();
    });

    it('a deleted workspace holds the job; a restore resumes it', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const fake = new FakeProvider();
      const r = await runOnce(
        runner(fake, { beforeAsk: async () => void (await fx.store.softDeleteWorkspace(fx.ws.id)) }),
        signal,
      );
      expect(r!.outcome.kind).toBe('release');
      expect(fake.requests).toHaveLength(0);
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
        state: 'owed',
        attempts: 0,
        claimToken: null,
      });
      expect(await runOnce(runner(fake), signal)).toBeNull();
      await fx.store.restoreWorkspace(fx.ws.id);
      expect((await runOnce(runner(fake), signal))!.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    });

    it('a 429 defers without counting an attempt, until the reset', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const r = await runOnce(runner(new FakeProvider({ faults: [{ status: 429, retryAfterMs: 90_000 }] })), signal);
      expect(r!.outcome).toMatchObject({ kind: 'defer', delayMs: 90_000 });
      const job = (await fx.store.getJob(it1.id, 'attention'))!;
      expect(job).toMatchObject({ attempts: 0, claimToken: null });
      expect(job.notBefore).toBe(job.lastErrorAt! + 90_000);
      expect(await fx.store.claimNextJob('w', 60_000, 8)).toBeNull();
    });

    it('repeated 503s never drop the job, and the backoff follows 30 s × 2^(n−1) up to 1 h', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const f = new FakeProvider({ faults: Array(12).fill({ status: 503 }) });
      const waits: number[] = [];
      for (let i = 0; i < 10; i++) {
        const r = await runOnce(runner(f), signal);
        expect(r!.outcome.kind).toBe('fail');
        const job = (await fx.store.getJob(it1.id, 'attention'))!;
        waits.push(job.notBefore - job.lastErrorAt!);
        fx.advance(job.notBefore - (await fx.store.now()) + 1);
      }
      expect(waits).toEqual([
        30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000, 3_600_000,
      ]);
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'owed', refusals: 0, attempts: 10 });
    });

    it('HTTP-400-style refusals park the job on the 5th; a write re-owes it', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const f = new FakeProvider({ faults: Array(10).fill({ status: 400 }) });
      const kinds: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = (await runOnce(runner(f), signal))!;
        kinds.push(`${r.outcome.kind}/${r.recorded}`);
        fx.advance(2 * 3_600_000);
      }
      // The refusal that reaches the limit is reported as the park the store applied (DESIGN §3.7).
      expect(kinds).toEqual(['refuse/applied', 'refuse/applied', 'refuse/applied', 'refuse/applied', 'park/applied']);
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'parked', refusals: 5 });
      expect(await runOnce(runner(f), signal)).toBeNull();
      await fx.store.updateItem(it1.id, { content: 'rewritten' });
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'owed', refusals: 0 });
    });

    it('a misconfigured provider releases the job without an attempt', async () => {
      await reopen([attentionSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const r = await runOnce(runner(new FakeProvider({ faults: [{ status: 401 }] })), signal);
      expect(r!.outcome.kind).toBe('misconfigured');
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
        attempts: 0,
        state: 'owed',
        claimToken: null,
      });
    });

    it('the whole pipeline: answers every key once, sends the bytes it hashes, and a second pass costs nothing', async () => {
      await reopen([attentionSet, effortSet]);
      const it1 = await item('T-1');
      fx.advance(30_000);
      const fake = new FakeProvider();
      const reports = await drain(runner(fake));
      // attention and effort read the same state: one co-asked call (DESIGN §7.2), two jobs done.
      expect(reports.map((r) => [r.outcome.kind, r.claim.coAsked?.map((c) => c.questionSet)])).toEqual([
        ['complete', ['effort']],
      ]);
      expect(fake.requests.map((q) => q.keys.sort())).toEqual([
        ['blocked', 'effort', 'needs_human_decision', 'waiting_on_external'],
      ]);
      expect(await fx.store.listJobs({ itemId: it1.id })).toEqual([]);
      const rows = await fx.store.listDecisions(it1.id);
      expect(rows.map((r) => `${r.questionSet}:${r.questionKey}`).sort()).toEqual([
        'attention:blocked',
        'attention:needs_human_decision',
        'attention:waiting_on_external',
        'effort:effort',
      ]);
      const att = rows.find((r) => r.questionSet === 'attention')!;
      const req = fake.requests.find((q) => q.keys.includes('blocked'))!;
      expect(createHash('sha256').update(req.state).digest('hex')).toBe(att.stateHash);
      await fx.store.oweJobs([{ itemId: it1.id, questionSet: 'attention' }], { quietPeriod: false });
      fx.advance(3_600_000);
      const again = await drain(runner(fake));
      expect(again.map((r) => r.outcome)).toEqual([{ kind: 'complete', reason: 'already_answered' }]);
      expect(fake.requests).toHaveLength(1);
      expect((await fx.store.spendSince(86_400_000)).calls).toBe(1);
    });
  });

  describe(`${backend.name}: bounded defers and set holds (DESIGN §3.7, §3.8)`, () => {
    const deferOpts = (over: Partial<{ delayMs: number; deferLimit: number; failBackoffMs: number }> = {}) => ({
      delayMs: 1_000,
      reason: 'provider_unavailable 429',
      deferLimit: 3,
      failBackoffMs: 30_000,
      ...over,
    });
    /** Claims the job of (item, set) after moving the clock past its not_before. */
    async function claimDue(itemId: string, set = 'attention') {
      const j = (await fx.store.getJob(itemId, set))!;
      fx.advance(Math.max(0, j.notBefore - (await fx.store.now())) + 1);
      const c = (await fx.store.claimNextJob(
        'w',
        60_000,
        8,
        ['effort', 'linked'].filter((s) => s !== set),
      ))!;
      expect(c).toMatchObject({ itemId, questionSet: set });
      return c;
    }

    it('a defer refunds the attempt and counts a consecutive defer; the one past the limit is recorded as a fail', async () => {
      const it1 = await item('T-1');
      for (let i = 1; i <= 3; i++) {
        const c = await claimDue(it1.id);
        expect(c.defers).toBe(i - 1);
        expect(await fx.store.deferJob(c, deferOpts())).toBe('applied');
        const j = (await fx.store.getJob(it1.id, 'attention'))!;
        expect(j).toMatchObject({ attempts: 0, defers: i, lastError: 'provider_unavailable 429' });
        expect(j.notBefore).toBe(j.lastErrorAt! + 1_000);
      }
      const c = await claimDue(it1.id);
      expect(c).toMatchObject({ attempts: 1, defers: 3 });
      expect(await fx.store.deferJob(c, deferOpts())).toBe('failed');
      const j = (await fx.store.getJob(it1.id, 'attention'))!;
      // Counted like a transient fail: the attempt stays, the count starts again, the job backs off.
      expect(j).toMatchObject({ state: 'owed', attempts: 1, defers: 0, claimToken: null });
      expect(j.notBefore).toBe(j.lastErrorAt! + 30_000);
      expect(j.lastError).toContain('provider_unavailable 429');
      expect(j.lastError).toContain('counted as a failure');
      // The next defer is a plain defer again.
      expect(await fx.store.deferJob(await claimDue(it1.id), deferOpts())).toBe('applied');
      expect(await fx.store.getJob(it1.id, 'attention')).toMatchObject({ attempts: 1, defers: 1 });
    });

    it('a defer past the limit waits for the longer of the backoff and the defer delay', async () => {
      const it1 = await item('T-1');
      await fx.store.deferJob(await claimDue(it1.id), deferOpts({ deferLimit: 1 }));
      expect(await fx.store.deferJob(await claimDue(it1.id), deferOpts({ deferLimit: 1, delayMs: 600_000 }))).toBe(
        'failed',
      );
      const j = (await fx.store.getJob(it1.id, 'attention'))!;
      expect(j.notBefore).toBe(j.lastErrorAt! + 600_000);
    });

    it('fail, refuse, park, an enqueue and jobs retry reset the defer count; a release keeps it', async () => {
      const it1 = await item('T-1');
      const deferOnce = async () => {
        await fx.store.deferJob(await claimDue(it1.id), deferOpts({ deferLimit: 20 }));
        expect((await fx.store.getJob(it1.id, 'attention'))!.defers).toBeGreaterThan(0);
      };
      await deferOnce();
      await fx.store.failJob(await claimDue(it1.id), { backoffMs: 1_000, error: 'HTTP 503' });
      expect((await fx.store.getJob(it1.id, 'attention'))!.defers).toBe(0);
      await deferOnce();
      await fx.store.refuseJob(await claimDue(it1.id), { backoffMs: 1_000, error: 'HTTP 400', refusalLimit: 5 });
      expect((await fx.store.getJob(it1.id, 'attention'))!.defers).toBe(0);
      await deferOnce();
      expect(await fx.store.releaseJob(await claimDue(it1.id))).toBe('applied');
      expect((await fx.store.getJob(it1.id, 'attention'))!.defers).toBe(1);
      await fx.store.updateItem(it1.id, { title: 'edited' });
      expect((await fx.store.getJob(it1.id, 'attention'))!.defers).toBe(0);
      await deferOnce();
      expect(await fx.store.retryJobs({ itemId: it1.id })).toBeGreaterThan(0);
      expect((await fx.store.getJob(it1.id, 'attention'))!.defers).toBe(0);
      await deferOnce();
      await fx.store.parkJob(await claimDue(it1.id), 'test');
      expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'parked', defers: 0 });
    });

    it('the claim passes over the sets it is told to skip, and claims them again when not told', async () => {
      const it1 = await item('T-1');
      fx.advance(31_000);
      const seen: string[] = [];
      for (;;) {
        const c = await fx.store.claimNextJob('w', 60_000, 8, ['attention']);
        if (!c) break;
        seen.push(c.questionSet);
      }
      expect(seen.sort()).toEqual(['effort', 'linked']);
      const c = (await fx.store.claimNextJob('w', 60_000, 8, []))!;
      expect(c).toMatchObject({ itemId: it1.id, questionSet: 'attention' });
    });

    it('a release with a hold: no attempt counted, not claimable until the hold ends, the reason recorded', async () => {
      const it1 = await item('T-1');
      const c = await claimDue(it1.id);
      expect(await fx.store.releaseJob(c, { holdMs: 30_000, error: 'schema_rejected 400' })).toBe('applied');
      const j = (await fx.store.getJob(it1.id, 'attention'))!;
      expect(j).toMatchObject({ attempts: 0, claimToken: null, lastError: 'schema_rejected 400' });
      expect(j.notBefore).toBe(j.lastErrorAt! + 30_000);
      fx.advance(29_000);
      expect(await fx.store.claimNextJob('w', 60_000, 8, ['effort', 'linked'])).toBeNull();
      fx.advance(1_001);
      expect(await fx.store.claimNextJob('w', 60_000, 8, ['effort', 'linked'])).toMatchObject({
        itemId: it1.id,
        questionSet: 'attention',
      });
    });
  });

  describe(`${backend.name}: operations (meta, chunk and set counts, spend rows)`, () => {
    it('meta: set, replace, get, delete; listMeta matches its prefix byte for byte (% and _ are literal), in byte order', async () => {
      expect(await fx.store.getMeta('cursor')).toBeNull();
      await fx.store.setMeta('cursor', 'v1');
      const first = (await fx.store.listMeta('cursor'))[0];
      fx.advance(10_000);
      await fx.store.setMeta('cursor', 'v2');
      expect(await fx.store.getMeta('cursor')).toBe('v2');
      const second = (await fx.store.listMeta('cursor'))[0];
      expect(second).toMatchObject({ key: 'cursor', value: 'v2' });
      expect(second.updatedAt - first.updatedAt).toBeGreaterThanOrEqual(10_000);
      await fx.store.deleteMeta('cursor');
      await fx.store.deleteMeta('cursor'); // a missing key is not an error
      expect(await fx.store.getMeta('cursor')).toBeNull();

      for (const k of ['a%b:2', 'a%b:1', 'aXb:1', 'a%', 'a_b:1', 'aZb:1', 'a\\b:1', 'a\\\\b:1', 'p:a', 'p:B', 'p:_'])
        await fx.store.setMeta(k, `v ${k}`);
      const keys = async (prefix: string) => (await fx.store.listMeta(prefix)).map((r) => r.key);
      expect(await keys('a%b:')).toEqual(['a%b:1', 'a%b:2']);
      expect(await keys('a%')).toEqual(['a%', 'a%b:1', 'a%b:2']);
      expect(await keys('a_b')).toEqual(['a_b:1']);
      expect(await keys('a\\b')).toEqual(['a\\b:1']);
      expect(await keys('p:')).toEqual(['p:B', 'p:_', 'p:a']); // byte order: 'B' < '_' < 'a'
      expect(await keys('nothing')).toEqual([]);
      expect(await keys('')).toHaveLength(11);
      expect((await fx.store.listMeta('p:a'))[0]).toMatchObject({ key: 'p:a', value: 'v p:a' });
      // An astral character counts once in the prefix (SQL length), not twice (UTF-16 units).
      await fx.store.setMeta('🎉x:1', 'party');
      await fx.store.setMeta('🎉y:1', 'other');
      expect(await keys('🎉x')).toEqual(['🎉x:1']);
    });

    it('oweJobs writes its meta row in the same transaction as the jobs: both or neither', async () => {
      await reopen([attentionSet]);
      const a = await item('T-1');
      const b = await item('T-2');
      await fx.store.dropJobs({});
      const pairs = [a, b].map((i) => ({ itemId: i.id, questionSet: 'attention' }));
      const n = await fx.store.oweJobs(pairs, {
        priority: PRIORITY_BACKFILL,
        quietPeriod: false,
        insertOnly: true,
        meta: { key: 'backfill:acme', value: '{"after":"T-2"}' },
      });
      expect(n).toBe(2);
      const [meta] = await fx.store.listMeta('backfill:');
      expect(meta).toMatchObject({ key: 'backfill:acme', value: '{"after":"T-2"}' });
      expect(meta.updatedAt).toBe((await fx.store.getJob(a.id, 'attention'))!.enqueuedAt); // one transaction, one "now"
      // A meta write that fails (value NOT NULL) rolls the jobs back with it.
      await fx.store.dropJobs({});
      await expect(
        fx.store.oweJobs(pairs, {
          quietPeriod: false,
          meta: { key: 'backfill:acme', value: null as unknown as string },
        }),
      ).rejects.toThrow();
      expect(await fx.store.listJobs({})).toHaveLength(0);
      expect(await fx.store.getMeta('backfill:acme')).toBe('{"after":"T-2"}');
    });

    it('countChunkJobs: claimable, in flight, waiting (not due or workspace deleted), parked, gone', async () => {
      await reopen([attentionSet]);
      const now = { quietPeriod: false };
      expect(await fx.store.countChunkJobs('attention', [])).toEqual({
        claimable: 0,
        inFlight: 0,
        waiting: 0,
        parked: 0,
        gone: 0,
      });
      const b = (
        await fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'T-b', title: 'b' }, now)
      ).row;
      const inFlight = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(inFlight.itemId).toBe(b.id);
      const c = (
        await fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'T-c', title: 'c' }, now)
      ).row;
      const parked = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(parked.itemId).toBe(c.id);
      await fx.store.parkJob(parked, 'test');
      const a = (
        await fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'T-a', title: 'a' }, now)
      ).row;
      const d = await item('T-d'); // quiet period: not due yet
      const e = await item('T-e');
      await fx.store.dropJobs({ itemId: e.id });
      const other = await fx.store.createWorkspace({ slug: 'gone' });
      const col = await fx.store.createCollection({ workspaceId: other.id, slug: 'task', schema: TASK_SCHEMA });
      const f = (
        await fx.store.createItem({ workspaceId: other.id, collectionId: col.id, ref: 'O-1', title: 'o' }, now)
      ).row;
      await fx.store.softDeleteWorkspace(other.id);
      const ids = [a.id, b.id, c.id, d.id, e.id, f.id, 'nope', a.id];
      expect(await fx.store.countChunkJobs('attention', ids)).toEqual({
        claimable: 1,
        inFlight: 1,
        waiting: 2,
        parked: 1,
        gone: 2,
      });
      expect(await fx.store.countChunkJobs('effort', ids)).toEqual({
        claimable: 0,
        inFlight: 0,
        waiting: 0,
        parked: 0,
        gone: 7,
      });
      // More ids than one statement binds: counted across statements.
      const many = [...Array.from({ length: 1_200 }, (_, i) => `missing-${i}`), ...ids];
      expect(await fx.store.countChunkJobs('attention', many)).toEqual({
        claimable: 1,
        inFlight: 1,
        waiting: 2,
        parked: 1,
        gone: 1_202,
      });
      fx.advance(61_000); // the lease runs out: claimable again; the quiet period is over too
      expect(await fx.store.countChunkJobs('attention', ids)).toEqual({
        claimable: 3,
        inFlight: 0,
        waiting: 1,
        parked: 1,
        gone: 2,
      });
    });

    it('jobCountsBySet: states per set; failing counts parked and retried-after-attempt errors, not deferrals', async () => {
      const now = { quietPeriod: false };
      const t1 = await item('T-1');
      await fx.store.dropJobs({});
      const owe = (itemId: string, questionSet: string) => fx.store.oweJobs([{ itemId, questionSet }], now);
      await owe(t1.id, 'attention');
      const deferred = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(deferred.questionSet).toBe('attention');
      await fx.store.deferJob(deferred, {
        delayMs: 3_600_000,
        reason: 'rate limited',
        deferLimit: 20,
        failBackoffMs: 30_000,
      });
      fx.advance(1_000);
      await owe(t1.id, 'effort');
      const failed = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(failed.questionSet).toBe('effort');
      await fx.store.failJob(failed, { backoffMs: 3_600_000, error: 'HTTP 503' });
      fx.advance(1_000);
      await owe(t1.id, 'linked');
      const parked = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(parked.questionSet).toBe('linked');
      await fx.store.parkJob(parked, 'test');
      fx.advance(1_000);
      const t2 = await item('T-2');
      await fx.store.dropJobs({ itemId: t2.id });
      await owe(t2.id, 'attention');
      expect((await fx.store.claimNextJob('w', 60_000, 8))!).toMatchObject({ itemId: t2.id, questionSet: 'attention' });
      await fx.store.oweJobs(
        ['effort', 'linked'].map((questionSet) => ({ itemId: t2.id, questionSet })),
        now,
      );
      const job = async (i: string, s: string) => (await fx.store.getJob(i, s))!;
      expect(await fx.store.jobCountsBySet()).toEqual([
        {
          questionSet: 'attention',
          due: 0,
          waiting: 1,
          inFlight: 1,
          parked: 0,
          failing: 0,
          oldestOwedAt: (await job(t1.id, 'attention')).enqueuedAt,
          lastErrorAt: null,
        },
        {
          questionSet: 'effort',
          due: 1,
          waiting: 1,
          inFlight: 0,
          parked: 0,
          failing: 1,
          oldestOwedAt: (await job(t1.id, 'effort')).enqueuedAt,
          lastErrorAt: (await job(t1.id, 'effort')).lastErrorAt,
        },
        {
          questionSet: 'linked',
          due: 1,
          waiting: 0,
          inFlight: 0,
          parked: 1,
          failing: 1,
          oldestOwedAt: (await job(t2.id, 'linked')).enqueuedAt,
          lastErrorAt: (await job(t1.id, 'linked')).lastErrorAt,
        },
      ]);
      await fx.store.dropJobs({});
      await fx.store.retryJobs({});
      expect((await fx.store.jobCountsBySet()).map((r) => r.questionSet)).toEqual(['attention']); // only the in-flight job is left
    });

    it('spendRowsSince groups by (provider, model, set, outcome) over the hour buckets of the window', async () => {
      const usage = (n: number) => ({
        inputTokens: 100 * n,
        outputTokens: 10 * n,
        cacheReadTokens: n,
        cacheWriteTokens: 2 * n,
      });
      const spend = (questionSet: string, model: string, outcome: string, n = 1) =>
        fx.store.recordSpend({ questionSet, provider: 'fake', model, outcome, calls: 1, usage: usage(n) });
      await spend('attention', 'm', 'ok');
      await spend('attention', 'm', 'ok', 2);
      await spend('effort', 'm', 'ok');
      await spend('attention', 'm2', 'error');
      await fx.store.recordSpend({
        questionSet: 'attention',
        provider: 'Other',
        model: 'm',
        outcome: 'ok',
        calls: 3,
        usage: usage(1),
      });
      fx.advance(2 * 3_600_000);
      await spend('attention', 'm', 'ok', 5);
      const recent = await fx.store.spendRowsSince(3_600_000);
      expect(recent.sinceHour % 3_600_000).toBe(0);
      expect(recent.rows).toEqual([
        {
          provider: 'fake',
          model: 'm',
          questionSet: 'attention',
          outcome: 'ok',
          calls: 1,
          inputTokens: 500,
          outputTokens: 50,
          cacheReadTokens: 5,
          cacheWriteTokens: 10,
        },
      ]);
      const all = await fx.store.spendRowsSince(4 * 3_600_000);
      expect(all.sinceHour).toBeLessThanOrEqual(recent.sinceHour - 3 * 3_600_000);
      expect(all.rows).toEqual([
        {
          provider: 'Other',
          model: 'm',
          questionSet: 'attention',
          outcome: 'ok',
          calls: 3,
          inputTokens: 100,
          outputTokens: 10,
          cacheReadTokens: 1,
          cacheWriteTokens: 2,
        },
        {
          provider: 'fake',
          model: 'm',
          questionSet: 'attention',
          outcome: 'ok',
          calls: 3,
          inputTokens: 800,
          outputTokens: 80,
          cacheReadTokens: 8,
          cacheWriteTokens: 16,
        },
        {
          provider: 'fake',
          model: 'm',
          questionSet: 'effort',
          outcome: 'ok',
          calls: 1,
          inputTokens: 100,
          outputTokens: 10,
          cacheReadTokens: 1,
          cacheWriteTokens: 2,
        },
        {
          provider: 'fake',
          model: 'm2',
          questionSet: 'attention',
          outcome: 'error',
          calls: 1,
          inputTokens: 100,
          outputTokens: 10,
          cacheReadTokens: 1,
          cacheWriteTokens: 2,
        },
      ]);
      // The same rows kept apart per hour, oldest first, the hour a number (the dashboard's series).
      const hours = await fx.store.spendByHourSince(4 * 3_600_000);
      expect(hours.sinceHour).toBe(all.sinceHour);
      const first = hours.rows[0].hour;
      expect(first % 3_600_000).toBe(0);
      expect(
        hours.rows.map((r) => [r.hour - first, r.provider, r.model, r.questionSet, r.outcome, r.calls, r.inputTokens]),
      ).toEqual([
        [0, 'Other', 'm', 'attention', 'ok', 3, 100],
        [0, 'fake', 'm', 'attention', 'ok', 2, 300],
        [0, 'fake', 'm', 'effort', 'ok', 1, 100],
        [0, 'fake', 'm2', 'attention', 'error', 1, 100],
        [2 * 3_600_000, 'fake', 'm', 'attention', 'ok', 1, 500],
      ]);
      expect(typeof hours.rows[0].hour).toBe('number');
      // Per UTC day, summed in the query: the hours' rows added up per (day, provider, model, set, outcome).
      const days = await fx.store.spendByHourSince(4 * 3_600_000, 'day');
      expect(days.sinceHour).toBe(all.sinceHour);
      const want = new Map<string, number>();
      for (const r of hours.rows) {
        const k = JSON.stringify([r.hour - (r.hour % 86_400_000), r.provider, r.model, r.questionSet, r.outcome]);
        want.set(k, (want.get(k) ?? 0) + r.calls);
      }
      expect(
        new Map(
          days.rows.map((r) => [JSON.stringify([r.hour, r.provider, r.model, r.questionSet, r.outcome]), r.calls]),
        ),
      ).toEqual(want);
      expect(days.rows.every((r) => typeof r.hour === 'number' && r.hour % 86_400_000 === 0)).toBe(true);
      expect(days.rows.length).toBeLessThanOrEqual(hours.rows.length);
    });
  });

  describe(`${backend.name}: drift sweep, retention and the owe options`, () => {
    it('scanItemsForDrift: live items of the workspace after the cursor, latest hash and state version per key, job state, newest 10 live comments', async () => {
      await reopen([attentionSet]);
      const [a, b, c, gone] = [await item('T-1'), await item('T-2'), await item('T-3'), await item('T-4')];
      await fx.store.softDeleteItem(gone.id);
      const other = await fx.store.createWorkspace({ slug: 'other' });
      const col = await fx.store.createCollection({ workspaceId: other.id, slug: 'task', schema: TASK_SCHEMA });
      await fx.store.createItem({ workspaceId: other.id, collectionId: col.id, ref: 'O-1', title: 'o' });
      await fx.store.dropJobs({ workspaceId: other.id });
      const d = (itemId: string, key: string, stateHash: string, questionHash: string, set = 'attention') => ({
        ...decision(itemId, set, key, stateHash, fx.ws.id),
        questionHash,
      });
      await fx.store.insertDecisions([d(a.id, 'blocked', 's1', 'q-old'), d(a.id, 'waiting_on_external', 's1', 'q-w')]);
      await fx.store.insertDecisions([
        { ...d(a.id, 'blocked', 's2', 'q-new'), stateVersion: 2 },
        d(a.id, 'blocked', 's1', 'q-other-set', 'effort'),
      ]);
      await fx.store.insertDecisions([d(a.id, 'mentions@cm-1', 's1', 'q-c')]);
      const commentIds: string[] = [];
      for (let i = 0; i < 12; i++)
        commentIds.push(
          (await fx.store.addComment({ itemId: a.id, author: 'x', body: `c${i}`, createdAt: 1_000 + i })).row.id,
        );
      await fx.store.deleteComment(commentIds[11]);
      await fx.store.dropJobs({ itemId: c.id });
      fx.advance(30_000);
      const claim = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(claim.itemId).toBe(b.id); // a's job is held by the re-ask debounce of its answers
      await fx.store.parkJob(claim, 'test');

      const scan = (afterItemId: string | null, limit: number, withComments = true) =>
        fx.store.scanItemsForDrift({
          workspaceId: fx.ws.id,
          questionSet: 'attention',
          afterItemId,
          limit,
          withComments,
        });
      const all = await scan(null, 10);
      expect(all.map((s) => [s.item.ref, s.job])).toEqual([
        ['T-1', 'owed'],
        ['T-2', 'parked'],
        ['T-3', null],
      ]);
      expect(all[0].item).toEqual(await fx.store.getItem(a.id));
      // evaluatedAt is the latest row's own (the expiry sweep's input, DESIGN §5.2).
      const storedAt = new Map(
        (await fx.store.listDecisions(a.id, 'attention')).map((r) => [r.questionKey, r.evaluatedAt]),
      );
      expect([...all[0].latest].sort((x, y) => x.questionKey.localeCompare(y.questionKey))).toEqual([
        { questionKey: 'blocked', questionHash: 'q-new', stateVersion: 2, evaluatedAt: storedAt.get('blocked') },
        {
          questionKey: 'mentions@cm-1',
          questionHash: 'q-c',
          stateVersion: 1,
          evaluatedAt: storedAt.get('mentions@cm-1'),
        },
        {
          questionKey: 'waiting_on_external',
          questionHash: 'q-w',
          stateVersion: 1,
          evaluatedAt: storedAt.get('waiting_on_external'),
        },
      ]);
      for (const l of all[0].latest) expect(typeof l.evaluatedAt).toBe('number');
      expect(all[0].commentIds).toEqual(commentIds.slice(1, 11));
      expect(all[1]).toMatchObject({ latest: [], commentIds: [] });
      const page1 = await scan(null, 2, false);
      expect(page1.map((s) => s.item.id)).toEqual([a.id, b.id]);
      expect(page1[0].commentIds).toEqual([]);
      expect((await scan(page1[1].item.id, 2)).map((s) => s.item.id)).toEqual([c.id]);
      expect(await scan(c.id, 2)).toEqual([]);
    });

    it('retention lists superseded rows past the window in id order; deleting never removes the latest row of a key', async () => {
      const [a, b] = [await item('T-1'), await item('T-2')];
      const ins = async (itemId: string, key: string, hash: string) => {
        await fx.store.insertDecisions([decision(itemId, 'attention', key, hash, fx.ws.id)]);
        const rows = await fx.store.listDecisions(itemId);
        return rows[rows.length - 1].id;
      };
      const r1 = await ins(a.id, 'k', 'h1');
      const r2 = await ins(a.id, 'k', 'h2');
      const r3 = await ins(a.id, 'k', 'h3');
      const r4 = await ins(a.id, 'solo', 'h1');
      const r5 = await ins(b.id, 'k', 'h1');
      const r6 = await ins(b.id, 'k', 'h2');
      fx.advance(2 * 86_400_000);
      const r7 = await ins(a.id, 'k', 'h4'); // supersedes r3, itself too new to list
      const list = (afterId: number, limit: number) =>
        fx.store.listSupersededDecisions({ olderThanMs: 86_400_000, afterId, limit });
      const listed = await list(0, 100);
      expect(listed.map((r) => r.id)).toEqual([r1, r2, r3, r5]);
      expect(listed[0]).toMatchObject({ itemId: a.id, questionSet: 'attention', questionKey: 'k' });
      expect(listed[0].evaluatedAt).toBe((await fx.store.listDecisions(a.id))[0].evaluatedAt);
      expect((await list(r1, 2)).map((r) => r.id)).toEqual([r2, r3]);
      expect(
        (await fx.store.listSupersededDecisions({ olderThanMs: 3 * 86_400_000, afterId: 0, limit: 100 })).map(
          (r) => r.id,
        ),
      ).toEqual([]);
      expect(await fx.store.deleteDecisions([])).toBe(0);
      // The latest rows (r4, r6, r7) survive even when passed in.
      expect(await fx.store.deleteDecisions([r1, r2, r3, r4, r5, r6, r7])).toBe(4);
      expect((await fx.store.listDecisions(a.id)).map((r) => r.id)).toEqual([r4, r7]);
      expect((await fx.store.listDecisions(b.id)).map((r) => r.id)).toEqual([r6]);
      expect(await fx.store.deleteDecisions([r4, r6, r7])).toBe(0);
      expect(await list(0, 100)).toEqual([]);
    });

    it('reaskDebounce: false leaves only the quiet period, on oweJobs and on the write doors', async () => {
      const it1 = await item('T-1');
      await fx.store.insertDecisions([decision(it1.id, 'attention', 'blocked', 'h')]);
      const answeredAt = (await fx.store.listDecisions(it1.id))[0].evaluatedAt;
      await fx.store.dropJobs({});
      fx.advance(60_000);
      const pair = [{ itemId: it1.id, questionSet: 'attention' }];
      await fx.store.oweJobs(pair, { quietPeriod: false, reaskDebounce: false });
      const j1 = (await fx.store.getJob(it1.id, 'attention'))!;
      expect(j1.notBefore).toBe(j1.enqueuedAt);
      await fx.store.dropJobs({});
      await fx.store.oweJobs(pair, { reaskDebounce: false });
      const j2 = (await fx.store.getJob(it1.id, 'attention'))!;
      expect(j2.notBefore).toBe(j2.enqueuedAt + 30_000);
      await fx.store.dropJobs({});
      const w = await fx.store.updateItem(it1.id, { content: 'changed' }, { reaskDebounce: false });
      expect((await fx.store.getJob(it1.id, 'attention'))!.notBefore).toBe(w.row.updatedAt + 30_000);
      await fx.store.dropJobs({});
      await fx.store.oweJobs(pair, { quietPeriod: false }); // the default still applies the debounce
      expect((await fx.store.getJob(it1.id, 'attention'))!.notBefore).toBe(answeredAt + 3_600_000);
    });

    it('listJobs errorWithinMs: only jobs whose last error is recent enough', async () => {
      await reopen([attentionSet]);
      const [a, b] = [await item('T-1'), await item('T-2')];
      await item('T-3');
      fx.advance(30_000);
      const first = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(first.itemId).toBe(a.id);
      await fx.store.failJob(first, { backoffMs: 3_600_000, error: 'HTTP 503' });
      fx.advance(10 * 60_000);
      const second = (await fx.store.claimNextJob('w', 60_000, 8))!;
      expect(second.itemId).toBe(b.id);
      await fx.store.failJob(second, { backoffMs: 3_600_000, error: 'HTTP 503' });
      const ids = async (f: { errorWithinMs?: number; itemId?: string }) =>
        (await fx.store.listJobs(f)).map((j) => j.itemId);
      expect(await ids({ errorWithinMs: 5 * 60_000 })).toEqual([b.id]);
      expect((await ids({ errorWithinMs: 60 * 60_000 })).sort()).toEqual([a.id, b.id].sort());
      expect(await ids({ errorWithinMs: 60 * 60_000, itemId: a.id })).toEqual([a.id]);
      expect(await ids({})).toHaveLength(3);
    });

    it('fingerprintContext is stored and read back; null when not given', async () => {
      const it1 = await item('T-1');
      const ctx = '{"effort":null,"model":"m","prompt_version":3}';
      await fx.store.insertDecisions([
        { ...decision(it1.id, 'attention', 'a', 'h', fx.ws.id), fingerprintContext: ctx },
        decision(it1.id, 'attention', 'b', 'h', fx.ws.id),
      ]);
      expect((await fx.store.listDecisions(it1.id)).map((r) => [r.questionKey, r.fingerprintContext])).toEqual([
        ['a', ctx],
        ['b', null],
      ]);
      expect((await fx.store.listWorkspaceDecisions(fx.ws.id, 'attention'))[0].fingerprintContext).toBe(ctx);
    });
  });

  // ---- outbound decision events (DESIGN §16.2, issue 14 part 3)
  describe(`${backend.name}: HTTP API tokens, webhook deliveries and the reads the API uses (DESIGN §16.2)`, () => {
    const hash = (s: string) => createHash('sha256').update(s).digest('hex');

    it('a token is found by its hash until revoked, and not once its workspace is soft-deleted; list shows it without the hash', async () => {
      const row = await fx.store.createApiToken({
        id: 'tok-1',
        workspaceId: fx.ws.id,
        role: 'write',
        tokenHash: hash('t1'),
        name: 'sync',
      });
      expect(row).toMatchObject({ id: 'tok-1', workspaceSlug: 'acme', role: 'write', name: 'sync', revokedAt: null });
      expect(await fx.store.findApiToken(hash('t1'))).toMatchObject({ id: 'tok-1' });
      expect(await fx.store.findApiToken(hash('t2'))).toBeNull();
      const other = await fx.store.createWorkspace({ slug: 'globex' });
      await fx.store.createApiToken({ id: 'tok-2', workspaceId: other.id, role: 'read', tokenHash: hash('t2') });
      expect((await fx.store.listApiTokens()).map((t) => t.id).sort()).toEqual(['tok-1', 'tok-2']);
      expect((await fx.store.listApiTokens(fx.ws.id)).map((t) => t.id)).toEqual(['tok-1']);
      expect(JSON.stringify(await fx.store.listApiTokens())).not.toContain(hash('t1'));
      await fx.store.softDeleteWorkspace(other.id);
      expect(await fx.store.findApiToken(hash('t2'))).toBeNull();
      expect(await fx.store.revokeApiToken('tok-1')).toBe(true);
      expect(await fx.store.revokeApiToken('tok-1')).toBe(false);
      expect(await fx.store.findApiToken(hash('t1'))).toBeNull();
      expect((await fx.store.listApiTokens(fx.ws.id))[0].revokedAt).not.toBeNull();
      await expect(
        fx.store.createApiToken({ id: 'tok-3', workspaceId: fx.ws.id, role: 'read', tokenHash: hash('t1') }),
      ).rejects.toThrow();
    });

    it('a dashboard session lives until logout, 12 h, an hour idle or its token\u2019s revocation, and is no token; prune deletes the ended ones (DESIGN §16.6)', async () => {
      const { token, row } = await createApiToken(fx.store, { workspace: 'acme', role: 'write' });
      const find = (id: string) => findDashboardSession(fx.store, id);
      const open = async () => (await openDashboardSession(fx.store, token))!;
      const s1 = await open();
      expect(s1.sessionId).toMatch(/^vds_[A-Za-z0-9_-]{43}$/);
      expect(s1.session).toMatchObject({
        token: { id: row.id, workspaceSlug: 'acme', role: 'write', revokedAt: null },
      });
      expect(s1.session.expiresAt - s1.session.createdAt).toBe(SESSION_MAX_AGE_MS);
      expect(await openDashboardSession(fx.store, `${token}x`)).toBeNull();
      expect(await find(s1.sessionId)).toMatchObject({ token: { id: row.id } });
      // Neither credential stands for the other.
      expect(await find(token)).toBeNull();
      expect(await authenticateApiToken(fx.store, s1.sessionId)).toBeNull();
      expect(await fx.store.findApiToken(createHash('sha256').update(s1.sessionId).digest('hex'))).toBeNull();
      // Idle: a request within the hour keeps it; an hour without one ends it.
      fx.advance(SESSION_IDLE_MS - 60_000);
      expect(await find(s1.sessionId)).not.toBeNull();
      fx.advance(SESSION_IDLE_MS - 60_000);
      expect(await find(s1.sessionId)).not.toBeNull();
      fx.advance(SESSION_IDLE_MS);
      expect(await find(s1.sessionId)).toBeNull();
      // Its whole life: 12 h after login even when used every 50 minutes.
      const s2 = await open();
      for (let t = 50; t <= 700; t += 50) {
        fx.advance(50 * 60_000);
        expect(await find(s2.sessionId)).not.toBeNull();
      }
      fx.advance(19 * 60_000);
      expect(await find(s2.sessionId)).not.toBeNull();
      fx.advance(60_000);
      expect(await find(s2.sessionId)).toBeNull();
      // Logout.
      const s3 = await open();
      expect(await endDashboardSession(fx.store, s3.sessionId)).toBe(true);
      expect(await find(s3.sessionId)).toBeNull();
      expect(await endDashboardSession(fx.store, s3.sessionId)).toBe(false);
      // Revocation ends the token's sessions (their rows go with it) and lets no new one open.
      const live = await open();
      const other = await createApiToken(fx.store, { workspace: 'acme', role: 'read' });
      const s4 = (await openDashboardSession(fx.store, other.token))!;
      expect(await fx.store.revokeApiToken(other.row.id)).toBe(true);
      expect(await find(s4.sessionId)).toBeNull();
      expect(await openDashboardSession(fx.store, other.token)).toBeNull();
      expect(
        await fx.store.createDashboardSession({ idHash: 'h', tokenId: other.row.id, maxAgeMs: SESSION_MAX_AGE_MS }),
      ).toBeNull();
      // Retention: the idle (s1) and expired (s2) rows; the logged-out and revoked ones are gone already.
      expect(await pruneDashboardSessions(fx.store)).toBe(2);
      expect(await pruneDashboardSessions(fx.store)).toBe(0);
      expect(await find(live.sessionId)).not.toBeNull();
    });

    it('a delivery id is recorded once; recorded in a transaction that rolls back, it is not recorded, nor are the writes beside it', async () => {
      const d = { source: 'github', deliveryId: 'd-1', event: 'issues' };
      await expect(
        fx.store.transaction(async (tx) => {
          expect(await (tx as Store).recordWebhookDelivery(d)).toBe(true);
          await tx.createItem({
            workspaceId: fx.ws.id,
            collectionId: fx.tasks.id,
            ref: 'HOOK-1',
            title: 'from a hook',
          });
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await fx.store.getItemByRef(fx.ws.id, 'HOOK-1')).toBeNull();
      const applied = await fx.store.transaction(async (tx) => {
        if (!(await (tx as Store).recordWebhookDelivery(d))) return false;
        await tx.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'HOOK-1', title: 'from a hook' });
        return true;
      });
      expect(applied).toBe(true);
      expect(await fx.store.recordWebhookDelivery(d)).toBe(false);
      expect(await fx.store.recordWebhookDelivery({ ...d, source: 'other' })).toBe(true);
    });

    it('getComment and getLink read one row by id; jobCountsBySet counts one workspace when asked', async () => {
      const a = await item('API-1');
      const b = await item('API-2');
      const cm = (await fx.store.addComment({ itemId: a.id, author: 'ann', body: 'hi' })).row;
      const ln = (await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: b.id, linkType: 'blocks' }))
        .row;
      expect(await fx.store.getComment(cm.id)).toMatchObject({ id: cm.id, itemId: a.id, deletedAt: null });
      expect(await fx.store.getLink(ln.id)).toMatchObject({ sourceId: a.id, targetId: b.id, linkType: 'blocks' });
      expect(await fx.store.getComment('nope')).toBeNull();
      const cm2 = (await fx.store.addComment({ itemId: a.id, author: 'bo', body: 'later' })).row;
      await fx.store.deleteComment(cm.id);
      expect((await fx.store.listComments(a.id)).map((x) => x.id)).toEqual([cm2.id]); // a delete removes the row
      expect((await fx.store.listLinks(a.id)).map((x) => x.id)).toEqual([ln.id]);
      expect((await fx.store.listLinks(b.id)).map((x) => x.id)).toEqual([ln.id]);
      expect(await fx.store.listComments(b.id)).toEqual([]);
      expect(await fx.store.getLink('nope')).toBeNull();
      const other = await fx.store.createWorkspace({ slug: 'initech' });
      const col = await fx.store.createCollection({ workspaceId: other.id, slug: 'task', schema: TASK_SCHEMA });
      await fx.store.createItem({
        workspaceId: other.id,
        collectionId: col.id,
        ref: 'X-1',
        title: 't',
        fields: { status: 'open' },
      });
      const total = (rows: Array<{ due: number; waiting: number; inFlight: number }>) =>
        rows.reduce((n, r) => n + r.due + r.waiting + r.inFlight, 0);
      const all = total(await fx.store.jobCountsBySet());
      const mine = total(await fx.store.jobCountsBySet(fx.ws.id));
      const theirs = total(await fx.store.jobCountsBySet(other.id));
      expect(theirs).toBeGreaterThan(0);
      expect(mine + theirs).toBe(all);
    });
  });

  describe(`${backend.name}: people in the loop: verdicts and surfacing memory (DESIGN §8.1, §8.2)`, () => {
    const T1 = 'http://127.0.0.1:9/one';
    const ctx = (ref: string) => ({ ref, threshold: 0.7, hysteresis: 0.05 });
    const p = (itemId: string, key: string, hash: string, prob: number) => ({
      ...decision(itemId, 'attention', key, hash, fx.ws.id),
      answer: `{"type":"noul","noul":${prob}}`,
    });
    const verdict = (
      itemId: string,
      verdict: 'agree' | 'disagree' | 'value' | 'withdrawn',
      value: string | null,
      extra: Record<string, unknown> = {},
    ) => ({
      workspaceId: fx.ws.id,
      itemId,
      questionSet: 'attention',
      questionKey: 'blocked',
      verdict,
      value,
      stateHash: 's1',
      stateVersion: 2,
      stateParts: '{"title":"t1"}',
      decisionId: null,
      author: 'ana',
      note: null,
      ...extra,
    });
    const moves = async (itemId: string) =>
      (await fx.store.listSurfacingChanges({ itemId })).map(
        (c) => `${c.surfaced ? 'surfaced' : 'cleared'} ${c.cause} ${c.probability}`,
      );

    it('answers keep a surfacing memory without any event target: the band holds a surfaced key, flips are rows', async () => {
      const a = await item('T-1');
      await fx.store.insertDecisions([p(a.id, 'blocked', 's1', 0.71)], ctx('T-1'));
      await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.67)], ctx('T-1')); // inside the band: held
      await fx.store.insertDecisions([p(a.id, 'blocked', 's3', 0.6)], ctx('T-1'));
      await fx.store.insertDecisions([p(a.id, 'blocked', 's4', 0.68)], ctx('T-1')); // not surfaced before: 0.68 is below 0.7
      await fx.store.insertDecisions([p(a.id, 'blocked', 's5', 0.7)], ctx('T-1'));
      expect(await moves(a.id)).toEqual(['surfaced model 0.71', 'cleared model 0.6', 'surfaced model 0.7']);
      expect(await fx.store.listDecisionEvents()).toEqual([]); // no target: no outbox rows
      const rows = await fx.store.listSurfacingChanges({ workspaceId: fx.ws.id, questionSet: 'attention' });
      expect(rows.map((r) => [r.itemId, r.questionKey, r.stateHash])).toEqual([
        [a.id, 'blocked', 's1'],
        [a.id, 'blocked', 's3'],
        [a.id, 'blocked', 's5'],
      ]);
      const later = rows[1].changedAt;
      expect((await fx.store.listSurfacingChanges({ itemId: a.id, sinceMs: later })).length).toBeGreaterThanOrEqual(2);
      expect(await fx.store.listSurfacingChanges({ workspaceId: fx.ws.id, questionSet: 'other' })).toEqual([]);
    });

    it('a key answered before the memory existed is judged by its latest answer (the plain rule)', async () => {
      const a = await item('T-1');
      await fx.store.insertDecisions([p(a.id, 'blocked', 's1', 0.9)]); // no context: no memory written
      expect(await moves(a.id)).toEqual([]);
      await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.6)], ctx('T-1'));
      expect(await moves(a.id)).toEqual(['cleared model 0.6']);
    });

    it('a value verdict moves the surfacing (cause human, event source human); model answers under it move nothing; withdrawn hands back', async () => {
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      await fx.store.insertDecisions([p(a.id, 'blocked', 's1', 0.9)], ctx('T-1'));
      const v = await fx.store.insertVerdict(
        verdict(a.id, 'value', '{"type":"noul","noul":0}', { note: 'not blocked: the API landed' }),
        ctx('T-1'),
      );
      expect(v).toMatchObject({
        itemId: a.id,
        questionSet: 'attention',
        questionKey: 'blocked',
        verdict: 'value',
        value: '{"type":"noul","noul":0}',
        stateHash: 's1',
        stateVersion: 2,
        author: 'ana',
        note: 'not blocked: the API landed',
        decisionId: null,
      });
      expect(typeof v.id).toBe('number');
      expect(typeof v.createdAt).toBe('number');
      expect(await moves(a.id)).toEqual(['surfaced model 0.9', 'cleared human 0']);
      const evs = await fx.store.listDecisionEvents();
      expect(evs.map((e) => `${e.type} ${(JSON.parse(e.payload) as { source: string }).source}`)).toEqual([
        'decision.surfaced model',
        'decision.cleared human',
      ]);
      // The model keeps answering 0.95 at new states: the person's value is in force, nothing moves.
      await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.95)], ctx('T-1'));
      await fx.store.insertDecisions([p(a.id, 'blocked', 's3', 0.97)], ctx('T-1'));
      expect(await moves(a.id)).toEqual(['surfaced model 0.9', 'cleared human 0']);
      // An agree that resolves to the same value changes nothing either.
      await fx.store.insertVerdict(verdict(a.id, 'agree', '{"type":"noul","noul":0}'), ctx('T-1'));
      expect(await moves(a.id)).toEqual(['surfaced model 0.9', 'cleared human 0']);
      // Withdrawn: the model's latest answer (0.97) is in force again.
      await fx.store.insertVerdict(verdict(a.id, 'withdrawn', null), ctx('T-1'));
      expect(await moves(a.id)).toEqual(['surfaced model 0.9', 'cleared human 0', 'surfaced human 0.97']);
      // A label-only disagree (no value) is not an override: the model's answers move it again.
      await fx.store.insertVerdict(verdict(a.id, 'disagree', null), ctx('T-1'));
      await fx.store.insertDecisions([p(a.id, 'blocked', 's4', 0.1)], ctx('T-1'));
      expect((await moves(a.id)).at(-1)).toBe('cleared model 0.1');
      const list = await fx.store.listVerdicts({ workspaceId: fx.ws.id });
      expect(list.map((r) => r.verdict)).toEqual(['value', 'agree', 'withdrawn', 'disagree']);
      expect(list.map((r) => r.id)).toEqual([...list.map((r) => r.id)].sort((x, y) => x - y));
    });

    it('verdicts list by workspace, set and item; a key that never surfaces records the verdict and moves nothing', async () => {
      const a = await item('T-1');
      const b = await item('T-2');
      await fx.store.insertVerdict(
        verdict(a.id, 'value', '{"type":"choice","choice":"x","probabilities":{"x":1}}', { questionKey: 'kind' }),
        null,
      );
      await fx.store.insertVerdict(
        verdict(b.id, 'value', '{"type":"noul","noul":1}', { questionSet: 'effort', questionKey: 'size' }),
        null,
      );
      expect((await fx.store.listVerdicts({ workspaceId: fx.ws.id })).map((r) => r.questionKey)).toEqual([
        'kind',
        'size',
      ]);
      expect(
        (await fx.store.listVerdicts({ workspaceId: fx.ws.id, questionSet: 'effort' })).map((r) => r.itemId),
      ).toEqual([b.id]);
      expect((await fx.store.listVerdicts({ workspaceId: fx.ws.id, itemId: a.id })).map((r) => r.questionKey)).toEqual([
        'kind',
      ]);
      expect(await fx.store.listVerdicts({ workspaceId: 'nope' })).toEqual([]);
      expect(await moves(a.id)).toEqual([]);
      expect(await moves(b.id)).toEqual([]);
    });
  });

  describe(`${backend.name}: outbound decision events (DESIGN §16.2)`, () => {
    const T1 = 'http://127.0.0.1:9/one';
    const T2 = 'http://127.0.0.1:9/two';
    const surfacing = (ref: string) => ({ ref, threshold: 0.7 });
    const p = (itemId: string, key: string, hash: string, prob: number) => ({
      ...decision(itemId, 'attention', key, hash, fx.ws.id),
      answer: `{"type":"noul","noul":${prob}}`,
    });
    const events = async (f: { targetUrl?: string; itemId?: string } = {}) => fx.store.listDecisionEvents(f);
    const types = async (f: { targetUrl?: string; itemId?: string } = {}) =>
      (await events(f)).map((e) => `${e.type} ${(JSON.parse(e.payload) as { key: string }).key}`);

    it('a noul that crosses the threshold queues surfaced, then cleared; an unchanged side, a conflict, choice and score queue nothing', async () => {
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      expect(await fx.store.insertDecisions([p(a.id, 'blocked', 's1', 0.2)], surfacing('T-1'))).toBe(1); // below, no prior row: not surfaced before or after
      expect(await events()).toEqual([]);
      expect(await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.9)], surfacing('T-1'))).toBe(1);
      expect(await types()).toEqual(['decision.surfaced blocked']);
      // The same state answered again conflicts on the idempotency key: nothing inserted, nothing queued.
      expect(await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.95)], surfacing('T-1'))).toBe(0);
      // Still surfaced at a new state (exactly at the threshold counts as surfaced): no event.
      expect(await fx.store.insertDecisions([p(a.id, 'blocked', 's3', 0.7)], surfacing('T-1'))).toBe(1);
      // Below the threshold but inside the hysteresis band (0.7 − 0.05): still surfaced (DESIGN §8.2).
      expect(await fx.store.insertDecisions([p(a.id, 'blocked', 's4a', 0.66)], surfacing('T-1'))).toBe(1);
      expect(await types()).toEqual(['decision.surfaced blocked']);
      expect(await fx.store.insertDecisions([p(a.id, 'blocked', 's4', 0.64)], surfacing('T-1'))).toBe(1);
      expect(await types()).toEqual(['decision.surfaced blocked', 'decision.cleared blocked']);
      // Cleared, the band no longer holds it: 0.69 is below the threshold and stays cleared.
      expect(await fx.store.insertDecisions([p(a.id, 'blocked', 's4b', 0.69)], surfacing('T-1'))).toBe(1);
      // Choice and score answers never surface; a key listed as unsurfaced neither.
      const choice = {
        ...decision(a.id, 'attention', 'kind', 's5', fx.ws.id),
        kind: 'choice' as const,
        answer: '{"type":"choice","choice":"x","probabilities":{"x":0.99,"y":0.01}}',
        confidence: 0.99,
      };
      const score = {
        ...decision(a.id, 'attention', 'size', 's5', fx.ws.id),
        kind: 'score' as const,
        answer: '{"type":"score","score":3.9,"probabilities":{"0":0,"1":0,"2":0,"3":0.1,"4":0.9}}',
        confidence: 0.9,
      };
      expect(
        await fx.store.insertDecisions([choice, score, p(a.id, 'quiet', 's5', 0.99)], {
          ...surfacing('T-1'),
          unsurfaced: ['quiet'],
        }),
      ).toBe(3);
      // Without a surfacing context (an older caller) nothing is compared or queued.
      expect(await fx.store.insertDecisions([p(a.id, 'waiting_on_external', 's5', 0.99)])).toBe(1);
      expect(await types()).toEqual(['decision.surfaced blocked', 'decision.cleared blocked']);
    });

    it('the payload is the exact stored and sent body: ids, ref, set, key, probability, state hash, time; no text', async () => {
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      await fx.store.insertDecisions(
        [{ ...p(a.id, 'blocked', 'hash-1', 0.83), rationale: 'secret rationale text' }],
        surfacing('T-1'),
      );
      const [e] = await events();
      const stored = (await fx.store.listDecisions(a.id))[0];
      expect(e).toMatchObject({
        targetUrl: T1,
        workspaceId: fx.ws.id,
        itemId: a.id,
        type: 'decision.surfaced',
        attempts: 0,
        deliveredAt: null,
        leaseOwner: null,
      });
      expect(e.createdAt).toBe(stored.evaluatedAt);
      expect(e.nextAttemptAt).toBe(e.createdAt);
      expect(e.payload).toBe(
        JSON.stringify({
          id: e.eventId,
          type: 'decision.surfaced',
          created_at: new Date(stored.evaluatedAt).toISOString(),
          workspace_id: fx.ws.id,
          item: { id: a.id, ref: 'T-1' },
          set: 'attention',
          key: 'blocked',
          probability: 0.83,
          state_hash: 'hash-1',
          source: 'model',
        }),
      );
      expect(e.payload).not.toMatch(/title|legal|secret/);
    });

    it('fans out once per enabled target with one event id; a disabled target gets none; sync re-enables', async () => {
      expect(await fx.store.syncEventTargets([T1, T2, T1])).toEqual({ enabled: 2, disabled: 0 });
      const a = await item('T-1');
      await fx.store.insertDecisions(
        [p(a.id, 'blocked', 's1', 0.9), p(a.id, 'waiting_on_external', 's1', 0.8)],
        surfacing('T-1'),
      );
      const all = await events();
      expect(all).toHaveLength(4);
      for (const key of ['blocked', 'waiting_on_external']) {
        const of = all.filter((e) => (JSON.parse(e.payload) as { key: string }).key === key);
        expect(of.map((e) => e.targetUrl).sort()).toEqual([T1, T2]);
        expect(new Set(of.map((e) => e.eventId)).size).toBe(1);
        expect(of[0].payload).toBe(of[1].payload);
      }
      // T2 leaves the configuration: it gets no new events, and its queued ones are not claimed.
      expect(await fx.store.syncEventTargets([T1])).toEqual({ enabled: 1, disabled: 1 });
      await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.1)], surfacing('T-1'));
      expect(await types({ targetUrl: T1 })).toEqual([
        'decision.surfaced blocked',
        'decision.surfaced waiting_on_external',
        'decision.cleared blocked',
      ]);
      expect(await events({ targetUrl: T2 })).toHaveLength(2);
      const claimed = await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 });
      expect(claimed.every((d) => d.targetUrl === T1)).toBe(true);
      expect(await fx.store.eventDeliveryStats()).toMatchObject({ pending: 3 });
      // With no targets at all nothing is queued.
      expect(await fx.store.syncEventTargets([])).toEqual({ enabled: 0, disabled: 1 });
      await fx.store.insertDecisions([p(a.id, 'blocked', 's3', 0.99)], surfacing('T-1'));
      expect(await events()).toHaveLength(5);
      expect(await fx.store.eventDeliveryStats()).toEqual({ pending: 0, due: 0, nextAttemptAt: null });
      // Enabled again: the queued rows are claimable once more (one at a time: both are of one item).
      await fx.store.syncEventTargets([T2]);
      expect(
        (await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 })).map((d) => d.targetUrl),
      ).toEqual([T2]);
    });

    it("finishJob queues the last call's events in its transaction, and a failed finishJob queues none", async () => {
      await reopen([attentionSet]);
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      fx.advance(30_000);
      const spend = {
        questionSet: 'attention',
        provider: 'fake',
        model: 'm',
        outcome: 'ok',
        calls: 1,
        usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
      };
      const c = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
      const broken = { ...p(a.id, 'waiting_on_external', 's1', 0.9), kind: null as unknown as 'noul' };
      await expect(
        fx.store.finishJob(c, {
          answers: {
            decisions: [p(a.id, 'blocked', 's1', 0.9), broken],
            spend,
            reservationId: null,
            surfacing: surfacing('T-1'),
          },
        }),
      ).rejects.toThrow();
      expect(await events()).toEqual([]);
      const f = await fx.store.finishJob(c, {
        answers: {
          decisions: [p(a.id, 'blocked', 's1', 0.9)],
          spend,
          reservationId: null,
          surfacing: surfacing('T-1'),
        },
      });
      expect(f).toMatchObject({ result: 'applied', answersStored: 1 });
      expect(await types()).toEqual(['decision.surfaced blocked']);
      // The next finish judges against that answer's memory (read before its own insert): the
      // key was surfaced, so a low answer clears it.
      await fx.store.updateItem(a.id, { content: 'edited' });
      fx.advance(3_700_000); // past the re-ask debounce from that answer (1 h)
      const c2 = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
      await fx.store.finishJob(c2, {
        answers: {
          decisions: [p(a.id, 'blocked', 's2', 0.1)],
          spend,
          reservationId: null,
          surfacing: surfacing('T-1'),
        },
      });
      expect(await types()).toEqual(['decision.surfaced blocked', 'decision.cleared blocked']);
    });

    it("the runner passes the set's threshold and the ref: the first surfaced answer queues an event", async () => {
      await reopen([attentionSet]);
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      fx.advance(30_000);
      const provider = new FakeProvider({
        handler: (req) => Object.fromEntries(req.keys.map((k) => [k, { probability: k === 'blocked' ? 0.95 : 0.05 }])),
      });
      await drain(runner(provider));
      const [e] = await events();
      expect(JSON.parse(e.payload)).toMatchObject({
        type: 'decision.surfaced',
        item: { id: a.id, ref: 'T-1' },
        set: 'attention',
        key: 'blocked',
        probability: 0.95,
      });
      expect(await events()).toHaveLength(1);
    });

    it('claims only the head of each (target, item) line; a failure backs the line off; completion frees the next', async () => {
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      const b = await item('T-2');
      await fx.store.insertDecisions([p(a.id, 'blocked', 's1', 0.9)], surfacing('T-1'));
      await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.1)], surfacing('T-1'));
      await fx.store.insertDecisions([p(b.id, 'blocked', 's1', 0.9)], surfacing('T-2'));
      const [a1, a2, b1] = await events();
      const first = await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 });
      expect(first.map((d) => d.id)).toEqual([a1.id, b1.id]);
      expect(first[0]).toMatchObject({
        eventId: a1.eventId,
        itemId: a.id,
        type: 'decision.surfaced',
        payload: a1.payload,
        attempts: 0,
        targetUrl: T1,
      });
      // a1 fails: its line waits for the backoff, a2 is not claimable meanwhile.
      expect(await fx.store.failEventDelivery(a1.id, 'w1', { backoffMs: 30_000, error: 'http 503' })).toBe(true);
      expect(await fx.store.completeEventDelivery(b1.id, 'w1')).toBe(true);
      expect(await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 })).toEqual([]);
      expect(await fx.store.eventDeliveryStats()).toMatchObject({ pending: 2, due: 1 });
      const failed = (await events({ itemId: a.id }))[0];
      expect(failed).toMatchObject({ attempts: 1, lastError: 'http 503', leaseOwner: null, deliveredAt: null });
      expect(failed.nextAttemptAt - a1.createdAt).toBeGreaterThanOrEqual(30_000);
      fx.advance(30_000);
      const again = await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 });
      expect(again.map((d) => [d.id, d.attempts])).toEqual([[a1.id, 1]]);
      expect(await fx.store.completeEventDelivery(a1.id, 'w1')).toBe(true);
      expect(
        (await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 })).map((d) => d.id),
      ).toEqual([a2.id]);
      expect(await fx.store.completeEventDelivery(a2.id, 'w1')).toBe(true);
      expect(await fx.store.completeEventDelivery(a2.id, 'w1')).toBe(false);
      expect(await fx.store.eventDeliveryStats()).toEqual({ pending: 0, due: 0, nextAttemptAt: null });
    });

    it('a lease is exclusive: another owner neither claims nor settles it until it expires; the old owner then settles nothing', async () => {
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      await fx.store.insertDecisions([p(a.id, 'blocked', 's1', 0.9)], surfacing('T-1'));
      const [mine] = await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 });
      expect(await fx.store.claimEventDeliveries({ owner: 'w2', leaseMs: 60_000, limit: 10 })).toEqual([]);
      expect(await fx.store.completeEventDelivery(mine.id, 'w2')).toBe(false);
      expect(await fx.store.failEventDelivery(mine.id, 'w2', { backoffMs: 30_000, error: 'x' })).toBe(false);
      fx.advance(60_000);
      const [taken] = await fx.store.claimEventDeliveries({ owner: 'w2', leaseMs: 60_000, limit: 10 });
      expect(taken.id).toBe(mine.id);
      expect(await fx.store.completeEventDelivery(mine.id, 'w1')).toBe(false);
      expect(await fx.store.failEventDelivery(mine.id, 'w1', { backoffMs: 30_000, error: 'x' })).toBe(false);
      // A stop gives the lease back without an attempt.
      expect(await fx.store.releaseEventDeliveries('w2')).toBe(1);
      const [back] = await fx.store.claimEventDeliveries({ owner: 'w3', leaseMs: 60_000, limit: 10 });
      expect(back).toMatchObject({ id: mine.id, attempts: 0 });
      expect(await fx.store.completeEventDelivery(mine.id, 'w3')).toBe(true);
    });

    it('concurrent claimers never share a row or a line', async () => {
      await fx.store.syncEventTargets([T1, T2]);
      const items = await Promise.all(['T-1', 'T-2', 'T-3', 'T-4', 'T-5'].map((r) => item(r)));
      for (const [i, it1] of items.entries()) {
        for (let s = 0; s < 4; s++)
          await fx.store.insertDecisions([p(it1.id, 'blocked', `s${s}`, s % 2 ? 0.1 : 0.9)], surfacing(`T-${i + 1}`));
      }
      expect(await events()).toHaveLength(40);
      const peers = await Promise.all([1, 2, 3].map(() => fx.opened.peer(fx.registry)));
      const stores = [fx.store, ...peers];
      const seen = new Map<number, string>();
      const delivered: string[] = [];
      for (let round = 0; round < 12; round++) {
        const got = await Promise.all(
          stores.flatMap((s, i) =>
            [0, 1].map((k) =>
              s
                .claimEventDeliveries({ owner: `w${i}-${k}`, leaseMs: 60_000, limit: 3 })
                .then((rs) => rs.map((r) => ({ r, owner: `w${i}-${k}`, s }))),
            ),
          ),
        );
        const flat = got.flat();
        const lines = flat.map(({ r }) => `${r.targetUrl} ${r.itemId}`);
        expect(new Set(lines).size).toBe(lines.length);
        for (const { r, owner } of flat) {
          expect(seen.has(r.id)).toBe(false);
          seen.set(r.id, owner);
        }
        for (const { r, owner, s } of flat) {
          expect(await s.completeEventDelivery(r.id, owner)).toBe(true);
          delivered.push(`${r.targetUrl} ${r.itemId} ${r.id}`);
        }
      }
      expect(seen.size).toBe(40);
      // Per line, delivered in id order.
      for (const t of [T1, T2]) {
        for (const it1 of items) {
          const ids = delivered.filter((d) => d.startsWith(`${t} ${it1.id} `)).map((d) => Number(d.split(' ')[2]));
          expect(ids).toEqual([...ids].sort((x, y) => x - y));
          expect(ids).toHaveLength(4);
        }
      }
    });

    it('prunes delivered rows older than the window, never undelivered ones', async () => {
      await fx.store.syncEventTargets([T1]);
      const a = await item('T-1');
      await fx.store.insertDecisions([p(a.id, 'blocked', 's1', 0.9)], surfacing('T-1'));
      await fx.store.insertDecisions([p(a.id, 'blocked', 's2', 0.1)], surfacing('T-1'));
      const [d1] = await fx.store.claimEventDeliveries({ owner: 'w1', leaseMs: 60_000, limit: 10 });
      await fx.store.completeEventDelivery(d1.id, 'w1');
      expect(await fx.store.pruneDeliveredEvents(3_600_000, 100)).toBe(0);
      fx.advance(3_600_001);
      expect(await fx.store.pruneDeliveredEvents(3_600_000, 100)).toBe(1);
      expect((await events()).map((e) => e.deliveredAt)).toEqual([null]);
    });
  });

  describe(`${backend.name}: actions in GitHub (DESIGN §17)`, () => {
    const plan = (itemId: string, over: Partial<PlannedAction> = {}): PlannedAction => ({
      workspaceId: fx.ws.id,
      itemId,
      questionSet: 'attention',
      questionKey: 'blocked',
      want: null,
      source: null,
      decisionId: null,
      proposal: null,
      proposalReason: null,
      proposalDecisionId: null,
      ...over,
    });
    const outbox = (n: number) => ({ targetUrl: 'github:acme/widgets', eventId: `ev-${n}`, payload: `{"n":${n}}` });
    const github = () => fx.store.listDecisionEvents({ kind: 'github' });

    it('saveItemAction stores the plan and queues one github outbox row per want not yet handed over', async () => {
      const a = await item('#1');
      expect(
        await fx.store.saveItemAction(
          plan(a.id, { proposal: ['verdict:blocked', 'verdict:a'], proposalReason: 'gate', proposalDecisionId: 7 }),
          outbox(1),
        ),
      ).toBe(false); // no want: nothing queued
      expect(await github()).toEqual([]);
      const [row] = await fx.store.listItemActions(a.id);
      expect(row).toMatchObject({
        workspaceId: fx.ws.id,
        questionSet: 'attention',
        questionKey: 'blocked',
        want: null,
        proposal: ['verdict:a', 'verdict:blocked'],
        proposalReason: 'gate',
        proposalDecisionId: 7,
        queued: null,
        applied: null,
        commentedAt: null,
      });
      expect(typeof row.updatedAt).toBe('number');
      const wants = plan(a.id, { want: ['verdict:blocked'], source: 'model', decisionId: 8 });
      expect(await fx.store.saveItemAction(wants, outbox(2))).toBe(true);
      expect(await fx.store.saveItemAction(wants, outbox(3))).toBe(false); // the same want again: already queued
      expect(await fx.store.saveItemAction(plan(a.id, { want: [], source: 'model', decisionId: 9 }), outbox(4))).toBe(
        true,
      );
      expect((await github()).map((e) => [e.eventId, e.itemId, e.payload, e.deliveredAt])).toEqual([
        ['ev-2', a.id, '{"n":2}', null],
        ['ev-4', a.id, '{"n":4}', null],
      ]);
      expect(await fx.store.listItemActions(a.id)).toMatchObject([
        { want: [], source: 'model', decisionId: 9, queued: [], proposal: null },
      ]);
      expect(
        (await fx.store.pendingActionWrites(fx.ws.id)).map((w) => [w.itemId, w.payload, w.attempts, w.lastError]),
      ).toEqual([
        [a.id, '{"n":2}', 0, null],
        [a.id, '{"n":4}', 0, null],
      ]);
      expect(await fx.store.countDeliveredActionWrites(fx.ws.id)).toBe(0);
    });

    it('recordActionDelivery records what GitHub shows; skipped clears queued so a later plan queues again; observeActionLabels inserts or updates applied', async () => {
      const a = await item('#1');
      const wants = plan(a.id, { want: ['verdict:blocked'], source: 'model', decisionId: 8 });
      await fx.store.saveItemAction(wants, outbox(1));
      await fx.store.recordActionDelivery({
        itemId: a.id,
        questionSet: 'attention',
        questionKey: 'blocked',
        applied: ['verdict:blocked'],
        skipped: false,
        commented: true,
      });
      const [done] = await fx.store.listItemActions(a.id);
      expect(done).toMatchObject({ applied: ['verdict:blocked'], queued: ['verdict:blocked'] });
      expect(done.commentedAt).toBe(done.updatedAt);
      await fx.store.recordActionDelivery({
        itemId: a.id,
        questionSet: 'attention',
        questionKey: 'blocked',
        applied: null,
        skipped: true,
        commented: false,
      });
      expect(await fx.store.listItemActions(a.id)).toMatchObject([
        { applied: ['verdict:blocked'], queued: null, commentedAt: done.commentedAt },
      ]);
      expect(await fx.store.saveItemAction(wants, outbox(2))).toBe(true); // handed over again
      const b = await item('#2');
      await fx.store.observeActionLabels(fx.ws.id, b.id, [
        { questionSet: 'attention', questionKey: 'blocked', applied: ['verdict:z', 'verdict:blocked'] },
      ]);
      expect(await fx.store.listItemActions(b.id)).toMatchObject([
        { workspaceId: fx.ws.id, applied: ['verdict:blocked', 'verdict:z'], want: null, queued: null },
      ]);
      await fx.store.observeActionLabels(fx.ws.id, b.id, [
        { questionSet: 'attention', questionKey: 'blocked', applied: [] },
      ]);
      expect(await fx.store.listItemActions(b.id)).toMatchObject([{ applied: [] }]);
    });

    it('listWorkspaceActions narrows and pages by item; actionItemsOfSet lists answered items by id; labelledAnswers takes the latest verdict per key with the answer judged', async () => {
      const [a, b, c] = [await item('#1'), await item('#2'), await item('#3')];
      await fx.store.saveItemAction(
        plan(a.id, { proposal: ['verdict:blocked'], proposalReason: 'mode', proposalDecisionId: 1 }),
        null,
      );
      await fx.store.saveItemAction(plan(b.id), null);
      await fx.store.saveItemAction(
        plan(c.id, {
          questionSet: 'effort',
          questionKey: 'size',
          proposal: ['verdict:l'],
          proposalReason: 'gate',
          proposalDecisionId: 2,
        }),
        null,
      );
      const ids = (rows: ItemActionRow[]) => rows.map((r) => `${r.itemId} ${r.questionSet}`);
      expect(ids(await fx.store.listWorkspaceActions({ workspaceId: fx.ws.id }))).toEqual([
        `${a.id} attention`,
        `${b.id} attention`,
        `${c.id} effort`,
      ]);
      expect(ids(await fx.store.listWorkspaceActions({ workspaceId: fx.ws.id, proposalsOnly: true }))).toEqual([
        `${a.id} attention`,
        `${c.id} effort`,
      ]);
      expect(
        ids(
          await fx.store.listWorkspaceActions({ workspaceId: fx.ws.id, questionSet: 'attention', afterItemId: a.id }),
        ),
      ).toEqual([`${b.id} attention`]);
      expect(ids(await fx.store.listWorkspaceActions({ workspaceId: fx.ws.id, limit: 1 }))).toEqual([
        `${a.id} attention`,
      ]);
      expect(await fx.store.listWorkspaceActions({ workspaceId: 'ws-other' })).toEqual([]);

      await fx.store.insertDecisions([
        decision(b.id, 'attention', 'blocked', 'h1', fx.ws.id),
        decision(a.id, 'attention', 'blocked', 'h1', fx.ws.id),
        decision(c.id, 'effort', 'size', 'h1', fx.ws.id),
      ]);
      await fx.store.insertDecisions([decision(a.id, 'attention', 'blocked', 'h2', fx.ws.id)]);
      expect(await fx.store.actionItemsOfSet({ workspaceId: fx.ws.id, questionSet: 'attention', limit: 10 })).toEqual([
        a.id,
        b.id,
      ]);
      expect(
        await fx.store.actionItemsOfSet({
          workspaceId: fx.ws.id,
          questionSet: 'attention',
          afterItemId: a.id,
          limit: 10,
        }),
      ).toEqual([b.id]);
      expect(await fx.store.actionItemsOfSet({ workspaceId: fx.ws.id, questionSet: 'attention', limit: 1 })).toEqual([
        a.id,
      ]);

      const [judged] = (await fx.store.listDecisions(a.id)).filter((d) => d.stateHash === 'h2');
      const v = (itemId: string, verdict: 'agree' | 'disagree', decisionId: number | null) => ({
        workspaceId: fx.ws.id,
        itemId,
        questionSet: 'attention',
        questionKey: 'blocked',
        verdict,
        value: null,
        stateHash: 'h2',
        stateVersion: 1,
        stateParts: '{}',
        decisionId,
        author: 'ana',
        note: null,
      });
      await fx.store.insertVerdict(v(a.id, 'disagree', null), null);
      await fx.store.insertVerdict(v(a.id, 'agree', judged.id), null); // the latest of (item, key) counts
      await fx.store.insertVerdict(v(b.id, 'disagree', null), null);
      const labelled = await fx.store.labelledAnswers(fx.ws.id, 'attention');
      expect(labelled.map((l) => [l.itemId, l.questionKey, l.verdict, l.value, l.answer])).toEqual(
        [
          [a.id, 'blocked', 'agree', null, judged.answer],
          [b.id, 'blocked', 'disagree', null, null],
        ].sort((x, y) => (x[0]! < y[0]! ? -1 : 1)),
      );
      expect(await fx.store.labelledAnswers(fx.ws.id, 'effort')).toEqual([]);
    });

    it("actionRows reads every set's rows by id (after an id, or among ids) and says which act; the mark is the database clock on Postgres only", async () => {
      const [a, b] = [await item('#1'), await item('#2')];
      await fx.store.insertDecisions([
        decision(a.id, 'attention', 'blocked', 'h1', fx.ws.id),
        decision(b.id, 'effort', 'size', 'h1', fx.ws.id),
        decision(b.id, 'attention', 'blocked', 'h1', fx.ws.id),
      ]);
      const all = await fx.store.actionRows({ table: 'decisions', sets: ['attention'], after: 0, limit: 10 });
      expect(all.rows.map((r) => [r.itemId, r.acts])).toEqual([
        [a.id, true],
        [b.id, false],
        [b.id, true],
      ]);
      expect(all.rows.map((r) => r.id)).toEqual([...all.rows.map((r) => r.id)].sort((x, y) => x - y));
      const [first, second, third] = all.rows.map((r) => r.id);
      expect(
        (await fx.store.actionRows({ table: 'decisions', sets: ['attention'], after: first, limit: 1 })).rows.map(
          (r) => r.id,
        ),
      ).toEqual([second]);
      expect(
        (
          await fx.store.actionRows({
            table: 'decisions',
            sets: ['attention'],
            ids: [third, first, third + 100],
            limit: 10,
          })
        ).rows.map((r) => r.id),
      ).toEqual([first, third]);
      expect(
        (await fx.store.actionRows({ table: 'decisions', sets: [], after: 0, limit: 10 })).rows.every((r) => !r.acts),
      ).toBe(true);
      await fx.store.insertVerdict(
        {
          workspaceId: fx.ws.id,
          itemId: b.id,
          questionSet: 'attention',
          questionKey: 'blocked',
          verdict: 'disagree',
          value: null,
          stateHash: 'h1',
          stateVersion: 1,
          stateParts: '{}',
          decisionId: null,
          author: 'ana',
          note: null,
        },
        null,
      );
      const verdicts = await fx.store.actionRows({ table: 'verdicts', sets: ['attention'], after: 0, limit: 10 });
      expect(verdicts.rows.map((r) => [r.itemId, r.acts])).toEqual([[b.id, true]]);
      if (backend.name === 'sqlite') expect(all.mark).toBeNull();
      else {
        expect(Number.isSafeInteger(all.mark)).toBe(true);
        expect(verdicts.mark!).toBeGreaterThanOrEqual(all.mark!);
      }
      // Nothing is open now: every writer of the read has ended.
      expect(await fx.store.actionWritersEnded(verdicts.mark ?? 0)).toBe(true);
    });

    it.runIf(backend.concurrentConnections)(
      'an answer whose id commits after a larger one was read is planned at a later pass: the cursor keeps the gap until its writer ends',
      async () => {
        const registry = fx.registry;
        const config = parseActionsConfig(
          { sets: { attention: { mode: 'propose', keys: { blocked: { label: 'verdict:blocked' } } } } },
          registry,
        );
        const actions = new Actions({
          store: fx.store,
          registry,
          config,
          reader: () => openReader(fx.store, registry, 'none', silentLogger),
          logger: silentLogger,
        });
        await fx.store.setMeta(githubWorkspaceMetaKey(fx.ws.id), 'acme/widgets');
        const [late, early] = [await item('#1'), await item('#2')];
        let release!: () => void;
        const held = new Promise<void>((r) => (release = r));
        let inserted!: () => void;
        const taken = new Promise<void>((r) => (inserted = r));
        // The late writer takes its id first and commits last.
        const lateTx = fx.store.transaction(async (tx) => {
          await (tx as Store).insertDecisions([decision(late.id, 'attention', 'blocked', 'late', fx.ws.id)]);
          inserted();
          await held;
        });
        try {
          await taken;
          await fx.store.insertDecisions([decision(early.id, 'attention', 'blocked', 'early', fx.ws.id)]);
          expect(await actions.planPass('propose')).toEqual({ items: 1, queued: 0 }); // #2 only: #1's row is not visible
          const cursor = JSON.parse((await fx.store.getMeta(ACTIONS_CURSOR_META_KEY))!) as {
            decisions: { to: number; gaps: number[] };
            mark: number;
          };
          expect(cursor.decisions.gaps).toHaveLength(1);
          expect(await fx.store.actionWritersEnded(cursor.mark)).toBe(false); // the late writer is still open
          expect(await actions.planPass('propose')).toEqual({ items: 0, queued: 0 }); // still open: the gap stays
        } finally {
          release();
          await lateTx;
        }
        expect(await actions.planPass('propose')).toEqual({ items: 1, queued: 0 }); // #1, read through its gap
        expect(await actions.planPass('propose')).toEqual({ items: 0, queued: 0 });
        expect(JSON.parse((await fx.store.getMeta(ACTIONS_CURSOR_META_KEY))!)).toMatchObject({
          decisions: { gaps: [] },
          mark: null,
        });
      },
    );
  });
}

function decision(
  itemId: string,
  questionSet: string,
  questionKey: string,
  stateHash: string,
  workspaceId = 'ws-acme',
): NewDecision {
  return {
    workspaceId,
    itemId,
    questionSet,
    questionKey,
    kind: 'noul',
    answer: '{"type":"noul","noul":0.1}',
    confidence: null,
    provider: 'fake',
    model: 'm',
    stateHash,
    questionHash: 'q',
    stateVersion: 1,
    stateParts: '{}',
    inputTokens: 1,
    outputTokens: 1,
    itemSeq: 1,
    stateTruncated: false,
  };
}
