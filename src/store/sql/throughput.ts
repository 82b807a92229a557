import { sql, type SQL } from 'drizzle-orm';
import type { FinishedJob, JobFinish } from '../store.js';
import { JOB_OUTCOMES, type JobOutcome, type ThroughputRow } from '../throughput.js';
import {
  autocommit,
  bind,
  changes,
  exec,
  nowMs,
  nowSql,
  read,
  rows,
  shape,
  type Expr,
  type SqlContext,
  type Steps,
} from './steps.js';

/**
 * The job_throughput count (DESIGN §2): written by every outcome in its own transaction, so the
 * chart counts exactly the outcomes that committed, and read per minute for the queue page.
 */

/** The count's bucket, ms: one row per minute and outcome. */
export const MINUTE_MS = 60_000;

/**
 * Start of the minute of `ms` (epoch ms), in SQL. The CAST floors on both dialects, as the spend
 * hour's (decisions.ts `hourOf`): better-sqlite3 binds JS numbers as REAL.
 */
function minuteOf(ms: Expr): SQL {
  return sql`(CAST((${ms}) / ${sql.raw(String(MINUTE_MS))} AS bigint) * ${sql.raw(String(MINUTE_MS))})`;
}

// One row per (minute, outcome): a busy minute is one row updated in place, never a row per job.
const countShape = shape<'now' | 'outcome' | 'jobs'>(
  'count outcomes',
  (d, p) => sql`
    INSERT INTO job_throughput (minute, outcome, jobs) VALUES (${minuteOf(p.now)}, ${p.outcome}, ${d.int8(p.jobs)})
    ON CONFLICT (minute, outcome, shard) DO UPDATE SET jobs = job_throughput.jobs + excluded.jobs`,
);

/**
 * Adds `jobs` outcomes to the current minute's row, inside the caller's transaction: one statement
 * (prepared once per connection), whatever the number of jobs.
 * @param now the operation's `nowSql()`.
 */
export function* countOutcomes(now: Expr, outcome: JobOutcome, jobs = 1): Steps<void> {
  if (jobs > 0) yield* exec(bind(countShape, { now, outcome, jobs }));
}

/** `countOutcomes` with the operation's own "now", for a caller that has none at hand. */
export function* countOutcomesNow(outcome: JobOutcome, jobs = 1): Steps<void> {
  if (jobs > 0) yield* countOutcomes(yield* nowSql(), outcome, jobs);
}

/**
 * Counts the finishes of one transaction (`finishJob`, or a group commit's `finishJobs`): the
 * completions that applied, by outcome, one statement per outcome present (one in the steady
 * state, every entry a `complete`), not one per job. Superseded and lost finishes are not counted:
 * the job is still owed, or its other claimant records it.
 */
export function* countFinishes(
  finishes: Iterable<{ finish: Pick<JobFinish, 'outcome'>; done: Pick<FinishedJob, 'result'> | null }>,
): Steps<void> {
  const jobs = appliedByOutcome(finishes);
  if (!jobs.size) return;
  const now = yield* nowSql();
  for (const [o, n] of jobs) yield* countOutcomes(now, o, n);
}

/**
 * The finishes that applied, counted by outcome (a finish without one is a `complete`). Superseded
 * and lost finishes are left out: the job is still owed, or its other claimant records it.
 */
export function appliedByOutcome(
  finishes: Iterable<{ finish: Pick<JobFinish, 'outcome'>; done: Pick<FinishedJob, 'result'> | null }>,
): Map<JobOutcome, number> {
  const jobs = new Map<JobOutcome, number>();
  for (const { finish, done } of finishes) {
    if (done?.result !== 'applied') continue;
    const o = finish.outcome ?? JOB_OUTCOMES.complete;
    jobs.set(o, (jobs.get(o) ?? 0) + 1);
  }
  return jobs;
}

/** The rows of the minutes overlapping the last `windowMs` (ThroughputStore `throughputSince`), each minute's shards summed (DESIGN §2 job_throughput). */
export function throughputSince(
  c: SqlContext,
  windowMs: number,
): Promise<{ sinceMinute: number; rows: ThroughputRow[] }> {
  return read(c, function* () {
    const sinceMinute = Math.floor(((yield* nowMs()) - windowMs) / MINUTE_MS) * MINUTE_MS;
    const out = yield* rows<ThroughputRow>(sql`
      SELECT minute, outcome, ${c.d.int8(sql`sum(jobs)`)} AS jobs FROM job_throughput WHERE minute >= ${c.d.int8(sinceMinute)}
      GROUP BY minute, outcome
      ORDER BY minute, ${c.d.byteOrder(sql`outcome`)}`);
    return {
      sinceMinute,
      rows: out.map((r) => ({ minute: Number(r.minute), outcome: r.outcome, jobs: Number(r.jobs) })),
    };
  });
}

/**
 * Deletes the minutes that started more than `olderThanMs` ago (ThroughputStore `pruneThroughput`):
 * one statement over the primary key's leading column. A month of minutes is at most 43,200 rows
 * per outcome, so one delete per retention pass stays short.
 */
export function pruneThroughput(c: SqlContext, olderThanMs: number): Promise<number> {
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return yield* changes(sql`DELETE FROM job_throughput WHERE minute < ${now} - ${c.d.int8(Math.trunc(olderThanMs))}`);
  });
}
