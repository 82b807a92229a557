import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { Claim, JobFilter, JobRow, OutcomeResult, QueueStats } from '../store.js';
import { abandonReason, boundError as bound, deferLimitReason, refusalParkReason, setTiming, toClaim, type RawJob } from '../write-rules.js';
import { changes, nowMs, one, rows, writeTx, type PgContext, type PgTx } from './context.js';
import { delayCapSql, latestAnswerSql } from './owe.js';
import { decisionJobs } from './schema.js';

/**
 * The owed-job queue on Postgres (DESIGN §3, §13), the twin of `../sqlite/jobs.ts`. Every time
 * here is the database's (context.ts `nowMs`), so a worker whose own clock is fast cannot expire
 * another machine's live lease. Every outcome is fenced by the claim token under a row lock; when
 * the generation moved since the claim, it only clears the claim and recomputes not_before.
 */

/**
 * Claims the claimable job with the lowest (priority, fair_tag, enqueued_at, key): one
 * `UPDATE … WHERE key = (SELECT … ORDER BY … LIMIT 1 FOR UPDATE OF j SKIP LOCKED) RETURNING *`.
 * It runs on its own (one round trip, no explicit transaction). SKIP LOCKED lets concurrent
 * claimers on many machines pass over each other's rows instead of queueing on them; the subquery is a scalar sub-select (run once), so the UPDATE can never touch
 * a second row. It walks `decision_jobs_claim_order_idx` in order and stops at the first free row,
 * like SQLite's claim. Postgres has no INDEXED BY, and on a table that autovacuum has not yet
 * analysed (a fresh database, a big backfill) its default estimates make "read every due row and
 * sort" look cheaper: 26 ms a claim at 6,000 rows (measured), against 0.07 ms for the walk. So
 * the statement is written to make the walk the plan whatever the statistics: `state <> 'parked'`
 * (the only other state; estimated to keep nearly every row) with `ORDER BY state, …` so the
 * whole index order is the sort order, and `not_before + 0` so no index offers a not_before range. A job found at the abandon limit is parked instead, before any
 * provider call, and the next one tried.
 */
/**
 * The claim's sub-select: the key of the first claimable job in claim order, locked, skipping rows
 * other claimers hold. Exported so a test can check its plan on a table without statistics.
 */
export function claimCandidateSql(now: SQL, skipSets: readonly string[] = []): SQL {
  // Sets cooling off after a rejected schema (DESIGN §16.4) are passed over like rows not yet due.
  const skip = skipSets.length ? sql`AND j.question_set NOT IN (${sql.join(skipSets.map((s) => sql`${s}`), sql`, `)})` : sql``;
  return sql`
    SELECT j.item_id, j.question_set FROM decision_jobs j
    WHERE j.state <> 'parked' AND j.not_before + 0 <= ${now}
      AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
      AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL)
      ${skip}
    ORDER BY j.state, j.priority, j.fair_tag, j.enqueued_at, j.item_id, j.question_set
    LIMIT 1
    FOR UPDATE OF j SKIP LOCKED`;
}

export async function claimNextJob(ctx: PgContext, workerId: string, leaseMs: number, abandonLimit: number, skipSets: readonly string[] = []): Promise<Claim | null> {
  for (;;) {
    const now = nowMs(ctx);
    const token = ctx.newToken();
    const row = await one<RawJob>(
      ctx.db,
      sql`
        UPDATE decision_jobs
        SET claimed_by = ${workerId}, claim_token = ${token}, lease_expires_at = ${now} + ${leaseMs}::bigint,
            attempts = attempts + 1,
            abandons = abandons + (CASE WHEN claim_token IS NOT NULL THEN 1 ELSE 0 END)
        WHERE (item_id, question_set) = (${claimCandidateSql(now, skipSets)})
        RETURNING *`,
    );
    if (!row) return null;
    if (row.abandons < abandonLimit) return toClaim(row);
    // Parked under the fresh claim's token; should this process die first, the claim expires and
    // the next claim parks it.
    await ctx.db.execute(sql`
      UPDATE decision_jobs SET state = 'parked', ${CLEAR_CLAIM}, defers = 0,
             last_error = ${bound(abandonReason(row.abandons))}, last_error_at = ${nowMs(ctx)}
      WHERE ${whereKey({ itemId: row.item_id, questionSet: row.question_set })} AND claim_token = ${token}`);
  }
}

const CLEAR_CLAIM = sql`claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL`;

function whereKey(k: { itemId: string; questionSet: string }): SQL {
  return sql`item_id = ${k.itemId} AND question_set = ${k.questionSet}`;
}

async function parkTx(tx: PgTx, ctx: PgContext, itemId: string, questionSet: string, reason: string): Promise<void> {
  await tx.execute(sql`
    UPDATE decision_jobs SET state = 'parked', ${CLEAR_CLAIM}, defers = 0,
           last_error = ${bound(reason)}, last_error_at = ${nowMs(ctx)}
    WHERE ${whereKey({ itemId, questionSet })}`);
}

/** Extends the lease when the token still matches; false when the claim was lost. */
export async function renewLease(ctx: PgContext, claim: Claim, leaseMs: number): Promise<boolean> {
  const n = await changes(
    ctx.db,
    sql`
    UPDATE decision_jobs SET lease_expires_at = ${nowMs(ctx)} + ${leaseMs}::bigint
    WHERE ${whereKey(claim)} AND claim_token = ${claim.claimToken}`,
  );
  return n === 1;
}

/**
 * Runs one outcome under the fence, with the row locked: `lost` when the token no longer
 * matches; `superseded` when the generation moved (only the claim is cleared and not_before
 * recomputed from the debounce rule); otherwise `apply` runs and the outcome is `applied`.
 */
async function fenced(
  ctx: PgContext,
  claim: Claim,
  apply: (tx: PgTx, row: RawJob, now: SQL) => Promise<unknown>,
  completion = false,
): Promise<OutcomeResult> {
  return writeTx(ctx, async (tx) => {
    const row = await one<RawJob>(tx, sql`SELECT * FROM decision_jobs WHERE ${whereKey(claim)} FOR UPDATE`);
    if (!row || row.claim_token !== claim.claimToken) return 'lost';
    const now = nowMs(ctx);
    if (row.generation !== claim.generation) {
      // A job that survives its completion counts its delay cap from the write that landed
      // during the evaluation (owed_at), DESIGN §16.1; see ../sqlite/jobs.ts `fencedTx`.
      const t = setTiming(ctx.registry, claim.questionSet);
      const enqueuedAt = completion ? sql`greatest(enqueued_at, owed_at)` : sql`enqueued_at`;
      const latest = latestAnswerSql(sql`${claim.itemId}`, claim.questionSet);
      await tx.execute(sql`
        UPDATE decision_jobs SET ${CLEAR_CLAIM}, enqueued_at = ${enqueuedAt},
          not_before = least(greatest(not_before, ${now} + ${t.quietPeriodMs}::bigint,
                                      coalesce(${latest} + ${t.reaskDebounceMs}::bigint, 0)),
                             ${delayCapSql(enqueuedAt, sql`${claim.itemId}`, claim.questionSet, t.maxDelayMs)})
        WHERE ${whereKey(claim)}`);
      return 'superseded';
    }
    await apply(tx, row, now);
    return 'applied';
  });
}

/**
 * Evaluation succeeded (including "already answered" and "nothing to ask"): delete the row. The
 * common case, token and generation both unchanged, is one statement; anything else goes through
 * the locked fence to tell `lost` from `superseded`.
 */
export async function completeJob(ctx: PgContext, claim: Claim): Promise<OutcomeResult> {
  const done = await changes(
    ctx.db,
    sql`DELETE FROM decision_jobs WHERE ${whereKey(claim)} AND claim_token = ${claim.claimToken} AND generation = ${claim.generation}::int`,
  );
  if (done === 1) return 'applied';
  return fenced(ctx, claim, (tx) => tx.execute(sql`DELETE FROM decision_jobs WHERE ${whereKey(claim)}`), true);
}

/** The item or its collection is gone, or the set no longer applies: delete the row. */
export async function dropJob(ctx: PgContext, claim: Claim): Promise<OutcomeResult> {
  return completeJob(ctx, claim);
}

/** Parks the job with a reason: visible, re-owed by the next write or `jobs retry`. */
export async function parkJob(ctx: PgContext, claim: Claim, reason: string): Promise<OutcomeResult> {
  return fenced(ctx, claim, (tx) => parkTx(tx, ctx, claim.itemId, claim.questionSet, reason));
}

/** A permanent refusal: refusals += 1 and back off; the refusal that reaches `refusalLimit` parks. */
export async function refuseJob(ctx: PgContext, claim: Claim, o: { backoffMs: number; error: string; refusalLimit: number }): Promise<OutcomeResult | 'parked'> {
  let parked = false;
  const r = await fenced(ctx, claim, async (tx, row, now) => {
    if (row.refusals + 1 >= o.refusalLimit) {
      parked = true;
      await tx.execute(sql`UPDATE decision_jobs SET refusals = refusals + 1 WHERE ${whereKey(claim)}`);
      await parkTx(tx, ctx, claim.itemId, claim.questionSet, refusalParkReason(row.refusals + 1, o.error));
      return;
    }
    await tx.execute(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, refusals = refusals + 1, defers = 0,
        not_before = greatest(not_before, ${now} + ${o.backoffMs}::bigint),
        last_error = ${bound(o.error)}, last_error_at = ${now}
      WHERE ${whereKey(claim)}`);
  });
  return r === 'applied' && parked ? 'parked' : r;
}

/** A transient failure: clear the claim, back off, reset the defer count. Never dropped. `refusals` is kept. */
export async function failJob(ctx: PgContext, claim: Claim, o: { backoffMs: number; error: string }): Promise<OutcomeResult> {
  return fenced(ctx, claim, (tx, _row, now) => failTx(tx, claim, now, o.backoffMs, o.error));
}

function failTx(tx: PgTx, claim: Claim, now: SQL, backoffMs: number, error: string) {
  return tx.execute(sql`
    UPDATE decision_jobs SET ${CLEAR_CLAIM}, defers = 0, not_before = greatest(not_before, ${now} + ${Math.ceil(backoffMs)}::bigint),
      last_error = ${bound(error)}, last_error_at = ${now}
    WHERE ${whereKey(claim)}`);
}

/**
 * A rate limit, a Retry-After above the provider's cap, or the limiter or spend cap says wait: no
 * attempt counted, due at reset time, one more consecutive defer. The defer past `deferLimit` in a
 * row is recorded as a fail instead (DESIGN §16.3), read and written under the same row lock.
 */
export async function deferJob(
  ctx: PgContext,
  claim: Claim,
  o: { delayMs: number; reason: string; deferLimit: number; failBackoffMs: number },
): Promise<OutcomeResult | 'failed'> {
  let failed = false;
  const r = await fenced(ctx, claim, async (tx, row, now) => {
    if (row.defers >= o.deferLimit) {
      failed = true;
      await failTx(tx, claim, now, Math.max(o.failBackoffMs, o.delayMs), deferLimitReason(row.defers, o.reason));
      return;
    }
    await tx.execute(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, attempts = greatest(attempts - 1, 0), defers = defers + 1,
        not_before = greatest(not_before, ${now} + ${Math.ceil(o.delayMs)}::bigint),
        last_error = ${bound(o.reason)}, last_error_at = ${now}
      WHERE ${whereKey(claim)}`);
  });
  return r === 'applied' && failed ? 'failed' : r;
}

/**
 * Shutdown, provider swap, workspace deleted, a set cooling off: no attempt counted; claimable at
 * once, or from now + `holdMs`. `defers` is kept (a release is no verdict of the provider's).
 */
export async function releaseJob(ctx: PgContext, claim: Claim, o: { holdMs?: number; error?: string } = {}): Promise<OutcomeResult> {
  return fenced(ctx, claim, (tx, _row, now) =>
    tx.execute(sql`UPDATE decision_jobs SET ${CLEAR_CLAIM}, attempts = greatest(attempts - 1, 0)
      ${o.holdMs ? sql`, not_before = greatest(not_before, ${now} + ${Math.ceil(o.holdMs)}::bigint)` : sql``}
      ${o.error !== undefined ? sql`, last_error = ${bound(o.error)}, last_error_at = ${now}` : sql``}
      WHERE ${whereKey(claim)}`),
  );
}

// ------------------------------------------------------------------ operator reads and commands

/** The filter's conditions; `errorWithinMs` only when `now` is given (`listJobs` alone reads it, as on SQLite). */
function filterWhere(f: JobFilter, now?: SQL): SQL | undefined {
  const conds: SQL[] = [];
  if (f.errorWithinMs !== undefined && now !== undefined) conds.push(sql`${decisionJobs.lastErrorAt} >= ${now} - ${Math.trunc(f.errorWithinMs)}::bigint`);
  if (f.questionSet) conds.push(eq(decisionJobs.questionSet, f.questionSet));
  if (f.state) conds.push(eq(decisionJobs.state, f.state));
  if (f.workspaceId) conds.push(eq(decisionJobs.workspaceId, f.workspaceId));
  if (f.itemId) conds.push(eq(decisionJobs.itemId, f.itemId));
  return conds.length ? and(...conds) : undefined;
}

export async function getJob(ctx: PgContext, itemId: string, questionSet: string): Promise<JobRow | null> {
  const [r] = await ctx.db
    .select()
    .from(decisionJobs)
    .where(and(eq(decisionJobs.itemId, itemId), eq(decisionJobs.questionSet, questionSet)));
  return (r as JobRow | undefined) ?? null;
}

export async function listJobs(ctx: PgContext, f: JobFilter): Promise<JobRow[]> {
  return (await ctx.db
    .select()
    .from(decisionJobs)
    .where(filterWhere(f, nowMs(ctx)))
    .orderBy(decisionJobs.priority, decisionJobs.enqueuedAt, sql`${decisionJobs.itemId} COLLATE "C"`)
    .limit(f.limit ?? 1000)) as JobRow[];
}

/** `jobs retry` (DESIGN §3): owed, counters 0, not_before = now (the one writer that may lower it). */
export async function retryJobs(ctx: PgContext, f: JobFilter): Promise<number> {
  const w = filterWhere(f);
  return changes(
    ctx.db,
    sql`
    UPDATE decision_jobs SET state = 'owed', attempts = 0, refusals = 0, abandons = 0, defers = 0, not_before = ${nowMs(ctx)}
    ${w ? sql`WHERE ${w}` : sql``}`,
  );
}

/** `jobs drop`: deletes matching rows that are not under a live lease. */
export async function dropJobs(ctx: PgContext, f: JobFilter): Promise<number> {
  const w = filterWhere(f);
  return changes(
    ctx.db,
    sql`
    DELETE FROM decision_jobs
    WHERE (lease_expires_at IS NULL OR lease_expires_at <= ${nowMs(ctx)}) ${w ? sql`AND ${w}` : sql``}`,
  );
}

export async function queueStats(ctx: PgContext): Promise<QueueStats> {
  return writeTx(ctx, async (tx) => {
    const n = nowMs(ctx);
    const c = (await one<{ now: number; due: number; waiting: number; inflight: number; parked: number; oldest: number | null; next_due: number | null }>(
      tx,
      sql`
      SELECT ${n} AS now,
        count(*) FILTER (WHERE state = 'owed' AND not_before <= ${n} AND (lease_expires_at IS NULL OR lease_expires_at <= ${n}))::int AS due,
        count(*) FILTER (WHERE state = 'owed' AND not_before > ${n} AND (lease_expires_at IS NULL OR lease_expires_at <= ${n}))::int AS waiting,
        count(*) FILTER (WHERE state = 'owed' AND lease_expires_at > ${n})::int AS inflight,
        count(*) FILTER (WHERE state = 'parked')::int AS parked,
        min(enqueued_at) FILTER (WHERE state = 'owed') AS oldest,
        min(not_before) FILTER (WHERE state = 'owed' AND not_before > ${n}) AS next_due
      FROM decision_jobs`,
    ))!;
    const bySet = await rows<{ questionSet: string; state: string; count: number }>(
      tx,
      sql`
      SELECT question_set AS "questionSet", state, count(*)::int AS count FROM decision_jobs
      GROUP BY question_set, state ORDER BY question_set COLLATE "C", state COLLATE "C"`,
    );
    return {
      owedDue: c.due,
      owedWaiting: c.waiting,
      inFlight: c.inflight,
      parked: c.parked,
      oldestOwedAgeMs: c.oldest === null ? null : c.now - c.oldest,
      nextDueAt: c.next_due,
      bySet,
    };
  });
}
