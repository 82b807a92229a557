import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { choice, noul, type Question } from '../../src/decision/questions.js';
import {
  AnthropicProvider,
  buildMessagesRequest,
  cachedPrefixTokens,
  type AnthropicProviderOptions,
} from '../../src/providers/anthropic.js';
import {
  ANTHROPIC_MIN_CACHEABLE_TOKENS,
  ANTHROPIC_PRICES,
  minCacheablePrefixTokens,
  pricingFor,
} from '../../src/providers/pricing.js';
import { buildAnswerSchema, buildSystemPrompt } from '../../src/providers/prompt.js';
import { estimateTokens } from '../../src/providers/provider.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { FAKE_CACHE_TTL_MS } from '../../src/testing/fake-anthropic-usage.js';
import { askOpts, questions, STATE } from './support.js';

/**
 * DESIGN §9.3, prompt caching only where it can work: the system block carries a cache
 * breakpoint only when the estimated cached prefix (tools, system prompt, output schema) reaches
 * the model's minimum cacheable length from pricing.ts, never for an unknown model; and the fake
 * Anthropic server, with realistic usage on, caches exactly as the API would (a write, then reads
 * within the TTL, nothing below the minimum), so the saving is visible in the provider's usage.
 * Real SDK against the fake server; the fake's cache clock is injected, so nothing sleeps.
 */

const DEFAULT = 'claude-haiku-5-5';
const reqOpts = (over: Partial<Parameters<typeof buildMessagesRequest>[2]> = {}) => ({
  model: DEFAULT,
  effort: 'low' as const,
  explain: false,
  useTool: false,
  ...over,
});

/** A conventions-sized set: `n` noul questions with long instructions (about 600 characters each). */
function longQuestions(n = 40, prefix = 'conv'): Map<string, Question> {
  const body =
    'Every change to the public API is described in the changelog under the release it ships in, with the reason for it, ' +
    'the migration steps for callers, and a link to the discussion that settled it; internal refactors that callers cannot ' +
    'observe are left out, and a deprecation names the release in which the old form goes away. ';
  return new Map(
    Array.from({ length: n }, (_, i) => [
      `${prefix}:${String(i).padStart(3, '0')}`,
      noul(`Does the item break convention ${prefix} ${i}? ${body}${body}`, {
        trueDesc: 'It breaks the convention',
        falseDesc: 'It follows the convention or the convention does not apply',
      }),
    ]),
  );
}

describe('minCacheablePrefixTokens (pricing.ts)', () => {
  it('knows the documented models and the pinned default', () => {
    expect(minCacheablePrefixTokens('anthropic', 'claude-haiku-4-5')).toBe(4096);
    expect(minCacheablePrefixTokens('anthropic', 'claude-opus-4-6')).toBe(4096);
    expect(minCacheablePrefixTokens('anthropic', 'claude-sonnet-4-5')).toBe(1024);
    expect(minCacheablePrefixTokens('anthropic', 'claude-opus-5')).toBe(512);
    expect(minCacheablePrefixTokens('anthropic', 'claude-sonnet-5')).toBe(1024);
    expect(minCacheablePrefixTokens('anthropic', DEFAULT)).toBe(4096);
  });

  it('resolves a dated snapshot id like pricingFor does, and nothing looser', () => {
    expect(minCacheablePrefixTokens('anthropic', 'claude-haiku-4-5-20251001')).toBe(4096);
    expect(minCacheablePrefixTokens('anthropic', 'claude-opus-4-20250514')).toBe(1024);
    expect(minCacheablePrefixTokens('anthropic', 'claude-opus-4-1-20250805')).toBe(1024);
    expect(minCacheablePrefixTokens('anthropic', 'claude-3-5-haiku-20241022')).toBe(2048);
    expect(pricingFor('anthropic', 'claude-haiku-4-5-20251001')).toMatchObject({
      kind: 'priced',
      model: 'claude-haiku-4-5',
    });
    for (const id of ['claude-haiku-4-5-2025', 'claude-haiku-4-5-x', 'claude-haiku-4', 'claude-haiku-4-5-202510011']) {
      expect(minCacheablePrefixTokens('anthropic', id), id).toBeNull();
    }
  });

  it('is null for an unknown model and for every other provider: never guessed', () => {
    expect(minCacheablePrefixTokens('anthropic', 'claude-haiku-9-9')).toBeNull();
    expect(minCacheablePrefixTokens('anthropic', 'constructor')).toBeNull(); // not an Object.prototype member
    expect(minCacheablePrefixTokens('openai', 'claude-haiku-4-5')).toBeNull();
    expect(minCacheablePrefixTokens('fake', DEFAULT)).toBeNull();
  });

  it('has a minimum for every priced model', () => {
    for (const id of Object.keys(ANTHROPIC_PRICES)) expect(ANTHROPIC_MIN_CACHEABLE_TOKENS[id], id).toBeGreaterThan(0);
  });
});

describe('where buildMessagesRequest puts the breakpoint', () => {
  it('a short prompt (three questions) gets none on the default model; a long one gets one, 5-minute by default', () => {
    const short = buildMessagesRequest(STATE, questions(), reqOpts());
    expect(short.prefixTokens).toBeLessThan(4096);
    expect(short.body.system).toEqual([{ type: 'text', text: short.system }]);

    const long = buildMessagesRequest(STATE, longQuestions(), reqOpts());
    expect(long.prefixTokens).toBeGreaterThanOrEqual(4096);
    expect(long.body.system).toEqual([{ type: 'text', text: long.system, cache_control: { type: 'ephemeral' } }]);
  });

  it("places it exactly when the estimate reaches each model's minimum", () => {
    const seen = new Map<number, Set<boolean>>();
    for (const [model, minimum] of Object.entries(ANTHROPIC_MIN_CACHEABLE_TOKENS)) {
      for (const qs of [questions(), longQuestions(3), longQuestions(8), longQuestions()]) {
        const r = buildMessagesRequest(STATE, qs, reqOpts({ model }));
        const placed = (r.body.system as Anthropic.TextBlockParam[])[0].cache_control !== undefined;
        expect(placed, `${model}, ${r.prefixTokens} tokens`).toBe(r.prefixTokens >= minimum);
        seen.set(minimum, (seen.get(minimum) ?? new Set()).add(placed));
      }
    }
    // The fixtures fall on both sides of the 2048 and 4096 minimums; the rules and three questions
    // alone are estimated at about 1150 tokens, so a 512 or 1024 minimum is always reached (by the
    // estimate; the real count is lower, and such a breakpoint writes nothing: free).
    expect(
      [...seen]
        .filter(([m]) => m >= 2048)
        .map(([m, s]) => [m, s.size])
        .sort(),
    ).toEqual([
      [2048, 2],
      [4096, 2],
    ]);
    expect(buildMessagesRequest(STATE, questions(), reqOpts()).prefixTokens).toBeGreaterThan(1024);
  });

  it('an unknown model never gets one, however long the prefix', () => {
    const r = buildMessagesRequest(STATE, longQuestions(80), reqOpts({ model: 'claude-haiku-9-9' }));
    expect(r.prefixTokens).toBeGreaterThan(8192);
    expect((r.body.system as Anthropic.TextBlockParam[])[0]).not.toHaveProperty('cache_control');
  });

  it('ttl 1h only when asked (batch requests)', () => {
    const r = buildMessagesRequest(STATE, longQuestions(), reqOpts({ cacheTtl: '1h' }));
    expect((r.body.system as Anthropic.TextBlockParam[])[0].cache_control).toEqual({ type: 'ephemeral', ttl: '1h' });
    const s = buildMessagesRequest(STATE, questions(), reqOpts({ cacheTtl: '1h' }));
    expect((s.body.system as Anthropic.TextBlockParam[])[0]).not.toHaveProperty('cache_control');
  });

  it('counts the output schema in the prefix: a system prompt under the minimum plus its schema reaches it', () => {
    // Choice questions with many options: their schema is large against their prompt text.
    const options = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`option_${String(i).padStart(2, '0')}`, `meaning ${i}`]),
    );
    let qs: Map<string, Question>;
    for (let n = 1; ; n++) {
      qs = new Map(
        Array.from(
          { length: n },
          (_, i) => [`pick${String(i).padStart(3, '0')}`, choice(`Which option fits? ${i}`, options)] as const,
        ),
      );
      const system = estimateTokens(buildSystemPrompt(qs, { explain: false }));
      const schema = estimateTokens(JSON.stringify(buildAnswerSchema(qs, { explain: false })));
      if (system + schema >= 4096) {
        expect(system).toBeLessThan(4096);
        break;
      }
    }
    const r = buildMessagesRequest(STATE, qs, reqOpts());
    expect((r.body.system as Anthropic.TextBlockParam[])[0].cache_control).toEqual({ type: 'ephemeral' });
  });

  it('on the forced-tool path, counts the tool definition (it precedes the system prompt)', () => {
    const qs = longQuestions(8);
    const plain = buildMessagesRequest(STATE, qs, reqOpts({ useTool: true }));
    expect(plain.body.tools).toHaveLength(1);
    expect(plain.prefixTokens).toBe(estimateTokens(JSON.stringify(plain.body.tools)) + estimateTokens(plain.system));
    expect(cachedPrefixTokens({ system: plain.body.system })).toBeLessThan(plain.prefixTokens);
  });

  it('keeps the prefix item-independent and in a stable order: the same questions give the same bytes', () => {
    const a = longQuestions(20, 'conv');
    const b = longQuestions(20, 'style');
    // Co-asking (DESIGN §7.2): keys of two sets, merged in either order.
    const ab = new Map([...a, ...b]);
    const ba = new Map([...[...b].reverse(), ...a]);
    const one = buildMessagesRequest(STATE, ab, reqOpts());
    const two = buildMessagesRequest('{"title":"another item","body":"other text"}', ba, reqOpts());
    expect(JSON.stringify(two.body.system)).toBe(JSON.stringify(one.body.system));
    expect(JSON.stringify(two.body.output_config)).toBe(JSON.stringify(one.body.output_config));
    expect(one.system).not.toContain('Fix <login>');
    expect(two.body.messages).toEqual([{ role: 'user', content: '{"title":"another item","body":"other text"}' }]);
  });
});

describe('through the SDK against the fake server with realistic usage', () => {
  let server: FakeAnthropicServer;
  let now = 1_000_000;
  beforeAll(async () => {
    server = await FakeAnthropicServer.start({ realisticUsage: { now: () => now } });
  });
  afterAll(async () => server.close());
  beforeEach(() => {
    server.reset();
    server.usageModel!.reset();
    now = 1_000_000;
  });

  const provider = (over: Partial<AnthropicProviderOptions> = {}) =>
    new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: server.url, minBackoffMs: 1, maxBackoffMs: 4, ...over });
  const client = () => new Anthropic({ apiKey: 'sk-ant-test', baseURL: server.url, maxRetries: 0 });
  const other =
    '{"title":"a different item","collection":"bugs","fields":{},"body":"more text here","recent_trail":[]}';

  it('a long prefix is written once, then read by the next items within 5 minutes, and written again after', async () => {
    const qs = longQuestions();
    const p = provider();
    const { prefixTokens } = buildMessagesRequest(STATE, qs, reqOpts());

    const first = await p.ask(STATE, qs, askOpts());
    expect(first.usage).toMatchObject({
      cacheWriteTokens: prefixTokens,
      cacheReadTokens: 0,
      inputTokens: estimateTokens(STATE),
    });

    now += 4 * 60_000;
    const second = await p.ask(other, qs, askOpts());
    expect(second.usage).toMatchObject({
      cacheWriteTokens: 0,
      cacheReadTokens: prefixTokens,
      inputTokens: estimateTokens(other),
    });

    now += 4 * 60_000; // 8 minutes after the write, 4 after the read that refreshed it
    expect((await p.ask(STATE, qs, askOpts())).usage).toMatchObject({
      cacheWriteTokens: 0,
      cacheReadTokens: prefixTokens,
    });

    now += FAKE_CACHE_TTL_MS['5m'] + 1;
    expect((await p.ask(STATE, qs, askOpts())).usage).toMatchObject({
      cacheWriteTokens: prefixTokens,
      cacheReadTokens: 0,
    });
    expect(server.messages.every((r) => r.body.system[0].cache_control?.type === 'ephemeral')).toBe(true);
  });

  it('different questions are a different prefix', async () => {
    const p = provider();
    const a = await p.ask(STATE, longQuestions(40, 'conv'), askOpts());
    const b = await p.ask(STATE, longQuestions(40, 'style'), askOpts());
    expect(a.usage.cacheWriteTokens).toBeGreaterThan(0);
    expect(b.usage.cacheWriteTokens).toBeGreaterThan(0);
    expect(b.usage.cacheReadTokens).toBe(0);
  });

  it('a short prompt carries no breakpoint and is never cached: the whole input is billed every time', async () => {
    const p = provider();
    const { prefixTokens } = buildMessagesRequest(STATE, questions(), reqOpts());
    for (let i = 0; i < 3; i++) {
      const r = await p.ask(STATE, questions(), askOpts());
      expect(r.usage).toMatchObject({
        cacheWriteTokens: 0,
        cacheReadTokens: 0,
        inputTokens: prefixTokens + estimateTokens(STATE),
      });
    }
    expect(server.messages.map((r) => r.body.system[0].cache_control)).toEqual([undefined, undefined, undefined]);
    expect(server.usageModel).toMatchObject({ writes: 0, reads: 0 });
  });

  it('an unknown model: no breakpoint is sent, and none would be cached', async () => {
    const qs = longQuestions();
    const r = await provider({ model: 'claude-haiku-9-9' }).ask(STATE, qs, askOpts());
    expect(server.messages[0].body.system[0]).not.toHaveProperty('cache_control');
    expect(r.usage).toMatchObject({ cacheWriteTokens: 0, cacheReadTokens: 0 });
  });

  it("the fake caches nothing below the model's minimum, even behind a breakpoint", async () => {
    const c = client();
    const body = {
      model: DEFAULT,
      max_tokens: 64,
      system: [
        {
          type: 'text' as const,
          text: buildSystemPrompt(questions(), { explain: false }),
          cache_control: { type: 'ephemeral' as const },
        },
      ],
      messages: [{ role: 'user' as const, content: STATE }],
    };
    for (let i = 0; i < 2; i++) {
      const m = await c.messages.create(body);
      expect(m.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    }
    // The same prefix on a model with a lower minimum (Opus 5: 512) is cached.
    const opus = [
      await c.messages.create({ ...body, model: 'claude-opus-5' }),
      await c.messages.create({ ...body, model: 'claude-opus-5' }),
    ];
    expect(opus[0].usage.cache_creation_input_tokens).toBeGreaterThan(512);
    expect(opus[1].usage.cache_read_input_tokens).toBe(opus[0].usage.cache_creation_input_tokens);
    // A model without a known minimum caches nothing, however long the prefix behind the breakpoint.
    const long = buildMessagesRequest(STATE, longQuestions(), reqOpts()).body;
    for (let i = 0; i < 2; i++) {
      const m = await c.messages.create({ ...long, model: 'claude-haiku-9-9' });
      expect(m.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    }
  });

  it("a batch request's 1-hour breakpoint still reads after 30 minutes", async () => {
    const c = client();
    const { body, prefixTokens } = buildMessagesRequest(STATE, longQuestions(), reqOpts({ cacheTtl: '1h' }));
    const w = await c.messages.create(body);
    expect(w.usage.cache_creation_input_tokens).toBe(prefixTokens);
    expect(w.usage.cache_creation).toEqual({ ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: prefixTokens });
    now += 30 * 60_000;
    const r = await c.messages.create({ ...body, messages: [{ role: 'user', content: other }] });
    expect(r.usage.cache_read_input_tokens).toBe(prefixTokens);
  });

  it('off by default: a server without realistic usage reports the fixed 100 / 20', async () => {
    const plain = await FakeAnthropicServer.start();
    try {
      const r = await new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: plain.url }).ask(
        STATE,
        longQuestions(),
        askOpts(),
      );
      expect(r.usage).toEqual({ inputTokens: 100, outputTokens: 20, cacheReadTokens: 0, cacheWriteTokens: 0 });
      expect(plain.messages[0].body.system[0].cache_control).toEqual({ type: 'ephemeral' });
    } finally {
      await plain.close();
    }
  });
});
