import { sql } from 'drizzle-orm';
import type { ChunkJobCounts, MetaRow, SetJobCounts, SpendRow } from '../store.js';
import { writeTx, type SqliteContext, type Tx } from './context.js';
import { HOUR_MS } from './decisions.js';

/**
 * The operator's reads and the `verdict_meta` rows on SQLite (DESIGN §10–12): backfill chunk
 * progress, jobs by set for `status`, spend by model for cost, cursors and worker heartbeats.
 */

/** Chunks of ids bound per statement: well under SQLite's 32,766 host-parameter limit. */
const IDS_PER_STATEMENT = 500;

/**
 * Where the jobs of one backfill chunk stand. Claimable mirrors the claim's own predicate
 * (jobs.ts `claimNextJob`): owed, due, no live lease, workspace not soft-deleted. A job under a
 * live lease is in flight; any other owed job is waiting (backoff, debounce, deferral, or a
 * deleted workspace holding it).
 */
export function countChunkJobs(ctx: SqliteContext, questionSet: string, itemIds: readonly string[]): ChunkJobCounts {
  const out: ChunkJobCounts = { claimable: 0, inFlight: 0, waiting: 0, parked: 0, gone: 0 };
  const unique = [...new Set(itemIds)];
  const now = ctx.clock.now();
  let found = 0;
  for (let i = 0; i < unique.length; i += IDS_PER_STATEMENT) {
    const ids = unique.slice(i, i + IDS_PER_STATEMENT);
    const r = ctx.db.get<{ n: number; claimable: number; inflight: number; parked: number }>(sql`
      SELECT count(*) AS n,
        coalesce(sum(CASE WHEN j.state = 'owed' AND j.not_before <= ${now}
                           AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
                           AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL)
                      THEN 1 ELSE 0 END), 0) AS claimable,
        coalesce(sum(CASE WHEN j.state = 'owed' AND j.lease_expires_at > ${now} THEN 1 ELSE 0 END), 0) AS inflight,
        coalesce(sum(CASE WHEN j.state = 'parked' THEN 1 ELSE 0 END), 0) AS parked
      FROM decision_jobs j
      WHERE j.question_set = ${questionSet} AND j.item_id IN (${sql.join(ids.map((id) => sql`${id}`), sql`, `)})`)!;
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
 * Jobs by set and state for `status`. "Failing" follows the reader's `workspaceFlags` rule
 * (src/decision/reads.ts): a last error on a job that is parked or was retried after an attempt
 * or a refusal.
 */
export function jobCountsBySet(ctx: SqliteContext): SetJobCounts[] {
  const now = ctx.clock.now();
  return ctx.db.all<SetJobCounts>(sql`
    SELECT question_set AS questionSet,
      coalesce(sum(CASE WHEN state = 'owed' AND not_before <= ${now} AND (lease_expires_at IS NULL OR lease_expires_at <= ${now}) THEN 1 ELSE 0 END), 0) AS due,
      coalesce(sum(CASE WHEN state = 'owed' AND not_before > ${now} AND (lease_expires_at IS NULL OR lease_expires_at <= ${now}) THEN 1 ELSE 0 END), 0) AS waiting,
      coalesce(sum(CASE WHEN state = 'owed' AND lease_expires_at > ${now} THEN 1 ELSE 0 END), 0) AS inFlight,
      coalesce(sum(CASE WHEN state = 'parked' THEN 1 ELSE 0 END), 0) AS parked,
      coalesce(sum(CASE WHEN last_error IS NOT NULL AND (state = 'parked' OR attempts > 0 OR refusals > 0) THEN 1 ELSE 0 END), 0) AS failing,
      min(CASE WHEN state = 'owed' THEN enqueued_at END) AS oldestOwedAt,
      max(CASE WHEN last_error IS NOT NULL AND (state = 'parked' OR attempts > 0 OR refusals > 0) THEN last_error_at END) AS lastErrorAt
    FROM decision_jobs GROUP BY question_set ORDER BY question_set`);
}

/** Spend by (provider, model, set, outcome) over the hour buckets overlapping the last `windowMs`. */
export function spendRowsSince(ctx: SqliteContext, windowMs: number): { sinceHour: number; rows: SpendRow[] } {
  const sinceHour = Math.floor((ctx.clock.now() - windowMs) / HOUR_MS) * HOUR_MS;
  const rows = ctx.db.all<SpendRow>(sql`
    SELECT provider, model, question_set AS questionSet, outcome,
           sum(calls) AS calls, sum(input_tokens) AS inputTokens, sum(output_tokens) AS outputTokens,
           sum(cache_read_tokens) AS cacheReadTokens, sum(cache_write_tokens) AS cacheWriteTokens
    FROM decision_spend WHERE hour >= ${sinceHour}
    GROUP BY provider, model, question_set, outcome
    ORDER BY provider, model, question_set, outcome`);
  return { sinceHour, rows };
}

export function getMeta(ctx: SqliteContext, key: string): string | null {
  return ctx.db.get<{ value: string }>(sql`SELECT value FROM verdict_meta WHERE key = ${key}`)?.value ?? null;
}

/** Upserts one meta row inside the caller's transaction. */
export function setMetaTx(tx: Tx, now: number, key: string, value: string): void {
  tx.run(sql`
    INSERT INTO verdict_meta (key, value, updated_at) VALUES (${key}, ${value}, ${now})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`);
}

export function setMeta(ctx: SqliteContext, key: string, value: string): void {
  writeTx(ctx, (tx) => setMetaTx(tx, ctx.clock.now(), key, value));
}

export function deleteMeta(ctx: SqliteContext, key: string): void {
  writeTx(ctx, (tx) => void tx.run(sql`DELETE FROM verdict_meta WHERE key = ${key}`));
}

/** Rows whose key starts with `prefix`; an exact substr comparison, so `%` and `_` in a prefix are literal (unlike LIKE). The length is SQL's (characters), not JavaScript's (UTF-16 units), so an astral character in the prefix still matches. */
export function listMeta(ctx: SqliteContext, prefix: string): MetaRow[] {
  return ctx.db.all<MetaRow>(sql`
    SELECT key, value, updated_at AS updatedAt FROM verdict_meta
    WHERE substr(key, 1, length(${prefix})) = ${prefix} ORDER BY key`);
}
