import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { Claim, JobFilter, JobRow, OutcomeResult, QueueStats } from '../store.js';
import { abandonReason, boundError, deferLimitReason, LAST_ERROR_MAX, refusalParkReason, setTiming, toClaim, type RawJob } from '../write-rules.js';
import { writeTx, type SqliteContext, type Tx } from './context.js';
import { delayCapSql, latestAnswerSql } from './owe.js';
import { decisionJobs } from './schema.js';

/**
 * The owed-job queue on SQLite (DESIGN §3): the claim and each outcome, with their SQL and the
 * reason for it together. Every outcome is fenced by the claim token; when the generation moved
 * since the claim (a write landed during the evaluation), every outcome only clears the claim and
 * recomputes not_before, so the newer generation runs.
 */

export { LAST_ERROR_MAX };

const bound = boundError;

/**
 * Claims the claimable job with the lowest (priority, fair_tag, enqueued_at) in one
 * UPDATE … RETURNING (DESIGN §3; fair_tag interleaves workspaces, see owe.ts `fairTagSql`).
 * Claimable: owed, due (not_before <= now), no live lease, workspace not soft-deleted. The same
 * statement counts the attempt, and counts an abandon when the row still carried an expired claim
 * (its claimant died without recording an outcome).
 *
 * The subquery walks `decision_jobs_claim_order_idx (state, priority, fair_tag, enqueued_at,
 * key)` in order and stops at the first claimable row, so the claim reads one index range and
 * never sorts, whatever the queue's size. A job found at the abandon limit is parked instead,
 * before any provider call, and the next one is tried.
 */
export function claimNextJob(ctx: SqliteContext, workerId: string, leaseMs: number, abandonLimit: number, skipSets: readonly string[] = []): Claim | null {
  // Sets cooling off after a rejected schema (DESIGN §16.4) are passed over; the walk filters them
  // like any other not-yet-claimable row.
  const skip = skipSets.length ? sql`AND j.question_set NOT IN (${sql.join(skipSets.map((s) => sql`${s}`), sql`, `)})` : sql``;
  return writeTx(ctx, (tx) => {
    for (;;) {
      const now = ctx.clock.now();
      const token = ctx.newToken();
      const row = tx.get<RawJob>(sql`
        UPDATE decision_jobs
        SET claimed_by = ${workerId}, claim_token = ${token}, lease_expires_at = ${now + leaseMs},
            attempts = attempts + 1,
            abandons = abandons + (CASE WHEN claim_token IS NOT NULL THEN 1 ELSE 0 END)
        WHERE (item_id, question_set) = (
          SELECT j.item_id, j.question_set FROM decision_jobs j INDEXED BY decision_jobs_claim_order_idx
          WHERE j.state = 'owed' AND j.not_before <= ${now}
            AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
            AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL)
            ${skip}
          ORDER BY j.priority, j.fair_tag, j.enqueued_at, j.item_id, j.question_set
          LIMIT 1)
        RETURNING *`);
      if (!row) return null;
      if (row.abandons >= abandonLimit) {
        parkTx(tx, now, row.item_id, row.question_set, abandonReason(row.abandons));
        continue;
      }
      return toClaim(row);
    }
  });
}

function parkTx(tx: Tx, now: number, itemId: string, questionSet: string, reason: string): void {
  tx.run(sql`
    UPDATE decision_jobs SET state = 'parked', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL, defers = 0,
           last_error = ${bound(reason)}, last_error_at = ${now}
    WHERE item_id = ${itemId} AND question_set = ${questionSet}`);
}

/** Extends the lease when the token still matches; false when the claim was lost. */
export function renewLease(ctx: SqliteContext, claim: Claim, leaseMs: number): boolean {
  return writeTx(ctx, (tx) => {
    const now = ctx.clock.now();
    const r = tx.run(sql`
      UPDATE decision_jobs SET lease_expires_at = ${now + leaseMs}
      WHERE item_id = ${claim.itemId} AND question_set = ${claim.questionSet} AND claim_token = ${claim.claimToken}`);
    return r.changes === 1;
  });
}

const CLEAR_CLAIM = sql`claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL`;

/**
 * Runs one outcome under the fence: `lost` when the token no longer matches; `superseded` when
 * the generation moved (only the claim is cleared and not_before recomputed from the debounce
 * rule); otherwise `apply` runs and the outcome is `applied`.
 */
function fenced(ctx: SqliteContext, claim: Claim, apply: (tx: Tx, row: RawJob, now: number) => void): OutcomeResult {
  return writeTx(ctx, (tx) => fencedTx(tx, ctx, claim, apply));
}

/**
 * `completion` marks the complete and drop outcomes: a job that survives its completion (the
 * generation moved: a write landed during the evaluation) gets enqueued_at = owed_at, the time of
 * that write (DESIGN §16.1), so its delay cap counts from the write the evaluation did not see.
 * Other outcomes keep enqueued_at: their owed work is still the old one.
 */
function fencedTx(
  tx: Tx,
  ctx: SqliteContext,
  claim: Claim,
  apply: (tx: Tx, row: RawJob, now: number) => void,
  completion = false,
): OutcomeResult {
  const row = tx.get<RawJob>(sql`
    SELECT * FROM decision_jobs WHERE item_id = ${claim.itemId} AND question_set = ${claim.questionSet}`);
  if (!row || row.claim_token !== claim.claimToken) return 'lost';
  const now = ctx.clock.now();
  if (row.generation !== claim.generation) {
    const { quietPeriodMs: quiet, reaskDebounceMs: debounce, maxDelayMs: maxDelay } = setTiming(ctx.registry, claim.questionSet);
    const enqueuedAt = completion ? sql`max(enqueued_at, owed_at)` : sql`enqueued_at`;
    const latest = latestAnswerSql(sql`${claim.itemId}`, claim.questionSet);
    tx.run(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, enqueued_at = ${enqueuedAt},
        not_before = min(max(not_before, ${now + quiet}, coalesce(${latest} + ${debounce}, 0)),
                         ${delayCapSql(enqueuedAt, sql`${claim.itemId}`, claim.questionSet, maxDelay)})
      WHERE item_id = ${claim.itemId} AND question_set = ${claim.questionSet}`);
    return 'superseded';
  }
  apply(tx, row, now);
  return 'applied';
}

function whereKey(claim: Claim): SQL {
  return sql`item_id = ${claim.itemId} AND question_set = ${claim.questionSet}`;
}

/**
 * Evaluation succeeded (including "already answered" and "nothing to ask"): delete the row. The
 * common case, token and generation both unchanged, is one DELETE; otherwise the fence tells
 * `lost` from `superseded`, in the same transaction.
 */
export function completeJob(ctx: SqliteContext, claim: Claim): OutcomeResult {
  return writeTx(ctx, (tx) => {
    const r = tx.run(sql`
      DELETE FROM decision_jobs
      WHERE ${whereKey(claim)} AND claim_token = ${claim.claimToken} AND generation = ${claim.generation}`);
    if (r.changes === 1) return 'applied';
    return fencedTx(tx, ctx, claim, (t) => void t.run(sql`DELETE FROM decision_jobs WHERE ${whereKey(claim)}`), true);
  });
}

/** The item or its collection is gone, or the set no longer applies: delete the row. */
export function dropJob(ctx: SqliteContext, claim: Claim): OutcomeResult {
  return completeJob(ctx, claim);
}

/** Parks the job with a reason: visible, re-owed by the next write or `jobs retry`. */
export function parkJob(ctx: SqliteContext, claim: Claim, reason: string): OutcomeResult {
  return fenced(ctx, claim, (tx, _row, now) => parkTx(tx, now, claim.itemId, claim.questionSet, reason));
}

/**
 * A permanent refusal: `refusals += 1`, clear the claim, back off; the refusal that brings the
 * count to `refusalLimit` parks instead (DESIGN §3: the 5th refusal parks).
 */
export function refuseJob(
  ctx: SqliteContext,
  claim: Claim,
  o: { backoffMs: number; error: string; refusalLimit: number },
): OutcomeResult | 'parked' {
  let parked = false;
  const r = fenced(ctx, claim, (tx, row, now) => {
    if (row.refusals + 1 >= o.refusalLimit) {
      parked = true;
      tx.run(sql`UPDATE decision_jobs SET refusals = refusals + 1 WHERE ${whereKey(claim)}`);
      parkTx(tx, now, claim.itemId, claim.questionSet, refusalParkReason(row.refusals + 1, o.error));
      return;
    }
    tx.run(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, refusals = refusals + 1, defers = 0,
        not_before = max(not_before, ${now + o.backoffMs}),
        last_error = ${bound(o.error)}, last_error_at = ${now}
      WHERE ${whereKey(claim)}`);
  });
  return r === 'applied' && parked ? 'parked' : r;
}

/** A transient failure: clear the claim, back off, reset the defer count. Never dropped. `refusals` is kept. */
export function failJob(ctx: SqliteContext, claim: Claim, o: { backoffMs: number; error: string }): OutcomeResult {
  return fenced(ctx, claim, (tx, _row, now) => failTx(tx, claim, now, o.backoffMs, o.error));
}

function failTx(tx: Tx, claim: Claim, now: number, backoffMs: number, error: string): void {
  tx.run(sql`
    UPDATE decision_jobs SET ${CLEAR_CLAIM}, defers = 0, not_before = max(not_before, ${now + Math.ceil(backoffMs)}),
      last_error = ${bound(error)}, last_error_at = ${now}
    WHERE ${whereKey(claim)}`);
}

/**
 * A rate limit, a Retry-After above the provider's cap, or the limiter or spend cap says wait: no
 * attempt counted, due at reset time, one more consecutive defer. The defer past `deferLimit` in a
 * row is recorded as a fail instead (DESIGN §16.3), read and written under the same fence.
 */
export function deferJob(
  ctx: SqliteContext,
  claim: Claim,
  o: { delayMs: number; reason: string; deferLimit: number; failBackoffMs: number },
): OutcomeResult | 'failed' {
  let failed = false;
  const r = fenced(ctx, claim, (tx, row, now) => {
    if (row.defers >= o.deferLimit) {
      failed = true;
      failTx(tx, claim, now, Math.max(o.failBackoffMs, o.delayMs), deferLimitReason(row.defers, o.reason));
      return;
    }
    tx.run(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, attempts = max(attempts - 1, 0), defers = defers + 1,
        not_before = max(not_before, ${now + Math.ceil(o.delayMs)}),
        last_error = ${bound(o.reason)}, last_error_at = ${now}
      WHERE ${whereKey(claim)}`);
  });
  return r === 'applied' && failed ? 'failed' : r;
}

/**
 * Shutdown, provider swap, workspace deleted, a set cooling off: no attempt counted; claimable at
 * once, or from now + `holdMs`. `defers` is kept (a release is no verdict of the provider's).
 */
export function releaseJob(ctx: SqliteContext, claim: Claim, o: { holdMs?: number; error?: string } = {}): OutcomeResult {
  return fenced(ctx, claim, (tx, _row, now) =>
    void tx.run(sql`UPDATE decision_jobs SET ${CLEAR_CLAIM}, attempts = max(attempts - 1, 0)
      ${o.holdMs ? sql`, not_before = max(not_before, ${now + Math.ceil(o.holdMs)})` : sql``}
      ${o.error !== undefined ? sql`, last_error = ${bound(o.error)}, last_error_at = ${now}` : sql``}
      WHERE ${whereKey(claim)}`),
  );
}

// ------------------------------------------------------------------ operator reads and commands

function toJobRow(r: typeof decisionJobs.$inferSelect): JobRow {
  return r as JobRow;
}

function filterWhere(f: JobFilter, now?: number): SQL | undefined {
  const conds: SQL[] = [];
  if (f.errorWithinMs !== undefined && now !== undefined) conds.push(sql`${decisionJobs.lastErrorAt} >= ${now - f.errorWithinMs}`);
  if (f.questionSet) conds.push(eq(decisionJobs.questionSet, f.questionSet));
  if (f.state) conds.push(eq(decisionJobs.state, f.state));
  if (f.workspaceId) conds.push(eq(decisionJobs.workspaceId, f.workspaceId));
  if (f.itemId) conds.push(eq(decisionJobs.itemId, f.itemId));
  return conds.length ? and(...conds) : undefined;
}

export function getJob(ctx: SqliteContext, itemId: string, questionSet: string): JobRow | null {
  const r = ctx.db
    .select()
    .from(decisionJobs)
    .where(and(eq(decisionJobs.itemId, itemId), eq(decisionJobs.questionSet, questionSet)))
    .get();
  return r ? toJobRow(r) : null;
}

export function listJobs(ctx: SqliteContext, f: JobFilter): JobRow[] {
  return ctx.db
    .select()
    .from(decisionJobs)
    .where(filterWhere(f, ctx.clock.now()))
    .orderBy(decisionJobs.priority, decisionJobs.enqueuedAt, decisionJobs.itemId)
    .limit(f.limit ?? 1000)
    .all()
    .map(toJobRow);
}

/** `jobs retry` (DESIGN §3): owed, counters 0, not_before = now (the one writer that may lower it). */
export function retryJobs(ctx: SqliteContext, f: JobFilter): number {
  return writeTx(ctx, (tx) => {
    const now = ctx.clock.now();
    const w = filterWhere(f);
    const r = tx.run(sql`
      UPDATE decision_jobs SET state = 'owed', attempts = 0, refusals = 0, abandons = 0, defers = 0, not_before = ${now}
      ${w ? sql`WHERE ${w}` : sql``}`);
    return r.changes;
  });
}

/** `jobs drop`: deletes matching rows that are not under a live lease. */
export function dropJobs(ctx: SqliteContext, f: JobFilter): number {
  return writeTx(ctx, (tx) => {
    const now = ctx.clock.now();
    const w = filterWhere(f);
    const r = tx.run(sql`
      DELETE FROM decision_jobs
      WHERE (lease_expires_at IS NULL OR lease_expires_at <= ${now}) ${w ? sql`AND ${w}` : sql``}`);
    return r.changes;
  });
}

export function queueStats(ctx: SqliteContext): QueueStats {
  const now = ctx.clock.now();
  const c = ctx.db.get<{
    due: number;
    waiting: number;
    inflight: number;
    parked: number;
    oldest: number | null;
    next_due: number | null;
  }>(sql`
    SELECT
      coalesce(sum(CASE WHEN state = 'owed' AND not_before <= ${now} AND (lease_expires_at IS NULL OR lease_expires_at <= ${now}) THEN 1 ELSE 0 END), 0) AS due,
      coalesce(sum(CASE WHEN state = 'owed' AND not_before > ${now} AND (lease_expires_at IS NULL OR lease_expires_at <= ${now}) THEN 1 ELSE 0 END), 0) AS waiting,
      coalesce(sum(CASE WHEN state = 'owed' AND lease_expires_at > ${now} THEN 1 ELSE 0 END), 0) AS inflight,
      coalesce(sum(CASE WHEN state = 'parked' THEN 1 ELSE 0 END), 0) AS parked,
      min(CASE WHEN state = 'owed' THEN enqueued_at END) AS oldest,
      min(CASE WHEN state = 'owed' AND not_before > ${now} THEN not_before END) AS next_due
    FROM decision_jobs`)!;
  const bySet = ctx.db.all<{ questionSet: string; state: string; count: number }>(sql`
    SELECT question_set AS questionSet, state, count(*) AS count FROM decision_jobs GROUP BY question_set, state ORDER BY question_set, state`);
  return {
    owedDue: c.due,
    owedWaiting: c.waiting,
    inFlight: c.inflight,
    parked: c.parked,
    oldestOwedAgeMs: c.oldest === null ? null : now - c.oldest,
    nextDueAt: c.next_due,
    bySet,
  };
}
