import type { Usage } from '../usage.js';
import { VerdictError } from '../errors.js';

/**
 * Typed provider errors (DESIGN §9). The runner's outcome rules (DESIGN §3) read only these
 * classes and their stable `code`, never provider text. Messages built here must never carry
 * item text, question text, answers or provider error bodies: they may reach logs.
 */

/** Base class: every provider error has a stable machine-readable `code`. */
export abstract class ProviderError extends VerdictError {
  abstract readonly code: string;
}

/**
 * The provider refused *this request* (HTTP 400/422 about its content), or the request was
 * refused before any call because its estimated input tokens exceed the input budget.
 * Permanent: the job's `refusals` grows; over budget parks at once.
 */
export class ProviderRefusal extends ProviderError {
  readonly code: 'provider_refusal' | 'input_over_budget';
  /** HTTP status when the refusal came from the provider. */
  readonly status?: number;
  constructor(message: string, opts: { status?: number; overBudget?: boolean } = {}) {
    super(message);
    this.code = opts.overBudget ? 'input_over_budget' : 'provider_refusal';
    this.status = opts.status;
  }
}

/**
 * Transient: 5xx, 529, transport errors, timeouts, or a rate limit that outlived the provider's
 * own retries. With `rateLimited` or a `retryAfterMs` the runner defers the job (no attempt
 * counted) until that time; otherwise it fails transiently with backoff.
 */
export class ProviderUnavailable extends ProviderError {
  readonly code = 'provider_unavailable';
  /** Milliseconds to wait before asking again, when the provider said so. */
  readonly retryAfterMs?: number;
  /** True for a 429: the job defers instead of counting an attempt. */
  readonly rateLimited: boolean;
  readonly status?: number;
  constructor(message: string, opts: { retryAfterMs?: number; rateLimited?: boolean; status?: number } = {}) {
    super(message);
    this.retryAfterMs = opts.retryAfterMs;
    this.rateLimited = opts.rateLimited ?? false;
    this.status = opts.status;
  }
}

/**
 * Provider-wide: 401, 403, unknown model (404), billing. Not any job's fault (a rejected schema is
 * the set's: SchemaRejected, DESIGN §3.8):
 * the job is released without an attempt and the worker cools off (DESIGN §3).
 */
export class ProviderMisconfigured extends ProviderError {
  readonly code = 'provider_misconfigured';
  readonly status?: number;
  constructor(message: string, opts: { status?: number } = {}) {
    super(message);
    this.status = opts.status;
  }
}

/**
 * The API rejected the request's answer schema or tool definition (a 400 naming the schema):
 * the fault of the question set the schema was built from, not of the provider (DESIGN §3.8).
 * The job is released without an attempt and *that set* cools off (30 s doubling to 10 min);
 * other sets keep running.
 */
export class SchemaRejected extends ProviderError {
  readonly code = 'schema_rejected';
  readonly status?: number;
  constructor(message: string, opts: { status?: number } = {}) {
    super(message);
    this.status = opts.status;
  }
}

/**
 * The response cannot be a valid answer to the questions asked: wrong kind, missing key, out of
 * range, probabilities not summing to 1 ± 0.02, truncated (`stop_reason: max_tokens`) or refused
 * (`stop_reason: refusal`). Permanent, like a refusal.
 */
export class AnswerDefect extends ProviderError {
  readonly code = 'answer_defect';
  /**
   * Tokens the provider billed for the defective reply, when one came back (a truncated or
   * malformed answer is still paid for); the runner records it as spend with outcome `defect`.
   */
  readonly usage?: Usage;
  constructor(message: string, opts: { usage?: Usage } = {}) {
    super(message);
    this.usage = opts.usage;
  }

  /** The same defect, carrying the usage of the reply it was found in. */
  withUsage(usage: Usage): AnswerDefect {
    const e = new AnswerDefect(this.message, { usage });
    e.stack = this.stack;
    return e;
  }
}

/**
 * The provider does not know this batch id (HTTP 404 on a batch endpoint): deleted, from another
 * workspace or key, or archived. Not provider-wide like ProviderMisconfigured: only the jobs of
 * that batch are affected, and no result of it will ever come (DESIGN §7.3).
 */
export class BatchNotFound extends ProviderError {
  readonly code = 'batch_not_found';
  constructor(readonly batchId: string) {
    super(`batch ${batchId} not found`);
  }
}

/**
 * The endpoint has no Message Batches API: its batch route answered 404, 405 or 400, or a 200
 * whose body is not a batch object (many gateways and proxies in front of the Messages API).
 * Nothing was created, so the batch's jobs go back to owed at once and the worker asks them
 * directly (DESIGN §7.4). `status` is the HTTP status seen (200 for a body that is not a batch).
 */
export class BatchUnsupported extends ProviderError {
  readonly code = 'batch_unsupported';
  constructor(readonly status: number) {
    super(`batch API unavailable (HTTP ${status})`);
  }
}
