import { asc, eq, and, sql } from 'drizzle-orm';
import type { StateLink, TrailComment } from '../../decision/state.js';
import type { AnswerKey, Claim, DecisionRow, ItemForEvaluation, Liveness, NewDecision, SpendRecord, SpendTotals } from '../store.js';
import { stateLinksSql } from '../shared-rows.js';
import { toCollectionRow } from '../write-rules.js';
import { writeTx, type SqliteContext, type Tx } from './context.js';
import { collections, decisionSpend, itemDecisions, items, workspaces } from './schema.js';

/** Evaluation reads, stored answers and spend on SQLite (DESIGN §2, §7). */

/** Reads everything the state builder needs; null when the item, its collection or workspace row is missing. */
export function loadItemForEvaluation(ctx: SqliteContext, itemId: string): ItemForEvaluation | null {
  const db = ctx.db;
  const item = db.select().from(items).where(eq(items.id, itemId)).get();
  if (!item) return null;
  const collection = db.select().from(collections).where(eq(collections.id, item.collectionId)).get();
  const workspace = db.select().from(workspaces).where(eq(workspaces.id, item.workspaceId)).get();
  if (!collection || !workspace) return null;
  const trail = db.all<TrailComment>(sql`
    SELECT id, author, body, created_at AS createdAt FROM comments
    WHERE item_id = ${itemId} AND deleted_at IS NULL ORDER BY created_at, id`);
  const links = db.all<StateLink>(stateLinksSql(itemId));
  return { item, collection: toCollectionRow(collection), workspace, comments: trail, links };
}

/** Liveness as the last statement before a send: item and collection live, workspace live. */
export function checkLiveness(ctx: SqliteContext, itemId: string, claim?: Claim): Liveness {
  const r = ctx.db.get<{ i: number | null; c: number | null; w: number | null }>(sql`
    SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w
    FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
    WHERE i.id = ${itemId}`);
  if (!r || r.i !== null || r.c !== null) return 'item_gone';
  if (r.w !== null) return 'workspace_gone';
  if (claim) {
    const j = ctx.db.get<{ token: string | null; generation: number }>(sql`
      SELECT claim_token AS token, generation FROM decision_jobs
      WHERE item_id = ${claim.itemId} AND question_set = ${claim.questionSet}`);
    if (!j || j.token !== claim.claimToken) return 'lost';
    if (j.generation !== claim.generation) return 'superseded';
  }
  return 'live';
}

/** Which wanted keys already have a stored row at exactly (state hash, question hash, state version). */
export function answeredKeys(ctx: SqliteContext, itemId: string, questionSet: string, keys: AnswerKey[]): Set<string> {
  const done = new Set<string>();
  for (const k of keys) {
    const hit = ctx.db.get<{ one: number }>(sql`
      SELECT 1 AS one FROM item_decisions
      WHERE item_id = ${itemId} AND question_set = ${questionSet} AND question_key = ${k.questionKey}
        AND state_hash = ${k.stateHash} AND question_hash = ${k.questionHash} AND state_version = ${k.stateVersion}`);
    if (hit) done.add(k.questionKey);
  }
  return done;
}

/** Inserts one call's answers in one transaction; a conflict on the idempotency key does nothing. */
export function insertDecisions(ctx: SqliteContext, rows: NewDecision[]): number {
  if (rows.length === 0) return 0;
  return writeTx(ctx, (tx) => {
    const now = ctx.clock.now();
    let n = 0;
    for (const r of rows) {
      n += tx
        .insert(itemDecisions)
        .values({ ...r, rationale: r.rationale ?? null, fingerprintContext: r.fingerprintContext ?? null, evaluatedAt: now })
        .onConflictDoNothing()
        .run().changes;
    }
    return n;
  });
}

export function listDecisions(ctx: SqliteContext, itemId: string): DecisionRow[] {
  return ctx.db.select().from(itemDecisions).where(eq(itemDecisions.itemId, itemId)).orderBy(asc(itemDecisions.id)).all() as DecisionRow[];
}

export function listWorkspaceDecisions(ctx: SqliteContext, workspaceId: string, questionSet: string): DecisionRow[] {
  return ctx.db
    .select()
    .from(itemDecisions)
    .where(and(eq(itemDecisions.workspaceId, workspaceId), eq(itemDecisions.questionSet, questionSet)))
    .orderBy(asc(itemDecisions.id))
    .all() as DecisionRow[];
}

export const HOUR_MS = 3_600_000;

/** Adds one evaluation's spend to its hour bucket. */
export function recordSpend(ctx: SqliteContext, r: SpendRecord): void {
  writeTx(ctx, (tx) => recordSpendTx(tx, ctx.clock.now(), r));
}

/** Adds one evaluation's spend to its hour bucket, inside the caller's write transaction. */
export function recordSpendTx(tx: Tx, now: number, r: SpendRecord): void {
  const hour = Math.floor(now / HOUR_MS) * HOUR_MS;
  tx.run(sql`
    INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    VALUES (${hour}, ${r.questionSet}, ${r.provider}, ${r.model}, ${r.outcome}, ${r.calls}, ${r.usage.inputTokens}, ${r.usage.outputTokens}, ${r.usage.cacheReadTokens}, ${r.usage.cacheWriteTokens})
    ON CONFLICT (hour, question_set, provider, model, outcome) DO UPDATE SET
      calls = calls + excluded.calls, input_tokens = input_tokens + excluded.input_tokens,
      output_tokens = output_tokens + excluded.output_tokens,
      cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
      cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens`);
}

/** Spend in the hour buckets overlapping the last `windowMs`. */
export function spendSince(ctx: SqliteContext, windowMs: number): SpendTotals {
  const from = Math.floor((ctx.clock.now() - windowMs) / HOUR_MS) * HOUR_MS;
  return ctx.db.get<SpendTotals>(sql`
    SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(input_tokens), 0) AS inputTokens,
           coalesce(sum(output_tokens), 0) AS outputTokens, coalesce(sum(cache_read_tokens), 0) AS cacheReadTokens,
           coalesce(sum(cache_write_tokens), 0) AS cacheWriteTokens
    FROM ${decisionSpend} WHERE hour >= ${from}`)!;
}
