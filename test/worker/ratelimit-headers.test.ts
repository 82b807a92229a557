import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { runWorker, type WorkerSettings } from '../../src/compose/run-worker.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderUnavailable } from '../../src/providers/errors.js';
import type { Provider, RateLimitSnapshot } from '../../src/providers/provider.js';
import { parseRateLimitHeaders, RATE_LIMIT_RESET_CAP_MS } from '../../src/providers/rate-limit-headers.js';
import type { Permit, PermitRequest } from '../../src/runner/evaluate.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import type { RecordedRequest, Reply } from '../../src/testing/fake-server-core.js';
import { DAY_MS, ProviderLimiter } from '../../src/worker/limiter.js';
import { ManualClock } from '../../src/clock.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { askOpts, questions, STATE } from '../providers/support.js';

/**
 * DESIGN §9.3: Anthropic's rate-limit headers (`anthropic-ratelimit-*-remaining/-reset`) feed the
 * worker's limiter, so the worker slows before a 429 instead of after it. The parser is pure; the
 * limiter is driven with fake timers (Date, setTimeout, performance), so no test sleeps on a
 * reset; the wire tests use the real SDK against the fake Anthropic server, and the worker test a
 * real worker (runWorker) whose fake server would answer 429 to any request sent before the reset.
 */

const iso = (ms: number) => new Date(ms).toISOString();

/** The rate-limit headers of one response: a window of `limit` requests and tokens. */
function rlHeaders(o: {
  requests?: number;
  inputTokens?: number;
  resetAt: number;
  limit?: number;
}): Record<string, string> {
  const limit = String(o.limit ?? 50);
  const h: Record<string, string> = {
    'anthropic-ratelimit-requests-limit': limit,
    'anthropic-ratelimit-requests-remaining': String(o.requests ?? 49),
    'anthropic-ratelimit-requests-reset': iso(o.resetAt),
  };
  if (o.inputTokens !== undefined) {
    h['anthropic-ratelimit-input-tokens-limit'] = '40000';
    h['anthropic-ratelimit-input-tokens-remaining'] = String(o.inputTokens);
    h['anthropic-ratelimit-input-tokens-reset'] = iso(o.resetAt);
  }
  return h;
}

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
const req = (inputTokens: number, over: Partial<PermitRequest> = {}): PermitRequest => ({
  inputTokens,
  maxOutputTokens: 0,
  maxWaitMs: Number.POSITIVE_INFINITY,
  reservationTtlMs: 60_000,
  holder: 'w/0',
  ...over,
});
const delayOf = (p: Permit): number | null => (p.granted ? null : p.delayMs);

describe('parseRateLimitHeaders', () => {
  const now = Date.parse('2026-11-30T12:00:00Z');

  it('reads every window: limit, remaining and the reset as epoch ms', () => {
    const h = new Headers({
      'anthropic-ratelimit-requests-limit': '50',
      'anthropic-ratelimit-requests-remaining': '0',
      'anthropic-ratelimit-requests-reset': '2026-11-30T12:00:02Z',
      'anthropic-ratelimit-tokens-limit': '48000',
      'anthropic-ratelimit-tokens-remaining': '47000',
      'anthropic-ratelimit-tokens-reset': '2026-11-30T12:00:01.500Z',
      'anthropic-ratelimit-input-tokens-limit': '40000',
      'anthropic-ratelimit-input-tokens-remaining': '39000',
      'anthropic-ratelimit-input-tokens-reset': '2026-11-30T13:00:01+01:00',
      'anthropic-ratelimit-output-tokens-limit': '8000',
      'anthropic-ratelimit-output-tokens-remaining': '8000',
      'anthropic-ratelimit-output-tokens-reset': '2026-11-30T12:00:00Z',
    });
    expect(parseRateLimitHeaders(h, now)).toEqual({
      observedAt: now,
      requests: { limit: 50, remaining: 0, resetAt: now + 2_000 },
      tokens: { limit: 48_000, remaining: 47_000, resetAt: now + 1_500 },
      inputTokens: { limit: 40_000, remaining: 39_000, resetAt: now + 1_000 },
      outputTokens: { limit: 8_000, remaining: 8_000, resetAt: now },
    });
  });

  it('caps a reset at 60 s after the response', () => {
    const s = parseRateLimitHeaders(new Headers(rlHeaders({ requests: 0, resetAt: now + 3_600_000 })), now);
    expect(s?.requests?.resetAt).toBe(now + RATE_LIMIT_RESET_CAP_MS);
  });

  it('ignores malformed values window by window, and gives null when nothing is usable', () => {
    for (const remaining of ['-1', '1.5', 'abc', '', '1e3', '0x10', '12345678901234567', 'NaN']) {
      expect(
        parseRateLimitHeaders(
          new Headers({ ...rlHeaders({ resetAt: now + 2_000 }), 'anthropic-ratelimit-requests-remaining': remaining }),
          now,
        ),
        remaining,
      ).toBeNull();
    }
    for (const reset of [
      'tomorrow',
      '2026-11-30',
      '1796040002',
      '2026-11-30T12:00:02',
      'Mon, 30 Nov 2026 12:00:02 GMT',
      '2026-13-30T12:00:02Z',
    ]) {
      expect(
        parseRateLimitHeaders(
          new Headers({ ...rlHeaders({ requests: 0, resetAt: now }), 'anthropic-ratelimit-requests-reset': reset }),
          now,
        ),
        reset,
      ).toBeNull();
    }
    // A bad limit keeps the window, without a limit; a good window survives a bad neighbour.
    const s = parseRateLimitHeaders(
      new Headers({
        ...rlHeaders({ requests: 3, inputTokens: 10, resetAt: now + 1_000 }),
        'anthropic-ratelimit-requests-limit': 'lots',
        'anthropic-ratelimit-input-tokens-remaining': 'x',
      }),
      now,
    );
    expect(s).toEqual({ observedAt: now, requests: { limit: null, remaining: 3, resetAt: now + 1_000 } });
  });

  it('never throws: absent, odd or throwing header objects give null', () => {
    expect(parseRateLimitHeaders(undefined, now)).toBeNull();
    expect(parseRateLimitHeaders(null, now)).toBeNull();
    expect(parseRateLimitHeaders({ 'anthropic-ratelimit-requests-remaining': '0' }, now)).toBeNull();
    expect(
      parseRateLimitHeaders(
        {
          get: () => {
            throw new Error('boom');
          },
        },
        now,
      ),
    ).toBeNull();
    expect(parseRateLimitHeaders({ get: () => 42 }, now)).toBeNull();
    expect(parseRateLimitHeaders(new Headers(), now)).toBeNull();
  });
});

describe("ProviderLimiter with the server's rate-limit reading", () => {
  // The limiter's buckets and waits run on its injected clock; the server's reset times are wall
  // clock (Date), so a test moves both together.
  let clock: ManualClock;
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    clock = new ManualClock();
  });
  afterEach(() => void vi.useRealTimers());
  const advance = async (ms: number) => {
    vi.advanceTimersByTime(ms);
    clock.advance(ms);
    await new Promise((r) => setImmediate(r));
  };

  const snapshot = (over: Partial<RateLimitSnapshot>): RateLimitSnapshot => ({ observedAt: Date.now(), ...over });
  const limiterOf = (read: () => RateLimitSnapshot | null, maxWaitMs = 0) =>
    new ProviderLimiter({ store: noSpend, rateLimitState: read, maxWaitMs, clock });

  it('is active with only the reading, and grants at once while there is none', async () => {
    const l = limiterOf(() => null);
    expect(l.active).toBe(true);
    expect(new ProviderLimiter({ store: noSpend }).active).toBe(false);
    expect(await l.acquire(req(1_000)).then(delayOf)).toBeNull();
  });

  it('no request left: defers by the time to the reset, or waits for it in process', async () => {
    const s = snapshot({ requests: { limit: 50, remaining: 0, resetAt: Date.now() + 2_000 } });
    expect(
      await limiterOf(() => s, 0)
        .acquire(req(10))
        .then(delayOf),
    ).toBe(2_000);

    const l = limiterOf(() => s, 5_000);
    let got: number | null | undefined;
    void l
      .acquire(req(10))
      .then(delayOf)
      .then((v) => (got = v));
    await advance(1_990);
    expect(got).toBeUndefined();
    await advance(20);
    expect(got).toBeNull();
  });

  it("a wait longer than the request's own budget defers with the time left to the reset", async () => {
    const s = snapshot({ requests: { limit: 50, remaining: 0, resetAt: Date.now() + 2_000 } });
    expect(
      await limiterOf(() => s, 10_000)
        .acquire(req(10, { maxWaitMs: 500 }))
        .then(delayOf),
    ).toBe(2_000);
    vi.advanceTimersByTime(1_500);
    expect(
      await limiterOf(() => s, 0)
        .acquire(req(10))
        .then(delayOf),
    ).toBe(500);
  });

  it("input tokens: waits when fewer are left than the call's estimate; a call larger than the window goes when it is full", async () => {
    const resetAt = Date.now() + 3_000;
    const tight = snapshot({ inputTokens: { limit: 2_000, remaining: 500, resetAt } });
    expect(
      await limiterOf(() => tight)
        .acquire(req(1_000))
        .then(delayOf),
    ).toBe(3_000);
    expect(
      await limiterOf(() => tight)
        .acquire(req(400))
        .then(delayOf),
    ).toBeNull();
    const full = snapshot({ inputTokens: { limit: 2_000, remaining: 2_000, resetAt } });
    expect(
      await limiterOf(() => full)
        .acquire(req(50_000))
        .then(delayOf),
    ).toBeNull();
    const almost = snapshot({ inputTokens: { limit: 2_000, remaining: 1_999, resetAt } });
    expect(
      await limiterOf(() => almost)
        .acquire(req(50_000))
        .then(delayOf),
    ).toBe(3_000);
    // The combined `tokens` window is read the same way; output tokens only when spent.
    expect(
      await limiterOf(() => snapshot({ tokens: { limit: 2_000, remaining: 10, resetAt } }))
        .acquire(req(100))
        .then(delayOf),
    ).toBe(3_000);
    expect(
      await limiterOf(() => snapshot({ outputTokens: { limit: 8_000, remaining: 0, resetAt } }))
        .acquire(req(100))
        .then(delayOf),
    ).toBe(3_000);
    expect(
      await limiterOf(() => snapshot({ outputTokens: { limit: 8_000, remaining: 1, resetAt } }))
        .acquire(req(100))
        .then(delayOf),
    ).toBeNull();
  });

  it('remaining > 0 changes nothing, and a reset that has passed is ignored', async () => {
    const l = limiterOf(() => snapshot({ requests: { limit: 50, remaining: 40, resetAt: Date.now() + 2_000 } }));
    for (let i = 0; i < 5; i++) expect(await l.acquire(req(10)).then(delayOf)).toBeNull();
    const past = snapshot({ requests: { limit: 50, remaining: 0, resetAt: Date.now() - 1 } });
    expect(
      await limiterOf(() => past)
        .acquire(req(10))
        .then(delayOf),
    ).toBeNull();
  });

  it('grants spend the reading until a newer response replaces it', async () => {
    let s = snapshot({ requests: { limit: 50, remaining: 2, resetAt: Date.now() + 2_000 } });
    const l = limiterOf(() => s);
    expect(await l.acquire(req(10)).then(delayOf)).toBeNull();
    expect(await l.acquire(req(10)).then(delayOf)).toBeNull();
    expect(await l.acquire(req(10)).then(delayOf)).toBe(2_000); // both requests left are spent
    s = snapshot({ requests: { limit: 50, remaining: 1, resetAt: Date.now() + 2_000 } }); // a newer response
    expect(await l.acquire(req(10)).then(delayOf)).toBeNull();
    expect(await l.acquire(req(10)).then(delayOf)).toBe(2_000);
  });

  it('never waits more than 60 s on a reading, whatever its reset', async () => {
    const s = snapshot({ requests: { limit: 50, remaining: 0, resetAt: Date.now() + 10 * 60_000 } });
    expect(
      await limiterOf(() => s)
        .acquire(req(10))
        .then(delayOf),
    ).toBe(RATE_LIMIT_RESET_CAP_MS);
  });
});

describe('through the SDK and the fake Anthropic server', () => {
  let server: FakeAnthropicServer;
  beforeAll(async () => {
    server = await FakeAnthropicServer.start();
  });
  afterAll(async () => server.close());
  beforeEach(() => server.reset());

  const provider = () =>
    new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: server.url, minBackoffMs: 1, maxBackoffMs: 4 });
  /** A limiter that never waits in process, so a wait shows as a deferral. */
  const limiterFor = (p: AnthropicProvider) =>
    new ProviderLimiter({ store: noSpend, rateLimitState: () => p.rateLimitState(), maxWaitMs: 0 });

  it('remaining 0 with a reset 2 s ahead: the next call defers until the reset, before any second request or 429', async () => {
    // The reading's reset is wall-clock time (epoch ms from the header) and the wait compares it
    // with Date.now(): Date stands still so the request's own duration (over a second on a loaded
    // machine) does not shorten the wait the test measures.
    vi.useFakeTimers({ toFake: ['Date'] });
    onTestFinished(() => void vi.useRealTimers());
    const p = provider();
    const limiter = limiterFor(p);
    expect(await limiter.acquire(req(100)).then(delayOf)).toBeNull();
    server.script(FakeAnthropicServer.auto({ headers: rlHeaders({ requests: 0, resetAt: Date.now() + 2_000 }) }));
    await p.ask(STATE, questions(), askOpts());
    expect(p.rateLimitState()?.requests?.remaining).toBe(0);

    const delay = await limiter.acquire(req(100)).then(delayOf);
    expect(delay).toBeGreaterThan(1_000);
    expect(delay).toBeLessThanOrEqual(2_000);
    expect(server.messages).toHaveLength(1);
    expect(server.requests.filter((r) => r.path === '/v1/messages')).toHaveLength(1);
  });

  it('a 429 carries the headers too: its reading holds the next call', async () => {
    const p = provider();
    // Retry-After above the provider's cap: the call ends at once and the job would defer.
    server.script(FakeAnthropicServer.rateLimited(45, rlHeaders({ requests: 0, resetAt: Date.now() + 5_000 })));
    await expect(p.ask(STATE, questions(), askOpts())).rejects.toBeInstanceOf(ProviderUnavailable);
    expect(await limiterFor(p).acquire(req(100)).then(delayOf)).toBeGreaterThan(3_000);
    expect(server.messages).toHaveLength(1);
  });

  it('malformed headers change nothing', async () => {
    const p = provider();
    server.script(
      FakeAnthropicServer.auto({
        headers: {
          'anthropic-ratelimit-requests-remaining': 'zero',
          'anthropic-ratelimit-requests-reset': iso(Date.now() + 2_000),
          'anthropic-ratelimit-input-tokens-remaining': '0',
          'anthropic-ratelimit-input-tokens-reset': 'in two seconds',
          'anthropic-ratelimit-tokens-remaining': '-5',
          'anthropic-ratelimit-tokens-reset': iso(Date.now() + 2_000),
        },
      }),
    );
    await p.ask(STATE, questions(), askOpts());
    expect(p.rateLimitState()).toBeNull();
    expect(await limiterFor(p).acquire(req(100)).then(delayOf)).toBeNull();
  });

  it('remaining > 0 changes nothing', async () => {
    const p = provider();
    server.script(
      FakeAnthropicServer.auto({
        headers: rlHeaders({ requests: 5, inputTokens: 30_000, resetAt: Date.now() + 2_000 }),
      }),
    );
    await p.ask(STATE, questions(), askOpts());
    expect(p.rateLimitState()?.requests?.remaining).toBe(5);
    expect(await limiterFor(p).acquire(req(100)).then(delayOf)).toBeNull();
  });
});

describe('a real worker against a server that allows one request per window', () => {
  const set = defineQuestionSet({
    name: 'flag',
    questions: { urgent: noul('the item is urgent') },
    threshold: 0.5,
    quietPeriodMs: 0,
    reaskDebounceMs: 0,
    noTrail: true,
  });
  const WINDOW_MS = 1_500;
  let server: FakeAnthropicServer;
  let fx: Fixture;
  /** Status of each Messages request, and when the current window resets (wall ms). */
  let statuses: number[];
  let resetAt: number;

  beforeAll(async () => {
    server = await FakeAnthropicServer.start();
  });
  afterAll(async () => server.close());
  beforeEach(async () => {
    server.reset();
    statuses = [];
    resetAt = 0;
    // The API's window: one request, then 429 until the reset; every answer says what is left.
    server.setFallback((r: RecordedRequest): Reply | Promise<Reply> => {
      if (r.method !== 'POST' || r.path !== '/v1/messages') return server.defaultReply(r);
      const now = Date.now();
      if (now < resetAt) {
        statuses.push(429);
        return FakeAnthropicServer.rateLimited(45, rlHeaders({ requests: 0, resetAt, limit: 1 }));
      }
      resetAt = now + WINDOW_MS;
      statuses.push(200);
      return FakeAnthropicServer.auto({ headers: rlHeaders({ requests: 0, resetAt, limit: 1 }) })(r);
    });
    fx = await makeFixture([set]);
  });
  afterEach(async () => {
    server.setFallback((r) => server.defaultReply(r));
    await fx.cleanup();
  });

  const settings = {
    concurrency: 1,
    tickMs: 50,
    leaseMs: 60_000,
    passLimit: 20,
    abandonLimit: 8,
    metricsPort: undefined,
    metricsHost: '127.0.0.1',
    requestsPerMinute: undefined, // no cap of ours: only the server's headers can slow the worker
    inputTokensPerMinute: undefined,
    dailyTokenCap: undefined,
    driftSweepPerMinute: 0,
    pruneIntervalMs: 0,
    retentionHistoryMs: 30 * DAY_MS,
    walCheckpointMs: 60_000,
    coAsk: 'off',
    batch: 'off',
  } as unknown as WorkerSettings;

  const items = async () => {
    for (const ref of ['A-1', 'B-1']) {
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref,
        title: ref,
        content: 'text',
        fields: { status: 'open' },
      });
    }
  };
  const anthropic = () =>
    new AnthropicProvider({
      apiKey: 'sk-ant-test',
      baseURL: server.url,
      perAttemptTimeoutMs: 5_000,
      maxAttempts: 2,
      retryAfterCapMs: 1_000,
      maxBackoffMs: 100,
    });
  const drain = (provider: Provider) =>
    runWorker({
      cfg: settings,
      store: fx.store,
      registry: fx.registry,
      provider,
      logger: silentLogger,
      untilIdle: true,
      workerId: 'w-rl',
    });

  it('the second call waits for the reset: two requests, no 429, answers stored for both items', async () => {
    await items();
    const summary = await drain(anthropic());
    expect(statuses).toEqual([200, 200]);
    const [first, second] = server.messages;
    expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(WINDOW_MS - 100);
    expect(summary.answersStored).toBe(2);
  });

  it('control: the same provider without its reading sends the second call at once and gets the 429', async () => {
    await items();
    const p = anthropic();
    const blind: Provider = {
      name: p.name,
      model: p.model,
      promptVersion: p.promptVersion,
      effort: p.effort,
      worstCaseCallMs: p.worstCaseCallMs,
      retryAfterCapMs: p.retryAfterCapMs,
      ask: (state, qs, opts) => p.ask(state, qs, opts),
    };
    const summary = await drain(blind);
    expect(statuses).toEqual([200, 429]);
    expect(summary.answersStored).toBe(1);
  });
});
