import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { noul, type Question } from '../../src/decision/questions.js';
import {
  ANSWER_TOOL_NAME,
  ANTHROPIC_PROMPT_VERSION,
  AnthropicProvider,
  type AnthropicProviderOptions,
} from '../../src/providers/anthropic.js';
import { ProviderMisconfigured, ProviderRefusal } from '../../src/providers/errors.js';
import { ANSWERING_RULES, maxTokensFor } from '../../src/providers/prompt.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { aliased, allKeys, askOpts, goodAnswers, objectSchemas, questions, STATE } from './support.js';

/** What the Anthropic provider sends, and how it reads a good reply. */

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

describe('AnthropicProvider request', () => {
  it('sends the state bytes exactly as the only user message', async () => {
    await provider().ask(STATE, questions(), askOpts());
    const [req] = server.messages;
    expect(req.body.messages).toEqual([{ role: 'user', content: STATE }]);
    expect(req.body.messages[0].content).toBe(STATE);
  });

  it("puts rules and questions in one system block, without a breakpoint below the model's cacheable minimum", async () => {
    await provider().ask(STATE, questions(), askOpts());
    const { system } = server.messages[0].body;
    expect(system).toHaveLength(1);
    expect(system[0].type).toBe('text');
    // DESIGN §9.3: three questions are far below Haiku 5.5's 4096 tokens (anthropic.cache.test.ts has the rest).
    expect(system[0]).not.toHaveProperty('cache_control');
    expect(system[0].text.startsWith(ANSWERING_RULES)).toBe(true);
    for (const key of ['blocked', 'area', 'effort']) expect(system[0].text).toContain(`"${key}"`);
    // The state is never in the cached prefix.
    expect(system[0].text).not.toContain('Fix <login>');
  });

  it('disables thinking and sends no sampling parameters', async () => {
    await provider().ask(STATE, questions(), askOpts());
    const { body } = server.messages[0];
    expect(body.thinking).toEqual({ type: 'disabled' });
    for (const k of ['temperature', 'top_p', 'top_k']) expect(body).not.toHaveProperty(k);
  });

  it('asks for structured output with the configured effort, model and a sized max_tokens', async () => {
    const p = provider({ model: 'claude-haiku-4-5', effort: 'medium' });
    await p.ask(STATE, questions(), askOpts());
    const [req] = server.messages;
    expect(req.body.model).toBe('claude-haiku-4-5');
    expect(req.body.output_config.format.type).toBe('json_schema');
    expect(req.body.output_config.effort).toBe('medium');
    expect(req.body.max_tokens).toBe(maxTokensFor(questions(), false));
    expect(req.body).not.toHaveProperty('tools');
    expect(req.body).not.toHaveProperty('tool_choice');
    // SDK 1.14 sends the key as a bearer token (older versions used x-api-key).
    expect(String(req.headers.authorization ?? req.headers['x-api-key'])).toContain('sk-ant-test');
    expect(req.headers['anthropic-version']).toBeDefined();
    expect(req.headers['anthropic-beta']).toBeUndefined();
  });

  it('leaves effort out when configured as null', async () => {
    await provider({ effort: null }).ask(STATE, questions(), askOpts());
    expect(server.messages[0].body.output_config).not.toHaveProperty('effort');
  });

  it('max_tokens grows per question and with explain', () => {
    const one = new Map([['a', noul('Is it?')]]);
    expect(maxTokensFor(questions(), false)).toBeGreaterThan(maxTokensFor(one, false));
    expect(maxTokensFor(questions(), true)).toBeGreaterThan(maxTokensFor(questions(), false));
  });

  it('builds one required property per key, and per option or level index, with no bounds', async () => {
    await provider().ask(STATE, questions(), askOpts());
    const schema = server.messages[0].body.output_config.format.schema;
    // Property names are the aliases q1…qN in key order (area, blocked, effort), DESIGN §9.2.
    expect(schema.required).toEqual(['q1', 'q2', 'q3']);
    expect(schema.properties.q2).toEqual({
      type: 'object',
      properties: { probability: { type: 'number' } },
      required: ['probability'],
      additionalProperties: false,
    });
    expect(schema.properties.q1.properties.probabilities).toEqual({
      type: 'object',
      properties: { backend: { type: 'number' }, docs: { type: 'number' }, frontend: { type: 'number' } },
      required: ['backend', 'docs', 'frontend'],
      additionalProperties: false,
    });
    expect(schema.properties.q3.properties.probabilities.required).toEqual(['0', '1', '2']);
    for (const o of objectSchemas(schema)) {
      expect(o.additionalProperties).toBe(false);
      expect([...o.required].sort()).toEqual(Object.keys(o.properties).sort());
    }
    const keys = allKeys(schema);
    for (const bound of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minItems', 'maxItems']) {
      expect(keys.has(bound)).toBe(false);
    }
    expect(keys.has('rationale')).toBe(false);
  });

  it('adds a required rationale per question only with explain, and returns it', async () => {
    const r = await provider().ask(STATE, questions(), askOpts({ explain: true }));
    const schema = server.messages[0].body.output_config.format.schema;
    for (const alias of ['q1', 'q2', 'q3']) {
      expect(schema.properties[alias].properties.rationale).toEqual({ type: 'string' });
      expect(schema.properties[alias].required).toContain('rationale');
    }
    expect(r.rationales?.get('area')).toBe('auto rationale for q1');
  });

  it('uses a forced tool with the same schema when useTool is set', async () => {
    const p = provider({ useTool: true });
    const r = await p.ask(STATE, questions(), askOpts());
    const { body } = server.messages[0];
    expect(body.tools).toHaveLength(1);
    expect(body.tools[0].name).toBe(ANSWER_TOOL_NAME);
    expect(body.tools[0].input_schema.required).toEqual(['q1', 'q2', 'q3']);
    expect(body.tool_choice).toEqual({ type: 'tool', name: ANSWER_TOOL_NAME, disable_parallel_tool_use: true });
    expect(body.thinking).toEqual({ type: 'disabled' });
    expect(body.output_config?.format).toBeUndefined();
    expect(body.messages).toEqual([{ role: 'user', content: STATE }]);
    expect(r.answers.size).toBe(3);
  });
});

describe('AnthropicProvider reply', () => {
  it('derives answers, reports the response model and usage with cache tokens', async () => {
    server.script(
      FakeAnthropicServer.answer(aliased(goodAnswers()), {
        model: 'claude-haiku-5-5-20261007',
        usage: {
          input_tokens: 1200,
          output_tokens: 60,
          cache_read_input_tokens: 900,
          cache_creation_input_tokens: null,
        },
      }),
    );
    const r = await provider().ask(STATE, questions(), askOpts());
    expect(r.responseModel).toBe('claude-haiku-5-5-20261007');
    expect(r.usage).toEqual({ inputTokens: 1200, outputTokens: 60, cacheReadTokens: 900, cacheWriteTokens: 0 });
    expect(r.answers.get('blocked')).toEqual({ answer: { type: 'noul', noul: 0.8 }, confidence: null });
    const area = r.answers.get('area')!;
    expect(area.answer).toMatchObject({ type: 'choice', choice: 'backend' });
    expect(area.confidence).toBeCloseTo(0.7);
    const effort = r.answers.get('effort')!;
    expect(effort.answer).toMatchObject({ type: 'score', legend: { '0': 'small', '1': 'medium', '2': 'large' } });
    if (effort.answer.type === 'score') expect(effort.answer.score).toBeCloseTo(0.3 + 2 * 0.5);
    expect(r.rationales).toBeUndefined();
  });

  it('selects content blocks by type, not position', async () => {
    server.script(
      FakeAnthropicServer.answer(aliased(goodAnswers()), {
        leadingBlocks: [{ type: 'thinking', thinking: '{"blocked":{"probability":0.01}}', signature: 'sig' }],
      }),
    );
    const r = await provider().ask(STATE, questions(), askOpts());
    expect(r.answers.get('blocked')!.answer).toEqual({ type: 'noul', noul: 0.8 });
  });

  it('reads the tool_use input on the tool path', async () => {
    server.script(
      FakeAnthropicServer.toolAnswer(aliased(goodAnswers()), {
        leadingBlocks: [{ type: 'text', text: 'Sure!', citations: null }],
      }),
    );
    const r = await provider({ useTool: true }).ask(STATE, questions(), askOpts());
    expect(r.answers.get('area')!.answer).toMatchObject({ choice: 'backend' });
  });

  it('sends nothing for an empty question map', async () => {
    const r = await provider().ask(STATE, new Map(), askOpts());
    expect(r.answers.size).toBe(0);
    expect(server.messages).toHaveLength(0);
  });

  it('refuses an invalid question before any request', async () => {
    const bad = new Map<string, Question>([
      ['x', { kind: 'choice', instructions: 'Which?', options: { only: 'one' } }],
    ]);
    const err = await provider()
      .ask(STATE, bad, askOpts())
      .catch((e) => e);
    expect(err).toBeInstanceOf(ProviderRefusal);
    expect(err.message).toContain('"x"');
    expect(server.messages).toHaveLength(0);
  });
});

describe('AnthropicProvider configuration', () => {
  it('refuses a -latest alias at construction', () => {
    expect(() => provider({ model: 'claude-haiku-latest' })).toThrow(ProviderMisconfigured);
    expect(() => provider({ model: 'claude-3-5-haiku-latest' })).toThrow(/-latest alias/);
    expect(() => provider({ model: 'claude-haiku-5-5' })).not.toThrow();
  });

  it('refuses a blank key, and names a bad numeric option', () => {
    expect(() => new AnthropicProvider({ apiKey: ' ', baseURL: server.url })).toThrow(ProviderMisconfigured);
    expect(() => provider({ maxAttempts: 0 })).toThrow(/maxAttempts/);
    expect(() => provider({ perAttemptTimeoutMs: 1.5 })).toThrow(/perAttemptTimeoutMs/);
  });

  it('exposes name, defaults and the fingerprint context', () => {
    const p = new AnthropicProvider({ apiKey: 'k', baseURL: server.url });
    expect(p.name).toBe('anthropic');
    expect(p.model).toBe('claude-haiku-5-5');
    expect(p.effort).toBe('low');
    expect(p.promptVersion).toBe(ANTHROPIC_PROMPT_VERSION);
    // 4 attempts × 60 s + 3 waits of at most the 30 s Retry-After cap.
    expect(p.worstCaseCallMs).toBe(4 * 60_000 + 3 * 30_000);
    expect(
      provider({ maxAttempts: 2, perAttemptTimeoutMs: 100, retryAfterCapMs: 50, maxBackoffMs: 10 }).worstCaseCallMs,
    ).toBe(2 * 100 + 50);
  });

  it('doctor finds the configured model, and maps an unknown one and a bad key', async () => {
    expect(await provider().doctor()).toEqual({ model: 'claude-haiku-5-5', displayName: 'Fake claude-haiku-5-5' });
    await expect(provider({ model: 'claude-nope-1' }).doctor()).rejects.toBeInstanceOf(ProviderMisconfigured);
    server.script(FakeAnthropicServer.error(401, 'authentication_error', 'invalid x-api-key'));
    await expect(provider().doctor()).rejects.toBeInstanceOf(ProviderMisconfigured);
  });
});

describe('AnthropicProvider usage and provider text', () => {
  it('counts a broken usage block (negative, string) as 0, never lowering or corrupting spend', async () => {
    server.script(
      FakeAnthropicServer.auto({
        usage: { input_tokens: -500, output_tokens: '7' as never, cache_read_input_tokens: 12.9 },
      }),
    );
    const r = await provider().ask(STATE, questions(), askOpts());
    expect(r.usage).toEqual({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 12, cacheWriteTokens: 0 });
  });

  it('keeps provider-chosen error types and request ids out of messages unless they are plain identifiers', async () => {
    const { safeToken } = await import('../../src/providers/classify.js');
    expect(safeToken('overloaded_error')).toBe('overloaded_error');
    expect(safeToken('x'.repeat(65))).toBe('[unprintable]');
    const weird = () =>
      FakeAnthropicServer.errorReply(500, 'the item said SECRET words', 'm', { 'request-id': 'req SECRET id' });
    server.script(weird(), weird(), weird(), weird());
    const err = await provider()
      .ask(STATE, questions(), askOpts())
      .catch((e: Error) => e);
    expect((err as Error).message).toMatch(/HTTP 500/);
    expect((err as Error).message).not.toContain('SECRET');
  });
});
