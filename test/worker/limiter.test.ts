import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { DAY_MS, ProviderLimiter } from '../../src/worker/limiter.js';
import { Worker, type WorkerOptions } from '../../src/worker/worker.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * The provider limiter: token buckets from the `limiter` package read `performance.now()`, which
 * the fake timers move, so no test sleeps.
 */

const noSpend = { now: async () => 0, spendSince: async () => ({ calls: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }) };

describe('per-minute caps', () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['performance', 'setTimeout', 'clearTimeout', 'Date'] }));
  afterEach(() => void vi.useRealTimers());

  it('lets a minute\'s allowance through at once, then defers with the time until the next request', async () => {
    const l = new ProviderLimiter({ store: noSpend, requestsPerMinute: 3, maxWaitMs: 0 });
    expect([await l.acquire(10), await l.acquire(10), await l.acquire(10)]).toEqual([null, null, null]);
    expect(await l.acquire(10)).toBe(20_000); // one request per 20 s
    vi.advanceTimersByTime(20_000);
    expect(await l.acquire(10)).toBeNull();
    expect(await l.acquire(10)).toBe(20_000);
  });

  it('waits in process when the wait is short', async () => {
    const l = new ProviderLimiter({ store: noSpend, requestsPerMinute: 60, maxWaitMs: 5_000 });
    for (let i = 0; i < 60; i++) expect(await l.acquire(1)).toBeNull();
    let got: number | null | undefined;
    void l.acquire(1).then((v) => (got = v));
    await vi.advanceTimersByTimeAsync(500);
    expect(got).toBeUndefined();
    await vi.advanceTimersByTimeAsync(600);
    expect(got).toBeNull();
  });

  it('caps input tokens; a request larger than the bucket goes through only when the bucket is full', async () => {
    const l = new ProviderLimiter({ store: noSpend, inputTokensPerMinute: 1_000, maxWaitMs: 0 });
    expect(await l.acquire(5_000)).toBeNull(); // full bucket: the oversize request takes all of it
    expect(await l.acquire(5_000)).toBe(60_000); // it needs the whole bucket back
    expect(await l.acquire(100)).toBe(6_000);
    vi.advanceTimersByTime(30_000);
    expect(await l.acquire(5_000)).toBe(30_000);
    expect(await l.acquire(400)).toBeNull(); // 500 tokens dripped back
    vi.advanceTimersByTime(60_000);
    expect(await l.acquire(5_000)).toBeNull();
  });

  it('serves waiters in arrival order, so a large request is not starved by small ones', async () => {
    const l = new ProviderLimiter({ store: noSpend, inputTokensPerMinute: 1_000, maxWaitMs: 120_000 });
    expect(await l.acquire(1_000)).toBeNull();
    const order: string[] = [];
    void l.acquire(1_000).then(() => order.push('large'));
    void l.acquire(10).then(() => order.push('small'));
    await vi.advanceTimersByTimeAsync(30_000); // enough for the small one alone, not the large one
    expect(order).toEqual([]);
    await vi.advanceTimersByTimeAsync(30_200); // the large one is served at 60 s; the small one needs 0.6 s more
    expect(order).toEqual(['large']);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(order).toEqual(['large', 'small']);
  });

  it('an abort ends a wait and returns the delay', async () => {
    const l = new ProviderLimiter({ store: noSpend, requestsPerMinute: 1, maxWaitMs: 120_000 });
    await l.acquire(1);
    const ac = new AbortController();
    const p = l.acquire(1, ac.signal);
    await vi.advanceTimersByTimeAsync(1_000);
    ac.abort();
    expect(await p).toBeGreaterThan(0);
  });

  it('refuses a cap that is not a positive number', () => {
    expect(() => new ProviderLimiter({ store: noSpend, requestsPerMinute: 0 })).toThrow(/requestsPerMinute/);
    expect(new ProviderLimiter({ store: noSpend }).active).toBe(false);
  });
});

describe('daily spend cap and the worker', () => {
  let fx: Fixture;
  beforeEach(async () => {
    fx = await makeFixture([attentionSet]);
  });
  afterEach(async () => fx.cleanup());

  async function items(n: number) {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await fx.store.createItem(
        { workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: `T-${i}`, title: `t${i}`, content: 'c', fields: { status: 'open' } },
        { quietPeriod: false },
      );
      ids.push(r.row.id);
    }
    return ids;
  }

  function worker(over: Partial<WorkerOptions>, provider = new FakeProvider()) {
    return new Worker({
      store: fx.store,
      registry: fx.registry,
      provider,
      logger: silentLogger,
      workerId: 'w',
      concurrency: 2,
      tickMs: 10,
      leaseMs: 60_000,
      passLimit: 20,
      abandonLimit: 8,
      untilIdle: true,
      ...over,
    });
  }

  const spend = (inputTokens: number, outputTokens: number) =>
    fx.store.recordSpend({ questionSet: 'attention', provider: 'fake', model: 'm', outcome: 'ok', calls: 1, usage: { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0 } });

  it('reaching the cap defers until the next UTC day; below it, permits are given', async () => {
    fx.clock.set(Date.UTC(2026, 0, 1, 18));
    await spend(600, 400);
    const capped = new ProviderLimiter({ store: fx.store, dailyTokenCap: 1_000, spendRefreshMs: 0 });
    expect(await capped.claimDelay()).toBe(6 * 3_600_000);
    expect(await capped.acquire(10)).toBe(6 * 3_600_000);
    expect(await new ProviderLimiter({ store: fx.store, dailyTokenCap: 1_001, spendRefreshMs: 0 }).acquire(10)).toBeNull();
    fx.clock.advance(6 * 3_600_000); // yesterday's spend no longer counts
    expect(await capped.claimDelay()).toBeNull();
    expect(DAY_MS).toBe(86_400_000);
  });

  it('the worker stops claiming when the cap is reached: no job is touched', async () => {
    const [id] = await items(1);
    await spend(2_000, 0);
    const l = new ProviderLimiter({ store: fx.store, dailyTokenCap: 1_000, spendRefreshMs: 0 });
    const w = worker({ acquirePermit: l.acquire, claimGate: l.claimDelay });
    const s = await w.run();
    expect(s).toMatchObject({ claimed: 0, spendCapReached: true });
    expect(await fx.store.getJob(id, 'attention')).toMatchObject({ attempts: 0, claimToken: null });
    // control: without the cap the same worker drains it
    expect((await worker({}).run()).claimed).toBe(1);
  });

  it('the requests-per-minute cap defers jobs beyond the allowance without counting an attempt', async () => {
    const ids = await items(3);
    const l = new ProviderLimiter({ store: fx.store, requestsPerMinute: 1, maxWaitMs: 0 });
    const fake = new FakeProvider();
    const s = await worker({ acquirePermit: l.acquire, claimGate: l.claimDelay }, fake).run();
    expect(s.outcomes).toEqual({ complete: 1, defer: 2 });
    expect(fake.requests).toHaveLength(1);
    const left = (await Promise.all(ids.map((id) => fx.store.getJob(id, 'attention')))).filter((j) => j !== null);
    expect(left).toHaveLength(2);
    for (const j of left) {
      expect(j!.attempts).toBe(0);
      expect(j!.claimToken).toBeNull();
      expect(j!.notBefore - fx.clock.now()).toBeGreaterThan(50_000);
    }
  });

  it('a 429 through the worker defers the job until the reset without counting an attempt', async () => {
    const [id] = await items(1);
    const fake = new FakeProvider({ faults: [{ status: 429, retryAfterMs: 90_000 }] });
    const s = await worker({}, fake).run();
    expect(s.outcomes).toEqual({ defer: 1 });
    expect(await fx.store.getJob(id, 'attention')).toMatchObject({ attempts: 0, claimToken: null, notBefore: fx.clock.now() + 90_000 });
    expect((await worker({}, fake).run()).claimed).toBe(0); // not before the reset
    fx.clock.advance(90_000);
    expect((await worker({}, fake).run()).outcomes).toEqual({ complete: 1 });
    expect(await fx.store.getJob(id, 'attention')).toBeNull();
  });
});
