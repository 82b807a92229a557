import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { permitWaitBudgetMs, type PermitRequest } from '../../src/runner/evaluate.js';
import { runOnce } from '../../src/runner/job-life.js';
import { ProviderLimiter } from '../../src/worker/limiter.js';
import { runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Leases and our own waits (DESIGN §3.6) and the daily-cap reservation's life in the runner
 * (DESIGN §10.3), by forced interleavings on the injected clock: a permit "wait" is the stub
 * moving the clock, and the `beforeAsk` seam lands a rival claim right before the final liveness
 * check. Nothing sleeps.
 */

let fx: Fixture;
let fake: FakeProvider;
const signal = new AbortController().signal;
const LEASE = 10_000;

beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
  fake = new FakeProvider();
});
afterEach(async () => fx.cleanup());

async function newItem(ref = 'T-1') {
  const r = await fx.store.createItem({
    workspaceId: fx.ws.id,
    collectionId: fx.tasks.id,
    ref,
    title: `Item ${ref}`,
    content: 'waiting on the vendor',
    fields: { status: 'open' },
  });
  fx.clock.advance(30_000); // past the quiet period
  return r.row;
}

const billed = async () => {
  const s = await fx.store.spendSince(86_400_000);
  return s.inputTokens + s.outputTokens + s.cacheReadTokens + s.cacheWriteTokens;
};

describe('the lease is renewed after the permits, right before the final liveness check', () => {
  it('a permit wait within its bound, then a call: no rival can claim, the call is made once, no abandon', async () => {
    const it1 = await newItem();
    const asked: PermitRequest[] = [];
    let rival: unknown = 'not tried';
    const opts = runnerOptions(fx, fake, {
      leaseMs: LEASE,
      // The limiter keeps this slot waiting for 4 s, inside its bound of half the lease.
      acquirePermit: async (req) => {
        asked.push(req);
        fx.clock.advance(4_000);
        return { granted: true, reservationId: null };
      },
      // Right before the liveness check, 7 s more pass: 11 s after the claim's own renewal,
      // 7 s after the renewal that follows the permit. A rival runner tries to claim now.
      beforeAsk: async () => {
        fx.clock.advance(7_000);
        rival = await fx.store.claimNextJob('runner-b', LEASE, 8);
      },
    });
    const r = (await runOnce(opts, signal))!;
    expect(rival).toBeNull();
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    expect(fake.requests).toHaveLength(1);
    expect(await fx.store.getJob(it1.id, 'attention')).toBeNull();
    // The wait was bounded by the lease it ran under, and a reservation lives as long as a lease.
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({
      maxWaitMs: permitWaitBudgetMs(LEASE),
      reservationTtlMs: LEASE,
      holder: 'runner-a',
    });
    expect(asked[0].maxWaitMs).toBeLessThan(LEASE);
    expect(asked[0].inputTokens).toBeGreaterThan(0);
    expect(asked[0].maxOutputTokens).toBeGreaterThan(0);
  });

  it('control: the same rival, with no wait of ours in between, does claim once the lease has run out', async () => {
    await newItem();
    let rival: unknown = null;
    const opts = runnerOptions(fx, fake, {
      leaseMs: LEASE,
      acquirePermit: async () => ({ granted: true, reservationId: null }),
      beforeAsk: async () => {
        fx.clock.advance(2 * LEASE + 1); // a stalled process, not a wait of ours: past the lease and its abandon backoff (one lease)
        rival = await fx.store.claimNextJob('runner-b', LEASE, 8);
      },
    });
    const r = (await runOnce(opts, signal))!;
    expect(rival).toMatchObject({ claimedBy: 'runner-b', abandons: 1 });
    // A release the fence turns away: the other runner's claim is left as it is.
    expect(r).toMatchObject({ outcome: { kind: 'release', reason: 'claim lost before send' }, recorded: 'lost' });
    expect(await fx.store.getJob(r.claim.itemId, 'attention')).toMatchObject({ claimedBy: 'runner-b' });
    expect(fake.requests).toHaveLength(0);
  });

  it('a limiter wait longer than half the lease defers the job at once: no attempt, no abandon, the lease never lapses', async () => {
    const ids = [(await newItem('T-1')).id, (await newItem('T-2')).id];
    // The next request in 6 s: inside the limiter's own 10 s bound, past half of a 4 s lease.
    const limiter = new ProviderLimiter({ store: fx.store, requestsPerMinute: 10 });
    const opts = runnerOptions(fx, fake, { leaseMs: 4_000, acquirePermit: limiter.acquire });
    // The bucket starts full: nine other calls and our first job take this minute's ten requests.
    for (let i = 0; i < 9; i++)
      expect(
        await limiter.acquire({
          inputTokens: 1,
          maxOutputTokens: 0,
          maxWaitMs: 0,
          reservationTtlMs: 0,
          holder: 'other',
        }),
      ).toMatchObject({ granted: true });
    const first = (await runOnce(opts, signal))!;
    const second = (await runOnce(opts, signal))!;
    expect(first.outcome.kind).toBe('complete');
    expect(second.outcome).toMatchObject({ kind: 'defer' });
    const job = (await fx.store.getJob(second.claim.itemId, 'attention'))!;
    expect(ids).toContain(job.itemId);
    expect(job).toMatchObject({ attempts: 0, abandons: 0, claimToken: null, state: 'owed' });
    expect(job.notBefore - fx.clock.now()).toBeGreaterThan(5_000);
  });
});

describe('a permit wait cut short', () => {
  it('by shutdown: the job is released without an attempt, not deferred', async () => {
    const it1 = await newItem();
    const ac = new AbortController();
    const opts = runnerOptions(fx, fake, {
      acquirePermit: async (req) => {
        ac.abort(Object.assign(new Error('shutdown'), { code: 'shutdown' }));
        expect(req.signal?.aborted).toBe(true);
        return { granted: false, delayMs: 30_000 };
      },
    });
    const r = (await runOnce(opts, ac.signal))!;
    expect(r.outcome).toEqual({ kind: 'release', reason: 'shutdown' });
    expect(await fx.store.getJob(it1.id, 'attention')).toMatchObject({
      attempts: 0,
      claimToken: null,
      notBefore: fx.clock.now(),
    });
  });

  it('by a store failure while reserving: a transient fail, the lease is not left to run out', async () => {
    const it1 = await newItem();
    const opts = runnerOptions(fx, fake, {
      acquirePermit: async () => {
        throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      },
    });
    const r = (await runOnce(opts, signal))!;
    expect(r.outcome).toEqual({ kind: 'fail', reason: 'permit failed: SQLITE_BUSY' });
    expect(await fx.store.getJob(it1.id, 'attention')).toMatchObject({ attempts: 1, claimToken: null, abandons: 0 });
  });
});

describe('the daily-cap reservation in the runner (DESIGN §10.3)', () => {
  it('settles to the real usage after the call: nothing stays reserved', async () => {
    await newItem();
    const cap = 100_000;
    const limiter = new ProviderLimiter({ store: fx.store, dailyTokenCap: cap, spendRefreshMs: 0 });
    const reserved: number[] = [];
    const opts = runnerOptions(fx, fake, {
      acquirePermit: async (req) => {
        reserved.push(req.inputTokens + req.maxOutputTokens);
        return limiter.acquire(req);
      },
    });
    const r = (await runOnce(opts, signal))!;
    expect(r.outcome.kind).toBe('complete');
    const real = await billed();
    expect(real).toBe(r.stats.inputTokens + r.stats.outputTokens);
    // The estimate covered the real usage, and the reservation is gone: the whole rest of the cap is free.
    expect(reserved[0]).toBeGreaterThanOrEqual(real);
    expect(
      await fx.store.reserveSpend({ tokens: cap - real, capTokens: cap, ttlMs: 60_000, holder: 'probe' }),
    ).toMatchObject({ granted: true, reservedTokens: 0 });
  });

  it('a call not sent (the item deleted before the send) releases its reservation and bills nothing', async () => {
    const it1 = await newItem();
    const cap = 100_000;
    const limiter = new ProviderLimiter({ store: fx.store, dailyTokenCap: cap, spendRefreshMs: 0 });
    const opts = runnerOptions(fx, fake, {
      acquirePermit: limiter.acquire,
      beforeAsk: async () => void (await fx.store.softDeleteItem(it1.id)),
    });
    const r = (await runOnce(opts, signal))!;
    expect(r.outcome.kind).toBe('drop');
    expect(fake.requests).toHaveLength(0);
    expect(await billed()).toBe(0);
    expect(await fx.store.reserveSpend({ tokens: cap, capTokens: cap, ttlMs: 60_000, holder: 'probe' })).toMatchObject({
      granted: true,
      reservedTokens: 0,
    });
  });

  it('a call refused its reservation defers without an attempt; the cap is never passed', async () => {
    await newItem('T-1');
    await newItem('T-2');
    const limiter = new ProviderLimiter({ store: fx.store, dailyTokenCap: 2_000, spendRefreshMs: 0 });
    // Another process holds most of the cap in flight.
    const held = await fx.store.reserveSpend({ tokens: 1_900, capTokens: 2_000, ttlMs: 60_000, holder: 'other' });
    expect(held.granted).toBe(true);
    const r = (await runOnce(runnerOptions(fx, fake, { acquirePermit: limiter.acquire }), signal))!;
    expect(r.outcome).toMatchObject({ kind: 'defer' });
    expect(fake.requests).toHaveLength(0);
    expect(await fx.store.getJob(r.claim.itemId, 'attention')).toMatchObject({
      attempts: 0,
      abandons: 0,
      claimToken: null,
    });
  });
});
