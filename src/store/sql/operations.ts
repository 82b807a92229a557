import { sql, type SQL } from 'drizzle-orm';
import type { ChunkJobCounts, SetJobCounts } from '../queue-store.js';
import type { SpendHourRow, SpendRow } from '../spend-store.js';
import type { MetaRow } from '../meta-store.js';
import { HOUR_MS } from './decisions.js';
import { SPEND_DAY_MS } from '../spend-rules.js';
import {
  autocommit,
  bind,
  exec,
  inList,
  nowMs,
  nowSql,
  one,
  read,
  rows,
  shape,
  write,
  type SqlContext,
  type Steps,
} from './steps.js';

/**
 * The operator's reads and the `verdict_meta` rows (DESIGN §10–12): backfill chunk progress, jobs
 * by set for `status`, spend by model for cost, cursors and worker heartbeats. On Postgres every
 * time is the database's. Counts are cast to int and sums back to bigint so both Postgres drivers
 * read JS numbers; text sorts in byte order (`byteOrder`, SQLite's BINARY) so both stores list alike.
 */

/** Ids bound per statement: well under SQLite's 32,766 host parameters (Postgres allows 65,535). */
const IDS_PER_STATEMENT = 500;

/**
 * Where the jobs of one backfill chunk stand. Claimable mirrors the claim's own predicate
 * (jobs.ts `claimCandidateSql`): owed, due, no live lease, workspace not soft-deleted. A job under
 * a live lease is in flight; any other owed job is waiting (backoff, debounce, deferral, or a
 * deleted workspace holding it). With more than 500 ids the counts come from several statements
 * (on Postgres each with its own database "now").
 */
export function countChunkJobs(
  c: SqlContext,
  questionSet: string,
  itemIds: readonly string[],
): Promise<ChunkJobCounts> {
  return read(c, function* () {
    const out: ChunkJobCounts = { claimable: 0, inFlight: 0, waiting: 0, parked: 0, gone: 0 };
    const unique = [...new Set(itemIds)];
    const now = yield* nowSql();
    const n = (filter: SQL) => c.d.int4(sql`count(*) FILTER (WHERE ${filter})`);
    let found = 0;
    for (let i = 0; i < unique.length; i += IDS_PER_STATEMENT) {
      const r = (yield* one<{ n: number; claimable: number; inflight: number; parked: number }>(sql`
        SELECT ${c.d.int4(sql`count(*)`)} AS n,
          ${n(sql`j.state = 'owed' AND j.not_before <= ${now}
                  AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
                  AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL)`)} AS claimable,
          ${n(sql`j.state = 'owed' AND j.lease_expires_at > ${now}`)} AS inflight,
          ${n(sql`j.state = 'parked'`)} AS parked
        FROM decision_jobs j
        WHERE j.question_set = ${questionSet} AND ${inList(sql`j.item_id`, unique.slice(i, i + IDS_PER_STATEMENT))}`))!;
      found += r.n;
      out.claimable += r.claimable;
      out.inFlight += r.inflight;
      out.parked += r.parked;
      out.waiting += r.n - r.claimable - r.inflight - r.parked;
    }
    out.gone = unique.length - found;
    return out;
  });
}

/**
 * Jobs by set and state for `status`, by set name in byte order. "Failing" follows the reader's
 * `workspaceFlags` rule (src/decision/reads.ts): a last error on a job that is parked or was
 * retried after an attempt or a refusal.
 */
export function jobCountsBySet(c: SqlContext, workspaceId?: string): Promise<SetJobCounts[]> {
  return read(c, function* () {
    const now = yield* nowSql();
    const n = (filter: SQL) => c.d.int4(sql`count(*) FILTER (WHERE ${filter})`);
    const free = sql`(lease_expires_at IS NULL OR lease_expires_at <= ${now})`;
    const failing = sql`last_error IS NOT NULL AND (state = 'parked' OR attempts > 0 OR refusals > 0)`;
    return yield* rows<SetJobCounts>(sql`
      SELECT question_set AS "questionSet",
        ${n(sql`state = 'owed' AND not_before <= ${now} AND ${free}`)} AS due,
        ${n(sql`state = 'owed' AND not_before > ${now} AND ${free}`)} AS waiting,
        ${n(sql`state = 'owed' AND lease_expires_at > ${now}`)} AS "inFlight",
        ${n(sql`state = 'parked'`)} AS parked,
        ${n(failing)} AS failing,
        min(enqueued_at) FILTER (WHERE state = 'owed') AS "oldestOwedAt",
        max(last_error_at) FILTER (WHERE ${failing}) AS "lastErrorAt"
      FROM decision_jobs ${workspaceId === undefined ? sql`` : sql`WHERE workspace_id = ${workspaceId}`}
      GROUP BY question_set ORDER BY ${c.d.byteOrder(sql`question_set`)}`);
  });
}

/** Spend by (provider, model, set, outcome) over the hour buckets overlapping the last `windowMs`. */
export function spendRowsSince(c: SqlContext, windowMs: number): Promise<{ sinceHour: number; rows: SpendRow[] }> {
  return read(c, function* () {
    const sinceHour = Math.floor(((yield* nowMs()) - windowMs) / HOUR_MS) * HOUR_MS;
    const sum = (col: string) => c.d.int8(sql`sum(${sql.raw(col)})`);
    const o = (col: string) => c.d.byteOrder(sql.raw(col));
    const out = yield* rows<SpendRow>(sql`
      SELECT provider, model, question_set AS "questionSet", outcome,
             ${sum('calls')} AS calls, ${sum('input_tokens')} AS "inputTokens", ${sum('output_tokens')} AS "outputTokens",
             ${sum('cache_read_tokens')} AS "cacheReadTokens", ${sum('cache_write_tokens')} AS "cacheWriteTokens"
      FROM decision_spend WHERE hour >= ${c.d.int8(sinceHour)}
      GROUP BY provider, model, question_set, outcome
      ORDER BY ${o('provider')}, ${o('model')}, ${o('question_set')}, ${o('outcome')}`);
    return { sinceHour, rows: out };
  });
}

/**
 * Spend by (bucket, provider, model, set, outcome) over the hour buckets overlapping the last
 * `windowMs`, oldest bucket first. A `day` bucket is summed here (the hour's UTC day start, `hour`
 * less its remainder of a day: hours are epoch ms, so epoch-aligned days are UTC days): the
 * dashboard's 30-day chart then reads tens of rows, not one per stored hour (4,560 rows in a month
 * of two sets measured 120 ms of row mapping per page).
 */
export function spendByHourSince(
  c: SqlContext,
  windowMs: number,
  bucket: 'hour' | 'day' = 'hour',
): Promise<{ sinceHour: number; rows: SpendHourRow[] }> {
  return read(c, function* () {
    const sinceHour = Math.floor(((yield* nowMs()) - windowMs) / HOUR_MS) * HOUR_MS;
    const sum = (col: string) => c.d.int8(sql`sum(${sql.raw(col)})`);
    const o = (col: string) => c.d.byteOrder(sql.raw(col));
    const at = bucket === 'day' ? sql`(hour - hour % ${sql.raw(String(SPEND_DAY_MS))})` : sql`hour`;
    const out = yield* rows<SpendHourRow>(sql`
      SELECT ${c.d.int8(at)} AS hour, provider, model, question_set AS "questionSet", outcome,
             ${sum('calls')} AS calls, ${sum('input_tokens')} AS "inputTokens", ${sum('output_tokens')} AS "outputTokens",
             ${sum('cache_read_tokens')} AS "cacheReadTokens", ${sum('cache_write_tokens')} AS "cacheWriteTokens"
      FROM decision_spend WHERE hour >= ${c.d.int8(sinceHour)}
      GROUP BY ${at}, provider, model, question_set, outcome
      ORDER BY 1, ${o('provider')}, ${o('model')}, ${o('question_set')}, ${o('outcome')}`);
    return { sinceHour, rows: out.map((r) => ({ ...r, hour: Number(r.hour) })) };
  });
}

/**
 * A shape, so SQLite prepares it once per connection: every item view with answers reads the
 * collection's pending-change row through it (reads.ts `pendingCollectionSets`), and compiling the
 * `sql` text per call cost about as much as the rest of that view's statements together (bench
 * part j under --cpu-prof).
 */
const metaByKeyShape = shape<'key'>('meta by key', (_d, p) => sql`SELECT value FROM verdict_meta WHERE key = ${p.key}`);

/** One `verdict_meta` value, or null. */
export function getMeta(c: SqlContext, key: string): Promise<string | null> {
  return read(c, function* () {
    return (yield* one<{ value: string }>(bind(metaByKeyShape, { key })))?.value ?? null;
  });
}

/** Upserts one meta row inside the caller's transaction; updated_at is the operation's now. */
export function* setMetaTx(c: SqlContext, key: string, value: string): Steps<void> {
  const now = yield* nowSql();
  yield* exec(sql`
    INSERT INTO verdict_meta (key, value, updated_at) VALUES (${key}, ${value}, ${now})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`);
}

/** Inserts or replaces one `verdict_meta` row. */
export function setMeta(c: SqlContext, key: string, value: string): Promise<void> {
  return write(c, () => setMetaTx(c, key, value));
}

/** Deletes one `verdict_meta` row; a missing key is not an error. */
export function deleteMeta(c: SqlContext, key: string): Promise<void> {
  return autocommit(c, () => exec(sql`DELETE FROM verdict_meta WHERE key = ${key}`));
}

/**
 * Rows whose key starts with `prefix`, by key in byte order. An exact substr comparison, so `%`,
 * `_` and `\` in a prefix are literal (unlike LIKE); the length is SQL's (characters), not
 * JavaScript's (UTF-16 units), so an astral character in the prefix still matches.
 */
export function listMeta(c: SqlContext, prefix: string): Promise<MetaRow[]> {
  return read(
    c,
    rows<MetaRow>(sql`
    SELECT key, value, updated_at AS "updatedAt" FROM verdict_meta
    WHERE ${keyHasPrefix(c, prefix)} ORDER BY ${c.d.byteOrder(sql`key`)}`),
  );
}

/** `key` starts with `prefix` (the parameter typed, which Postgres' overloaded `length` needs). */
export function keyHasPrefix(c: SqlContext, prefix: string): SQL {
  return sql`substr(key, 1, length(${c.d.text(prefix)})) = ${c.d.text(prefix)}`;
}
