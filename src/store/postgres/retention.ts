import { sql } from 'drizzle-orm';
import type { SupersededDecision } from '../store.js';
import { changes, nowMs, rows, type PgContext } from './context.js';

/**
 * Retention on Postgres (DESIGN §2 "Retention prunes superseded rows in small batches"), the twin
 * of `../sqlite/retention.ts`. Listing is a read; each delete is one statement (one implicit
 * transaction) over a caller-sized batch, so row locks are held for one batch only.
 */

/** Rows older than the history window (database clock) that a newer row of the same key supersedes, in id order. */
export async function listSupersededDecisions(ctx: PgContext, q: { olderThanMs: number; afterId: number; limit: number }): Promise<SupersededDecision[]> {
  return rows<SupersededDecision>(
    ctx.db,
    sql`
    SELECT d.id, d.item_id AS "itemId", d.question_set AS "questionSet", d.question_key AS "questionKey", d.evaluated_at AS "evaluatedAt"
    FROM item_decisions d
    WHERE d.id > ${Math.trunc(q.afterId)}::bigint AND d.evaluated_at < ${nowMs(ctx)} - ${Math.trunc(q.olderThanMs)}::bigint
      AND EXISTS (SELECT 1 FROM item_decisions n
                  WHERE n.item_id = d.item_id AND n.question_set = d.question_set
                    AND n.question_key = d.question_key AND n.id > d.id)
    ORDER BY d.id LIMIT ${Math.trunc(q.limit)}::int`,
  );
}

/**
 * Deletes the given rows, each only while a newer row of its key exists, so the latest row per
 * key survives whatever the caller passes, and concurrent callers too: the newest row of a key
 * never has a newer one, and rows only ever get newer ids. @returns rows deleted.
 */
export async function deleteDecisions(ctx: PgContext, ids: readonly number[]): Promise<number> {
  if (ids.length === 0) return 0;
  return changes(
    ctx.db,
    sql`
    DELETE FROM item_decisions d
    WHERE d.id IN (${sql.join(ids.map((id) => sql`${Math.trunc(id)}::bigint`), sql`, `)})
      AND EXISTS (SELECT 1 FROM item_decisions n
                  WHERE n.item_id = d.item_id AND n.question_set = d.question_set
                    AND n.question_key = d.question_key AND n.id > d.id)`,
  );
}
