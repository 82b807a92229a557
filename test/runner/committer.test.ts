import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { Committer } from '../../src/runner/committer.js';
import { runOnce } from '../../src/runner/job-life.js';
import type { Claim, JobFinish } from '../../src/store/store.js';
import type { Store } from '../../src/store/whole-store.js';
import { Worker } from '../../src/worker/worker.js';
import { runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Group commit (DESIGN §10.6) on a real SQLite file with the manual clock: several slots' finishes
 * in one transaction, each slot's result its own, one entry's failure its own, and a failed commit
 * that loses and doubles nothing. The process kill between hand-in and commit is in
 * test/worker/committer-kill.test.ts.
 */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
});
afterEach(async () => fx.cleanup());

async function items(n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 1; i <= n; i++) {
    const r = await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: `T-${i}`,
      title: `Item ${i}`,
      content: 'waiting for legal sign-off',
      fields: { status: 'open' },
    });
    ids.push(r.row.id);
  }
  fx.clock.advance(30_000);
  return ids;
}

/**
 * The store with its transactions counted: each `finishJobs` call is one, each `finishJob` one;
 * `claimBatches` has the size of each `claimNextJobs` call, `claimSingles` counts `claimNextJob`s.
 */
function counted(store: Store): {
  store: Store;
  batches: number[];
  singles: () => number;
  claimBatches: number[];
  claimSingles: () => number;
} {
  const batches: number[] = [];
  const claimBatches: number[] = [];
  let singles = 0;
  let claimSingles = 0;
  const s = new Proxy(store, {
    get(target, key, receiver) {
      if (key === 'claimNextJobs') {
        return (requests: Parameters<Store['claimNextJobs']>[0]) => {
          claimBatches.push(requests.length);
          return target.claimNextJobs(requests);
        };
      }
      if (key === 'claimNextJob') {
        return (...a: Parameters<Store['claimNextJob']>) => {
          claimSingles++;
          return target.claimNextJob(...a);
        };
      }
      if (key === 'finishJobs') {
        return (entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>) => {
          batches.push(entries.length);
          return target.finishJobs(entries);
        };
      }
      if (key === 'finishJob') {
        return (claim: Claim, f: JobFinish) => {
          singles++;
          return target.finishJob(claim, f);
        };
      }
      const v = Reflect.get(target, key, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { store: s, batches, singles: () => singles, claimBatches, claimSingles: () => claimSingles };
}

/** The client under the store, for test-only triggers and functions. */
const client = () => fx.store.ctx.db.$client;

/** Answer rows per (item, set, key, state hash): a duplicate is a count above 1. */
function answerCounts(): Array<{ n: number }> {
  return client()
    .prepare('SELECT count(*) AS n FROM item_decisions GROUP BY item_id, question_set, question_key, state_hash')
    .all() as Array<{ n: number }>;
}

const claimRequest = (workerId: string) => ({ workerId, leaseMs: 60_000, abandonLimit: 8, skipSets: [] as string[] });

/** A worker of four slots that drains until idle (one process's group committer, as `verdict worker` runs). */
function fourSlotDrain(store: Store, provider: FakeProvider): Worker {
  return new Worker({
    store,
    registry: fx.registry,
    provider,
    logger: silentLogger,
    workerId: 'w',
    concurrency: 4,
    tickMs: 20,
    leaseMs: 60_000,
    passLimit: 1_000,
    abandonLimit: 8,
    untilIdle: true,
  });
}

describe('group commit', () => {
  it('several slots hand in at once: one transaction; each slot gets its own result and its own next claim', async () => {
    await items(8);
    const c = counted(fx.store);
    const committer = new Committer(c.store);
    const claims: Claim[] = [];
    for (let i = 0; i < 4; i++) claims.push((await fx.store.claimNextJob(`slot-${i}`, 60_000, 8))!);
    // Slot 2's claim was lost (another claimant took the job since): its result alone says so.
    const lostToken = { ...claims[2], claimToken: 'not-the-token' };
    const handed = [claims[0], claims[1], lostToken, claims[3]];
    const results = await Promise.all(
      handed.map((claim, i) => committer.finish(claim, { claimNext: claimRequest(`slot-${i}`) })),
    );
    expect(c.batches).toEqual([4]);
    expect(committer.commits).toBe(1);
    expect(results.map((r) => r.result)).toEqual(['applied', 'applied', 'lost', 'applied']);
    // Each next claim is the slot's own, four different jobs, none of the four finished.
    expect(results.map((r) => r.next!.claimedBy)).toEqual(['slot-0', 'slot-1', 'slot-2', 'slot-3']);
    const nextItems = results.map((r) => r.next!.itemId);
    expect(new Set(nextItems).size).toBe(4);
    expect(nextItems.filter((id) => claims.some((cl) => cl.itemId === id))).toEqual([]);
    // Committed before any slot woke: every next claim is in the database under its token.
    for (const r of results)
      expect((await fx.store.getJob(r.next!.itemId, 'attention'))!.claimToken).toBe(r.next!.claimToken);
  });

  it('slots that claim in the same turn share one transaction; each gets its own job, committed before it wakes', async () => {
    await items(3);
    const c = counted(fx.store);
    const committer = new Committer(c.store);
    const got = await Promise.all([0, 1, 2, 3].map((i) => committer.claim(claimRequest(`slot-${i}`))));
    expect(c.claimBatches).toEqual([4]);
    expect(c.claimSingles()).toBe(0);
    expect(committer.commits).toBe(1);
    // Three jobs for four slots: three different jobs, each its slot's, and the fourth finds none.
    expect(got.slice(0, 3).map((g) => g!.claimedBy)).toEqual(['slot-0', 'slot-1', 'slot-2']);
    expect(new Set(got.slice(0, 3).map((g) => g!.itemId)).size).toBe(3);
    expect(got[3]).toBeNull();
    for (const g of got.slice(0, 3))
      expect((await fx.store.getJob(g!.itemId, 'attention'))!.claimToken).toBe(g!.claimToken);
  });

  it("a worker's slots take their first jobs in one commit, not one each", async () => {
    await items(4);
    const c = counted(fx.store);
    const worker = fourSlotDrain(c.store, new FakeProvider());
    const summary = await worker.run();
    expect(summary.outcomes).toEqual({ complete: 4 });
    // The four first claims: one claimNextJobs of four (the later claims ride on the finishes).
    expect(c.claimBatches[0]).toBe(4);
    expect(c.claimSingles()).toBe(0);
  });

  it('a claims transaction that fails: every slot of it gets the error and nothing is claimed', async () => {
    await items(2);
    const failing = new Proxy(fx.store, {
      get(target, key, receiver) {
        if (key === 'claimNextJobs') return () => Promise.reject(new Error('disk I/O error'));
        const v = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const committer = new Committer(failing);
    const got = await Promise.allSettled([0, 1].map((i) => committer.claim(claimRequest(`slot-${i}`))));
    expect(got.map((g) => g.status)).toEqual(['rejected', 'rejected']);
    expect(committer.commits).toBe(0);
    const held = client().prepare('SELECT count(*) AS n FROM decision_jobs WHERE claim_token IS NOT NULL').get() as {
      n: number;
    };
    expect(held.n).toBe(0);
  });

  it('a finish handed in while a commit runs goes in the next transaction, not a third', async () => {
    await items(6);
    const c = counted(fx.store);
    const committer = new Committer(c.store);
    const claims: Claim[] = [];
    for (let i = 0; i < 5; i++) claims.push((await fx.store.claimNextJob(`slot-${i}`, 60_000, 8))!);
    const first = committer.finish(claims[0], {});
    // Handed in after the first commit started (it starts at the next turn of the loop).
    await new Promise((r) => setImmediate(r));
    const later = claims.slice(1).map((claim) => committer.finish(claim, {}));
    await Promise.all([first, ...later]);
    expect(c.batches).toEqual([1, 4]);
  });

  it("a co-asked group hands in every finish at once: one transaction holds the group's completions and the slot's next claim", async () => {
    const co = await makeFixture([attentionSet, effortSet]);
    try {
      for (let i = 1; i <= 2; i++) {
        await co.store.createItem({
          workspaceId: co.ws.id,
          collectionId: co.tasks.id,
          ref: `T-${i}`,
          title: `Item ${i}`,
          content: 'waiting for legal sign-off',
          fields: { status: 'open' },
        });
      }
      co.clock.advance(30_000);
      const c = counted(co.store);
      const committer = new Committer(c.store);
      const opts = runnerOptions(co, new FakeProvider(), { store: c.store, committer, claimNext: true });
      const report = (await runOnce(opts, new AbortController().signal))!;
      expect(report.claim.coAsked?.map((s) => s.questionSet)).toEqual(['effort']);
      expect(report.outcome.kind).toBe('complete');
      // The slot's job and its co-asked sibling in one transaction, with the next claim.
      expect(c.batches).toEqual([2]);
      expect(c.singles()).toBe(0);
      // Two commits: the slot's first claim (through the committer, with its sibling), then the group's finish.
      expect(c.claimBatches).toEqual([1]);
      expect(committer.commits).toBe(2);
      expect(report.next).not.toBeNull();
      const first = report.claim.itemId;
      expect(await co.store.getJob(first, 'attention')).toBeNull();
      expect(await co.store.getJob(first, 'effort')).toBeNull();
    } finally {
      await co.cleanup();
    }
  });

  it("one entry's statements throw: that entry alone gets the error and writes nothing; the others commit", async () => {
    const ids = await items(4);
    const committer = new Committer(fx.store);
    const claims: Claim[] = [];
    for (let i = 0; i < 3; i++) claims.push((await fx.store.claimNextJob(`slot-${i}`, 60_000, 8))!);
    const bad = claims[1].itemId;
    client().exec(
      `CREATE TEMP TRIGGER refuse_one BEFORE DELETE ON main.decision_jobs WHEN OLD.item_id = '${bad}' BEGIN SELECT RAISE(ABORT, 'injected'); END`,
    );
    const spend = {
      questionSet: 'attention',
      provider: 'fake',
      model: 'fake-model-1',
      outcome: 'ok',
      calls: 1,
      usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
    };
    // Each entry carries one answer row for its item, so a half-applied entry would show.
    const answersFor = (itemId: string): JobFinish['answers'] => ({
      decisions: [
        {
          workspaceId: fx.ws.id,
          itemId,
          questionSet: 'attention',
          questionKey: 'blocked',
          kind: 'noul',
          answer: 'true',
          confidence: 0.9,
          provider: 'fake',
          model: 'fake-model-1',
          stateHash: `sh-${itemId}`,
          questionHash: 'qh',
          stateVersion: 1,
          stateParts: '{}',
          inputTokens: 10,
          outputTokens: 5,
          itemSeq: 1,
          stateTruncated: false,
        },
      ],
      spend,
      reservationId: null,
    });
    const settled = await Promise.allSettled(
      claims.map((claim) => committer.finish(claim, { answers: answersFor(claim.itemId) })),
    );
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toContain('injected');
    expect(committer.commits).toBe(1);
    const stored = client().prepare('SELECT item_id AS id FROM item_decisions ORDER BY item_id').all() as Array<{
      id: string;
    }>;
    expect(stored.map((r) => r.id)).toEqual([claims[0].itemId, claims[2].itemId].sort());
    expect((await fx.store.spendSince(3_600_000)).calls).toBe(2);
    expect(await fx.store.getJob(bad, 'attention')).toMatchObject({ claimToken: claims[1].claimToken });
    expect(await fx.store.getJob(claims[0].itemId, 'attention')).toBeNull();
    expect(ids).toContain(bad);
  });

  it('a commit that fails: every entry of it gets the error, each slot stores its answers on its own; nothing lost, nothing doubled', async () => {
    const n = 12;
    await items(n);
    // The first DELETE of a job (inside the first group commit) leaves a deferred foreign-key
    // violation, so that transaction's COMMIT throws; after that the trigger does nothing.
    let armed = 1;
    client().function('break_commit_once', { deterministic: false }, () => (armed-- > 0 ? 1 : 0));
    client().exec(`
      CREATE TEMP TABLE breaker_parent (id INTEGER PRIMARY KEY);
      CREATE TEMP TABLE breaker (p INTEGER REFERENCES breaker_parent(id) DEFERRABLE INITIALLY DEFERRED);
      CREATE TEMP TRIGGER break_commit AFTER DELETE ON main.decision_jobs WHEN break_commit_once() = 1 BEGIN INSERT INTO breaker VALUES (42); END`);
    const c = counted(fx.store);
    const failed: number[] = [];
    const store = new Proxy(c.store, {
      get(target, key, receiver) {
        if (key === 'finishJobs') {
          return async (entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>) => {
            try {
              return await target.finishJobs(entries);
            } catch (err) {
              failed.push(entries.length);
              throw err;
            }
          };
        }
        const v = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const fake = new FakeProvider();
    const worker = fourSlotDrain(store, fake);
    const summary = await worker.run();
    expect(failed).toHaveLength(1);
    expect(failed[0]).toBeGreaterThan(0);
    expect(armed).toBeLessThan(1);
    // Nothing lost: every job done, once; every key answered, once; one call per job.
    expect(await fx.store.listJobs({})).toEqual([]);
    expect(summary.outcomes.complete).toBe(n);
    expect(fake.requests).toHaveLength(n);
    const counts = answerCounts();
    expect(counts).toHaveLength(n * 3);
    expect(counts.every((r) => r.n === 1)).toBe(true);
    expect((await fx.store.spendSince(3_600_000)).calls).toBe(n);
    // The slots finished through the committer, several to a transaction at least once.
    expect(c.singles()).toBe(0);
    expect(Math.max(...c.batches)).toBeGreaterThan(1);
  });
});
