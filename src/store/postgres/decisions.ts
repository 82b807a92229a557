import { and, asc, eq, sql } from 'drizzle-orm';
import type { StateLink, TrailComment } from '../../decision/state.js';
import type { AnswerKey, Claim, DecisionRow, ItemForEvaluation, Liveness, NewDecision, SpendRecord, SpendTotals } from '../store.js';
import { stateLinksSql } from '../shared-rows.js';
import { toCollectionRow } from '../write-rules.js';
import { nowMs, one, rows, type PgContext, type PgTx } from './context.js';
import { collections, itemDecisions, items, workspaces } from './schema.js';

/** Evaluation reads, stored answers and spend on Postgres (DESIGN §2, §7); the twin of `../sqlite/decisions.ts`. */

/**
 * Reads everything the state builder needs in three statements (the rows, the live comments, the
 * links); null when the item, its collection or workspace row is missing. Not one snapshot, as on
 * SQLite: a write landing between the statements bumps the job's generation, so the outcome of an
 * evaluation that read a torn state is superseded and the job runs again.
 */
export async function loadItemForEvaluation(ctx: PgContext, itemId: string): Promise<ItemForEvaluation | null> {
  const db = ctx.db;
  const [r] = await db
    .select({ item: items, collection: collections, workspace: workspaces })
    .from(items)
    .leftJoin(collections, eq(collections.id, items.collectionId))
    .leftJoin(workspaces, eq(workspaces.id, items.workspaceId))
    .where(eq(items.id, itemId));
  if (!r || !r.collection || !r.workspace) return null;
  const trail = await rows<TrailComment>(
    db,
    sql`
    SELECT id, author, body, created_at AS "createdAt" FROM comments
    WHERE item_id = ${itemId} AND deleted_at IS NULL ORDER BY created_at, id`,
  );
  const links = await rows<StateLink>(
    db,
    stateLinksSql(itemId),
  );
  return { item: r.item, collection: toCollectionRow(r.collection), workspace: r.workspace, comments: trail, links };
}

/** Liveness as the last statement before a send: item and collection live, workspace live. */
export async function checkLiveness(ctx: PgContext, itemId: string, claim?: Claim): Promise<Liveness> {
  const r = await one<{ i: number | null; c: number | null; w: number | null; token: string | null; generation: number | null }>(
    ctx.db,
    sql`
    SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w,
           j.claim_token AS token, j.generation AS generation
    FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
    LEFT JOIN decision_jobs j ON j.item_id = ${claim?.itemId ?? null} AND j.question_set = ${claim?.questionSet ?? null}
    WHERE i.id = ${itemId}`,
  );
  if (!r || r.i !== null || r.c !== null) return 'item_gone';
  if (r.w !== null) return 'workspace_gone';
  if (claim) {
    if (r.token !== claim.claimToken) return 'lost';
    if (Number(r.generation) !== claim.generation) return 'superseded';
  }
  return 'live';
}

/** Which wanted keys already have a stored row at exactly (state hash, question hash, state version); one query for all keys. */
export async function answeredKeys(ctx: PgContext, itemId: string, questionSet: string, keys: AnswerKey[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const wanted = sql.join(
    keys.map((k) => sql`(${k.questionKey}::text, ${k.stateHash}::text, ${k.questionHash}::text, ${k.stateVersion}::int)`),
    sql`, `,
  );
  const hits = await rows<{ k: string }>(
    ctx.db,
    sql`
    SELECT question_key AS k FROM item_decisions
    WHERE item_id = ${itemId} AND question_set = ${questionSet}
      AND (question_key, state_hash, question_hash, state_version) IN (${wanted})`,
  );
  return new Set(hits.map((h) => h.k));
}

/** Inserts one call's answers in one statement (all or none); a conflict on the idempotency key does nothing. */
export async function insertDecisions(ctx: PgContext, list: NewDecision[]): Promise<number> {
  if (list.length === 0) return 0;
  const now = nowMs(ctx);
  const inserted = await ctx.db
    .insert(itemDecisions)
    .values(list.map((r) => ({ ...r, rationale: r.rationale ?? null, fingerprintContext: r.fingerprintContext ?? null, evaluatedAt: sql`${now}` })))
    .onConflictDoNothing()
    .returning({ id: itemDecisions.id });
  return inserted.length;
}

export async function listDecisions(ctx: PgContext, itemId: string): Promise<DecisionRow[]> {
  return (await ctx.db.select().from(itemDecisions).where(eq(itemDecisions.itemId, itemId)).orderBy(asc(itemDecisions.id))) as DecisionRow[];
}

export async function listWorkspaceDecisions(ctx: PgContext, workspaceId: string, questionSet: string): Promise<DecisionRow[]> {
  return (await ctx.db
    .select()
    .from(itemDecisions)
    .where(and(eq(itemDecisions.workspaceId, workspaceId), eq(itemDecisions.questionSet, questionSet)))
    .orderBy(asc(itemDecisions.id))) as DecisionRow[];
}

export const HOUR_MS = 3_600_000;

/** Adds one evaluation's spend to its hour bucket (the database's hour). */
export async function recordSpend(ctx: PgContext, r: SpendRecord, tx: PgTx = ctx.db): Promise<void> {
  await tx.execute(sql`
    INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    VALUES ((${nowMs(ctx)} / ${HOUR_MS}) * ${HOUR_MS}, ${r.questionSet}, ${r.provider}, ${r.model}, ${r.outcome},
            ${r.calls}::bigint, ${r.usage.inputTokens}::bigint, ${r.usage.outputTokens}::bigint,
            ${r.usage.cacheReadTokens}::bigint, ${r.usage.cacheWriteTokens}::bigint)
    ON CONFLICT (hour, question_set, provider, model, outcome) DO UPDATE SET
      calls = decision_spend.calls + excluded.calls,
      input_tokens = decision_spend.input_tokens + excluded.input_tokens,
      output_tokens = decision_spend.output_tokens + excluded.output_tokens,
      cache_read_tokens = decision_spend.cache_read_tokens + excluded.cache_read_tokens,
      cache_write_tokens = decision_spend.cache_write_tokens + excluded.cache_write_tokens`);
}

/** Spend in the hour buckets overlapping the last `windowMs`. */
export async function spendSince(ctx: PgContext, windowMs: number): Promise<SpendTotals> {
  return (await one<SpendTotals>(
    ctx.db,
    sql`
    SELECT coalesce(sum(calls), 0)::bigint AS calls, coalesce(sum(input_tokens), 0)::bigint AS "inputTokens",
           coalesce(sum(output_tokens), 0)::bigint AS "outputTokens", coalesce(sum(cache_read_tokens), 0)::bigint AS "cacheReadTokens",
           coalesce(sum(cache_write_tokens), 0)::bigint AS "cacheWriteTokens"
    FROM decision_spend WHERE hour >= ((${nowMs(ctx)} - ${Math.trunc(windowMs)}::bigint) / ${HOUR_MS}) * ${HOUR_MS}`,
  ))!;
}
