import { sql } from 'drizzle-orm';
import type { Claim } from '../store.js';
import type {
  BatchJobOutcome,
  BatchRequestRow,
  BatchResultWrite,
  NewBatchRequest,
  NewProviderBatch,
  ProviderBatchPatch,
  ProviderBatchRow,
} from '../batch-store.js';
import { VerdictError } from '../../errors.js';
import { insertDecisionsTx, recordSpendTx } from './decisions.js';
import { settleReservationTx } from './spend-reservations.js';
import { abandonReason, boundError as bound, refusalParkReason, toClaim, type RawJob } from '../write-rules.js';
import { backsOff, claimSet, park, putBack } from './jobs.js';
import {
  autocommit,
  changes,
  exec,
  nowMs,
  nowSql,
  one,
  read,
  rows,
  write,
  type Expr,
  type SqlContext,
  type Steps,
} from './steps.js';

/**
 * Provider batches on the job queue (DESIGN §7.3). A batched job is `state = 'batched'` with
 * `batch_id`, no claim and no lease: no claim takes it, and nothing but its batch's result (or
 * the batch re-owing it) moves it, except a write, whose owe sets it `owed` as for any job (live
 * work never waits a day for a batch). A result then finds the job no longer batched in its batch
 * and leaves it alone; its answers are stored for the state they were asked about.
 */

/** Thrown by `recordBatch` when a job's claim was lost before the batch was recorded: nothing was written. */
class BatchClaimLost extends VerdictError {
  readonly code = 'batch_claim_lost';
  constructor(
    readonly itemId: string,
    readonly questionSet: string,
  ) {
    super(`claim lost before batching: job (${itemId}, ${questionSet})`);
  }
}

/**
 * Claims up to `limit` due owed jobs at backfill priority (priority ≥ 1) in claim order, under a
 * lease of `leaseMs` while the batch is assembled, counting their attempts. Jobs found at the
 * abandon limit are parked, as `claimNextJob` parks them, and not returned; so are jobs whose
 * abandon backoff the claim started (`backsOff`), put back.
 */
export function claimBatchJobs(
  c: SqlContext,
  workerId: string,
  o: { leaseMs: number; limit: number; abandonLimit: number; skipSets?: readonly string[] },
): Promise<Claim[]> {
  const skip = (o.skipSets ?? []).length
    ? sql`AND j.question_set NOT IN (${sql.join(
        (o.skipSets ?? []).map((s) => sql`${s}`),
        sql`, `,
      )})`
    : sql``;
  return autocommit(c, function* () {
    const now = yield* nowSql();
    const token = c.newToken();
    // The candidates as a MATERIALIZED CTE, run once: as a sub-select under the UPDATE, Postgres
    // may plan a nested loop that re-runs it per job row, and each run, skipping the rows this
    // statement has just claimed (SKIP LOCKED), adds the next ones: 6 claims for a limit of 4
    // (test/store/claim-batch.postgres.test.ts).
    const got = yield* rows<RawJob>(sql`
      WITH picked AS MATERIALIZED (
        SELECT j.item_id, j.question_set FROM decision_jobs j
        WHERE j.state = 'owed' AND j.priority >= 1 AND j.not_before <= ${now}
          AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
          AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL)
          ${skip}
        ORDER BY j.priority, j.fair_tag, j.enqueued_at, j.item_id, j.question_set
        LIMIT ${c.d.int8(o.limit)}${c.d.skipLocked})
      UPDATE decision_jobs
      SET ${claimSet(c.d, workerId, token, now, o.leaseMs)}
      WHERE (item_id, question_set) IN (SELECT item_id, question_set FROM picked)
      RETURNING *`);
    const out: Claim[] = [];
    for (const row of got) {
      if (row.abandons >= o.abandonLimit)
        yield* park(c, now, row.item_id, row.question_set, abandonReason(row.abandons), token);
      else if (backsOff(row, o.leaseMs)) yield* putBack(row);
      else out.push(toClaim(row));
    }
    return out.sort((a, b) =>
      a.itemId === b.itemId ? (a.questionSet < b.questionSet ? -1 : 1) : a.itemId < b.itemId ? -1 : 1,
    );
  });
}

/**
 * Records a batch before it is submitted, in one transaction: the `provider_batches` row
 * (`submitting`), its requests, and every claimed job moved to `batched` (claim and lease cleared),
 * fenced by its claim token. A job whose claim was lost aborts the whole transaction.
 * @throws BatchClaimLost when a claim no longer holds (nothing was written).
 */
export function recordBatch(
  c: SqlContext,
  b: NewProviderBatch,
  requests: readonly NewBatchRequest[],
  claims: readonly Claim[],
): Promise<void> {
  return write(c, function* () {
    const now = yield* nowMs();
    yield* exec(sql`
      INSERT INTO provider_batches (id, provider, model, provider_batch_id, status, request_count, created_at)
      VALUES (${b.id}, ${b.provider}, ${b.model}, NULL, 'submitting', ${requests.length}, ${c.d.int8(now)})`);
    for (const r of requests) {
      yield* exec(sql`
        INSERT INTO batch_requests (batch_id, custom_id, workspace_id, item_id, plan)
        VALUES (${b.id}, ${r.customId}, ${r.workspaceId}, ${r.itemId}, ${JSON.stringify(r.plan)})`);
    }
    for (const claim of claims) {
      const n = yield* changes(sql`
        UPDATE decision_jobs SET state = 'batched', batch_id = ${b.id}, claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL
        WHERE item_id = ${claim.itemId} AND question_set = ${claim.questionSet} AND claim_token = ${claim.claimToken}`);
      if (n !== 1) throw new BatchClaimLost(claim.itemId, claim.questionSet);
    }
  });
}

/** Changes a batch row: its provider id and times, status, outcome (only the fields given). */
export function updateProviderBatch(c: SqlContext, id: string, p: ProviderBatchPatch): Promise<void> {
  const sets: ReturnType<typeof sql>[] = [];
  const ms = (v: number | null) => (v === null ? sql`NULL` : c.d.int8(v));
  if (p.providerBatchId !== undefined) sets.push(sql`provider_batch_id = ${p.providerBatchId}`);
  if (p.status !== undefined) sets.push(sql`status = ${p.status}`);
  if (p.submittedAt !== undefined) sets.push(sql`submitted_at = ${ms(p.submittedAt)}`);
  if (p.expiresAt !== undefined) sets.push(sql`expires_at = ${ms(p.expiresAt)}`);
  if (p.endedAt !== undefined) sets.push(sql`ended_at = ${ms(p.endedAt)}`);
  if (p.polledAt !== undefined) sets.push(sql`polled_at = ${ms(p.polledAt)}`);
  if (p.outcome !== undefined) sets.push(sql`outcome = ${p.outcome}`);
  if (sets.length === 0) return Promise.resolve();
  return write(c, function* () {
    yield* exec(sql`UPDATE provider_batches SET ${sql.join(sets, sql`, `)} WHERE id = ${id}`);
  });
}

interface RawBatch {
  id: string;
  provider: string;
  model: string;
  provider_batch_id: string | null;
  status: ProviderBatchRow['status'];
  request_count: number;
  created_at: number;
  submitted_at: number | null;
  expires_at: number | null;
  ended_at: number | null;
  polled_at: number | null;
  outcome: string | null;
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

function toBatch(r: RawBatch): ProviderBatchRow {
  return {
    id: r.id,
    provider: r.provider,
    model: r.model,
    providerBatchId: r.provider_batch_id,
    status: r.status,
    requestCount: Number(r.request_count),
    createdAt: Number(r.created_at),
    submittedAt: num(r.submitted_at),
    expiresAt: num(r.expires_at),
    endedAt: num(r.ended_at),
    polledAt: num(r.polled_at),
    outcome: r.outcome,
  };
}

/** Batch rows, oldest first; only those in `statuses` when given. */
export function listProviderBatches(
  c: SqlContext,
  statuses?: readonly ProviderBatchRow['status'][],
): Promise<ProviderBatchRow[]> {
  const where =
    statuses && statuses.length
      ? sql`WHERE status IN (${sql.join(
          statuses.map((s) => sql`${s}`),
          sql`, `,
        )})`
      : sql``;
  return read(c, function* () {
    return (yield* rows<RawBatch>(sql`SELECT * FROM provider_batches ${where} ORDER BY created_at, id`)).map(toBatch);
  });
}

/** The requests of a batch whose results are not stored yet. */
export function listBatchRequests(c: SqlContext, batchId: string): Promise<BatchRequestRow[]> {
  return read(c, function* () {
    const got = yield* rows<{
      batch_id: string;
      custom_id: string;
      workspace_id: string;
      item_id: string;
      plan: string;
    }>(sql`SELECT * FROM batch_requests WHERE batch_id = ${batchId} ORDER BY custom_id`);
    return got.map((r) => ({
      batchId: r.batch_id,
      customId: r.custom_id,
      workspaceId: r.workspace_id,
      itemId: r.item_id,
      plan: JSON.parse(r.plan),
    }));
  });
}

/**
 * A batch's jobs in one read (`Store.batchJobCounts`): those still batched in it, and those naming
 * it in any state (batched, or re-owed by a write since: its result still serves them). `jobs
 * retry` and `jobs drop` take a job out (its `batch_id` cleared or its row gone), so `named` 0
 * means nobody waits for the batch (DESIGN §7.5). Walks `decision_jobs_batch_idx`.
 */
export function batchJobCounts(c: SqlContext, batchId: string): Promise<{ batched: number; named: number }> {
  return read(c, function* () {
    const r = yield* one<{ batched: number | string | null; named: number | string }>(
      sql`SELECT sum(CASE WHEN state = 'batched' THEN 1 ELSE 0 END) AS batched, count(*) AS named FROM decision_jobs WHERE batch_id = ${batchId}`,
    );
    return { batched: Number(r?.batched ?? 0), named: Number(r?.named ?? 0) };
  });
}

/**
 * Stores one request's result in one transaction (DESIGN §7.3): its answers (whatever happens to
 * the jobs: they were paid for, and are keyed by the state asked), its spend, each job's outcome
 * (only while the job is still batched in this batch), and the request row deleted, so a sweep
 * that stops halfway stores each result once.
 * @returns answers inserted (conflicts, already stored, do nothing).
 */
export function storeBatchResult(
  c: SqlContext,
  batchId: string,
  customId: string,
  r: BatchResultWrite,
): Promise<number> {
  return write(c, function* () {
    const now = yield* nowSql();
    const gone = yield* changes(
      sql`DELETE FROM batch_requests WHERE batch_id = ${batchId} AND custom_id = ${customId}`,
    );
    if (gone !== 1) return 0; // stored already (a sweep that stopped after its commit)
    let stored = 0;
    let jobs = r.jobs;
    if (r.answers.length) {
      // Liveness in the transaction that stores (the item row locked on Postgres): an item
      // deleted since, even a moment ago, keeps no answer about its text (DESIGN §7.3).
      const live = yield* itemLivenessTx(c, r.itemId);
      if (live === 'live') {
        for (const [i, a] of r.answers.entries()) {
          // A job taken out of this batch (`jobs retry` or `jobs drop`, DESIGN §7.4) gets
          // nothing from it: its part is discarded. A job a write re-owed keeps its batch id.
          const part = r.jobs[i];
          if (part && !(yield* inBatchTx(c, batchId, part.itemId, part.questionSet))) continue;
          stored += yield* insertDecisionsTx(c, now, a.decisions, a.surfacing);
        }
      } else
        jobs = jobs.map((j) => ({
          ...j,
          outcome: live === 'item_gone' ? 'drop' : 'release',
          error: live === 'item_gone' ? undefined : 'workspace deleted',
        }));
    }
    for (const j of jobs) yield* batchJobOutcome(c, now, batchId, j);
    if (r.reservationId) yield* settleReservationTx(r.reservationId);
    for (const s of r.spend) yield* recordSpendTx(c, now, s);
    return stored;
  });
}

/** Whether the job of (item, set) still names this batch (batched, or re-owed by a write since). */
function* inBatchTx(c: SqlContext, batchId: string, itemId: string, questionSet: string): Steps<boolean> {
  return (
    (yield* one<{ n: number }>(
      sql`SELECT 1 AS n FROM decision_jobs WHERE item_id = ${itemId} AND question_set = ${questionSet} AND batch_id = ${batchId}`,
    )) !== undefined
  );
}

/** The item's liveness, its row locked (Postgres) until the transaction ends. */
function* itemLivenessTx(c: SqlContext, itemId: string): Steps<'live' | 'item_gone' | 'workspace_gone'> {
  const item = yield* one<{ deleted_at: number | null; collection_id: string; workspace_id: string }>(
    sql`SELECT deleted_at, collection_id, workspace_id FROM items WHERE id = ${itemId}${c.d.forUpdate}`,
  );
  if (!item || item.deleted_at !== null) return 'item_gone';
  const r = yield* one<{ c: number | null; w: number | null }>(sql`
    SELECT (SELECT deleted_at FROM collections WHERE id = ${item.collection_id}) AS c, (SELECT deleted_at FROM workspaces WHERE id = ${item.workspace_id}) AS w`);
  if (r?.c !== null && r?.c !== undefined) return 'item_gone';
  return r?.w !== null && r?.w !== undefined ? 'workspace_gone' : 'live';
}

function* batchJobOutcome(c: SqlContext, now: Expr, batchId: string, j: BatchJobOutcome): Steps<void> {
  const where = sql`item_id = ${j.itemId} AND question_set = ${j.questionSet} AND state = 'batched' AND batch_id = ${batchId}`;
  const owed = sql`state = 'owed', batch_id = NULL`;
  switch (j.outcome) {
    case 'complete':
    case 'drop':
      yield* exec(sql`DELETE FROM decision_jobs WHERE ${where}`);
      return;
    case 'fail':
      yield* exec(sql`
        UPDATE decision_jobs SET ${owed}, defers = 0, not_before = ${c.d.max}(not_before, ${now} + ${c.d.int8(Math.ceil(j.backoffMs ?? 0))}),
               last_error = ${bound(j.error ?? 'batch: failed')}, last_error_at = ${now}
        WHERE ${where}`);
      return;
    case 'refuse': {
      const row = yield* one<{ refusals: number }>(sql`SELECT refusals FROM decision_jobs WHERE ${where}`);
      if (!row) return;
      const limit = j.refusalLimit ?? 5;
      if (row.refusals + 1 >= limit) {
        yield* exec(sql`
          UPDATE decision_jobs SET state = 'parked', batch_id = NULL, refusals = refusals + 1, defers = 0,
                 last_error = ${bound(refusalParkReason(row.refusals + 1, j.error ?? 'batch: refused'))}, last_error_at = ${now}
          WHERE ${where}`);
        return;
      }
      yield* exec(sql`
        UPDATE decision_jobs SET ${owed}, refusals = refusals + 1, defers = 0,
               not_before = ${c.d.max}(not_before, ${now} + ${c.d.int8(Math.ceil(j.backoffMs ?? 0))}),
               last_error = ${bound(j.error ?? 'batch: refused')}, last_error_at = ${now}
        WHERE ${where}`);
      return;
    }
    case 'release':
      yield* exec(sql`
        UPDATE decision_jobs SET ${owed}, attempts = ${c.d.max}(attempts - 1, 0), not_before = ${now},
               last_error = ${j.error === undefined ? sql`last_error` : bound(j.error)}, last_error_at = ${j.error === undefined ? sql`last_error_at` : now}
        WHERE ${where}`);
      return;
  }
}

/**
 * Re-owes every job still batched in `batchId` without counting the attempt (the batch expired,
 * was canceled, was never submitted, or returned no result for them), claimable from now +
 * `holdMs`, deletes its remaining requests and marks the batch `done` with `outcome`, in one
 * transaction.
 * @returns the jobs re-owed.
 */
export function closeBatch(
  c: SqlContext,
  batchId: string,
  outcome: string,
  error?: string,
  holdMs = 0,
): Promise<number> {
  return write(c, function* () {
    const now = yield* nowMs();
    const n = yield* changes(sql`
      UPDATE decision_jobs SET state = 'owed', batch_id = NULL, attempts = ${c.d.max}(attempts - 1, 0), not_before = ${c.d.int8(now + holdMs)},
             last_error = ${error === undefined ? sql`last_error` : bound(error)}, last_error_at = ${error === undefined ? sql`last_error_at` : c.d.int8(now)}
      WHERE batch_id = ${batchId} AND state = 'batched'`);
    // The daily-cap reservations of the requests that never got a result end with the batch.
    const left = yield* rows<{ plan: string }>(sql`SELECT plan FROM batch_requests WHERE batch_id = ${batchId}`);
    for (const r of left) {
      const id = (JSON.parse(r.plan) as { reservationId?: string | null }).reservationId;
      if (id) yield* settleReservationTx(id);
    }
    yield* exec(sql`DELETE FROM batch_requests WHERE batch_id = ${batchId}`);
    yield* exec(
      sql`UPDATE provider_batches SET status = 'done', outcome = ${outcome}, ended_at = coalesce(ended_at, ${c.d.int8(now)}) WHERE id = ${batchId}`,
    );
    return n;
  });
}
