import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { noul, questionFingerprint } from '../../src/decision/questions.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { Provider } from '../../src/providers/provider.js';
import { runOnce } from '../../src/runner/job-life.js';
import { runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Work the runner does once (DESIGN §7.6): a lease renewed before a call only when less than
 * half of it is left, one claim read before the first attempt, and each question hashed once per
 * process; and a report timed on the injected clock. Statements are counted by spying on the store; the
 * clock is the fixture's.
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

function spies() {
  return {
    renew: vi.spyOn(fx.store, 'renewLease'),
    claim: vi.spyOn(fx.store, 'checkClaims'),
    liveness: vi.spyOn(fx.store, 'checkLiveness'),
  };
}

describe('the lease before a call', () => {
  it('a fresh claim is not renewed: one claim read, no write, before the call', async () => {
    await newItem();
    const s = spies();
    const r = (await runOnce(runnerOptions(fx, fake, { leaseMs: LEASE }), signal))!;
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    expect(fake.requests).toHaveLength(1);
    expect(s.renew).not.toHaveBeenCalled();
    expect(s.claim).toHaveBeenCalledTimes(1);
    expect(s.liveness).not.toHaveBeenCalled();
  });

  it('with less than half the lease left it is renewed, and a rival cannot claim during the call', async () => {
    const it1 = await newItem();
    const s = spies();
    let rival: unknown = 'not tried';
    let leaseAtSend = 0;
    // The call itself takes more than half a lease: a rival tries to claim while it is out.
    const provider: Provider = Object.assign(Object.create(fake) as FakeProvider, {
      ask: async (...args: Parameters<Provider['ask']>) => {
        leaseAtSend = (await fx.store.getJob(it1.id, 'attention'))!.leaseExpiresAt! - fx.clock.now();
        fx.clock.advance(LEASE / 2 + 1);
        rival = await fx.store.claimNextJob('runner-b', LEASE, 8);
        return fake.ask(...args);
      },
    });
    const opts = runnerOptions(fx, provider, { leaseMs: LEASE, beforeAsk: () => fx.clock.advance(LEASE / 2 + 1) });
    const r = (await runOnce(opts, signal))!;
    expect(s.renew).toHaveBeenCalledTimes(1);
    expect(leaseAtSend).toBe(LEASE);
    expect(rival).toBeNull();
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'answered' });
  });

  it('with half or more left it is not renewed', async () => {
    await newItem();
    const s = spies();
    const opts = runnerOptions(fx, fake, { leaseMs: LEASE, beforeAsk: () => fx.clock.advance(LEASE / 2) });
    const r = (await runOnce(opts, signal))!;
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    expect(s.renew).not.toHaveBeenCalled();
  });

  it('a claim lost before the send is not renewed and makes no call', async () => {
    await newItem();
    let rivals: unknown;
    const opts = runnerOptions(fx, fake, {
      leaseMs: LEASE,
      beforeAsk: async ({ claim }) => {
        fx.clock.advance(LEASE + 1);
        await fx.store.claimNextJob('runner-b', LEASE, 8);
        rivals = await fx.store.getJob(claim.itemId, 'attention');
      },
    });
    const s = spies();
    const r = (await runOnce(opts, signal))!;
    // A release the fence turns away: the row is as the other runner's claim left it.
    expect(r).toMatchObject({ outcome: { kind: 'release', reason: 'claim lost before send' }, recorded: 'lost' });
    expect(await fx.store.getJob(r.claim.itemId, 'attention')).toEqual(rivals);
    expect(s.renew).not.toHaveBeenCalled();
    expect(fake.requests).toHaveLength(0);
  });
});

describe('question fingerprints', () => {
  const ctx = { model: 'm-1', promptVersion: 'p-1', effort: null };

  it('are worked out once per question object and context: a later change to the object is not seen', () => {
    const q = noul('Is it blocked?') as { instructions: string };
    const first = questionFingerprint(q as never, ctx);
    q.instructions = 'Something else entirely';
    expect(questionFingerprint(q as never, ctx)).toBe(first);
    // A new object with the new text is a new question version.
    expect(questionFingerprint(noul('Something else entirely'), ctx)).not.toBe(first);
  });

  it('are kept per context: another model or effort gives another fingerprint', () => {
    const q = noul('Is it blocked?');
    const a = questionFingerprint(q, ctx);
    expect(questionFingerprint(q, { ...ctx, model: 'm-2' })).not.toBe(a);
    expect(questionFingerprint(q, { ...ctx, effort: 'high' })).not.toBe(a);
    expect(questionFingerprint(q, { ...ctx, effort: '' })).not.toBe(a);
    expect(questionFingerprint(q, ctx)).toBe(a);
  });
});

describe("a report's duration", () => {
  it('is read from the injected clock: a call that moves it 2.5 s reports 2,500 ms', async () => {
    await newItem();
    const provider: Provider = Object.assign(Object.create(fake) as FakeProvider, {
      ask: async (...args: Parameters<Provider['ask']>) => {
        fx.clock.advance(2_500);
        return fake.ask(...args);
      },
    });
    const r = (await runOnce(runnerOptions(fx, provider, { clock: fx.clock }), signal))!;
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    expect(r.durationMs).toBe(2_500);
  });
});

describe('the settings made once per settings object and signal', () => {
  it('a second run with the same settings and a new signal asks under the new signal, not the first', async () => {
    await newItem('T-1');
    await newItem('T-2');
    const seen: AbortSignal[] = [];
    const provider: Provider = Object.assign(Object.create(fake) as FakeProvider, {
      ask: (...a: Parameters<Provider['ask']>) => {
        seen.push(a[2].signal);
        return fake.ask(...a);
      },
    });
    const opts = runnerOptions(fx, provider, { leaseMs: LEASE });
    const first = new AbortController();
    expect((await runOnce(opts, first.signal))!.outcome.kind).toBe('complete');
    // The pass is cancelled (a reload, a shutdown of that pass); the next pass brings a new signal.
    first.abort('reload');
    const second = new AbortController();
    expect((await runOnce(opts, second.signal))!.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    expect(seen).toEqual([first.signal, second.signal]);
  });
});
