import type { OutcomeResult } from '../store/store.js';

/**
 * The one outcome vocabulary of a job's evaluation (DESIGN §3 outcomes table): the runner, the
 * `RunReport`, the `verdict_job_outcomes_total` label, a failed call's `decision_spend.outcome`
 * and the log lines all use these words. The runner maps each to one fenced store outcome;
 * `misconfigured` and `schema_rejected` are releases the worker or the set cools off after.
 * A claim found lost (the lease ran out and another runner holds the job) is a `release` whose
 * fence reports `lost`: what became of the write is `Recorded`, never a second outcome.
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
  | { kind: 'schema_rejected'; reason: string };

/**
 * What recording an outcome did (DESIGN §3): the fence's `OutcomeResult` (`applied`,
 * `superseded`, `lost`), or `unrecorded` when the write itself failed (disk full or locked; the
 * lease bounds the job).
 */
export type Recorded = OutcomeResult | 'unrecorded';

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
