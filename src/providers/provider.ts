import type { Answer, FingerprintContext, Question } from '../decision/questions.js';
import type { Usage } from '../usage.js';

/** Re-exported: `Usage` lives in src/usage.ts so the store and the errors need not import providers. */
export type { Usage };

/** Options of one `ask`. */
export interface AskOptions {
  /** Cancels every wait and every request of this call (shutdown, lost lease, reload). */
  readonly signal: AbortSignal;
  /**
   * Called as the last statement before every attempt, including each retry. The runner re-checks
   * liveness here and throws when the item or workspace is gone; the provider must let that error
   * through unchanged and must not retry it (DESIGN §1 principle 8).
   */
  readonly beforeSend: () => Promise<void> | void;
  /** Ask for a one-sentence rationale per answer (the set's `explain`). */
  readonly explain?: boolean;
}

/** Options of one `countTokens`. */
export interface CountTokensOptions {
  /** Cancels every wait and every request of this call. */
  readonly signal: AbortSignal;
  /** Count the request with a rationale per answer (the set's `explain`), as `ask` would send it. */
  readonly explain?: boolean;
}

/** What one `ask` returns: every answer asked for, or a thrown error (all or none). */
export interface AskResult {
  /** key → derived answer and its confidence (null for nouls). */
  readonly answers: Map<string, { answer: Answer; confidence: number | null }>;
  /** key → one short sentence, only when `explain` was asked. */
  readonly rationales?: Map<string, string>;
  readonly usage: Usage;
  /** The model id the provider reported in its response; stored with the answer. */
  readonly responseModel: string;
}

/**
 * A provider answers typed questions about one state (DESIGN §9).
 * `ask(stateBytes, questions)` sends `stateBytes` exactly as hashed.
 * Errors are the typed classes of `./errors.ts` (ProviderRefusal, ProviderUnavailable,
 * ProviderMisconfigured, AnswerDefect); anything thrown by `beforeSend` passes through.
 */
export interface Provider extends FingerprintContext {
  /** `anthropic`, `openai`, `fake` or `none`. */
  readonly name: string;
  /** Upper bound of one call, in milliseconds, including the provider's own retries; the lease must cover it. */
  readonly worstCaseCallMs: number;
  /**
   * Longest Retry-After (ms) the provider honours by waiting inside one call. A ProviderUnavailable
   * whose Retry-After is above it defers the job; one at or below it is a transient fail (DESIGN
   * §3.7). @defaultValue 30000 when absent (the shared retry policy's cap)
   */
  readonly retryAfterCapMs?: number;
  ask(state: string, questions: ReadonlyMap<string, Question>, opts: AskOptions): Promise<AskResult>;
  /**
   * Input tokens, counted by the provider, of exactly the request `ask(state, questions,
   * {explain})` would send (system prompt, answer schema or tool, state), for `verdict estimate
   * --exact`. Counting asks no question and records no spend. Absent when the provider cannot count
   * exactly (then only the heuristic `estimateTokens` is available).
   * @returns a non-negative integer, tokens; 0 without a request for an empty `questions`.
   * @throws the typed errors of `ask` (never AnswerDefect); `opts.signal.reason` on abort.
   */
  countTokens?(state: string, questions: ReadonlyMap<string, Question>, opts: CountTokensOptions): Promise<number>;
  /**
   * The provider's batch API (DESIGN §7.3): half price, results within 24 h. Absent when the
   * provider has none; batching is then off.
   */
  readonly batch?: BatchApi;
  /**
   * What the provider last learned of its server's rate limits (DESIGN §9.3), from the
   * `anthropic-ratelimit-*` headers every response carries, errors included: the worker's limiter
   * reads it before each call and waits for the reset when a window is spent, so the worker slows
   * before a 429 instead of after it. null before any response, or while no response has carried
   * a usable header. Absent when the provider's server sends no such headers.
   */
  rateLimitState?(): RateLimitSnapshot | null;
  /** Releases sockets and timers. */
  close?(): Promise<void>;
}

/** One request of a batch: one chunk, as `ask` would send it. */
export interface BatchRequest {
  /** Matches `^[a-zA-Z0-9_-]{1,64}$` and is unique within the batch (the API's rule, checked before any request). */
  readonly customId: string;
  readonly state: string;
  readonly questions: ReadonlyMap<string, Question>;
  readonly explain: boolean;
}

/** Requests of a batch by outcome; all but `processing` stay 0 until the batch has ended. */
export interface BatchCounts {
  processing: number;
  succeeded: number;
  errored: number;
  canceled: number;
  expired: number;
}

/** A batch as the provider reports it. Times are the provider's clock, epoch milliseconds. */
export interface BatchInfo {
  readonly id: string;
  readonly status: 'in_progress' | 'canceling' | 'ended';
  readonly createdAt: number;
  /** When the provider stops processing it (Anthropic: 24 h after creation); what is left then expires. */
  readonly expiresAt: number;
  readonly counts: BatchCounts;
}

/**
 * The outcome of one request of an ended batch. A succeeded result carries what `ask` would have
 * returned for the same request (its usage is the billed tokens, undiscounted: the batch discount
 * is in the price, `pricing.ts` `batchCostOf`). An errored one carries the typed error `ask` would
 * have thrown (ProviderRefusal, ProviderUnavailable, ProviderMisconfigured, SchemaRejected,
 * AnswerDefect with its usage when the reply was billed).
 */
export type BatchResult = { readonly customId: string } & (
  | { readonly type: 'succeeded'; readonly result: AskResult }
  | { readonly type: 'errored'; readonly error: Error }
  | { readonly type: 'canceled' }
  | { readonly type: 'expired' }
);

/**
 * A provider's batch endpoints (DESIGN §7.3). Every call is cancelled by its signal; calls are
 * retried under the provider's retry policy without any `beforeSend` (liveness is checked when the
 * batch is assembled). Errors are the typed classes of `./errors.ts`; a batch id the provider does
 * not know is `BatchNotFound`; a request that breaks the rules of a batch (custom id, limits, no
 * question) is a TypeError before any request.
 */
export interface BatchApi {
  /** Provider limits per batch: Anthropic 100 000 requests; `maxBytes` bounds the sum of `requestBytes`. */
  readonly maxRequests: number;
  readonly maxBytes: number;
  /**
   * Where the batches go (a base URL, or `fake`): a worker that finds no batch API there marks
   * this endpoint and asks its jobs directly (DESIGN §7.4).
   */
  readonly endpoint: string;
  /**
   * Bytes one request adds to the batch body (for the assembler to respect maxBytes).
   * @throws what `ask` throws before any request for this request (ProviderRefusal
   *   `input_over_budget`, an invalid question), so the assembler can leave it out of the batch.
   */
  requestBytes(r: BatchRequest): number;
  /**
   * Creates a batch. When it throws after sending (a timeout, a dropped connection, an abort), the
   * batch may exist anyway: `list` finds it. BatchUnsupported: the endpoint has no batch API and
   * nothing was created.
   */
  submit(requests: readonly BatchRequest[], opts: { signal: AbortSignal }): Promise<BatchInfo>;
  retrieve(id: string, opts: { signal: AbortSignal }): Promise<BatchInfo>;
  /** Lists batches created at or after `since` (epoch ms, the provider's clock), newest first — used after a crash between submit and recording the id. */
  list(opts: { signal: AbortSignal; since: number }): Promise<BatchInfo[]>;
  /**
   * Results of an ended batch, in the provider's order (not the submission order), each custom id
   * at most once. `lookup` gives the questions and explain flag of a custom id (null: unknown id,
   * reported as errored). A stream that breaks part way throws (ProviderUnavailable); iterating
   * again starts from the first result.
   * @throws TypeError for a batch that has not ended.
   */
  results(
    id: string,
    lookup: (customId: string) => { questions: ReadonlyMap<string, Question>; explain: boolean } | null,
    opts: { signal: AbortSignal },
  ): AsyncIterable<BatchResult>;
  /** Asks the provider to cancel a batch: `canceling`, then `ended` with the unfinished requests canceled. An ended batch is returned unchanged. */
  cancel(id: string, opts: { signal: AbortSignal }): Promise<BatchInfo>;
}

/**
 * One rate-limit window as a response reported it (`anthropic-ratelimit-<name>-limit/-remaining/
 * -reset`). Counts are requests or tokens; `resetAt` is wall-clock epoch milliseconds (the server's
 * clock), the time the window is fully replenished, never more than `RATE_LIMIT_RESET_CAP_MS`
 * (60 s) after the response was read (providers/rate-limit-headers.ts).
 */
export interface RateLimitWindow {
  /** The window's size; null when the header is absent or malformed. */
  readonly limit: number | null;
  readonly remaining: number;
  readonly resetAt: number;
}

/**
 * The rate limits one response reported (DESIGN §9.3); a window is absent when its headers were
 * absent or malformed. Anthropic: `tokens` is the most restrictive token limit in effect,
 * `inputTokens` and `outputTokens` the per-minute input and output limits.
 */
export interface RateLimitSnapshot {
  /** When the response was read, wall-clock epoch ms. */
  readonly observedAt: number;
  readonly requests?: RateLimitWindow;
  readonly tokens?: RateLimitWindow;
  readonly inputTokens?: RateLimitWindow;
  readonly outputTokens?: RateLimitWindow;
}

/**
 * A token count from a provider's response, as a non-negative integer: anything else (a string,
 * NaN, a negative or fractional number, absent) counts as 0, so a broken usage block can neither
 * lower recorded spend nor corrupt the spend log.
 */
export function tokenCount(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
}

/**
 * Rough token estimate used for input budgets and cost estimates before any call:
 * 1 token per 3 UTF-16 code units, rounded up. Deliberately pessimistic against the ~4 chars per
 * token of English text, because Haiku 5.5's tokenizer counts about 30 % more than older models.
 */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 3);
}
