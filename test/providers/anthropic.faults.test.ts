import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { choice, noul, type Question } from '../../src/decision/questions.js';
import { AnthropicProvider, type AnthropicProviderOptions } from '../../src/providers/anthropic.js';
import {
  AnswerDefect,
  ProviderMisconfigured,
  ProviderRefusal,
  ProviderUnavailable,
  SchemaRejected,
} from '../../src/providers/errors.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import type { RecordedRequest } from '../../src/testing/fake-server-core.js';
import { aliased, askOpts, promptKeys, goodAnswers, questions, recordingRuntime, STATE, until } from './support.js';

/** Faults of the Anthropic provider against the fake Messages API (DESIGN §9 retries and errors). */

let server: FakeAnthropicServer;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => server.reset());

/** Small real timings: backoff 1 → 2 → 4 ms, attempts time out after 2 s unless a test says less. */
function provider(over: Partial<AnthropicProviderOptions> = {}): AnthropicProvider {
  return new AnthropicProvider({
    apiKey: 'sk-ant-test',
    baseURL: server.url,
    minBackoffMs: 1,
    maxBackoffMs: 4,
    perAttemptTimeoutMs: 2_000,
    runtime: { random: () => 0 },
    ...over,
  });
}

const ask = (p: AnthropicProvider, opts = askOpts()) => p.ask(STATE, questions(), opts);
const fail = (p: AnthropicProvider, opts = askOpts()) =>
  ask(p, opts).then(
    () => {
      throw new Error('expected the ask to fail');
    },
    (e: unknown) => e as any,
  );

/**
 * Each attempt was closed before the next one was sent. The server learns of a client's abort
 * from the socket's close event, which a loaded machine can deliver a few milliseconds after the
 * retry's request (CI saw maxInFlight 2 that way), so the check allows ONE_AT_A_TIME_SLACK_MS. An
 * attempt left open instead stays open until the whole call gives up, at least one attempt
 * timeout (≥ 80 ms here) after the next was sent, so the check still fails then.
 */
const ONE_AT_A_TIME_SLACK_MS = 40;
function expectOneAtATime(messages: ReadonlyArray<{ receivedAt: number; closedAt?: number }>): void {
  for (let i = 1; i < messages.length; i++) {
    expect(messages[i - 1].closedAt!, `attempt ${i} closed before attempt ${i + 1} was sent`).toBeLessThanOrEqual(
      messages[i].receivedAt + ONE_AT_A_TIME_SLACK_MS,
    );
  }
}

describe('transient faults are retried', () => {
  it('529 twice then 200 → answers after exactly 3 requests', async () => {
    server.script(FakeAnthropicServer.overloaded(), FakeAnthropicServer.overloaded());
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
    expect(server.messages).toHaveLength(3);
  });

  it('529 forever → ProviderUnavailable after exactly 4 requests (SDK retries are off)', async () => {
    server.setFallback(() => FakeAnthropicServer.overloaded());
    try {
      const err = await fail(provider());
      expect(err).toBeInstanceOf(ProviderUnavailable);
      expect(err.status).toBe(529);
      expect(err.rateLimited).toBe(false);
      expect(err.message).toContain('overloaded_error');
      expect(server.messages).toHaveLength(4);
    } finally {
      server.setFallback((req) => server.defaultReply(req));
    }
  });

  it('backs off 0.5 s doubling by default between attempts', async () => {
    const { waits, runtime } = recordingRuntime();
    server.script(
      FakeAnthropicServer.overloaded(),
      FakeAnthropicServer.error(500, 'api_error'),
      FakeAnthropicServer.error(503, 'api_error'),
    );
    const p = new AnthropicProvider({ apiKey: 'k', baseURL: server.url, runtime });
    await ask(p);
    expect(waits).toEqual([500, 1000, 2000]);
    expect(server.messages).toHaveLength(4);
  });

  it('429 with retry-after 1 (s) waits 1000 ms then succeeds', async () => {
    const { waits, runtime } = recordingRuntime();
    server.script(FakeAnthropicServer.rateLimited(1));
    const r = await ask(provider({ runtime }));
    expect(r.answers.size).toBe(3);
    expect(waits).toEqual([1000]);
    expect(server.messages).toHaveLength(2);
  });

  it('honours retry-after-ms in real time before the next request', async () => {
    server.script(FakeAnthropicServer.rateLimited(undefined, { 'retry-after-ms': '60' }));
    await ask(provider());
    const [first, second] = server.messages;
    expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(55);
  });

  it('retry-after 120 s → ProviderUnavailable(retryAfterMs 120000, rateLimited) with no second request', async () => {
    const { waits, runtime } = recordingRuntime();
    server.script(FakeAnthropicServer.rateLimited(120));
    const err = await fail(provider({ runtime }));
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err.retryAfterMs).toBe(120_000);
    expect(err.rateLimited).toBe(true);
    expect(waits).toEqual([]);
    expect(server.messages).toHaveLength(1);
  });

  it('a 429 that outlives the retries → ProviderUnavailable(rateLimited) so the job defers', async () => {
    server.script(...Array.from({ length: 4 }, () => FakeAnthropicServer.rateLimited(0)));
    const err = await fail(provider());
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err.rateLimited).toBe(true);
    expect(err.retryAfterMs).toBe(0);
    expect(server.messages).toHaveLength(4);
  });

  it('an overloaded_error inside a 200 is retried', async () => {
    server.script(FakeAnthropicServer.errorIn200('overloaded_error'));
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
    expect(server.messages).toHaveLength(2);
  });

  it('a dropped connection is retried', async () => {
    server.script(FakeAnthropicServer.drop());
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
    expect(server.messages).toHaveLength(2);
  });

  it('a connection dropped mid-body is retried', async () => {
    server.script(FakeAnthropicServer.drop(true));
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
    expect(server.messages).toHaveLength(2);
  });

  it('a slow response hits the attempt timeout; the request is aborted before the retry, never two at once', async () => {
    server.script(FakeAnthropicServer.slow(1_000));
    const r = await ask(provider({ perAttemptTimeoutMs: 80 }));
    expect(r.answers.size).toBe(3);
    const [first] = server.messages;
    expect(server.messages).toHaveLength(2);
    expect(first.aborted).toBe(true);
    expectOneAtATime(server.messages);
  });

  it('a server that never answers → ProviderUnavailable after 4 timed-out attempts, one at a time', async () => {
    server.script(...Array.from({ length: 4 }, () => FakeAnthropicServer.hang()));
    const started = performance.now();
    const err = await fail(provider({ perAttemptTimeoutMs: 120 }));
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err.message).toMatch(/timed out/);
    expect(server.messages).toHaveLength(4);
    await until(() => server.messages.every((m) => m.closedAt !== undefined));
    expect(server.messages.every((m) => m.aborted)).toBe(true);
    expectOneAtATime(server.messages);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe('permanent faults are not retried', () => {
  const cases: Array<[string, () => ReturnType<typeof FakeAnthropicServer.error>, new (...a: any[]) => Error, number]> =
    [
      [
        '400 invalid_request_error',
        () => FakeAnthropicServer.error(400, 'invalid_request_error', 'messages: bad'),
        ProviderRefusal,
        400,
      ],
      ['422', () => FakeAnthropicServer.error(422, 'invalid_request_error'), ProviderRefusal, 422],
      ['413 request too large', () => FakeAnthropicServer.error(413, 'request_too_large'), ProviderRefusal, 413],
      [
        '401 authentication_error',
        () => FakeAnthropicServer.error(401, 'authentication_error', 'invalid x-api-key'),
        ProviderMisconfigured,
        401,
      ],
      ['403 permission_error', () => FakeAnthropicServer.error(403, 'permission_error'), ProviderMisconfigured, 403],
      [
        '404 unknown model',
        () => FakeAnthropicServer.error(404, 'not_found_error', 'model: claude-nope'),
        ProviderMisconfigured,
        404,
      ],
      [
        '400 low credit',
        () =>
          FakeAnthropicServer.error(
            400,
            'invalid_request_error',
            'Your credit balance is too low to access the Anthropic API.',
          ),
        ProviderMisconfigured,
        400,
      ],
      [
        '400 billing_error',
        () => FakeAnthropicServer.error(400, 'billing_error', 'billing'),
        ProviderMisconfigured,
        400,
      ],
      ['402 payment required', () => FakeAnthropicServer.error(402, 'billing_error'), ProviderMisconfigured, 402],
      [
        // DESIGN §3.8: the set's fault, not provider-wide.
        '400 rejecting the schema → SchemaRejected',
        () =>
          FakeAnthropicServer.error(
            400,
            'invalid_request_error',
            'output_config.format.schema: Invalid schema: unsupported keyword',
          ),
        SchemaRejected,
        400,
      ],
    ];
  for (const [name, reply, cls, status] of cases) {
    it(`${name} → ${cls.name} after 1 request`, async () => {
      server.script(reply());
      const err = await fail(provider());
      expect(err).toBeInstanceOf(cls);
      expect(err.status).toBe(status);
      expect(server.messages).toHaveLength(1);
    });
  }

  it('an account error code wins over a retryable status', async () => {
    server.script(
      FakeAnthropicServer.errorReply(
        429,
        'rate_limit_error',
        'limit',
        {},
        { error_code: 'enforced_spend_limit_reached' },
      ),
    );
    const err = await fail(provider());
    expect(err).toBeInstanceOf(ProviderMisconfigured);
    expect(server.messages).toHaveLength(1);
  });
});

describe('defective answers', () => {
  const defects: Array<[string, () => any, RegExp]> = [
    ['stop_reason max_tokens', () => FakeAnthropicServer.truncated(), /max_tokens/],
    ['stop_reason refusal', () => FakeAnthropicServer.refusal(), /refusal/],
    ['malformed JSON', () => FakeAnthropicServer.text('{"blocked": {"probability": 0.5}'), /not valid JSON/],
    ['a JSON array', () => FakeAnthropicServer.answer([1, 2]), /not a JSON object/],
    [
      'a wrong kind',
      () => FakeAnthropicServer.answer(aliased({ ...goodAnswers(), blocked: { probabilities: { yes: 1 } } })),
      /"blocked": wrong kind/,
    ],
    [
      'a missing key',
      () => FakeAnthropicServer.answer(aliased({ area: goodAnswers().area, effort: goodAnswers().effort })),
      /"blocked" missing/,
    ],
    [
      'a missing option',
      () =>
        FakeAnthropicServer.answer(
          aliased({ ...goodAnswers(), area: { probabilities: { frontend: 0.5, backend: 0.5 } } }),
        ),
      /"docs" missing/,
    ],
    [
      'probabilities summing to 0.8',
      () =>
        FakeAnthropicServer.answer(
          aliased({ ...goodAnswers(), area: { probabilities: { frontend: 0.5, backend: 0.2, docs: 0.1 } } }),
        ),
      /sum to 0\.8/,
    ],
    [
      'a probability above 1',
      () => FakeAnthropicServer.answer(aliased({ ...goodAnswers(), blocked: { probability: 1.5 } })),
      /not a probability/,
    ],
    ['a tool reply on the text path', () => FakeAnthropicServer.toolAnswer(aliased(goodAnswers())), /no text block/],
  ];
  for (const [name, reply, pattern] of defects) {
    it(`${name} → AnswerDefect, not retried`, async () => {
      server.script(reply());
      const err = await fail(provider());
      expect(err).toBeInstanceOf(AnswerDefect);
      expect(err.message).toMatch(pattern);
      expect(server.messages).toHaveLength(1);
    });
  }

  it('a missing rationale with explain → AnswerDefect', async () => {
    server.script(FakeAnthropicServer.answer(aliased(goodAnswers())));
    const err = await fail(provider(), askOpts({ explain: true }));
    expect(err).toBeInstanceOf(AnswerDefect);
    expect(err.message).toMatch(/rationale/);
  });

  it('extra keys and members are ignored', async () => {
    server.script(
      FakeAnthropicServer.answer(
        aliased({ ...goodAnswers(), unasked: { probability: 0.3 }, blocked: { probability: 0.8, note: 'x' } }),
      ),
    );
    const r = await ask(provider());
    expect([...r.answers.keys()].sort()).toEqual(['area', 'blocked', 'effort']);
  });

  it('probabilities summing to 1.01 are normalised', async () => {
    server.script(
      FakeAnthropicServer.answer(
        aliased({ ...goodAnswers(), area: { probabilities: { frontend: 0.11, backend: 0.7, docs: 0.2 } } }),
      ),
    );
    const r = await ask(provider());
    const a = r.answers.get('area')!.answer;
    if (a.type !== 'choice') throw new Error('expected a choice');
    const sum = Object.values(a.probabilities).reduce((x, y) => x + y, 0);
    expect(sum).toBeCloseTo(1, 12);
    expect(a.probabilities.backend).toBeCloseTo(0.7 / 1.01, 12);
  });
});

describe('abort, beforeSend and budget', () => {
  it('an abort mid-request rejects promptly with the abort reason and sends nothing more', async () => {
    server.script(FakeAnthropicServer.hang());
    const ac = new AbortController();
    const reason = new Error('lease lost');
    setTimeout(() => ac.abort(reason), 30);
    const started = performance.now();
    const err = await fail(provider({ perAttemptTimeoutMs: 5_000 }), askOpts({ signal: ac.signal }));
    expect(err).toBe(reason);
    expect(performance.now() - started).toBeLessThan(1_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(server.messages).toHaveLength(1);
    expect(server.messages[0].aborted).toBe(true);
  });

  it('an abort during the backoff wait rejects at once and starts no further attempt', async () => {
    server.script(FakeAnthropicServer.overloaded());
    const ac = new AbortController();
    const p = provider({ minBackoffMs: 10_000, maxBackoffMs: 10_000 });
    const pending = fail(p, askOpts({ signal: ac.signal }));
    await until(() => server.messages[0]?.closedAt !== undefined);
    await new Promise((r) => setTimeout(r, 20));
    const started = performance.now();
    ac.abort();
    const err = await pending;
    expect(err).toBeInstanceOf(DOMException);
    expect(err.name).toBe('AbortError');
    expect(performance.now() - started).toBeLessThan(500);
    expect(server.messages).toHaveLength(1);
  });

  it('an already aborted signal sends nothing', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(ask(provider(), askOpts({ signal: ac.signal }))).rejects.toThrow();
    expect(server.messages).toHaveLength(0);
  });

  it('beforeSend runs before every attempt', async () => {
    server.script(FakeAnthropicServer.overloaded(), FakeAnthropicServer.drop());
    const seen: number[] = [];
    await ask(provider(), askOpts({ beforeSend: () => void seen.push(server.messages.length) }));
    // Before attempt n the server has seen n−1 requests.
    expect(seen).toEqual([0, 1, 2]);
  });

  it('beforeSend throwing on the 2nd attempt propagates unchanged, with no 2nd request', async () => {
    server.script(FakeAnthropicServer.overloaded());
    const gone = { why: 'item deleted' }; // not even an Error: it must pass through untouched
    let calls = 0;
    const err = await fail(
      provider(),
      askOpts({
        beforeSend: async () => {
          if (++calls === 2) throw gone;
        },
      }),
    );
    expect(err).toBe(gone);
    expect(calls).toBe(2);
    expect(server.messages).toHaveLength(1);
  });

  it('beforeSend throwing a provider-looking error is still not retried', async () => {
    const err = await fail(
      provider(),
      askOpts({
        beforeSend: () => {
          throw new ProviderUnavailable('workspace gone');
        },
      }),
    );
    expect(err.message).toBe('workspace gone');
    expect(server.messages).toHaveLength(0);
  });

  it('an input over budget → ProviderRefusal(overBudget) with 0 requests and no beforeSend', async () => {
    let called = false;
    const err = await fail(provider({ inputBudgetTokens: 500 }), askOpts({ beforeSend: () => void (called = true) }));
    expect(err).toBeInstanceOf(ProviderRefusal);
    expect(err.code).toBe('input_over_budget');
    expect(err.message).toMatch(/exceeds the input budget of 500 tokens/);
    expect(called).toBe(false);
    expect(server.messages).toHaveLength(0);
  });

  it('the default budget admits a large bounded state', async () => {
    const big = JSON.stringify({
      title: 't'.repeat(500),
      body: 'b'.repeat(16_000),
      fields: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`f${i}`, 'v'.repeat(1_000)])),
    });
    const r = await provider().ask(big, questions(), askOpts());
    expect(r.answers.size).toBe(3);
  });
});

describe('schema too complex', () => {
  const tooComplex = () =>
    FakeAnthropicServer.error(
      400,
      'invalid_request_error',
      'output_config.format.schema: Invalid schema: The compiled grammar is too large, which would cause performance issues.',
    );
  const keysOf = (r: RecordedRequest) => promptKeys(r.body.system[0].text);

  it('splits the chunk in halves down to one question per call, merging answers and usage', async () => {
    const qs = new Map<string, Question>([
      ['a', noul('Is A?')],
      ['b', noul('Is B?')],
      ['c', choice('Which C?', { x: 'X', y: 'Y' })],
    ]);
    // Anything with more than one question is "too complex".
    server.setFallback((req) => (keysOf(req).length > 1 ? tooComplex() : FakeAnthropicServer.autoReply(req, {})));
    try {
      const r = await provider().ask(STATE, qs, askOpts());
      expect([...r.answers.keys()].sort()).toEqual(['a', 'b', 'c']);
      expect(server.messages.map(keysOf)).toEqual([['a', 'b', 'c'], ['a', 'b'], ['a'], ['b'], ['c']]);
      expect(r.usage.inputTokens).toBe(300);
      expect(r.usage.outputTokens).toBe(60);
      expect(server.maxInFlight).toBe(1);
    } finally {
      server.setFallback((req) => server.defaultReply(req));
    }
  });

  it('a single question still too complex → ProviderRefusal after 1 request', async () => {
    server.script(tooComplex());
    const err = await provider()
      .ask(STATE, new Map([['a', noul('Is A?')]]), askOpts())
      .catch((e) => e);
    expect(err).toBeInstanceOf(ProviderRefusal);
    expect(err.message).toMatch(/too complex/);
    expect(server.messages).toHaveLength(1);
  });
});
