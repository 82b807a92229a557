/**
 * What an evaluation concluded (DESIGN §3 outcomes table). The runner maps each to one fenced
 * store outcome; `misconfigured` is a release plus the worker's cooling-off period.
 */
export type EvalOutcome =
  | { kind: 'complete'; reason: 'answered' | 'already_answered' | 'nothing_to_ask' }
  | { kind: 'drop'; reason: string }
  | { kind: 'park'; reason: string }
  | { kind: 'refuse'; reason: string }
  /**
   * Transient: backs off by backoff(attempts), or by `retryAfterMs` when the provider asked for
   * longer (a 5xx or 529 with a Retry-After within the provider's cap, DESIGN §3.7).
   */
  | { kind: 'fail'; reason: string; retryAfterMs?: number }
  | { kind: 'defer'; delayMs: number; reason: string }
  | { kind: 'release'; reason: string }
  | { kind: 'misconfigured'; reason: string }
  /** The provider rejected the set's answer schema: release without an attempt, the set cools off (DESIGN §3.8). */
  | { kind: 'schema_rejected'; reason: string }
  /** The lease was lost mid-evaluation: nothing is recorded; the other claimant owns the job. */
  | { kind: 'lost'; reason: string };

/** Counters of one evaluation, for the spend line and metrics. */
export interface EvalStats {
  calls: number;
  questions: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  answersStored: number;
  truncated: boolean;
}

export function emptyStats(): EvalStats {
  return {
    calls: 0,
    questions: 0,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    answersStored: 0,
    truncated: false,
  };
}
