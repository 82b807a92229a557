import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { attentionSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { Permit, PermitRequest } from '../../src/runner/evaluate.js';
import { DAY_MS, ProviderLimiter, SETTLE_RETRY_MS } from '../../src/worker/limiter.js';
import { Worker, type WorkerOptions } from '../../src/worker/worker.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * The provider limiter on a manual clock: its buckets refill and its waits end when the test moves
 * the clock, so no test sleeps and none fakes the global timers.
 */

const noSpend = {
  now: async () => 0,
  spendSince: async () => ({ calls: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }),
  reserveSpend: async () => ({
    granted: true as const,
    id: 'r',
    settledTokens: 0,
    reservedTokens: 0,
    windowEndsInMs: DAY_MS,
  }),
};

/** One call's permit request: `inputTokens`, no output ceiling, no lease bound unless given. */
const req = (inputTokens: number, over: Partial<PermitRequest> = {}): PermitRequest => ({
  inputTokens,
  maxOutputTokens: 0,
  maxWaitMs: Number.POSITIVE_INFINITY,
  reservationTtlMs: 60_000,
  holder: 'w/0',
  ...over,
});
/** null when granted, else the deferral in ms (the shape the worker tests below read). */
const delayOf = (p: Permit): number | null => (p.granted ? null : p.delayMs);
/** Lets every promise continuation that the last clock move released run (no time passes). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('per-minute caps', () => {
  let clock: ManualClock;
  beforeEach(() => void (clock = new ManualClock()));
  const limiter = (o: Omit<ConstructorParameters<typeof ProviderLimiter>[0], 'store' | 'clock'>) =>
    new ProviderLimiter({ store: noSpend, clock, ...o });

  it("lets a minute's allowance through at once, then defers with the time until the next request", async () => {
    const l = limiter({ requestsPerMinute: 3, maxWaitMs: 0 });
    expect([
      await l.acquire(req(10)).then(delayOf),
      await l.acquire(req(10)).then(delayOf),
      await l.acquire(req(10)).then(delayOf),
    ]).toEqual([null, null, null]);
    expect(await l.acquire(req(10)).then(delayOf)).toBe(20_000); // one request per 20 s
    clock.advance(20_000);
    expect(await l.acquire(req(10)).then(delayOf)).toBeNull();
    expect(await l.acquire(req(10)).then(delayOf)).toBe(20_000);
  });

  it('waits in process when the wait is short', async () => {
    const l = limiter({ requestsPerMinute: 60, maxWaitMs: 5_000 });
    for (let i = 0; i < 60; i++) expect(await l.acquire(req(1)).then(delayOf)).toBeNull();
    let got: number | null | undefined;
    void l
      .acquire(req(1))
      .then(delayOf)
      .then((v) => (got = v));
    clock.advance(500);
    await settle();
    expect(got).toBeUndefined();
    clock.advance(600);
    await settle();
    expect(got).toBeNull();
  });

  it('caps input tokens; a request larger than the bucket goes through only when the bucket is full', async () => {
    const l = limiter({ inputTokensPerMinute: 1_000, maxWaitMs: 0 });
    expect(await l.acquire(req(5_000)).then(delayOf)).toBeNull(); // full bucket: the oversize request takes all of it
    expect(await l.acquire(req(5_000)).then(delayOf)).toBe(60_000); // it needs the whole bucket back
    expect(await l.acquire(req(100)).then(delayOf)).toBe(6_000);
    clock.advance(30_000);
    expect(await l.acquire(req(5_000)).then(delayOf)).toBe(30_000);
    expect(await l.acquire(req(400)).then(delayOf)).toBeNull(); // 500 tokens dripped back
    clock.advance(60_000);
    expect(await l.acquire(req(5_000)).then(delayOf)).toBeNull();
  });

  it('serves waiters in arrival order, so a large request is not starved by small ones', async () => {
    const l = limiter({ inputTokensPerMinute: 1_000, maxWaitMs: 120_000 });
    expect(await l.acquire(req(1_000)).then(delayOf)).toBeNull();
    const order: string[] = [];
    void l
      .acquire(req(1_000))
      .then(delayOf)
      .then(() => order.push('large'));
    void l
      .acquire(req(10))
      .then(delayOf)
      .then(() => order.push('small'));
    clock.advance(30_000);
    await settle(); // enough for the small one alone, not the large one
    expect(order).toEqual([]);
    clock.advance(30_200);
    await settle(); // the large one is served at 60 s; the small one needs 0.6 s more
    expect(order).toEqual(['large']);
    clock.advance(1_000);
    await settle();
    expect(order).toEqual(['large', 'small']);
  });

  it('an abort ends a wait and returns the delay', async () => {
    const l = limiter({ requestsPerMinute: 1, maxWaitMs: 120_000 });
    await l.acquire(req(1)).then(delayOf);
    const ac = new AbortController();
    const p = l.acquire(req(1, { signal: ac.signal })).then(delayOf);
    clock.advance(1_000);
    await settle();
    ac.abort();
    expect(await p).toBeGreaterThan(0);
  });

  it("a wait counts the time queued behind other slots, and never passes the request's own bound (half its lease)", async () => {
    const l = limiter({ requestsPerMinute: 60, maxWaitMs: 120_000 });
    for (let i = 0; i < 60; i++) expect(await l.acquire(req(1)).then(delayOf)).toBeNull();
    // Two slots ask at once, each bounded to 1.5 s: the first gets the next token at 1 s; the
    // second reaches the bucket only then and would need until 2 s, past its bound: it defers.
    const got: Array<number | null> = [];
    const a = l
      .acquire(req(1, { maxWaitMs: 1_500 }))
      .then(delayOf)
      .then((v) => got.push(v));
    const b = l
      .acquire(req(1, { maxWaitMs: 1_500 }))
      .then(delayOf)
      .then((v) => got.push(v));
    clock.advance(1_100);
    await settle();
    await Promise.all([a, b]);
    expect(got).toEqual([null, expect.any(Number)]);
    expect(got[1]).toBeGreaterThan(0);
    // A single request whose wait exceeds its bound is not made to wait at all: it is answered
    // without the clock moving.
    const alone = l.acquire(req(1, { maxWaitMs: 500 })).then(delayOf);
    expect(await Promise.race([alone, settle().then(() => 'still waiting')])).toBeGreaterThan(500);
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
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: `T-${i}`,
          title: `t${i}`,
          content: 'c',
          fields: { status: 'open' },
        },
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
    fx.store.recordSpend({
      questionSet: 'attention',
      provider: 'fake',
      model: 'm',
      outcome: 'ok',
      calls: 1,
      usage: { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0 },
    });

  it('reaching the cap defers until the next UTC day; below it, permits are given', async () => {
    fx.clock.set(Date.UTC(2026, 0, 1, 18));
    await spend(600, 400);
    const capped = new ProviderLimiter({ store: fx.store, dailyTokenCap: 1_000, spendRefreshMs: 0, clock: fx.clock });
    expect(await capped.claimDelay()).toBe(6 * 3_600_000);
    expect(await capped.acquire(req(10)).then(delayOf)).toBe(6 * 3_600_000);
    // Below the cap a call goes only if its whole estimate fits (DESIGN §10.3): 1 000 + 10 + 5.
    const below = new ProviderLimiter({ store: fx.store, dailyTokenCap: 1_015, spendRefreshMs: 0, clock: fx.clock });
    const granted = await below.acquire(req(10, { maxOutputTokens: 5 }));
    expect(granted).toMatchObject({ granted: true, reservationId: expect.any(String) });
    expect(await below.acquire(req(10, { maxOutputTokens: 5 })).then(delayOf)).toBe(SETTLE_RETRY_MS); // in flight may settle lower
    if (granted.granted) await fx.store.settleSpendReservation(granted.reservationId!, null);
    expect(
      await new ProviderLimiter({ store: fx.store, dailyTokenCap: 1_014, spendRefreshMs: 0, clock: fx.clock })
        .acquire(req(10, { maxOutputTokens: 5 }))
        .then(delayOf),
    ).toBe(6 * 3_600_000);
    fx.clock.advance(6 * 3_600_000); // yesterday's spend no longer counts
    expect(await capped.claimDelay()).toBeNull();
    expect(DAY_MS).toBe(86_400_000);
  });

  it('a refused reservation at the cap stops claims at once, without waiting for the next spend re-read', async () => {
    // The limiter counts the time since its reading on the store's manual clock, which does not
    // move between the refusal and the check.
    fx.clock.set(Date.UTC(2026, 0, 1, 18));
    const l = new ProviderLimiter({
      store: fx.store,
      dailyTokenCap: 1_000,
      spendRefreshMs: 3_600_000,
      clock: fx.clock,
    });
    expect(await l.claimDelay()).toBeNull(); // read once: nothing billed
    await spend(900, 100); // another process bills up to the cap
    expect(await l.claimDelay()).toBeNull(); // the cached reading still says go
    expect(await l.acquire(req(10)).then(delayOf)).toBe(6 * 3_600_000);
    expect(await l.claimDelay()).toBe(6 * 3_600_000);
  });

  it('the worker stops claiming when the cap is reached: no job is touched', async () => {
    const [id] = await items(1);
    await spend(2_000, 0);
    const l = new ProviderLimiter({ store: fx.store, dailyTokenCap: 1_000, spendRefreshMs: 0, clock: fx.clock });
    const w = worker({ acquirePermit: l.acquire, claimGate: l.claimDelay });
    const s = await w.run();
    expect(s).toMatchObject({ claimed: 0, spendCapReached: true });
    expect(await fx.store.getJob(id, 'attention')).toMatchObject({ attempts: 0, claimToken: null });
    // control: without the cap the same worker drains it
    expect((await worker({}).run()).claimed).toBe(1);
  });

  it('the requests-per-minute cap defers jobs beyond the allowance without counting an attempt', async () => {
    const ids = await items(3);
    const l = new ProviderLimiter({ store: fx.store, requestsPerMinute: 1, maxWaitMs: 0, clock: fx.clock });
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
    expect(await fx.store.getJob(id, 'attention')).toMatchObject({
      attempts: 0,
      claimToken: null,
      notBefore: fx.clock.now() + 90_000,
    });
    expect((await worker({}, fake).run()).claimed).toBe(0); // not before the reset
    fx.clock.advance(90_000);
    expect((await worker({}, fake).run()).outcomes).toEqual({ complete: 1 });
    expect(await fx.store.getJob(id, 'attention')).toBeNull();
  });
});
