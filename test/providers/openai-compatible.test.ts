import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  AnswerDefect,
  ProviderMisconfigured,
  ProviderRefusal,
  ProviderUnavailable,
} from '../../src/providers/errors.js';
import {
  OpenAICompatibleProvider,
  RESPONSE_FORMAT_NAME,
  unwrapJsonText,
  type OpenAICompatibleProviderOptions,
} from '../../src/providers/openai-compatible.js';
import { ANSWERING_RULES, buildAnswerSchema, maxTokensFor } from '../../src/providers/prompt.js';
import { FakeOpenAIServer } from '../../src/testing/fake-openai-server.js';
import { aliased, askOpts, captureLogger, goodAnswers, questions, recordingRuntime, STATE, until } from './support.js';

/** The OpenAI-compatible provider against a fake chat-completions server. */

let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await FakeOpenAIServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.reset();
  server.rejectJsonSchema = false;
});

function provider(over: Partial<OpenAICompatibleProviderOptions> = {}): OpenAICompatibleProvider {
  return new OpenAICompatibleProvider({
    baseURL: server.baseURL,
    model: 'qwen3:8b',
    minBackoffMs: 1,
    maxBackoffMs: 4,
    perAttemptTimeoutMs: 2_000,
    runtime: { random: () => 0 },
    ...over,
  });
}
const ask = (p: OpenAICompatibleProvider, opts = askOpts()) => p.ask(STATE, questions(), opts);
const fail = (p: OpenAICompatibleProvider, opts = askOpts()) =>
  ask(p, opts).then(
    () => {
      throw new Error('expected the ask to fail');
    },
    (e: unknown) => e as any,
  );

describe('request', () => {
  it('sends rules + questions as system, the state bytes exactly as user, and a strict json_schema format', async () => {
    await ask(provider({ apiKey: 'sk-local' }));
    const [req] = server.completions;
    expect(req.method).toBe('POST');
    expect(req.body.model).toBe('qwen3:8b');
    expect(req.body.messages).toHaveLength(2);
    expect(req.body.messages[0].role).toBe('system');
    expect(req.body.messages[0].content.startsWith(ANSWERING_RULES)).toBe(true);
    expect(req.body.messages[1]).toEqual({ role: 'user', content: STATE });
    expect(req.body.response_format).toEqual({
      type: 'json_schema',
      json_schema: {
        name: RESPONSE_FORMAT_NAME,
        strict: true,
        schema: buildAnswerSchema(questions(), { explain: false }),
      },
    });
    expect(req.body.temperature).toBe(0);
    expect(req.body.max_tokens).toBe(maxTokensFor(questions(), false));
    expect(req.body.stream).toBe(false);
    expect(req.headers.authorization).toBe('Bearer sk-local');
  });

  it('sends no authorization without a key, no temperature when null, and max_completion_tokens when asked', async () => {
    await ask(provider({ temperature: null, maxTokensParam: 'max_completion_tokens' }));
    const [req] = server.completions;
    expect(req.headers.authorization).toBeUndefined();
    expect(req.body).not.toHaveProperty('temperature');
    expect(req.body).not.toHaveProperty('max_tokens');
    expect(req.body.max_completion_tokens).toBe(maxTokensFor(questions(), false));
  });

  it('derives answers, usage with cached tokens, and the response model', async () => {
    server.script(
      FakeOpenAIServer.answer(aliased(goodAnswers()), {
        model: 'qwen3:8b-q4_K_M',
        usage: { prompt_tokens: 900, completion_tokens: 40, prompt_tokens_details: { cached_tokens: 512 } },
      }),
    );
    const r = await ask(provider());
    expect(r.responseModel).toBe('qwen3:8b-q4_K_M');
    expect(r.usage).toEqual({ inputTokens: 900, outputTokens: 40, cacheReadTokens: 512, cacheWriteTokens: 0 });
    expect(r.answers.get('area')!.answer).toMatchObject({ type: 'choice', choice: 'backend' });
  });

  it('refuses a -latest alias and a missing model at construction', () => {
    expect(() => provider({ model: 'chatgpt-4o-latest' })).toThrow(ProviderMisconfigured);
    expect(() => provider({ model: '' })).toThrow(ProviderMisconfigured);
    expect(() => provider({ model: 'qwen3:latest' })).not.toThrow();
    const p = provider();
    expect(p.name).toBe('openai');
    expect(p.effort).toBeNull();
    expect(p.promptVersion).toBe('openai-v2');
  });
});

describe('response-format fallback', () => {
  it('a 400 naming json_schema falls back to json_object with the schema in the prompt, and stays there', async () => {
    server.rejectJsonSchema = true;
    const { lines, logger } = captureLogger();
    const p = provider({ logger });
    const r = await ask(p);
    expect(r.answers.size).toBe(3);
    const [first, second] = server.completions;
    expect(server.completions).toHaveLength(2);
    expect(first.body.response_format.type).toBe('json_schema');
    expect(second.body.response_format).toEqual({ type: 'json_object' });
    expect(second.body.messages[0].content).toContain(
      JSON.stringify(buildAnswerSchema(questions(), { explain: false })),
    );
    expect(second.body.messages[1]).toEqual({ role: 'user', content: STATE });
    expect(p.responseFormat).toBe('json_object');
    expect(lines.join('\n')).toContain('falling back to json_object');

    server.reset();
    await ask(p);
    expect(server.completions).toHaveLength(1);
    expect(server.completions[0].body.response_format).toEqual({ type: 'json_object' });
  });

  it('a 400 about something else is a refusal, with no fallback', async () => {
    server.script(FakeOpenAIServer.error(400, 'invalid_request_error', 'context length exceeded'));
    const p = provider();
    const err = await fail(p);
    expect(err).toBeInstanceOf(ProviderRefusal);
    expect(server.completions).toHaveLength(1);
    expect(p.responseFormat).toBe('json_schema');
  });

  it('unwraps a fenced or <think>-prefixed reply', () => {
    expect(unwrapJsonText('```json\n{"a":1}\n```')).toBe('{"a":1}');
    expect(unwrapJsonText('<think>hmm</think>\n{"a":1}')).toBe('{"a":1}');
    expect(unwrapJsonText(' {"a":1} ')).toBe('{"a":1}');
  });

  it('accepts a fenced reply end to end', async () => {
    server.script(FakeOpenAIServer.text('```json\n' + JSON.stringify(aliased(goodAnswers())) + '\n```'));
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
  });
});

describe('faults', () => {
  it('500 twice then 200 → answers after exactly 3 requests', async () => {
    server.script(FakeOpenAIServer.error(500, 'server_error'), FakeOpenAIServer.error(502, 'bad_gateway'));
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
    expect(server.completions).toHaveLength(3);
  });

  it('503 forever → ProviderUnavailable after 4 requests', async () => {
    server.script(...Array.from({ length: 4 }, () => FakeOpenAIServer.error(503, 'server_error')));
    const err = await fail(provider());
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err.status).toBe(503);
    expect(server.completions).toHaveLength(4);
  });

  it('429 with retry-after 2 waits 2000 ms; one above the cap defers at once', async () => {
    const { waits, runtime } = recordingRuntime();
    server.script(FakeOpenAIServer.error(429, 'rate_limit_exceeded', 'slow down', { 'retry-after': '2' }));
    await ask(provider({ runtime }));
    expect(waits).toEqual([2000]);
    expect(server.completions).toHaveLength(2);

    server.reset();
    server.script(FakeOpenAIServer.error(429, 'rate_limit_exceeded', 'slow down', { 'retry-after': '45' }));
    const err = await fail(provider({ runtime }));
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err).toMatchObject({ retryAfterMs: 45_000, rateLimited: true });
    expect(server.completions).toHaveLength(1);
  });

  it.each([
    [401, 'invalid_api_key', null, ProviderMisconfigured],
    [404, 'not_found_error', null, ProviderMisconfigured],
    [429, 'insufficient_quota', 'insufficient_quota', ProviderMisconfigured],
    [422, 'invalid_request_error', null, ProviderRefusal],
  ] as const)('%i %s → %o after 1 request', async (status, type, code, cls) => {
    server.script(FakeOpenAIServer.error(status, type, 'x', {}, code));
    const err = await fail(provider());
    expect(err).toBeInstanceOf(cls);
    expect(server.completions).toHaveLength(1);
  });

  it('a non-JSON 200 (a proxy page) is retried', async () => {
    server.script({ kind: 'raw', status: 200, text: '<html>gateway</html>' });
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
    expect(server.completions).toHaveLength(2);
  });

  it('a dropped connection is retried, also mid-body', async () => {
    server.script(FakeOpenAIServer.drop(), FakeOpenAIServer.drop(true));
    const r = await ask(provider());
    expect(r.answers.size).toBe(3);
    expect(server.completions).toHaveLength(3);
  });

  it('a slow response hits the attempt timeout and is aborted before the retry', async () => {
    server.script(FakeOpenAIServer.slow(1_000));
    const r = await ask(provider({ perAttemptTimeoutMs: 80 }));
    expect(r.answers.size).toBe(3);
    const [first, second] = server.completions;
    expect(first.aborted).toBe(true);
    expect(first.closedAt!).toBeLessThanOrEqual(second.receivedAt);
    expect(server.maxInFlight).toBe(1);
  });

  it('an abort mid-request rejects with the reason and sends nothing more', async () => {
    server.script(FakeOpenAIServer.hang());
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('shutdown')), 30);
    const err = await fail(provider({ perAttemptTimeoutMs: 5_000 }), askOpts({ signal: ac.signal }));
    expect(err.message).toBe('shutdown');
    await until(() => server.completions[0]?.closedAt !== undefined);
    expect(server.completions).toHaveLength(1);
  });

  it('beforeSend throwing on the 2nd attempt propagates unchanged with no 2nd request', async () => {
    server.script(FakeOpenAIServer.error(500, 'server_error'));
    const gone = new Error('item deleted');
    let calls = 0;
    const err = await fail(
      provider(),
      askOpts({
        beforeSend: () => {
          if (++calls === 2) throw gone;
        },
      }),
    );
    expect(err).toBe(gone);
    expect(server.completions).toHaveLength(1);
  });

  it('an input over budget is refused with 0 requests', async () => {
    const err = await fail(provider({ inputBudgetTokens: 100 }));
    expect(err).toBeInstanceOf(ProviderRefusal);
    expect(err.code).toBe('input_over_budget');
    expect(server.completions).toHaveLength(0);
  });
});

describe('defective answers', () => {
  it.each([
    [
      'finish_reason length',
      () => FakeOpenAIServer.text('{"blocked":', { finishReason: 'length' }),
      /finish_reason length/,
    ],
    ['content_filter', () => FakeOpenAIServer.text('', { finishReason: 'content_filter' }), /content_filter/],
    ['a refusal', () => FakeOpenAIServer.completion(undefined, null, { refusal: 'I cannot help' }), /refusal/],
    ['malformed JSON', () => FakeOpenAIServer.text('{"blocked": {"probability": 0.5'), /not valid JSON/],
    ['a missing key', () => FakeOpenAIServer.answer(aliased({ blocked: { probability: 0.5 } })), /"area" missing/],
    [
      'a bad sum',
      () =>
        FakeOpenAIServer.answer(
          aliased({ ...goodAnswers(), effort: { probabilities: { '0': 0.9, '1': 0.9, '2': 0.9 } } }),
        ),
      /sum to/,
    ],
  ])('%s → AnswerDefect, not retried', async (_name, reply, pattern) => {
    server.script(reply() as any);
    const err = await fail(provider());
    expect(err).toBeInstanceOf(AnswerDefect);
    expect(err.message).toMatch(pattern);
    expect(server.completions).toHaveLength(1);
  });
});

describe('doctor', () => {
  it('lists the models and says whether the configured one is there', async () => {
    expect(await provider().doctor()).toEqual({ model: 'qwen3:8b', listed: true, models: 2 });
    expect((await provider({ model: 'mistral:7b' }).doctor()).listed).toBe(false);
    server.script(FakeOpenAIServer.error(401, 'invalid_api_key'));
    await expect(provider().doctor()).rejects.toBeInstanceOf(ProviderMisconfigured);
  });
});
