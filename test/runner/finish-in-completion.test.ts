import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { runOnce } from '../../src/runner/job-life.js';
import { SpendBacklog } from '../../src/runner/spend-backlog.js';
import type { Store } from '../../src/store/whole-store.js';
import { Worker } from '../../src/worker/worker.js';
import { runnerOptions } from '../harness/runner-fixture.js';
import { captureLog } from '../harness/log-capture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Issue 13: the last call's answers and spend, the completion and the slot's next claim commit
 * together (`Store.finishJob`). What must hold around it: answers paid for survive a failure of
 * that transaction, and a claim taken for a next run that does not happen is given back.
 */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
});
afterEach(async () => fx.cleanup());

const signal = new AbortController().signal;

async function items(n: number) {
  for (let i = 1; i <= n; i++) {
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: `T-${i}`,
      title: `Item ${i}`,
      content: 'waiting for legal sign-off',
      fields: { status: 'open' },
    });
  }
  fx.clock.advance(30_000);
}

/** The store with `finishJob` (and the methods in `also`) failing as a full disk would, `times` times each. */
function failingFinish(store: Store, times: number, also: readonly string[] = []): Store {
  const left = new Map(['finishJob', ...also].map((k) => [k, times]));
  return new Proxy(store, {
    get(target, key, receiver) {
      if (typeof key === 'string' && (left.get(key) ?? 0) > 0) {
        return async () => {
          left.set(key, left.get(key)! - 1);
          throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
        };
      }
      const v = Reflect.get(target, key, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

describe('answers with the completion', () => {
  it('one job: its answers, spend and completion are one finishJob; no next claim unless asked', async () => {
    await items(2);
    const fake = new FakeProvider();
    const r = (await runOnce(runnerOptions(fx, fake), signal))!;
    expect(r).toMatchObject({ outcome: { kind: 'complete', reason: 'answered' }, recorded: 'applied', next: null });
    expect(r.stats.answersStored).toBe(3);
    expect(await fx.store.countDecisions()).toBe(3);
    expect((await fx.store.spendSince(3_600_000)).calls).toBe(1);
    expect(await fx.store.getJob(r.claim.itemId, 'attention')).toBeNull();
    expect((await fx.store.listJobs({})).every((j) => j.claimToken === null)).toBe(true);
  });

  it('with claimNext the next job comes back claimed, and runs when passed in', async () => {
    await items(2);
    const fake = new FakeProvider();
    const opts = { ...runnerOptions(fx, fake), claimNext: true };
    const first = (await runOnce(opts, signal))!;
    expect(first.next).not.toBeNull();
    expect((await fx.store.getJob(first.next!.itemId, 'attention'))!.claimToken).toBe(first.next!.claimToken);
    const second = (await runOnce(opts, signal, first.next))!;
    expect(second.claim.claimToken).toBe(first.next!.claimToken);
    expect(second).toMatchObject({ recorded: 'applied', next: null });
    expect(fake.requests).toHaveLength(2);
    expect(await fx.store.countDecisions()).toBe(6);
  });

  it('when that transaction fails, the answers (paid for) are stored on their own and the job completes', async () => {
    await items(1);
    const fake = new FakeProvider();
    const r = (await runOnce(
      { ...runnerOptions(fx, fake), store: failingFinish(fx.store, 1), claimNext: true },
      signal,
    ))!;
    expect(r).toMatchObject({ outcome: { kind: 'complete', reason: 'answered' }, recorded: 'applied', next: null });
    expect(await fx.store.countDecisions()).toBe(3);
    expect((await fx.store.spendSince(3_600_000)).calls).toBe(1);
    expect(await fx.store.getJob(r.claim.itemId, 'attention')).toBeNull();
  });

  it('a full disk throughout: the outcome reads as an unrecorded fail, not a complete; the lease still bounds the job', async () => {
    await items(1);
    const fake = new FakeProvider();
    const disk = failingFinish(fx.store, 1, ['recordSpend', 'insertDecisions', 'failJob']);
    const r = (await runOnce({ ...runnerOptions(fx, fake), store: disk, claimNext: true }, signal))!;
    expect(r).toMatchObject({
      outcome: { kind: 'fail', reason: 'answer insert failed: SQLITE_FULL' },
      recorded: 'unrecorded',
      next: null,
    });
    expect((await fx.store.getJob(r.claim.itemId, 'attention'))!.claimToken).toBe(r.claim.claimToken);
  });

  it("a paid call's spend that cannot be written is kept, and written before the next claim once it can be", async () => {
    await items(2);
    // The real store on a database that refuses every spend row, as a full disk would.
    const raw = new Database(fx.file);
    raw.exec(`CREATE TRIGGER refuse_spend BEFORE INSERT ON decision_spend BEGIN SELECT RAISE(ABORT, 'full'); END`);
    const log = captureLog('info');
    const backlog = new SpendBacklog(log.logger);
    const opts = { ...runnerOptions(fx, new FakeProvider()), logger: log.logger, spendBacklog: backlog };
    const first = (await runOnce(opts, signal))!;
    expect(first).toMatchObject({ outcome: { kind: 'complete', reason: 'answered' }, recorded: 'applied' });
    expect((await fx.store.spendSince(3_600_000)).calls).toBe(0);
    expect(backlog.size).toBe(1);
    expect(log.records().find((l) => l.msg === 'spend record failed: kept until it can be written')).toMatchObject({
      err: 'SQLITE_CONSTRAINT_TRIGGER',
      kept: 1,
      set: 'attention',
    });
    // Room again: the next run writes the kept record before it claims, then its own.
    raw.exec('DROP TRIGGER refuse_spend');
    raw.close();
    expect(await runOnce(opts, signal)).toMatchObject({ outcome: { kind: 'complete', reason: 'answered' } });
    expect(backlog.size).toBe(0);
    expect((await fx.store.spendSince(3_600_000)).calls).toBe(2);
    expect(log.records().find((l) => l.msg === 'kept spend written')).toMatchObject({ written: 1, kept: 0 });
  });

  it('a held claim is given back, with no attempt counted, when the pass was cancelled', async () => {
    await items(2);
    const fake = new FakeProvider();
    const opts = { ...runnerOptions(fx, fake), claimNext: true };
    const first = (await runOnce(opts, signal))!;
    const ac = new AbortController();
    ac.abort();
    expect(await runOnce(opts, ac.signal, first.next)).toBeNull();
    expect((await fx.store.getJob(first.next!.itemId, 'attention'))!).toMatchObject({
      claimToken: null,
      attempts: 0,
      state: 'owed',
    });
    expect(fake.requests).toHaveLength(1);
  });

  it('a worker that stops gives back the job it claimed with its last completion', async () => {
    await items(40);
    const fake = new FakeProvider({ latencyMs: 1 });
    const worker = new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: fake,
      logger: silentLogger,
      workerId: 'w',
      concurrency: 2,
      tickMs: 20,
      leaseMs: 60_000,
      passLimit: 1_000,
      abandonLimit: 8,
      onOutcome: () => {
        if (fake.requests.length >= 6) worker.stop();
      },
    });
    const summary = await worker.run();
    const left = await fx.store.listJobs({});
    expect(left.length).toBe(40 - (summary.outcomes.complete ?? 0));
    expect(left.length).toBeGreaterThan(0);
    // Every job left is claimable at once, none charged an attempt: no claim outlives the worker.
    expect(left.filter((j) => j.claimToken !== null)).toEqual([]);
    expect(left.every((j) => j.attempts === 0)).toBe(true);
  });
});
