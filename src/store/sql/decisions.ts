import { and, asc, eq, sql, type SQL } from 'drizzle-orm';
import type { StateLink, TrailComment } from '../../decision/state.js';
import type { AnswerKey, Claim, DecisionRow, ItemForEvaluation, Liveness, NewDecision, SpendRecord, SpendTotals } from '../store.js';
import { toCollectionRow } from '../write-rules.js';
import { autocommit, exec, nowSql, one, read, rows, type Expr, type SqlContext, type Steps } from './steps.js';

/** Evaluation reads, stored answers and spend (DESIGN §2, §7). */

/**
 * The links an item's state shows (DESIGN §5), from its point of view: its parent, the items it
 * blocks, the items that block it. Links to deleted items, or to items of a deleted collection,
 * are left out, so their titles are never sent. Columns: relation, ref, title.
 */
export function stateLinksSql(itemId: string): SQL {
  return sql`
    SELECT 'parent' AS relation, t.ref AS ref, t.title AS title FROM item_links l JOIN items t ON t.id = l.target_id
      JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
      WHERE l.source_id = ${itemId} AND l.link_type = 'parent' AND t.deleted_at IS NULL
    UNION ALL
    SELECT 'blocks', t.ref, t.title FROM item_links l JOIN items t ON t.id = l.target_id
      JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
      WHERE l.source_id = ${itemId} AND l.link_type = 'blocks' AND t.deleted_at IS NULL
    UNION ALL
    SELECT 'blocked_by', s.ref, s.title FROM item_links l JOIN items s ON s.id = l.source_id
      JOIN collections sc ON sc.id = s.collection_id AND sc.deleted_at IS NULL
      WHERE l.target_id = ${itemId} AND l.link_type = 'blocks' AND s.deleted_at IS NULL`;
}

/** * Reads everything the state builder needs: the item, its collection and workspace by primary key
 * (three plain selects measured faster on SQLite than one joined select, whose nested row mapping
 * costs more than the two lookups), the live comments and the links; null when the item, its
 * collection or workspace row is missing. Not one snapshot: a
 * write landing between the statements bumps the job's generation, so the outcome of an
 * evaluation that read a torn state is superseded and the job runs again.
 */
export function loadItemForEvaluation(c: SqlContext, itemId: string): Promise<ItemForEvaluation | null> {
  const { items, collections, workspaces } = c.d.t;
  return read(c, function* () {    const item = yield* one((db) => db.select().from(items).where(eq(items.id, itemId)));
    if (!item) return null;
    const collection = yield* one((db) => db.select().from(collections).where(eq(collections.id, item.collectionId)));
    const workspace = yield* one((db) => db.select().from(workspaces).where(eq(workspaces.id, item.workspaceId)));
    if (!collection || !workspace) return null;
    const comments = yield* rows<TrailComment>(sql`
      SELECT id, author, body, created_at AS "createdAt" FROM comments
      WHERE item_id = ${itemId} AND deleted_at IS NULL ORDER BY created_at, id`);
    const links = yield* rows<StateLink>(stateLinksSql(itemId));
    return { item, collection: toCollectionRow(collection), workspace, comments, links };
  });
}

/** Liveness as the last statement before a send: item and collection live, workspace live, and the claim still held at its generation. */
export function checkLiveness(c: SqlContext, itemId: string, claim?: Claim): Promise<Liveness> {
  return read(c, function* (): Steps<Liveness> {
    const r = yield* one<{ i: number | null; c: number | null; w: number | null; token: string | null; generation: number | null }>(sql`      SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w${claim ? sql`, j.claim_token AS token, j.generation AS generation` : sql``}
      FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
      ${claim ? sql`LEFT JOIN decision_jobs j ON j.item_id = ${claim.itemId} AND j.question_set = ${claim.questionSet}` : sql``}
      WHERE i.id = ${itemId}`);
    if (!r || r.i !== null || r.c !== null) return 'item_gone';
    if (r.w !== null) return 'workspace_gone';
    if (claim) {
      if (r.token !== claim.claimToken) return 'lost';
      if (Number(r.generation) !== claim.generation) return 'superseded';
    }
    return 'live';
  });
}

/** Which wanted keys already have a stored row at exactly (state hash, question hash, state version); one query for all keys. */
export function answeredKeys(c: SqlContext, itemId: string, questionSet: string, keys: AnswerKey[]): Promise<Set<string>> {
  if (keys.length === 0) return Promise.resolve(new Set());
  const d = c.d;  // One exact-key term per key, ORed: each term is a seek on item_decisions_idem_uq on both
  // dialects (a row-value `IN (VALUES …)` made SQLite build a temporary table: 61 µs against 33
  // for three keys, measured).
  const wanted = sql.join(
    keys.map((k) => sql`(question_key = ${d.text(k.questionKey)} AND state_hash = ${d.text(k.stateHash)} AND question_hash = ${d.text(k.questionHash)} AND state_version = ${d.int4(k.stateVersion)})`),
    sql` OR `,
  );
  return read(c, function* () {
    const hits = yield* rows<{ k: string }>(sql`
      SELECT question_key AS k FROM item_decisions
      WHERE item_id = ${itemId} AND question_set = ${questionSet}
        AND (${wanted})`);
    return new Set(hits.map((h) => h.k));
  });
}

/** Inserts one call's answers in one statement (all or none); a conflict on the idempotency key does nothing. */
export function insertDecisions(c: SqlContext, list: NewDecision[]): Promise<number> {
  if (list.length === 0) return Promise.resolve(0);
  return autocommit(c, function* () {
    const now = yield* nowSql();
    const t = c.d.t.itemDecisions;
    const inserted = yield* rows((db) =>
      db
        .insert(t)
        .values(list.map((r) => ({ ...r, rationale: r.rationale ?? null, fingerprintContext: r.fingerprintContext ?? null, evaluatedAt: sql`${now}` })))
        .onConflictDoNothing()
        .returning({ id: t.id }),
    );
    return inserted.length;
  });
}

export function listDecisions(c: SqlContext, itemId: string): Promise<DecisionRow[]> {
  const t = c.d.t.itemDecisions;
  return read(c, rows((db) => db.select().from(t).where(eq(t.itemId, itemId)).orderBy(asc(t.id)))) as Promise<DecisionRow[]>;
}

export function listWorkspaceDecisions(c: SqlContext, workspaceId: string, questionSet: string): Promise<DecisionRow[]> {
  const t = c.d.t.itemDecisions;
  return read(
    c,
    rows((db) =>
      db
        .select()
        .from(t)
        .where(and(eq(t.workspaceId, workspaceId), eq(t.questionSet, questionSet)))
        .orderBy(asc(t.id)),
    ),
  ) as Promise<DecisionRow[]>;
}

export const HOUR_MS = 3_600_000;

/**
 * Start of the hour of `ms` (epoch ms), in SQL. The CAST floors on both dialects: Postgres divides
 * bigints as integers, but better-sqlite3 binds every JS number as REAL, so SQLite's `/` is real.
 */
function hourOf(ms: Expr): SQL {
  return sql`(CAST((${ms}) / ${sql.raw(String(HOUR_MS))} AS bigint) * ${sql.raw(String(HOUR_MS))})`;
}

/** Adds one evaluation's spend to its hour bucket (on Postgres the database's hour). */
export function recordSpend(c: SqlContext, r: SpendRecord): Promise<void> {
  return autocommit(c, function* () {
    yield* recordSpendTx(c, yield* nowSql(), r);
  });
}

/**
 * Adds one evaluation's spend to its hour bucket, inside the caller's transaction.
 * @param now the operation's `nowSql()` (no round trip for the database clock on Postgres).
 */
export function* recordSpendTx(c: SqlContext, now: Expr, r: SpendRecord): Steps<void> {
  const d = c.d;
  const u = r.usage;
  yield* exec(sql`
    INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    VALUES (${hourOf(now)}, ${r.questionSet}, ${r.provider}, ${r.model}, ${r.outcome}, ${d.int8(r.calls)},
            ${d.int8(u.inputTokens)}, ${d.int8(u.outputTokens)}, ${d.int8(u.cacheReadTokens)}, ${d.int8(u.cacheWriteTokens)})
    ON CONFLICT (hour, question_set, provider, model, outcome) DO UPDATE SET
      calls = decision_spend.calls + excluded.calls,
      input_tokens = decision_spend.input_tokens + excluded.input_tokens,
      output_tokens = decision_spend.output_tokens + excluded.output_tokens,
      cache_read_tokens = decision_spend.cache_read_tokens + excluded.cache_read_tokens,
      cache_write_tokens = decision_spend.cache_write_tokens + excluded.cache_write_tokens`);
}

/** Spend in the hour buckets overlapping the last `windowMs`. */
export function spendSince(c: SqlContext, windowMs: number): Promise<SpendTotals> {
  return read(c, function* () {
    const now = yield* nowSql();
    return (yield* one<SpendTotals>(sql`
      SELECT CAST(coalesce(sum(calls), 0) AS bigint) AS calls, CAST(coalesce(sum(input_tokens), 0) AS bigint) AS "inputTokens",
             CAST(coalesce(sum(output_tokens), 0) AS bigint) AS "outputTokens",
             CAST(coalesce(sum(cache_read_tokens), 0) AS bigint) AS "cacheReadTokens",
             CAST(coalesce(sum(cache_write_tokens), 0) AS bigint) AS "cacheWriteTokens"
      FROM decision_spend WHERE hour >= ${hourOf(sql`${now} - ${c.d.int8(Math.trunc(windowMs))}`)}`))!;
  });
}
