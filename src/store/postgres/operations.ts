import { sql } from 'drizzle-orm';
import type { ChunkJobCounts, MetaRow, SetJobCounts, SpendRow } from '../store.js';
import { changes, nowMs, one, readNow, rows, writeTx, type PgContext, type PgTx } from './context.js';
import { HOUR_MS } from './decisions.js';

/**
 * The operator's reads and the `verdict_meta` rows on Postgres (DESIGN §10–12), the twin of
 * `../sqlite/operations.ts`: backfill chunk progress, jobs by set for `status`, spend by model for
 * cost, cursors and worker heartbeats. Every time is the database's (context.ts `nowMs`).
 */

/** Ids bound per statement: keeps one statement's parameter list short (Postgres allows 65,535). */
const IDS_PER_STATEMENT = 500;

/**
 * Where the jobs of one backfill chunk stand. Claimable mirrors the claim's own predicate
 * (jobs.ts `claimCandidateSql`): owed, due, no live lease, workspace not soft-deleted. A job under
 * a live lease is in flight; any other owed job is waiting (backoff, debounce, deferral, or a
 * deleted workspace holding it). With more than 500 ids the counts come from several statements
 * (each with its own database "now"), as on SQLite.
 */
export async function countChunkJobs(ctx: PgContext, questionSet: string, itemIds: readonly string[]): Promise<ChunkJobCounts> {
  const out: ChunkJobCounts = { claimable: 0, inFlight: 0, waiting: 0, parked: 0, gone: 0 };
  const unique = [...new Set(itemIds)];
  const now = nowMs(ctx);
  let found = 0;
  for (let i = 0; i < unique.length; i += IDS_PER_STATEMENT) {
    const ids = unique.slice(i, i + IDS_PER_STATEMENT);
    const r = (await one<{ n: number; claimable: number; inflight: number; parked: number }>(
      ctx.db,
      sql`
      SELECT count(*)::int AS n,
        count(*) FILTER (WHERE j.state = 'owed' AND j.not_before <= ${now}
                           AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
                           AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL))::int AS claimable,
        count(*) FILTER (WHERE j.state = 'owed' AND j.lease_expires_at > ${now})::int AS inflight,
        count(*) FILTER (WHERE j.state = 'parked')::int AS parked
      FROM decision_jobs j
      WHERE j.question_set = ${questionSet} AND j.item_id IN (${sql.join(ids.map((id) => sql`${id}`), sql`, `)})`,
    ))!;
    found += r.n;
    out.claimable += r.claimable;
    out.inFlight += r.inflight;
    out.parked += r.parked;
    out.waiting += r.n - r.claimable - r.inflight - r.parked;
  }
  out.gone = unique.length - found;
  return out;
}

/**
 * Jobs by set and state for `status`, by set name (byte order, as on SQLite). "Failing" follows
 * the reader's `workspaceFlags` rule (src/decision/reads.ts): a last error on a job that is parked
 * or was retried after an attempt or a refusal.
 */
export async function jobCountsBySet(ctx: PgContext): Promise<SetJobCounts[]> {
  const now = nowMs(ctx);
  const failing = sql`last_error IS NOT NULL AND (state = 'parked' OR attempts > 0 OR refusals > 0)`;
  return rows<SetJobCounts>(
    ctx.db,
    sql`
    SELECT question_set AS "questionSet",
      count(*) FILTER (WHERE state = 'owed' AND not_before <= ${now} AND (lease_expires_at IS NULL OR lease_expires_at <= ${now}))::int AS due,
      count(*) FILTER (WHERE state = 'owed' AND not_before > ${now} AND (lease_expires_at IS NULL OR lease_expires_at <= ${now}))::int AS waiting,
      count(*) FILTER (WHERE state = 'owed' AND lease_expires_at > ${now})::int AS "inFlight",
      count(*) FILTER (WHERE state = 'parked')::int AS parked,
      count(*) FILTER (WHERE ${failing})::int AS failing,
      min(enqueued_at) FILTER (WHERE state = 'owed') AS "oldestOwedAt",
      max(last_error_at) FILTER (WHERE ${failing}) AS "lastErrorAt"
    FROM decision_jobs GROUP BY question_set ORDER BY question_set COLLATE "C"`,
  );
}

/**
 * Spend by (provider, model, set, outcome) over the hour buckets overlapping the last `windowMs`
 * of the database clock. Sums are cast back to `bigint` so both drivers read JS numbers.
 */
export async function spendRowsSince(ctx: PgContext, windowMs: number): Promise<{ sinceHour: number; rows: SpendRow[] }> {
  const sinceHour = Math.floor(((await readNow(ctx)) - windowMs) / HOUR_MS) * HOUR_MS;
  const out = await rows<SpendRow>(
    ctx.db,
    sql`
    SELECT provider, model, question_set AS "questionSet", outcome,
           sum(calls)::bigint AS calls, sum(input_tokens)::bigint AS "inputTokens", sum(output_tokens)::bigint AS "outputTokens",
           sum(cache_read_tokens)::bigint AS "cacheReadTokens", sum(cache_write_tokens)::bigint AS "cacheWriteTokens"
    FROM decision_spend WHERE hour >= ${sinceHour}::bigint
    GROUP BY provider, model, question_set, outcome
    ORDER BY provider COLLATE "C", model COLLATE "C", question_set COLLATE "C", outcome COLLATE "C"`,
  );
  return { sinceHour, rows: out };
}

/** One `verdict_meta` value, or null. */
export async function getMeta(ctx: PgContext, key: string): Promise<string | null> {
  return (await one<{ value: string }>(ctx.db, sql`SELECT value FROM verdict_meta WHERE key = ${key}`))?.value ?? null;
}

/** Upserts one meta row on `tx` (the caller's transaction), updated_at = the database's now. */
export async function setMetaTx(ctx: PgContext, tx: PgTx, key: string, value: string): Promise<void> {
  await tx.execute(sql`
    INSERT INTO verdict_meta (key, value, updated_at) VALUES (${key}, ${value}, ${nowMs(ctx)})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`);
}

/** Inserts or replaces one `verdict_meta` row. */
export async function setMeta(ctx: PgContext, key: string, value: string): Promise<void> {
  await writeTx(ctx, (tx) => setMetaTx(ctx, tx, key, value));
}

/** Deletes one `verdict_meta` row; a missing key is not an error. */
export async function deleteMeta(ctx: PgContext, key: string): Promise<void> {
  await changes(ctx.db, sql`DELETE FROM verdict_meta WHERE key = ${key}`);
}

/**
 * Rows whose key starts with `prefix`, by key in byte order (COLLATE "C", as SQLite's BINARY).
 * An exact `left(key, length(prefix)) = prefix` comparison, so `%`, `_` and `\` in a prefix are
 * literal (unlike LIKE).
 */
export async function listMeta(ctx: PgContext, prefix: string): Promise<MetaRow[]> {
  return rows<MetaRow>(
    ctx.db,
    sql`
    SELECT key, value, updated_at AS "updatedAt" FROM verdict_meta
    WHERE left(key, length(${prefix}::text)) = ${prefix}::text ORDER BY key COLLATE "C"`,
  );
}
