import { describe, expect, it } from 'vitest';
import { ProviderRefusal, ProviderUnavailable } from '../../src/providers/errors.js';
import {
  DEFAULT_RETRY_POLICY,
  silentLogger,
  withRetries,
  type Fault,
  type RetryContext,
} from '../../src/providers/retry.js';

/** The shared retry loop on its own, with a fake clock: no server, no sleeping. */

function context(over: Partial<RetryContext> & { clock?: { t: number } } = {}): RetryContext & { waits: number[] } {
  const clock = over.clock ?? { t: 0 };
  const waits: number[] = [];
  return {
    provider: 'test',
    policy: DEFAULT_RETRY_POLICY,
    log: silentLogger,
    signal: new AbortController().signal,
    beforeSend: () => {},
    deadline: Number.POSITIVE_INFINITY,
    ...over,
    runtime: {
      now: () => clock.t,
      random: () => 0,
      sleep: async (ms) => {
        waits.push(ms);
        clock.t += ms;
      },
    },
    waits,
  };
}

const transient = (): Fault => ({ retry: true, error: new ProviderUnavailable('test: HTTP 503', { status: 503 }) });

describe('withRetries', () => {
  it('returns the first success without waiting', async () => {
    const ctx = context();
    let classified = 0;
    const r = await withRetries(
      ctx,
      async () => 'ok',
      () => (classified++, transient()),
    );
    expect(r).toBe('ok');
    expect(classified).toBe(0);
    expect(ctx.waits).toEqual([]);
  });

  it('stops before a wait that would pass the deadline, keeping the last status', async () => {
    // Attempt 1 fails at t=0; the 500 ms backoff fits (deadline 700); attempt 2 fails; the 1000 ms
    // backoff would end at 1500 > 700, so the call ends there with 2 sends.
    const ctx = context({ deadline: 700 });
    let sends = 0;
    const err = await withRetries(
      ctx,
      async () => {
        sends++;
        throw new Error('503');
      },
      transient,
    ).catch((e) => e);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err.message).toMatch(/time budget spent after 2 attempt/);
    expect(err.status).toBe(503);
    expect(sends).toBe(2);
    expect(ctx.waits).toEqual([500]);
  });

  it('starts no attempt once the deadline has passed', async () => {
    const clock = { t: 1_000 };
    const ctx = context({ clock, deadline: 1_000 });
    let sends = 0;
    const err = await withRetries(ctx, async () => (sends++, 'ok'), transient).catch((e) => e);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(sends).toBe(0);
  });

  it('throws a fatal fault’s error unchanged after one attempt', async () => {
    const refusal = new ProviderRefusal('test: HTTP 400', { status: 400 });
    let sends = 0;
    const err = await withRetries(
      context(),
      async () => {
        sends++;
        throw new Error('400');
      },
      () => ({ retry: false, error: refusal }),
    ).catch((e) => e);
    expect(err).toBe(refusal);
    expect(sends).toBe(1);
  });

  it('rethrows a non-Error abort reason as is', async () => {
    const ac = new AbortController();
    const err = await withRetries(
      context({ signal: ac.signal }),
      async () => {
        ac.abort('reload');
        throw new Error('aborted');
      },
      transient,
    ).catch((e) => e);
    expect(err).toBe('reload');
  });

  it('gives the attempt a signal that fires at the attempt timeout', async () => {
    const ctx = context({ policy: { ...DEFAULT_RETRY_POLICY, maxAttempts: 1, perAttemptTimeoutMs: 20 } });
    let timedOutSeen: boolean | undefined;
    const err: any = await withRetries(
      ctx,
      (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      (_e, timedOut) => ((timedOutSeen = timedOut), transient()),
    ).catch((e: any) => e);
    expect(timedOutSeen).toBe(true);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err.message).toMatch(/attempts exhausted after 1 attempt/);
  });
});
