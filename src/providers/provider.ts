import type { Answer, FingerprintContext, Question } from '../decision/questions.js';
import type { Usage } from '../decision/usage.js';

/** Re-exported: `Usage` lives in decision/usage.ts so the store and the errors need not import providers. */
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
   * §16.3). @defaultValue 30000 when absent (the shared retry policy's cap)
   */
  readonly retryAfterCapMs?: number;
  ask(state: string, questions: ReadonlyMap<string, Question>, opts: AskOptions): Promise<AskResult>;
  /** Releases sockets and timers. */
  close?(): Promise<void>;
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
