import { sql } from 'drizzle-orm';
import type { SupersededDecision } from '../store.js';
import { writeTx, type SqliteContext } from './context.js';

/**
 * Retention on SQLite (DESIGN §2 "Retention prunes superseded rows in small batches"). Listing
 * is a read; each delete is one short IMMEDIATE transaction over a caller-sized batch, so a
 * writer waits at most one batch.
 */

/** Rows older than the history window that a newer row of the same key supersedes, in id order. */
export function listSupersededDecisions(ctx: SqliteContext, q: { olderThanMs: number; afterId: number; limit: number }): SupersededDecision[] {
  const cutoff = ctx.clock.now() - q.olderThanMs;
  return ctx.db.all<SupersededDecision>(sql`
    SELECT d.id, d.item_id AS itemId, d.question_set AS questionSet, d.question_key AS questionKey, d.evaluated_at AS evaluatedAt
    FROM item_decisions d
    WHERE d.id > ${q.afterId} AND d.evaluated_at < ${cutoff}
      AND EXISTS (SELECT 1 FROM item_decisions n
                  WHERE n.item_id = d.item_id AND n.question_set = d.question_set
                    AND n.question_key = d.question_key AND n.id > d.id)
    ORDER BY d.id LIMIT ${q.limit}`);
}

/**
 * Deletes the given rows, each only while a newer row of its key exists (the latest row per key
 * survives whatever the caller passes). @returns rows deleted.
 */
export function deleteDecisions(ctx: SqliteContext, ids: readonly number[]): number {
  if (ids.length === 0) return 0;
  return writeTx(ctx, (tx) =>
    tx.run(sql`
      DELETE FROM item_decisions
      WHERE id IN (${sql.join(ids.map((id) => sql`${id}`), sql`, `)})
        AND EXISTS (SELECT 1 FROM item_decisions n
                    WHERE n.item_id = item_decisions.item_id AND n.question_set = item_decisions.question_set
                      AND n.question_key = item_decisions.question_key AND n.id > item_decisions.id)`).changes,
  );
}
