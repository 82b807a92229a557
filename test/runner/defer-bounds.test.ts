import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { formatStatus, statusReport } from '../../src/cli/status.js';
import { attentionSet } from '../../src/decision/production-sets.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderUnavailable } from '../../src/providers/errors.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { classify } from '../../src/runner/evaluate.js';
import { runOnce } from '../../src/runner/job-life.js';
import { DEFER_LIMIT } from '../../src/store/write-rules.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { askOpts, questions, recordingRuntime, STATE } from '../providers/support.js';

/**
 * DESIGN §3.7: a short Retry-After on a 5xx or 529 is a transient fail (the attempt counts, the
 * job backs off by max(backoff, retry-after)); only a 429, a Retry-After above the provider's cap,
 * or our own limiter defers, and a job's consecutive defers are bounded. Real AnthropicProvider and
 * SDK against the fake Anthropic server; real SQLite file with a manual clock; the provider's sleep
 * is a recording seam, so no test waits on a Retry-After.
 */

let server: FakeAnthropicServer;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => server.close());

const outage = {
  '529 overloaded_error': () => FakeAnthropicServer.overloaded({ 'retry-after': '1' }),
  '503 api_error': () => FakeAnthropicServer.error(503, 'api_error', 'Service unavailable', { 'retry-after': '1' }),
} as const;

function provider(waits?: ReturnType<typeof recordingRuntime>): AnthropicProvider {
  return new AnthropicProvider({
    apiKey: 'sk-ant-test',
    baseURL: server.url,
    runtime: (waits ?? recordingRuntime()).runtime,
  });
}

describe.each(Object.entries(outage))('%s with retry-after: 1, for ever', (_name, reply) => {
  let fx: Fixture;
  beforeEach(async () => {
    server.reset();
    server.setFallback(reply);
    fx = await makeFixture([attentionSet]);
  });
  afterEach(async () => {
    server.setFallback((req) => server.defaultReply(req));
    await fx.cleanup();
  });

  it('provider: 4 requests per call, honouring the 1 s wait, then ProviderUnavailable(retryAfter 1000) that the runner fails, not defers', async () => {
    const rec = recordingRuntime();
    const err = await provider(rec)
      .ask(STATE, questions(), askOpts())
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err).toMatchObject({ retryAfterMs: 1000, rateLimited: false });
    expect(server.messages).toHaveLength(4);
    expect(rec.waits).toEqual([1000, 1000, 2000]); // max(backoff 0.5 s doubling, retry-after 1 s)
    const outcome = classify(err, new AbortController().signal, 30_000);
    expect(outcome).toMatchObject({ kind: 'fail', retryAfterMs: 1000 });
  });

  it('runner: attempts 1 then 2, due 30 s then 60 s after each pass, at most 4 requests a pass; status lists the set as failing', async () => {
    const item = (
      await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: 'T-1',
          title: 'Fix login',
          content: 'Fails on Safari.',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      )
    ).row;
    const opts = runnerOptions(fx, provider());
    const signal = new AbortController().signal;
    const seen: Array<{ attempts: number; dueInMs: number; requests: number }> = [];
    for (let pass = 0; pass < 2; pass++) {
      const before = server.messages.length;
      const r = (await runOnce(opts, signal))!;
      expect(r.outcome).toMatchObject({ kind: 'fail', reason: expect.stringMatching(/^provider_unavailable 5\d\d$/) });
      const j = (await fx.store.getJob(item.id, 'attention'))!;
      seen.push({
        attempts: j.attempts,
        dueInMs: j.notBefore - fx.clock.now(),
        requests: server.messages.length - before,
      });
      expect(await runOnce(opts, signal)).toBeNull(); // backing off: not due
      fx.clock.set(j.notBefore);
    }
    // random 0.5: no jitter, so exactly 30 s × 2^(attempts−1) (DESIGN §3), never the 1 s Retry-After.
    expect(seen).toEqual([
      { attempts: 1, dueInMs: 30_000, requests: 4 },
      { attempts: 2, dueInMs: 60_000, requests: 4 },
    ]);
    const s = await statusReport(fx.store);
    expect(s.failingSets.map((f) => f.set)).toEqual(['attention']);
    expect(formatStatus(s)).toMatch(/failing sets: attention \(1 job with errors/);
  });
});

describe('classify (DESIGN §3.7)', () => {
  const signal = new AbortController().signal;
  const un = (o: ConstructorParameters<typeof ProviderUnavailable>[1]) => new ProviderUnavailable('x', o);
  it('defers a 429 and a Retry-After above the cap; fails a 5xx with a Retry-After at or under the cap, carrying it', () => {
    expect(classify(un({ status: 429, rateLimited: true, retryAfterMs: 45_000 }), signal, 30_000)).toMatchObject({
      kind: 'defer',
      delayMs: 45_000,
    });
    expect(classify(un({ status: 503, retryAfterMs: 30_001 }), signal, 30_000)).toMatchObject({
      kind: 'defer',
      delayMs: 30_001,
    });
    expect(classify(un({ status: 503, retryAfterMs: 30_000 }), signal, 30_000)).toEqual({
      kind: 'fail',
      reason: 'provider_unavailable 503',
      retryAfterMs: 30_000,
    });
    expect(classify(un({ status: 529, retryAfterMs: 0 }), signal, 30_000)).toMatchObject({
      kind: 'fail',
      retryAfterMs: 0,
    });
    expect(classify(un({ status: 500 }), signal, 30_000)).toEqual({ kind: 'fail', reason: 'provider_unavailable 500' });
  });

  it('a provider deferral waits at least the backoff base and at most its cap, whatever the reset time says', () => {
    // retry-after: 0 (or a past HTTP-date) after the attempt's own retries: not straight back.
    expect(classify(un({ status: 429, rateLimited: true, retryAfterMs: 0 }), signal, 30_000)).toMatchObject({
      kind: 'defer',
      delayMs: 30_000,
    });
    expect(classify(un({ status: 429, rateLimited: true, retryAfterMs: 1000 }), signal, 30_000)).toMatchObject({
      kind: 'defer',
      delayMs: 30_000,
    });
    // retry-after: 99999999, or an HTTP-date in the year 9999: one reply never hides a job past an hour.
    expect(classify(un({ status: 529, retryAfterMs: 99_999_999_000 }), signal, 30_000)).toMatchObject({
      kind: 'defer',
      delayMs: 3_600_000,
    });
    expect(
      classify(
        un({ status: 429, rateLimited: true, retryAfterMs: Date.UTC(9999, 11, 31) - Date.now() }),
        signal,
        30_000,
      ),
    ).toMatchObject({ kind: 'defer', delayMs: 3_600_000 });
  });

  it('a fail waits for the longer of the backoff and the Retry-After', async () => {
    const fx = await makeFixture([attentionSet]);
    try {
      const item = (
        await fx.store.createItem(
          {
            workspaceId: fx.ws.id,
            collectionId: fx.tasks.id,
            ref: 'T-1',
            title: 't',
            content: 'b',
            fields: { status: 'open' },
          },
          { quietPeriod: false },
        )
      ).row;
      // A 503 whose 45 s Retry-After is under a 60 s cap: a fail, due after 45 s rather than the 30 s backoff.
      const fake = Object.assign(new FakeProvider({ faults: [{ status: 503, retryAfterMs: 45_000 }] }), {
        retryAfterCapMs: 60_000,
      });
      const r = (await runOnce(runnerOptions(fx, fake), new AbortController().signal))!;
      expect(r.outcome).toMatchObject({ kind: 'fail', retryAfterMs: 45_000 });
      const j = (await fx.store.getJob(item.id, 'attention'))!;
      expect(j).toMatchObject({ attempts: 1, defers: 0 });
      expect(j.notBefore - fx.clock.now()).toBe(45_000);
    } finally {
      await fx.cleanup();
    }
  });
});

describe('bounded defers through the runner (DESIGN §3.7)', () => {
  it('a 429 for ever: 20 defers without an attempt, then the 21st is counted as a fail with backoff; then the count starts again', async () => {
    const fx = await makeFixture([attentionSet]);
    try {
      const item = (
        await fx.store.createItem(
          {
            workspaceId: fx.ws.id,
            collectionId: fx.tasks.id,
            ref: 'T-1',
            title: 't',
            content: 'b',
            fields: { status: 'open' },
          },
          { quietPeriod: false },
        )
      ).row;
      // retry-after 1 s: each deferral still waits the 30 s floor (providerDeferMs).
      const fake = new FakeProvider({
        faults: Array.from({ length: DEFER_LIMIT + 3 }, () => ({ status: 429, retryAfterMs: 1_000 })),
      });
      const opts = runnerOptions(fx, fake);
      const signal = new AbortController().signal;
      const trail: string[] = [];
      for (let i = 0; i < DEFER_LIMIT + 2; i++) {
        const r = (await runOnce(opts, signal))!;
        const j = (await fx.store.getJob(item.id, 'attention'))!;
        trail.push(
          `${r.outcome.kind}/${r.recorded} attempts=${j.attempts} defers=${j.defers} due=${j.notBefore - fx.clock.now()}`,
        );
        fx.clock.set(j.notBefore);
      }
      expect(DEFER_LIMIT).toBe(20);
      expect(trail.slice(0, DEFER_LIMIT)).toEqual(
        Array.from({ length: DEFER_LIMIT }, (_, i) => `defer/applied attempts=0 defers=${i + 1} due=30000`),
      );
      // The 21st: the attempt counts, the count resets, backoff(1) = 30 s.
      expect(trail[DEFER_LIMIT]).toBe('fail/applied attempts=1 defers=0 due=30000');
      expect(trail[DEFER_LIMIT + 1]).toBe('defer/applied attempts=1 defers=1 due=30000');
      const s = await statusReport(fx.store);
      expect(s.failingSets.map((f) => f.set)).toEqual(['attention']);
    } finally {
      await fx.cleanup();
    }
  });
});
