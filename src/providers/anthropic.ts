import type Anthropic from '@anthropic-ai/sdk';
import type { Question } from '../decision/questions.js';
import { BadEnvelope, classifyAnthropicError, loadAnthropicSdk, safeToken, SchemaTooComplex } from './classify.js';
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
  parseReply,
  parseReplyText,
  PROMPT_TEMPLATE_VERSION,
  zeroUsage,
  type JsonSchema,
} from './prompt.js';
import { apiKeyProblem } from '../config.js';
import { AnthropicBatches } from './anthropic-batches.js';
import { ANTHROPIC_BATCH_MAX_BODY_BYTES, ANTHROPIC_BATCH_MAX_REQUESTS } from './batch.js';
import { minCacheablePrefixTokens } from './pricing.js';
import { parseRateLimitHeaders } from './rate-limit-headers.js';
import {
  estimateTokens,
  tokenCount,
  type RateLimitSnapshot,
  type AskOptions,
  type AskResult,
  type CountTokensOptions,
  type Provider,
} from './provider.js';
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

/**
 * The Anthropic provider (DESIGN §9): one Messages call per chunk through the official SDK, with
 * SDK retries off and the shared p-retry policy of `./retry.ts` on top.
 */

/** Prompt-template version of this provider; part of every question fingerprint (DESIGN §4). */
export const ANTHROPIC_PROMPT_VERSION = `anthropic-v${PROMPT_TEMPLATE_VERSION}`;
/** The pinned default model (DESIGN §9). */
export const DEFAULT_ANTHROPIC_MODEL = 'claude-haiku-5-5';
/** The SDK's default base URL, named for the batch availability mark (DESIGN §7.4). */
const ANTHROPIC_DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** Name of the forced tool of the fallback path. */
export const ANSWER_TOOL_NAME = 'record_answers';

/** Reasoning effort the API takes in `output_config.effort`; null leaves it out (older models reject it). */
export type AnthropicEffort = 'low' | 'medium' | 'high' | 'xhigh' | 'max';
const EFFORTS: readonly AnthropicEffort[] = ['low', 'medium', 'high', 'xhigh', 'max'];

/** Constructor options of AnthropicProvider. Durations in milliseconds, budgets in tokens. */
export interface AnthropicProviderOptions {
  /** API key. Required and non-blank: never read from the environment here (the config does that). */
  readonly apiKey: string;
  /** API base URL (tests point it at a fake server). @defaultValue the SDK's default (`ANTHROPIC_BASE_URL` or https://api.anthropic.com) */
  readonly baseURL?: string;
  /** Pinned model id; a `-latest` alias is refused. @defaultValue 'claude-haiku-5-5' */
  readonly model?: string;
  /** `output_config.effort`; null omits it (for models that do not take it). @defaultValue 'low' */
  readonly effort?: AnthropicEffort | null;
  /**
   * Largest estimated input (system prompt + schema + state) sent in one call, in tokens; above it
   * the call is refused before any request with `ProviderRefusal({overBudget: true})`.
   * @defaultValue DEFAULT_INPUT_BUDGET_TOKENS (200000)
   */
  readonly inputBudgetTokens?: number;
  /** Timeout of one attempt (ms). @defaultValue 60000 */
  readonly perAttemptTimeoutMs?: number;
  /** Attempts per call, the first included. @defaultValue 4 */
  readonly maxAttempts?: number;
  /** Longest Retry-After honoured by waiting (ms); longer ones defer the job. @defaultValue 30000 */
  readonly retryAfterCapMs?: number;
  /** First backoff (ms), doubling per retry. @defaultValue 500 */
  readonly minBackoffMs?: number;
  /** Largest backoff step (ms). @defaultValue 8000 */
  readonly maxBackoffMs?: number;
  /**
   * Use the forced-tool fallback instead of `output_config.format`, for models without structured
   * output. @defaultValue false
   */
  readonly useTool?: boolean;
  /** pino-like logger; gets attempt failures and splits (status, type, request id, counts only). */
  readonly logger?: ProviderLogger;
  /** Time and randomness seams for tests. @defaultValue real timers, performance.now, Math.random */
  readonly runtime?: Partial<RetryRuntime>;
  /**
   * Limits of one Message Batch, at most the API's (tests lower them).
   * @defaultValue `{ maxRequests: 100000, maxBodyBytes: 256000000 }` (batch.ts)
   */
  readonly batchLimits?: { readonly maxRequests?: number; readonly maxBodyBytes?: number };
}

type CreateParams = Anthropic.MessageCreateParamsNonStreaming;

/**
 * TTL of the cache breakpoint (`cache_control.ttl`): `5m`, the API's default (sent without a
 * `ttl`), for ordinary calls; `1h` for requests of a Message Batch, whose requests run in any order
 * over up to 24 h and hit one cache entry only at the longer TTL (STACK.md §3: "For cache hits
 * across a batch, use ttl: '1h'"). A 1-hour write costs 2× the input price instead of 1.25×
 * (pricing.ts `cacheWrite1hPerMTok`).
 */
export type AnthropicCacheTtl = '5m' | '1h';

/**
 * The cached prefix of a Messages request as the API orders it (tools, then system), estimated
 * with `estimateTokens` (1 token per 3 UTF-16 units, each part rounded up), in tokens: the tool
 * definitions when there are any, every system block, and the `output_config.format` schema. The
 * schema is counted because the API compiles it into the prompt ahead of the messages (changing it
 * invalidates the cache), and it is as stable as the questions it is built from; if it is not in
 * the cached prefix after all, the estimate is high by the schema's size, which only places a
 * breakpoint that writes nothing (free). The user message (the state) is never counted: it comes
 * after the breakpoint.
 */
export function cachedPrefixTokens(body: Pick<CreateParams, 'system' | 'tools' | 'output_config'>): number {
  let n = 0;
  if (body.tools && body.tools.length > 0) n += estimateTokens(JSON.stringify(body.tools));
  const system = typeof body.system === 'string' ? [{ text: body.system }] : (body.system ?? []);
  for (const b of system) n += estimateTokens(b.text);
  const format = body.output_config?.format;
  if (format) n += estimateTokens(JSON.stringify(format.schema));
  return n;
}

/**
 * Builds the Messages request of one chunk: rules and questions in one system block, the state
 * bytes unchanged as the only user message, thinking disabled, no sampling parameters, and either
 * `output_config.format` (structured output) or a forced tool with the same schema.
 *
 * The system block carries a cache breakpoint only when the estimated cached prefix
 * (`cachedPrefixTokens`) reaches the model's minimum cacheable length (pricing.ts
 * `minCacheablePrefixTokens`, DESIGN §9.3); a model without a known minimum gets none. Below the
 * minimum the API caches nothing anyway, silently. The estimate over-counts (about 4 characters
 * make a token of English text on the older tokenizers), so a breakpoint may go out slightly below
 * the real minimum, which costs nothing: nothing is written then. The prefix holds only the rules
 * and the questions (keys sorted, `buildSystemPrompt`), never item text, so it is byte-identical
 * across items asked the same questions, whichever sets they come from.
 * @param opts.cacheTtl the breakpoint's TTL. @defaultValue '5m'
 * @returns the body, the system prompt and the answer schema, and the prefix estimate (tokens).
 */
export function buildMessagesRequest(
  state: string,
  questions: ReadonlyMap<string, Question>,
  opts: {
    model: string;
    effort: AnthropicEffort | null;
    explain: boolean;
    useTool: boolean;
    cacheTtl?: AnthropicCacheTtl;
  },
): { body: CreateParams; system: string; schema: JsonSchema; prefixTokens: number } {
  const schema = buildAnswerSchema(questions, { explain: opts.explain });
  const system = buildSystemPrompt(questions, { explain: opts.explain });
  const systemBlock: Anthropic.TextBlockParam = { type: 'text', text: system };
  const body: CreateParams = {
    model: opts.model,
    max_tokens: maxTokensFor(questions, opts.explain),
    system: [systemBlock],
    messages: [{ role: 'user', content: state }],
    // Forced tools give a 400 while thinking is on, and answers are probabilities, not reasoning.
    thinking: { type: 'disabled' },
  };
  if (opts.useTool) {
    body.tools = [
      {
        name: ANSWER_TOOL_NAME,
        // Part of the request's template (versioned with PROMPT_TEMPLATE_VERSION): properties are
        // the aliases q1…qN, never question keys, which the API may refuse as property names.
        description: 'Records the answers to every question, each under its alias (q1, q2, ...).',
        // Not `strict`: models without structured output do not compile strict grammars either;
        // the reply is validated with zod regardless.
        input_schema: schema as Anthropic.Tool.InputSchema,
      },
    ];
    body.tool_choice = { type: 'tool', name: ANSWER_TOOL_NAME, disable_parallel_tool_use: true };
    if (opts.effort !== null) body.output_config = { effort: opts.effort };
  } else {
    body.output_config = {
      format: { type: 'json_schema', schema: schema as Record<string, unknown> },
      ...(opts.effort !== null ? { effort: opts.effort } : {}),
    };
  }
  const prefixTokens = cachedPrefixTokens(body);
  const minimum = minCacheablePrefixTokens('anthropic', opts.model);
  if (minimum !== null && prefixTokens >= minimum) {
    systemBlock.cache_control = opts.cacheTtl === '1h' ? { type: 'ephemeral', ttl: '1h' } : { type: 'ephemeral' };
  }
  return { body, system, schema, prefixTokens };
}

/**
 * The count_tokens request (POST /v1/messages/count_tokens) of a Messages request: the same model,
 * system blocks, messages, thinking, tools, tool choice and `output_config` (format and effort), so
 * the count covers exactly what `ask` sends. Only `max_tokens` is left out: the endpoint takes no
 * output settings and refuses a field it does not know with a 400 ("Extra inputs are not
 * permitted"). Fields are picked one by one rather than copied, so a field added to the Messages
 * request later cannot turn every count into a 400; test/providers/anthropic.count-tokens.test.ts
 * fails until it is picked here too.
 */
export function countTokensRequest(body: CreateParams): Anthropic.MessageCountTokensParams {
  return {
    model: body.model,
    messages: body.messages,
    ...(body.system !== undefined ? { system: body.system } : {}),
    ...(body.thinking !== undefined ? { thinking: body.thinking } : {}),
    ...(body.tools !== undefined ? { tools: body.tools } : {}),
    ...(body.tool_choice !== undefined ? { tool_choice: body.tool_choice } : {}),
    ...(body.output_config !== undefined ? { output_config: body.output_config } : {}),
  };
}

/** The billed usage of a message, in tokens (a broken usage block counts 0: `tokenCount`). */
function messageUsage(message: Anthropic.Message) {
  const u = message.usage;
  return {
    inputTokens: tokenCount(u?.input_tokens),
    outputTokens: tokenCount(u?.output_tokens),
    cacheReadTokens: tokenCount(u?.cache_read_input_tokens),
    cacheWriteTokens: tokenCount(u?.cache_creation_input_tokens),
  };
}

/** Stop reasons after which the reply is complete. */
const COMPLETE_STOPS = new Set(['end_turn', 'stop_sequence', 'tool_use']);

/**
 * Answers typed questions with Claude (DESIGN §9). See AnthropicProviderOptions for the options.
 * @throws ProviderMisconfigured at construction for a blank key, a key that cannot be sent as a
 *   header (control characters, non-ASCII, whitespace: DESIGN §3.8), a blank model or a `-latest` alias
 *   (it is the provider-wide configuration error the CLI reports at start).
 * @throws TypeError at construction for a bad numeric option or effort, naming the option.
 */
export class AnthropicProvider implements Provider {
  readonly name = 'anthropic';
  readonly model: string;
  readonly promptVersion = ANTHROPIC_PROMPT_VERSION;
  readonly effort: AnthropicEffort | null;
  readonly worstCaseCallMs: number;
  /** Longest Retry-After honoured by waiting (ms); a longer one defers the job (DESIGN §3.7). */
  readonly retryAfterCapMs: number;
  /** Input budget per call (tokens). */
  readonly inputBudgetTokens: number;
  readonly useTool: boolean;
  /** Message Batches (DESIGN §7.3): the same requests and parser as `ask`, at half price. */
  readonly batch: AnthropicBatches;
  /** The SDK client, made on the first request (the SDK loads then: see classify.ts `loadAnthropicSdk`). */
  #client: Promise<Anthropic> | null = null;
  /** The latest rate-limit reading (`rateLimitState`). */
  #rateLimits: RateLimitSnapshot | null = null;
  readonly #clientOptions: ConstructorParameters<typeof Anthropic>[0];
  readonly #policy: RetryPolicy;
  readonly #log: ProviderLogger;
  readonly #runtime: RetryRuntime;

  constructor(opts: AnthropicProviderOptions) {
    if (typeof opts.apiKey !== 'string' || opts.apiKey.trim() === '') {
      throw new ProviderMisconfigured('anthropic: apiKey is missing (set ANTHROPIC_API_KEY)');
    }
    const keyProblem = apiKeyProblem(opts.apiKey);
    if (keyProblem) throw new ProviderMisconfigured(`anthropic: apiKey ${keyProblem}`);
    const model = opts.model ?? DEFAULT_ANTHROPIC_MODEL;
    if (typeof model !== 'string' || model.trim() === '') throw new ProviderMisconfigured('anthropic: model is blank');
    if (/-latest$/i.test(model)) {
      throw new ProviderMisconfigured(
        `anthropic: model "${model}" is a -latest alias; pin a model id (answers store the model, and an alias would change under them)`,
      );
    }
    const effort = opts.effort === undefined ? 'low' : opts.effort;
    if (effort !== null && !EFFORTS.includes(effort)) {
      throw new TypeError(`effort must be one of ${EFFORTS.join(', ')} or null, got ${JSON.stringify(effort)}`);
    }
    const budget = opts.inputBudgetTokens ?? DEFAULT_INPUT_BUDGET_TOKENS;
    if (!Number.isInteger(budget) || budget < 1)
      throw new TypeError(`inputBudgetTokens must be an integer ≥ 1, got ${String(budget)}`);
    const policy: RetryPolicy = {
      maxAttempts: opts.maxAttempts ?? DEFAULT_RETRY_POLICY.maxAttempts,
      perAttemptTimeoutMs: opts.perAttemptTimeoutMs ?? DEFAULT_RETRY_POLICY.perAttemptTimeoutMs,
      minBackoffMs: opts.minBackoffMs ?? DEFAULT_RETRY_POLICY.minBackoffMs,
      maxBackoffMs: opts.maxBackoffMs ?? DEFAULT_RETRY_POLICY.maxBackoffMs,
      retryAfterCapMs: opts.retryAfterCapMs ?? DEFAULT_RETRY_POLICY.retryAfterCapMs,
    };
    checkRetryPolicy(policy);

    this.model = model;
    this.effort = effort;
    this.inputBudgetTokens = budget;
    this.useTool = opts.useTool ?? false;
    this.#policy = policy;
    this.worstCaseCallMs = worstCaseCallMs(policy);
    this.retryAfterCapMs = policy.retryAfterCapMs;
    this.#log = opts.logger ?? silentLogger;
    this.#runtime = { ...realRuntime, ...opts.runtime };
    const log = this.#log;
    // The SDK's own log lines are forwarded as bare messages at warn and above; extra arguments
    // (which at debug level can hold request details) are dropped.
    const sdkLogger = {
      error: (message: string) => log.error({ provider: 'anthropic', component: 'sdk' }, message),
      warn: (message: string) => log.warn({ provider: 'anthropic', component: 'sdk' }, message),
      info: () => {},
      debug: () => {},
    };
    this.#clientOptions = {
      apiKey: opts.apiKey,
      ...(opts.baseURL !== undefined ? { baseURL: opts.baseURL } : {}),
      maxRetries: 0,
      timeout: policy.perAttemptTimeoutMs,
      logger: sdkLogger,
      logLevel: 'warn',
    };
    const limit = (name: string, v: number | undefined, max: number) => {
      if (v === undefined) return max;
      if (!Number.isInteger(v) || v < 1 || v > max)
        throw new TypeError(`batchLimits.${name} must be an integer in [1, ${max}], got ${String(v)}`);
      return v;
    };
    this.batch = new AnthropicBatches({
      client: () => this.#sdkClient(),
      params: (r) => this.#batchParams(r),
      read: (message, questions, explain) => this.#read(message, questions, explain),
      usage: (message) => messageUsage(message),
      // Liveness is checked when the batch is assembled, not per batch call.
      context: (signal) => this.#retryContext(signal, () => {}),
      log: this.#log,
      idleTimeoutMs: policy.perAttemptTimeoutMs,
      maxRequests: limit('maxRequests', opts.batchLimits?.maxRequests, ANTHROPIC_BATCH_MAX_REQUESTS),
      maxBodyBytes: limit('maxBodyBytes', opts.batchLimits?.maxBodyBytes, ANTHROPIC_BATCH_MAX_BODY_BYTES),
      endpoint: opts.baseURL ?? ANTHROPIC_DEFAULT_BASE_URL,
    });
  }

  /**
   * Asks every question of `questions` about `state` (sent exactly as given), in one Messages call
   * unless the API finds the schema too complex, in which case the chunk is split in halves down to
   * one question per call, strictly one call after another, and the results merged (usage summed).
   * No request is sent for an empty `questions`.
   * @returns every answer (all or none), usage in tokens, and the model the response reported.
   * @throws ProviderRefusal (400/422, input over budget with code `input_over_budget`, an invalid
   *   question); ProviderMisconfigured (401/403/404, billing, a rejected schema);
   *   ProviderUnavailable (transient faults after the retries, or a Retry-After above the cap);
   *   AnswerDefect (stop reason max_tokens/refusal, malformed or invalid answers); whatever
   *   `opts.beforeSend` throws, unchanged; `opts.signal.reason` on abort.
   */
  async ask(state: string, questions: ReadonlyMap<string, Question>, opts: AskOptions): Promise<AskResult> {
    opts.signal.throwIfAborted();
    checkQuestions(questions);
    if (questions.size === 0) return { answers: new Map(), usage: zeroUsage(), responseModel: this.model };
    const explain = opts.explain ?? false;
    const { system, schema } = buildMessagesRequest(state, questions, this.#requestOptions(explain));
    checkInputBudget('anthropic', { system, schema, state }, this.inputBudgetTokens);
    // The SDK loads (once) before the first attempt's timeout starts: its import took about 0.3 s,
    // which a 300 ms attempt budget counted as a timed-out attempt (the fault matrix's 529 case).
    await this.#sdkClient();
    const ctx = this.#retryContext(opts.signal, opts.beforeSend);
    return this.#askChunk(state, questions, explain, ctx);
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
      if (!(err instanceof SchemaTooComplex)) throw err;
      if (questions.size <= 1) {
        // Not provider-wide: only this question's set is affected, so the job parks.
        throw new ProviderRefusal(`anthropic: ${err.message}, even for a single question`, { status: err.status });
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

  async #askOnce(
    state: string,
    questions: ReadonlyMap<string, Question>,
    explain: boolean,
    ctx: RetryContext,
  ): Promise<AskResult> {
    const { body } = buildMessagesRequest(state, questions, this.#requestOptions(explain));
    const message = await withRetries(ctx, (signal) => this.#send(body, signal), classifyAnthropicError);
    return this.#read(message, questions, explain);
  }

  /**
   * The params of one batch request: the body `ask` sends for the same chunk, after the same checks
   * before any request, with the 1-hour cache TTL (a batch's requests run over hours, STACK §3).
   */
  #batchParams(r: { state: string; questions: ReadonlyMap<string, Question>; explain: boolean }): CreateParams {
    checkQuestions(r.questions);
    const { body, system, schema } = buildMessagesRequest(r.state, r.questions, {
      ...this.#requestOptions(r.explain),
      cacheTtl: '1h',
    });
    checkInputBudget('anthropic', { system, schema, state: r.state }, this.inputBudgetTokens);
    return body;
  }

  /** The shared retry policy's context for one call of ours (a message, a count, a batch endpoint), its deadline the worst case from now. */
  #retryContext(signal: AbortSignal, beforeSend: RetryContext['beforeSend']): RetryContext {
    return {
      provider: this.name,
      policy: this.#policy,
      runtime: this.#runtime,
      log: this.#log,
      signal,
      beforeSend,
      deadline: this.#runtime.now() + this.worstCaseCallMs,
    };
  }

  #requestOptions(explain: boolean) {
    return { model: this.model, effort: this.effort, explain, useTool: this.useTool };
  }

  /** The SDK client, loading the SDK on first use. */
  #sdkClient(): Promise<Anthropic> {
    this.#client ??= loadAnthropicSdk().then((sdk) => new sdk.default(this.#clientOptions));
    return this.#client;
  }

  /**
   * The rate limits the last Messages response reported (DESIGN §9.3; `Provider.rateLimitState`):
   * its `anthropic-ratelimit-*` headers, parsed by `parseRateLimitHeaders`. A response without a
   * usable header keeps the previous reading (it expires at its own reset). count_tokens responses
   * are not read: that endpoint has limits of its own.
   */
  rateLimitState(): RateLimitSnapshot | null {
    return this.#rateLimits;
  }

  #noteRateLimits(headers: unknown): void {
    // Wall clock, not runtime.now(): resets are wall-clock times.
    const s = parseRateLimitHeaders(headers, Date.now());
    if (s) this.#rateLimits = s;
  }

  /** One attempt: the SDK call, then the envelope check (an error inside a 200 is retried). */
  async #send(body: CreateParams, signal: AbortSignal): Promise<Anthropic.Message> {
    const client = await this.#sdkClient();
    let sent: { data: unknown; response: Response };
    try {
      sent = await client.messages.create(body, { signal }).withResponse();
    } catch (err) {
      // An API error (a 429 above all) carries the same rate-limit headers as a success.
      this.#noteRateLimits((err as { headers?: unknown } | null)?.headers);
      throw err;
    }
    this.#noteRateLimits(sent.response.headers);
    const response = sent.data;
    const r = response as Partial<Anthropic.Message> & { error?: { type?: unknown }; _request_id?: string | null };
    if (r === null || typeof r !== 'object' || r.type !== 'message' || !Array.isArray(r.content)) {
      const errorType = r && typeof r === 'object' && typeof r.error?.type === 'string' ? r.error.type : null;
      const requestId = r && typeof r === 'object' ? (r._request_id ?? null) : null;
      throw new BadEnvelope(errorType, requestId);
    }
    return response as Anthropic.Message;
  }

  /**
   * Reads the answers out of a complete message, selecting blocks by type (never content[0]). A
   * defect carries the message's usage: a truncated or malformed reply is still billed.
   */
  #read(message: Anthropic.Message, questions: ReadonlyMap<string, Question>, explain: boolean): AskResult {
    const usage = messageUsage(message);
    let parsed;
    try {
      parsed = this.#parse(message, questions, explain);
    } catch (err) {
      throw err instanceof AnswerDefect ? err.withUsage(usage) : err;
    }
    return {
      answers: parsed.answers,
      ...(parsed.rationales ? { rationales: parsed.rationales } : {}),
      usage,
      responseModel: typeof message.model === 'string' ? message.model : this.model,
    };
  }

  /** @throws AnswerDefect for an incomplete reply, a missing block, or answers that fail validation. */
  #parse(message: Anthropic.Message, questions: ReadonlyMap<string, Question>, explain: boolean) {
    const stop = message.stop_reason;
    if (stop === null || !COMPLETE_STOPS.has(stop)) {
      throw new AnswerDefect(`anthropic: reply incomplete, stop_reason ${String(stop)}`);
    }
    if (this.useTool) {
      const block = message.content.find((b) => b.type === 'tool_use' && b.name === ANSWER_TOOL_NAME);
      if (!block || block.type !== 'tool_use')
        throw new AnswerDefect(`anthropic: no ${ANSWER_TOOL_NAME} tool_use block in the reply`);
      return parseReply(block.input, questions, explain);
    }
    const texts = message.content.filter((b) => b.type === 'text');
    if (texts.length === 0) throw new AnswerDefect('anthropic: no text block in the reply');
    return parseReplyText(texts.map((b) => b.text).join(''), questions, explain);
  }

  /**
   * Counts the input tokens of the Messages request `ask(state, questions, {explain})` would send
   * (`buildMessagesRequest`, then `countTokensRequest`) with the official endpoint, POST
   * /v1/messages/count_tokens (`client.messages.countTokens`), for `verdict estimate --exact`. The
   * endpoint is free, so nothing is recorded as spend; it is rate-limited, so the call runs under
   * the shared retry policy (429 and 5xx retried, Retry-After honoured up to the cap), one attempt
   * at a time, with the same error classification as `ask`. The input budget is not applied:
   * counting an over-budget request is how one learns its size. A schema the API finds too complex
   * is not split as `ask` splits it (a count has no answers to merge): it is a ProviderRefusal.
   * @returns the count the API reports, tokens (a non-negative integer); 0, without a request, for
   *   an empty `questions`.
   * @throws ProviderRefusal (400/422, a schema too complex, an invalid question);
   *   ProviderMisconfigured (401/403/404, billing); SchemaRejected; ProviderUnavailable (transient
   *   faults after the retries, a Retry-After above the cap, or a 200 without a usable
   *   `input_tokens` after the retries); `opts.signal.reason` on abort.
   */
  async countTokens(
    state: string,
    questions: ReadonlyMap<string, Question>,
    opts: CountTokensOptions,
  ): Promise<number> {
    opts.signal.throwIfAborted();
    checkQuestions(questions);
    if (questions.size === 0) return 0;
    const { body } = buildMessagesRequest(state, questions, this.#requestOptions(opts.explain ?? false));
    const params = countTokensRequest(body);
    await this.#sdkClient();
    const ctx = this.#retryContext(opts.signal, () => {}); // an estimate holds no claim: there is no liveness to re-check
    try {
      return await withRetries(ctx, (signal) => this.#sendCount(params, signal), classifyAnthropicError);
    } catch (err) {
      if (err instanceof SchemaTooComplex)
        throw new ProviderRefusal(`anthropic: ${err.message} (counting tokens)`, { status: err.status });
      throw err;
    }
  }

  /** One count attempt; a 200 without a non-negative integer `input_tokens` is a BadEnvelope (retried). */
  async #sendCount(params: Anthropic.MessageCountTokensParams, signal: AbortSignal): Promise<number> {
    const client = await this.#sdkClient();
    const response: unknown = await client.messages.countTokens(params, { signal });
    const r = response as { input_tokens?: unknown; error?: { type?: unknown }; _request_id?: string | null } | null;
    const n = r !== null && typeof r === 'object' ? r.input_tokens : undefined;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
      const errorType = r && typeof r === 'object' && typeof r.error?.type === 'string' ? r.error.type : null;
      const requestId = r && typeof r === 'object' ? (r._request_id ?? null) : null;
      throw new BadEnvelope(errorType, requestId);
    }
    return n;
  }

  /**
   * Doctor check: asks the API about the configured model (GET /v1/models/{model}), once, without
   * retries.
   * @returns the model id and display name the API reports; `model` is null when the answer
   *   carries no usable id (a 200 from something that is not the models endpoint), so the caller
   *   never reports "model undefined is available".
   * @throws ProviderMisconfigured (bad key, unknown model), ProviderUnavailable, ProviderRefusal.
   */
  async doctor(opts: { signal?: AbortSignal } = {}): Promise<{ model: string | null; displayName: string | null }> {
    let info: { id?: unknown; display_name?: unknown };
    try {
      info = await (await this.#sdkClient()).models.retrieve(this.model, {}, { signal: opts.signal });
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      throw classifyAnthropicError(err, false).error;
    }
    const id =
      info && typeof info === 'object' && typeof info.id === 'string' && info.id.trim() !== '' ? info.id : null;
    const name = info && typeof info === 'object' && typeof info.display_name === 'string' ? info.display_name : null;
    // Both come from the response: keep them only when they look like an id and a short name.
    return {
      model: id === null ? null : safeToken(id, 128),
      displayName: name !== null && /^[\w .:()-]{1,80}$/.test(name) ? name : null,
    };
  }

  /** Nothing to release: the SDK holds no sockets beyond the global fetch pool. */
  async close(): Promise<void> {}
}
