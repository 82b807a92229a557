import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ANTHROPIC_PROMPT_VERSION } from '../../src/providers/anthropic.js';
import { classifyHttpStatus, SchemaTooComplex } from '../../src/providers/classify.js';
import {
  AnswerDefect,
  ProviderMisconfigured,
  ProviderRefusal,
  ProviderUnavailable,
  SchemaRejected,
} from '../../src/providers/errors.js';
import { OPENAI_PROMPT_VERSION } from '../../src/providers/openai-compatible.js';
import {
  buildAnswerSchema,
  buildSystemPrompt,
  checkInputBudget,
  DEFAULT_INPUT_BUDGET_TOKENS,
  halves,
  parseReply,
  PROMPT_TEMPLATE_VERSION,
} from '../../src/providers/prompt.js';
import { backoffMs, DEFAULT_RETRY_POLICY, parseRetryAfter } from '../../src/providers/retry.js';
import { estimateTokens } from '../../src/providers/provider.js';
import { aliased, goodAnswers, questions } from './support.js';

/** Pure rules of the provider layer: template, schema, parsing, budget, retry arithmetic, classification. */

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('prompt template', () => {
  it('is pinned: editing the rules or the rendering needs a PROMPT_TEMPLATE_VERSION bump', () => {
    // If this fails you changed what the model reads. Bump PROMPT_TEMPLATE_VERSION (which re-asks
    // every item: the version is in every question fingerprint), then update the hashes.
    expect({
      version: PROMPT_TEMPLATE_VERSION,
      plain: sha(buildSystemPrompt(questions(), { explain: false })),
      explain: sha(buildSystemPrompt(questions(), { explain: true })),
      schema: sha(JSON.stringify(buildAnswerSchema(questions(), { explain: true }))),
    }).toEqual({
      version: 2,
      plain: '7ec8ee24238f4afcd2e3b541f994419d00cb334cd616a9ec8066b4286e670ba1',
      explain: '3eb1e86a7e43be3ddcd91d584f661e6071b708254354de760366be94e8a3c3ba',
      schema: '48d64d14008b760796d477a4a7c8d617f91401368587ef63ea60d85f00b28ff1',
    });
    expect(ANTHROPIC_PROMPT_VERSION).toBe('anthropic-v2');
    expect(OPENAI_PROMPT_VERSION).toBe('openai-v2');
  });

  it('renders questions in key order whatever the map order', () => {
    const reversed = new Map([...questions()].reverse());
    expect(buildSystemPrompt(reversed, { explain: false })).toBe(buildSystemPrompt(questions(), { explain: false }));
    expect(JSON.stringify(buildAnswerSchema(reversed, { explain: false }))).toBe(
      JSON.stringify(buildAnswerSchema(questions(), { explain: false })),
    );
  });

  it('appends the schema only when asked to put it in the prompt', () => {
    const schema = buildAnswerSchema(questions(), { explain: false });
    expect(buildSystemPrompt(questions(), { explain: false })).not.toContain('"additionalProperties"');
    expect(buildSystemPrompt(questions(), { explain: false, schemaInPrompt: schema })).toContain(
      JSON.stringify(schema),
    );
  });
});

describe('parseReply', () => {
  it('returns every answer or throws AnswerDefect', () => {
    expect(parseReply(aliased(goodAnswers()), questions(), false).answers.size).toBe(3);
    expect(() => parseReply('text', questions(), false)).toThrow(AnswerDefect);
    expect(() => parseReply({}, questions(), false)).toThrow(AnswerDefect);
  });

  it('requires a string rationale per key with explain, and trims it', () => {
    const withWhy = Object.fromEntries(
      Object.entries(aliased(goodAnswers())).map(([k, v]) => [k, { ...(v as object), rationale: `  because ${k} ` }]),
    );
    expect(parseReply(withWhy, questions(), true).rationales?.get('area')).toBe('because q1'); // read by alias, returned by key
    expect(() => parseReply(aliased(goodAnswers()), questions(), true)).toThrow(/rationale/);
  });
});

describe('halves', () => {
  it('splits in key order, the first half taking the odd key', () => {
    const [a, b] = halves(questions());
    expect([...a.keys()]).toEqual(['area', 'blocked']);
    expect([...b.keys()]).toEqual(['effort']);
  });
});

describe('input budget', () => {
  it('counts system, schema and state, and refuses above the budget with input_over_budget', () => {
    const parts = { system: 'x'.repeat(300), schema: { type: 'object' }, state: 'y'.repeat(600) };
    const estimate = checkInputBudget('t', parts, 10_000);
    expect(estimate).toBe(
      estimateTokens(parts.system) + estimateTokens('{"type":"object"}') + estimateTokens(parts.state),
    );
    expect(() => checkInputBudget('t', parts, estimate)).not.toThrow();
    try {
      checkInputBudget('t', parts, estimate - 1);
      throw new Error('expected a refusal');
    } catch (e) {
      expect(e).toBeInstanceOf(ProviderRefusal);
      expect((e as ProviderRefusal).code).toBe('input_over_budget');
    }
  });

  it('the default covers the largest bounded state in astral characters plus a large prompt', () => {
    // title 500 + body 16000 + 10 × (2000 + 100) + 100 × 1000 + 50 × 200 code points, 2 UTF-16 units each.
    const units = (500 + 16_000 + 10 * 2_100 + 100 * 1_000 + 50 * 200) * 2;
    expect(Math.ceil(units / 3) + 50_000).toBeLessThan(DEFAULT_INPUT_BUDGET_TOKENS);
  });
});

describe('retry arithmetic', () => {
  it('backs off 500 ms doubling to the 8 s cap, jitter only stretching it', () => {
    const p = DEFAULT_RETRY_POLICY;
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffMs(p, n, () => 0))).toEqual([500, 1000, 2000, 4000, 8000, 8000]);
    expect(backoffMs(p, 1, () => 0.999)).toBeLessThanOrEqual(600);
  });

  it('parses retry-after-ms, retry-after seconds and HTTP dates', () => {
    const h = (o: Record<string, string>) => new Headers(o);
    expect(parseRetryAfter(h({ 'retry-after': '1' }))).toBe(1000);
    expect(parseRetryAfter(h({ 'retry-after': '0.5' }))).toBe(500);
    expect(parseRetryAfter(h({ 'retry-after-ms': '250', 'retry-after': '9' }))).toBe(250);
    const now = Date.parse('2026-11-30T00:00:00Z');
    expect(parseRetryAfter(h({ 'retry-after': 'Mon, 30 Nov 2026 00:00:42 GMT' }), now)).toBe(42_000);
    expect(parseRetryAfter(h({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(parseRetryAfter(h({}))).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});

describe('classifyHttpStatus', () => {
  const c = (status: number, info: Parameters<typeof classifyHttpStatus>[2] = {}) =>
    classifyHttpStatus('p', status, info);
  it.each([408, 409, 500, 502, 503, 504, 529])('%i is retryable', (status) => {
    const f = c(status);
    expect(f.retry).toBe(true);
    expect(f.error).toBeInstanceOf(ProviderUnavailable);
  });

  it('429 is retryable and rate limited, with its Retry-After', () => {
    const f = c(429, { headers: new Headers({ 'retry-after': '3' }) });
    expect(f.retry).toBe(true);
    expect(f.error).toMatchObject({ rateLimited: true, retryAfterMs: 3000, status: 429 });
  });

  it('maps the permanent statuses', () => {
    expect(c(400).error).toBeInstanceOf(ProviderRefusal);
    expect(c(422).error).toBeInstanceOf(ProviderRefusal);
    for (const s of [401, 402, 403, 404]) expect(c(s).error).toBeInstanceOf(ProviderMisconfigured);
    expect(c(400, { text: 'The compiled grammar is too large' }).error).toBeInstanceOf(SchemaTooComplex);
    expect(c(400, { text: 'Schema is too complex for compilation' }).error).toBeInstanceOf(SchemaTooComplex);
    // DESIGN §3.8: a rejected schema is the set's fault, not provider-wide.
    expect(c(400, { text: 'output_config.format.schema: Invalid schema' }).error).toBeInstanceOf(SchemaRejected);
    expect(c(400, { text: 'output_config.format.schema: Invalid schema' }).error).not.toBeInstanceOf(
      ProviderMisconfigured,
    );
    expect(c(429, { errorCode: 'insufficient_quota' }).error).toBeInstanceOf(ProviderMisconfigured);
  });

  it('never copies the provider text into the message', () => {
    const f = c(400, {
      text: 'prompt contained SECRET-ITEM-TEXT',
      errorType: 'invalid_request_error',
      requestId: 'req_1',
    });
    expect(f.error.message).toBe('p: HTTP 400 invalid_request_error (request req_1)');
  });
});
