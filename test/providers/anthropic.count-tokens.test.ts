import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  AnthropicProvider,
  buildMessagesRequest,
  countTokensRequest,
  type AnthropicProviderOptions,
} from '../../src/providers/anthropic.js';
import { ProviderMisconfigured, ProviderUnavailable } from '../../src/providers/errors.js';
import { estimateTokens } from '../../src/providers/provider.js';
import { buildAnswerSchema, buildSystemPrompt } from '../../src/providers/prompt.js';
import {
  COUNT_TOKENS_PATH,
  countedCodeUnits,
  fakeCountTokens,
  FAKE_CHARS_PER_TOKEN,
} from '../../src/testing/fake-anthropic-count-tokens.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { askOpts, captureLogger, questions, recordingRuntime, STATE } from './support.js';

/**
 * `AnthropicProvider.countTokens` through the real SDK against the fake server's
 * POST /v1/messages/count_tokens: the count request is the Messages request `ask` sends (without
 * `max_tokens`), it runs under the shared retry policy, and its failures are classified as `ask`'s.
 */

let server: FakeAnthropicServer;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => server.reset());

function provider(over: Partial<AnthropicProviderOptions> = {}): AnthropicProvider {
  return new AnthropicProvider({
    apiKey: 'sk-ant-test',
    baseURL: server.url,
    minBackoffMs: 1,
    maxBackoffMs: 4,
    ...over,
  });
}

const counts = () => server.requestsTo(COUNT_TOKENS_PATH);
const countOpts = (explain?: boolean) => ({ signal: new AbortController().signal, explain });

/** A Messages body without the one field count_tokens does not take. */
function withoutMaxTokens(body: Record<string, unknown>): Record<string, unknown> {
  const { max_tokens: _, ...rest } = body;
  return rest;
}

describe('AnthropicProvider.countTokens', () => {
  for (const mode of [
    { name: 'structured output', over: {} },
    {
      name: 'the forced tool, with explain and another effort',
      over: { useTool: true, effort: 'high' as const },
      explain: true,
    },
    { name: 'no effort', over: { effort: null } },
  ]) {
    it(`counts exactly the Messages request ask sends (${mode.name}): same model, system, messages, schema`, async () => {
      const p = provider({ model: 'claude-haiku-4-5', ...mode.over });
      await p.ask(STATE, questions(), askOpts({ explain: mode.explain }));
      const n = await p.countTokens(STATE, questions(), countOpts(mode.explain));
      const [asked] = server.messages;
      const [counted] = counts();
      expect(counted.method).toBe('POST');
      expect(counted.body).toEqual(withoutMaxTokens(asked.body));
      expect(counted.body.model).toBe('claude-haiku-4-5');
      expect(counted.body.messages).toEqual([{ role: 'user', content: STATE }]);
      expect(counted.body.system).toEqual(asked.body.system);
      // The count is the server's, not a local estimate.
      expect(n).toBe(fakeCountTokens(counted.body));
      expect(n).toBeGreaterThan(0);
    });
  }

  it('the fake counts system + schema + state at 3.6 code units a token, where the heuristic counts 3', async () => {
    const n = await provider().countTokens(STATE, questions(), countOpts());
    const system = buildSystemPrompt(questions(), { explain: false });
    const schema = JSON.stringify(buildAnswerSchema(questions(), { explain: false }));
    expect(countedCodeUnits(counts()[0].body)).toBe(system.length + schema.length + STATE.length);
    expect(n).toBe(Math.ceil((system.length + schema.length + STATE.length) / FAKE_CHARS_PER_TOKEN));
    const heuristic = estimateTokens(system) + estimateTokens(schema) + estimateTokens(STATE);
    expect(heuristic / n).toBeGreaterThan(1.19);
    expect(heuristic / n).toBeLessThan(1.21);
  });

  it('the fake refuses a field count_tokens does not take, as the API does (so copying the Messages body would fail)', async () => {
    const { body } = buildMessagesRequest(STATE, questions(), {
      model: 'claude-haiku-5-5',
      effort: 'low',
      explain: false,
      useTool: false,
    });
    const post = (b: unknown) =>
      fetch(`${server.url}${COUNT_TOKENS_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(b),
      });
    const bad = await post(body);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain('max_tokens');
    const good = await post(countTokensRequest(body));
    expect(good.status).toBe(200);
    expect(await good.json()).toEqual({ input_tokens: fakeCountTokens(countTokensRequest(body)) });
  });

  it('sends nothing for no questions, and nothing once the signal is aborted', async () => {
    expect(await provider().countTokens(STATE, new Map(), countOpts())).toBe(0);
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    await expect(provider().countTokens(STATE, questions(), { signal: ac.signal })).rejects.toThrow('stop');
    expect(counts()).toHaveLength(0);
  });

  it('retries a 429 under the shared policy, honouring Retry-After, one request at a time', async () => {
    const { waits, runtime } = recordingRuntime();
    server.script(FakeAnthropicServer.rateLimited(2), FakeAnthropicServer.overloaded());
    const n = await provider({ runtime }).countTokens(STATE, questions(), countOpts());
    expect(counts()).toHaveLength(3);
    expect(n).toBe(fakeCountTokens(counts()[2].body));
    expect(waits[0]).toBe(2_000);
    expect(server.maxInFlight).toBe(1);
  });

  it('a Retry-After above the cap ends the count at once with ProviderUnavailable(retryAfterMs)', async () => {
    server.script(FakeAnthropicServer.rateLimited(120));
    const err = await provider()
      .countTokens(STATE, questions(), countOpts())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(err).toMatchObject({ rateLimited: true, retryAfterMs: 120_000 });
    expect(counts()).toHaveLength(1);
  });

  it('a 401 is ProviderMisconfigured, not retried, and the message carries no provider text', async () => {
    const { lines, logger } = captureLogger();
    server.script(FakeAnthropicServer.errorReply(401, 'authentication_error', 'invalid x-api-key SECRET-ECHO'));
    const err = await provider({ logger })
      .countTokens(STATE, questions(), countOpts())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderMisconfigured);
    expect(String((err as Error).message)).not.toContain('SECRET-ECHO');
    expect(counts()).toHaveLength(1);
    expect(lines.join('\n')).not.toContain('Fix <login>');
  });

  it('a 200 without a usable input_tokens is never read as a count: retried, then ProviderUnavailable', async () => {
    const bad = (input_tokens: unknown) => ({ kind: 'json' as const, status: 200, body: { input_tokens } });
    server.script(bad(undefined), bad(-1), bad(1.5), bad('12'));
    const err = await provider({ maxAttempts: 4 })
      .countTokens(STATE, questions(), countOpts())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(counts()).toHaveLength(4);
    server.reset();
    server.script(bad(undefined));
    expect(await provider({ maxAttempts: 2 }).countTokens(STATE, questions(), countOpts())).toBe(
      fakeCountTokens(counts()[1].body),
    );
  });

  it('never calls the Messages endpoint (counting asks nothing and is not billed)', async () => {
    await provider().countTokens(STATE, questions(), countOpts());
    expect(server.messages).toHaveLength(0);
    expect(server.requests.map((r) => r.path)).toEqual([COUNT_TOKENS_PATH]);
  });
});
