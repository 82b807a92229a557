import type { Question } from '../decision/questions.js';
import { BadEnvelope, classifyOpenAIError, HttpFailure, ResponseFormatRejected, SchemaTooComplex } from './classify.js';
import { AnswerDefect, ProviderMisconfigured, ProviderRefusal } from './errors.js';
import {
  buildAnswerSchema,
  buildSystemPrompt,
  checkInputBudget,
  checkQuestions,
  DEFAULT_INPUT_BUDGET_TOKENS,
  halves,
  maxTokensFor,
  mergeResults,
  parseReplyText,
  PROMPT_TEMPLATE_VERSION,
  zeroUsage,
  type JsonSchema,
} from './prompt.js';
import { tokenCount, type AskOptions, type AskResult, type Provider } from './provider.js';
import {
  checkRetryPolicy,
  DEFAULT_RETRY_POLICY,
  realRuntime,
  silentLogger,
  withRetries,
  worstCaseCallMs,
  type ProviderLogger,
  type RetryContext,
  type RetryPolicy,
  type RetryRuntime,
} from './retry.js';
import { apiKeyProblem } from '../config.js';

/**
 * The OpenAI-compatible provider (DESIGN §9) for Ollama, vLLM, llama.cpp `llama-server` and OpenAI:
 * POST {baseURL}/chat/completions with a strict JSON-schema response format, falling back to
 * `json_object` with the schema in the prompt when a server rejects the format.
 *
 * It uses plain `fetch`, not the `openai` package: one POST needs no client, the job's AbortSignal
 * and the attempt timeout go straight to the request (body read included), and the error body text
 * that decides the response-format fallback is at hand. The SDK's value (its retries) would be
 * switched off anyway (our own retry policy runs instead, DESIGN §9).
 */

/** Prompt-template version of this provider; part of every question fingerprint (DESIGN §4). */
export const OPENAI_PROMPT_VERSION = `openai-v${PROMPT_TEMPLATE_VERSION}`;
/** `json_schema.name` sent with the response format. */
export const RESPONSE_FORMAT_NAME = 'verdict_answers';

/** How the answer's shape is requested: enforced by the server, or described in the prompt. */
export type ResponseFormatMode = 'json_schema' | 'json_object';

/** Constructor options of OpenAICompatibleProvider. Durations in milliseconds, budgets in tokens. */
export interface OpenAICompatibleProviderOptions {
  /**
   * The OpenAI-style base URL, `/v1` included, as the servers document it:
   * `http://localhost:11434/v1` (Ollama), `http://localhost:8000/v1` (vLLM),
   * `http://localhost:8080/v1` (llama-server), `https://api.openai.com/v1`.
   */
  readonly baseURL: string;
  /** Bearer key; local servers need none. */
  readonly apiKey?: string;
  /** Pinned model id; a `-latest` alias is refused (Ollama's `:latest` tag is accepted). */
  readonly model: string;
  /** Sampling temperature; null leaves it out (models that only take the default). @defaultValue 0 */
  readonly temperature?: number | null;
  /** Name of the output-token limit: OpenAI's newer models only take `max_completion_tokens`. @defaultValue 'max_tokens' */
  readonly maxTokensParam?: 'max_tokens' | 'max_completion_tokens';
  /** Response format to start with. @defaultValue 'json_schema' */
  readonly responseFormat?: ResponseFormatMode;
  /** Largest estimated input per call (tokens). @defaultValue DEFAULT_INPUT_BUDGET_TOKENS (200000) */
  readonly inputBudgetTokens?: number;
  /** Timeout of one attempt (ms). @defaultValue 60000 */
  readonly perAttemptTimeoutMs?: number;
  /** Attempts per call, the first included. @defaultValue 4 */
  readonly maxAttempts?: number;
  /** Longest Retry-After honoured by waiting (ms). @defaultValue 30000 */
  readonly retryAfterCapMs?: number;
  /** First backoff (ms), doubling per retry. @defaultValue 500 */
  readonly minBackoffMs?: number;
  /** Largest backoff step (ms). @defaultValue 8000 */
  readonly maxBackoffMs?: number;
  /** pino-like logger (status, type, counts only). */
  readonly logger?: ProviderLogger;
  /** Time and randomness seams for tests. */
  readonly runtime?: Partial<RetryRuntime>;
  /** fetch implementation. @defaultValue globalThis.fetch */
  readonly fetch?: typeof fetch;
}

interface ChatCompletion {
  model?: unknown;
  choices?: Array<{ finish_reason?: unknown; message?: { content?: unknown; refusal?: unknown } }>;
  usage?: {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    prompt_tokens_details?: { cached_tokens?: unknown } | null;
  };
}

/** Finish reasons after which the content is complete (null: servers that leave it out). */
const COMPLETE_FINISH = new Set(['stop', 'eos']);

/**
 * Strips what chatty models wrap JSON in when the server does not enforce the format: a leading
 * `<think>…</think>` block (reasoning models) and a Markdown code fence.
 */
export function unwrapJsonText(text: string): string {
  let t = text.trim();
  if (t.startsWith('<think>')) {
    const end = t.indexOf('</think>');
    if (end >= 0) t = t.slice(end + '</think>'.length).trim();
  }
  const fence = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/i.exec(t);
  return fence ? fence[1] : t;
}

/**
 * Answers typed questions through any OpenAI-compatible chat-completions server.
 * @throws ProviderMisconfigured at construction for a blank baseURL or model, a `-latest` alias, or
 *   an apiKey that cannot be sent as a header (DESIGN §3.8).
 * @throws TypeError at construction for a bad numeric option, naming the option.
 */
export class OpenAICompatibleProvider implements Provider {
  readonly name = 'openai';
  readonly model: string;
  readonly promptVersion = OPENAI_PROMPT_VERSION;
  readonly effort = null;
  readonly worstCaseCallMs: number;
  /** Longest Retry-After honoured by waiting (ms); a longer one defers the job (DESIGN §3.7). */
  readonly retryAfterCapMs: number;
  readonly inputBudgetTokens: number;
  readonly #endpoint: string;
  readonly #baseURL: string;
  readonly #apiKey: string | undefined;
  readonly #temperature: number | null;
  readonly #maxTokensParam: 'max_tokens' | 'max_completion_tokens';
  readonly #policy: RetryPolicy;
  readonly #log: ProviderLogger;
  readonly #runtime: RetryRuntime;
  readonly #fetch: typeof fetch;
  /** Switches to json_object for good once the server rejects json_schema (per instance). */
  #mode: ResponseFormatMode;

  constructor(opts: OpenAICompatibleProviderOptions) {
    if (typeof opts.baseURL !== 'string' || opts.baseURL.trim() === '') {
      throw new ProviderMisconfigured('openai: baseURL is missing');
    }
    if (typeof opts.model !== 'string' || opts.model.trim() === '')
      throw new ProviderMisconfigured('openai: model is missing');
    if (/-latest$/i.test(opts.model)) {
      throw new ProviderMisconfigured(`openai: model "${opts.model}" is a -latest alias; pin a model id`);
    }
    const budget = opts.inputBudgetTokens ?? DEFAULT_INPUT_BUDGET_TOKENS;
    if (!Number.isInteger(budget) || budget < 1)
      throw new TypeError(`inputBudgetTokens must be an integer ≥ 1, got ${String(budget)}`);
    const temperature = opts.temperature === undefined ? 0 : opts.temperature;
    if (temperature !== null && (typeof temperature !== 'number' || !(temperature >= 0 && temperature <= 2))) {
      throw new TypeError(`temperature must be a number from 0 to 2 or null, got ${String(temperature)}`);
    }
    const policy: RetryPolicy = {
      maxAttempts: opts.maxAttempts ?? DEFAULT_RETRY_POLICY.maxAttempts,
      perAttemptTimeoutMs: opts.perAttemptTimeoutMs ?? DEFAULT_RETRY_POLICY.perAttemptTimeoutMs,
      minBackoffMs: opts.minBackoffMs ?? DEFAULT_RETRY_POLICY.minBackoffMs,
      maxBackoffMs: opts.maxBackoffMs ?? DEFAULT_RETRY_POLICY.maxBackoffMs,
      retryAfterCapMs: opts.retryAfterCapMs ?? DEFAULT_RETRY_POLICY.retryAfterCapMs,
    };
    checkRetryPolicy(policy);
    const keyProblem = opts.apiKey ? apiKeyProblem(opts.apiKey) : null;
    if (keyProblem) throw new ProviderMisconfigured(`openai: apiKey ${keyProblem}`);
    this.model = opts.model;
    this.inputBudgetTokens = budget;
    this.#baseURL = opts.baseURL.replace(/\/+$/, '');
    this.#endpoint = `${this.#baseURL}/chat/completions`;
    this.#apiKey = opts.apiKey;
    this.#temperature = temperature;
    this.#maxTokensParam = opts.maxTokensParam ?? 'max_tokens';
    this.#mode = opts.responseFormat ?? 'json_schema';
    this.#policy = policy;
    this.worstCaseCallMs = worstCaseCallMs(policy);
    this.retryAfterCapMs = policy.retryAfterCapMs;
    this.#log = opts.logger ?? silentLogger;
    this.#runtime = { ...realRuntime, ...opts.runtime };
    this.#fetch = opts.fetch ?? globalThis.fetch;
  }

  /** The response format this instance currently sends. */
  get responseFormat(): ResponseFormatMode {
    return this.#mode;
  }

  /**
   * Asks every question about `state` (sent exactly as given as the user message) in one chat
   * completion. A 400 about the response format switches this instance to `json_object` with the
   * schema in the prompt and asks again. No request is sent for an empty `questions`.
   * @throws the same typed errors as AnthropicProvider.ask; `opts.beforeSend` errors unchanged;
   *   `opts.signal.reason` on abort.
   */
  async ask(state: string, questions: ReadonlyMap<string, Question>, opts: AskOptions): Promise<AskResult> {
    opts.signal.throwIfAborted();
    checkQuestions(questions);
    if (questions.size === 0) return { answers: new Map(), usage: zeroUsage(), responseModel: this.model };
    const explain = opts.explain ?? false;
    this.#checkBudget(state, questions, explain);
    const ctx: RetryContext = {
      provider: this.name,
      policy: this.#policy,
      runtime: this.#runtime,
      log: this.#log,
      signal: opts.signal,
      beforeSend: opts.beforeSend,
      deadline: this.#runtime.now() + this.worstCaseCallMs,
    };
    return this.#askChunk(state, questions, explain, ctx);
  }

  #checkBudget(state: string, questions: ReadonlyMap<string, Question>, explain: boolean): void {
    const { system, schema } = this.#prompt(questions, explain);
    checkInputBudget('openai', { system, schema, state }, this.inputBudgetTokens);
  }

  #prompt(questions: ReadonlyMap<string, Question>, explain: boolean): { system: string; schema: JsonSchema } {
    const schema = buildAnswerSchema(questions, { explain });
    const system = buildSystemPrompt(questions, {
      explain,
      ...(this.#mode === 'json_object' ? { schemaInPrompt: schema } : {}),
    });
    return { system, schema };
  }

  async #askChunk(
    state: string,
    questions: ReadonlyMap<string, Question>,
    explain: boolean,
    ctx: RetryContext,
  ): Promise<AskResult> {
    try {
      return await this.#askOnce(state, questions, explain, ctx);
    } catch (err) {
      if (err instanceof ResponseFormatRejected && this.#mode === 'json_schema') {
        this.#log.warn(
          { provider: this.name, status: err.status },
          'server rejected response_format json_schema; falling back to json_object',
        );
        this.#mode = 'json_object';
        this.#checkBudget(state, questions, explain);
        return this.#askChunk(state, questions, explain, ctx);
      }
      if (!(err instanceof SchemaTooComplex)) throw err;
      if (questions.size <= 1) {
        throw new ProviderRefusal(`openai: ${err.message}, even for a single question`, { status: err.status });
      }
      this.#log.info(
        { provider: this.name, questions: questions.size },
        'answer schema too complex; splitting the chunk in halves',
      );
      const [first, second] = halves(questions);
      const a = await this.#askChunk(state, first, explain, ctx);
      const b = await this.#askChunk(state, second, explain, ctx);
      return mergeResults(a, b);
    }
  }

  /** The request body of one chunk in the current mode. */
  buildRequestBody(state: string, questions: ReadonlyMap<string, Question>, explain: boolean): Record<string, unknown> {
    const { system, schema } = this.#prompt(questions, explain);
    const body: Record<string, unknown> = {
      model: this.model,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: state },
      ],
      response_format:
        this.#mode === 'json_schema'
          ? { type: 'json_schema', json_schema: { name: RESPONSE_FORMAT_NAME, strict: true, schema } }
          : { type: 'json_object' },
      [this.#maxTokensParam]: maxTokensFor(questions, explain),
      stream: false,
    };
    if (this.#temperature !== null) body.temperature = this.#temperature;
    return body;
  }

  async #askOnce(
    state: string,
    questions: ReadonlyMap<string, Question>,
    explain: boolean,
    ctx: RetryContext,
  ): Promise<AskResult> {
    const payload = JSON.stringify(this.buildRequestBody(state, questions, explain));
    const jsonSchemaMode = this.#mode === 'json_schema';
    const completion = await withRetries(
      ctx,
      (signal) => this.#send(payload, signal),
      (err, timedOut) => classifyOpenAIError(err, timedOut, jsonSchemaMode),
    );
    return this.#read(completion, questions, explain);
  }

  #headers(): Record<string, string> {
    const h: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.#apiKey) h.authorization = `Bearer ${this.#apiKey}`;
    return h;
  }

  /** One attempt: the POST and the whole body read, under the attempt's signal. */
  async #send(payload: string, signal: AbortSignal): Promise<ChatCompletion> {
    const res = await this.#fetch(this.#endpoint, { method: 'POST', headers: this.#headers(), body: payload, signal });
    const text = await res.text();
    if (!res.ok) throw new HttpFailure(res.status, res.headers, text);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new BadEnvelope(null, res.headers.get('x-request-id'));
    }
    const b = body as ChatCompletion & { error?: { type?: unknown } | string };
    if (
      !b ||
      typeof b !== 'object' ||
      !Array.isArray(b.choices) ||
      b.choices.length === 0 ||
      typeof b.choices[0]?.message !== 'object'
    ) {
      const errorType =
        b && typeof b === 'object' && b.error && typeof b.error === 'object' && typeof b.error.type === 'string'
          ? b.error.type
          : null;
      throw new BadEnvelope(errorType, res.headers.get('x-request-id'));
    }
    return b;
  }

  /** Reads the answers of a complete reply; a defect carries the reply's usage (it is billed). */
  #read(completion: ChatCompletion, questions: ReadonlyMap<string, Question>, explain: boolean): AskResult {
    const u = completion.usage;
    const usage = {
      inputTokens: tokenCount(u?.prompt_tokens),
      outputTokens: tokenCount(u?.completion_tokens),
      cacheReadTokens: tokenCount(u?.prompt_tokens_details?.cached_tokens),
      cacheWriteTokens: 0,
    };
    let parsed;
    try {
      parsed = this.#parse(completion, questions, explain);
    } catch (err) {
      throw err instanceof AnswerDefect ? err.withUsage(usage) : err;
    }
    return {
      answers: parsed.answers,
      ...(parsed.rationales ? { rationales: parsed.rationales } : {}),
      usage,
      responseModel: typeof completion.model === 'string' ? completion.model : this.model,
    };
  }

  /** @throws AnswerDefect for an incomplete reply, a refusal, no text, or answers that fail validation. */
  #parse(completion: ChatCompletion, questions: ReadonlyMap<string, Question>, explain: boolean) {
    const choice = completion.choices![0];
    const finish = choice.finish_reason;
    if (finish !== null && finish !== undefined && !(typeof finish === 'string' && COMPLETE_FINISH.has(finish))) {
      throw new AnswerDefect(`openai: reply incomplete, finish_reason ${String(finish)}`);
    }
    const message = choice.message!;
    if (typeof message.refusal === 'string' && message.refusal !== '')
      throw new AnswerDefect('openai: reply is a refusal');
    if (typeof message.content !== 'string') throw new AnswerDefect('openai: reply has no text content');
    return parseReplyText(unwrapJsonText(message.content), questions, explain);
  }

  /**
   * Doctor check: GET {baseURL}/models once, without retries.
   * @returns whether the configured model is listed, and how many models the server lists.
   * @throws ProviderMisconfigured (401/403/404), ProviderUnavailable, ProviderRefusal.
   */
  async doctor(opts: { signal?: AbortSignal } = {}): Promise<{ model: string; listed: boolean; models: number }> {
    const signal = opts.signal ?? AbortSignal.timeout(this.#policy.perAttemptTimeoutMs);
    try {
      const res = await this.#fetch(`${this.#baseURL}/models`, { headers: this.#headers(), signal });
      const text = await res.text();
      if (!res.ok) throw new HttpFailure(res.status, res.headers, text);
      const body = JSON.parse(text) as { data?: Array<{ id?: unknown }> };
      const ids = Array.isArray(body.data) ? body.data.map((m) => m.id) : [];
      return { model: this.model, listed: ids.includes(this.model), models: ids.length };
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (err instanceof SyntaxError)
        throw new ProviderMisconfigured('openai: GET /models did not return JSON (is baseURL the /v1 base?)');
      throw classifyOpenAIError(err, false, false).error;
    }
  }

  async close(): Promise<void> {}
}
