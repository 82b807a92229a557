import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import {
  Backfill,
  backfillCursorKey,
  loadBackfillCursor,
  type BackfillOptions,
  type BackfillProgress,
} from '../../src/backfill/backfill.js';
import { runOnce } from '../../src/runner/job-life.js';
import { PRIORITY_BACKFILL, PRIORITY_LIVE } from '../../src/store/queue-store.js';
import type { Store } from '../../src/store/whole-store.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Backfill against a real SQLite file with a manual clock (DESIGN §11). The backfill polls on a
 * 1 ms tick; the tests drive it by its events (a chunk owed, a poll while draining) and run the
 * jobs themselves, so nothing waits on wall time.
 */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet, effortSet]);
});
afterEach(async () => fx.cleanup());

async function seed(n: number, status = 'open', prefix = 'T'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: `${prefix}-${i + 1}`,
        title: `item ${prefix}-${i + 1}`,
        content: 'body',
        fields: { status },
      },
      { quietPeriod: false },
    );
    ids.push(r.row.id);
  }
  return ids;
}

/** A store that records every pair oweJobs is given. */
function recordingStore(store: Store, owed: string[]): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'oweJobs') {
        return (pairs: Array<{ itemId: string; questionSet: string }>, opts: Parameters<Store['oweJobs']>[1]) => {
          owed.push(...pairs.map((p) => p.itemId));
          return target.oweJobs(pairs, opts);
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** Events of a running backfill, as promises. */
function events() {
  const waiters: Array<{ kind: 'owed' | 'poll'; resolve: () => void }> = [];
  const fire = (kind: 'owed' | 'poll') => {
    for (const w of waiters.splice(0))
      if (w.kind === kind) w.resolve();
      else waiters.push(w);
  };
  return {
    next: (kind: 'owed' | 'poll') => new Promise<void>((resolve) => waiters.push({ kind, resolve })),
    onChunkOwed: () => fire('owed'),
    onProgress: (p: BackfillProgress) => {
      if (p.phase === 'draining' && p.current && p.current.claimable + p.current.inFlight > 0) fire('poll');
    },
  };
}

function backfill(over: Partial<BackfillOptions> = {}): Backfill {
  return new Backfill({ store: fx.store, set: effortSet, chunkSize: 2, tickMs: 1, logger: silentLogger, ...over });
}

const effortJobs = () => fx.store.listJobs({ questionSet: 'effort' });

describe('backfill', () => {
  it('owes eligible items in chunks at backfill priority and owes the next chunk only when the last has drained', async () => {
    const ids = await seed(5);
    await seed(1, 'closed', 'C'); // terminal: the set does not apply, never owed
    await fx.store.dropJobs({});
    const ev = events();
    const run = backfill({ onChunkOwed: ev.onChunkOwed, onProgress: ev.onProgress }).run();
    const fake = new FakeProvider();

    await ev.next('owed');
    expect((await effortJobs()).map((j) => [j.itemId, j.priority])).toEqual([
      [ids[0], PRIORITY_BACKFILL],
      [ids[1], PRIORITY_BACKFILL],
    ]);
    // Several polls later, with the chunk still claimable, nothing more is owed.
    for (let i = 0; i < 3; i++) await ev.next('poll');
    expect(await effortJobs()).toHaveLength(2);
    // A live write made now is claimed before the backfill's jobs.
    await fx.store.updateItem(ids[4], { title: 'edited live' });
    fx.clock.advance(attentionSet.quietPeriodMs);
    const first = await runOnce(runnerOptions(fx, fake), new AbortController().signal);
    expect(first!.claim).toMatchObject({ itemId: ids[4], priority: PRIORITY_LIVE });

    const owedNext = ev.next('owed');
    await drainNow(runnerOptions(fx, fake));
    await owedNext;
    expect((await effortJobs()).map((j) => j.itemId)).toEqual([ids[2], ids[3]]);
    const last = ev.next('owed');
    await drainNow(runnerOptions(fx, fake));
    await last;
    await drainNow(runnerOptions(fx, fake));
    const report = await run;

    // The live write already got the last item its effort answer; the backfill's job for it is
    // owed without the re-ask debounce, so it is due at once and completes without a call.
    expect(report).toMatchObject({
      finished: true,
      interrupted: false,
      total: 5,
      owedThisRun: 5,
      chunksOwed: 3,
      chunksDrained: 3,
      parked: 0,
      waiting: 0,
    });
    expect(await fx.store.getJob(ids[4], 'effort')).toBeNull();
    for (const id of ids)
      expect((await fx.store.listDecisions(id)).filter((d) => d.questionSet === 'effort')).toHaveLength(1);
    expect(await fx.store.getMeta(backfillCursorKey('effort', null))).toBeNull();
  });

  it('is insert-only: a parked job stays parked, a backing-off job keeps its time; neither holds a chunk up, both are counted', async () => {
    const [parkedId, backoffId, freshId] = await seed(3);
    await fx.store.dropJobs({});
    await fx.store.oweJobs(
      [
        { itemId: parkedId, questionSet: 'effort' },
        { itemId: backoffId, questionSet: 'effort' },
      ],
      { priority: PRIORITY_LIVE, quietPeriod: false },
    );
    const c1 = (await fx.store.claimNextJob('w', 60_000, 8))!;
    await fx.store.parkJob(c1, 'refused 5 times: invalid_request 400');
    const c2 = (await fx.store.claimNextJob('w', 60_000, 8))!;
    await fx.store.failJob(c2, { backoffMs: 600_000, error: 'unavailable 529' });
    const before = [await fx.store.getJob(parkedId, 'effort'), await fx.store.getJob(backoffId, 'effort')];
    expect(before.map((j) => j!.state)).toEqual(['parked', 'owed']);

    const ev = events();
    const run = backfill({ chunkSize: 3, onChunkOwed: ev.onChunkOwed, onProgress: ev.onProgress }).run();
    await ev.next('owed');
    expect([await fx.store.getJob(parkedId, 'effort'), await fx.store.getJob(backoffId, 'effort')]).toEqual(before);
    await ev.next('poll'); // the fresh job is claimable, so the chunk waits for it
    await drainNow(runnerOptions(fx, new FakeProvider()));
    const report = await run;
    expect(report).toMatchObject({ finished: true, owedThisRun: 3, insertedThisRun: 1, parked: 1, waiting: 1 });
    expect(await fx.store.getJob(freshId, 'effort')).toBeNull();
    expect([await fx.store.getJob(parkedId, 'effort'), await fx.store.getJob(backoffId, 'effort')]).toEqual(before);
  });

  it('stopped mid-way, a rerun resumes from the cursor: it waits for the chunk in hand, owes only what follows, and nothing is owed twice or lost', async () => {
    const ids = await seed(5);
    await fx.store.dropJobs({});
    const owed: string[] = [];
    const store = recordingStore(fx.store, owed);
    const stop = new AbortController();
    const first = await backfill({ store, signal: stop.signal, onChunkOwed: () => stop.abort() }).run();
    expect(first).toMatchObject({ finished: false, interrupted: true, owedThisRun: 2, chunksDrained: 0 });
    const cursor = await loadBackfillCursor(fx.store, 'effort', null);
    expect(cursor).toMatchObject({ afterId: ids[1], pending: [ids[0], ids[1]], chunks: 1, owedItems: 2 });
    // The work it owed is still owed.
    expect((await effortJobs()).map((j) => [j.itemId, j.state])).toEqual([
      [ids[0], 'owed'],
      [ids[1], 'owed'],
    ]);

    const ev = events();
    const second = backfill({ store, onChunkOwed: ev.onChunkOwed, onProgress: ev.onProgress }).run();
    await ev.next('poll'); // waiting for the first run's chunk before owing anything
    expect(owed).toEqual([ids[0], ids[1]]);
    const drainAll = async () => {
      for (;;) {
        await drainNow(runnerOptions(fx, new FakeProvider()));
        const done = await Promise.race([second.then(() => true), ev.next('poll').then(() => false)]);
        if (done) return;
      }
    };
    await drainAll();
    const report = await second;
    expect(report).toMatchObject({
      finished: true,
      resumedAfter: { afterId: ids[1], owedItems: 2, pending: 2 },
      owedThisRun: 3,
      total: 5,
    });
    expect(owed).toEqual(ids); // each item owed exactly once, in order, across both runs
    for (const id of ids)
      expect((await fx.store.listDecisions(id)).filter((d) => d.questionSet === 'effort')).toHaveLength(1);
  });

  it('owes one workspace only with workspaceId, and never deleted items', async () => {
    const ids = await seed(2);
    await fx.store.softDeleteItem(ids[1]);
    const other = await fx.store.createWorkspace({ slug: 'other' });
    const col = await fx.store.createCollection({ workspaceId: other.id, slug: 'task', schema: fx.tasks.schema });
    await fx.store.createItem({
      workspaceId: other.id,
      collectionId: col.id,
      ref: 'O-1',
      title: 'other',
      fields: { status: 'open' },
    });
    await fx.store.dropJobs({});
    const owed: string[] = [];
    const ev = events();
    const run = backfill({
      store: recordingStore(fx.store, owed),
      workspaceId: fx.ws.id,
      onProgress: ev.onProgress,
    }).run();
    await ev.next('poll');
    await drainNow(runnerOptions(fx, new FakeProvider()));
    expect(await run).toMatchObject({ finished: true, total: 1 });
    expect(owed).toEqual([ids[0]]);
  });

  it('the cursor commits with its chunk: when owing fails, the cursor does not move', async () => {
    const ids = await seed(3);
    await fx.store.dropJobs({});
    // Make the insert of the second item's job fail inside the owe transaction.
    fx.store.ctx.db.$client.exec(
      `CREATE TRIGGER fail_owe BEFORE INSERT ON decision_jobs WHEN NEW.item_id = '${ids[1]}' BEGIN SELECT RAISE(ABORT, 'disk full'); END`,
    );
    await expect(backfill({ chunkSize: 3 }).run()).rejects.toThrow(/Failed to run the query/);
    expect(await fx.store.getMeta(backfillCursorKey('effort', null))).toBeNull();
    expect(await effortJobs()).toHaveLength(0);
    fx.store.ctx.db.$client.exec('DROP TRIGGER fail_owe');
    const ev = events();
    const run = backfill({ chunkSize: 3, onProgress: ev.onProgress }).run();
    await ev.next('poll');
    expect((await effortJobs()).map((j) => j.itemId)).toEqual(ids);
    await drainNow(runnerOptions(fx, new FakeProvider()));
    expect(await run).toMatchObject({ finished: true, owedThisRun: 3 });
  });
});

describe('backfill over items already answered', () => {
  it('owes them due now (no re-ask debounce): they complete without a call instead of waiting an hour', async () => {
    await seed(2);
    const fake = new FakeProvider();
    await drainNow(runnerOptions(fx, fake)); // both sets answered now
    const calls = fake.requests.length;
    const ev = events();
    const owed = ev.next('owed');
    const run = backfill({ chunkSize: 10, onChunkOwed: ev.onChunkOwed, onProgress: ev.onProgress }).run();
    await owed;
    // The jobs it owes are due at once: a runner claims them and finds nothing to ask.
    const reports = await drainNow(runnerOptions(fx, fake));
    await run;
    expect(reports.map((r) => r.outcome)).toEqual([
      { kind: 'complete', reason: 'already_answered' },
      { kind: 'complete', reason: 'already_answered' },
    ]);
    expect(fake.requests.length).toBe(calls);
    expect(await effortJobs()).toHaveLength(0);
  });
});
