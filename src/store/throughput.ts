/**
 * Jobs per minute by outcome (DESIGN §2 job_throughput), counted in each outcome's own transaction
 * and read by the queue page's throughput chart (`VerdictReader.throughput`).
 */

/**
 * The outcome words the count is kept under, the one place they are spelled (a renamed outcome
 * is one edit here; rows written before keep their old word until retention deletes them).
 * A completion (`complete`) and a drop finish the job; `park`, `refuse`, `fail`, `defer` and
 * `release` leave it in the queue. A refusal that parks counts as `park` and a defer past its limit
 * as `fail`, as the store records them.
 */
export const JOB_OUTCOMES = {
  complete: 'complete',
  drop: 'drop',
  park: 'park',
  refuse: 'refuse',
  fail: 'fail',
  defer: 'defer',
  release: 'release',
} as const;

/** One counted outcome word. */
export type JobOutcome = (typeof JOB_OUTCOMES)[keyof typeof JOB_OUTCOMES];

/** The outcomes that finish a job (`JobFinish.outcome`, `completeJob`). */
export type FinishOutcome = typeof JOB_OUTCOMES.complete | typeof JOB_OUTCOMES.drop;

/** Every counted outcome, in the order the chart stacks them. */
export const JOB_OUTCOME_ORDER: readonly JobOutcome[] = Object.values(JOB_OUTCOMES);

/** One minute's count of one outcome. */
export interface ThroughputRow {
  /** Start of the minute (UTC), epoch ms. */
  minute: number;
  outcome: string;
  jobs: number;
}

/** The store's side of the count: the read for the chart and the retention delete. */
export interface ThroughputStore {
  /**
   * Rows of the minutes that overlap the last `windowMs` (on Postgres the database's clock), oldest
   * minute first, then outcome in byte order.
   * @returns `sinceMinute`, the start (epoch ms) of the oldest minute read, and the rows.
   */
  throughputSince(windowMs: number): Promise<{ sinceMinute: number; rows: ThroughputRow[] }>;
  /** Deletes the rows of minutes that started more than `olderThanMs` ago. @returns rows deleted. */
  pruneThroughput(olderThanMs: number): Promise<number>;
}
