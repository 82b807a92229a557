import { sql } from 'drizzle-orm';
import type { SupersededDecision } from '../decision-store.js';
import { autocommit, changes, nowSql, read, rows, type SqlContext } from './steps.js';

/**
 * Retention (DESIGN §2 "Retention prunes superseded rows in small batches"). Listing is a read;
 * each delete is one statement over a caller-sized batch (SQLite: one short IMMEDIATE
 * transaction; Postgres: one implicit transaction), so a writer waits at most one batch and row
 * locks are held for one batch only.
 */

/** Rows older than the history window (on Postgres the database clock's) that a newer row of the same key supersedes, in id order. */
export function listSupersededDecisions(
  c: SqlContext,
  q: { olderThanMs: number; afterId: number; limit: number },
): Promise<SupersededDecision[]> {
  const d = c.d;
  return read(c, function* () {
    const now = yield* nowSql();
    return yield* rows<SupersededDecision>(sql`
      SELECT d.id, d.item_id AS "itemId", d.question_set AS "questionSet", d.question_key AS "questionKey", d.evaluated_at AS "evaluatedAt"
      FROM item_decisions d
      WHERE d.id > ${d.int8(Math.trunc(q.afterId))} AND d.evaluated_at < ${now} - ${d.int8(Math.trunc(q.olderThanMs))}
        AND EXISTS (SELECT 1 FROM item_decisions n
                    WHERE n.item_id = d.item_id AND n.question_set = d.question_set
                      AND n.question_key = d.question_key AND n.id > d.id)
      ORDER BY d.id LIMIT ${d.int4(Math.trunc(q.limit))}`);
  });
}

/**
 * Deletes the given rows, each only while a newer row of its key exists, so the latest row per
 * key survives whatever the caller passes, and concurrent callers too: the newest row of a key
 * never has a newer one, and rows only ever get newer ids. @returns rows deleted.
 */
export function deleteDecisions(c: SqlContext, ids: readonly number[]): Promise<number> {
  if (ids.length === 0) return Promise.resolve(0);
  return autocommit(c, () =>
    changes(sql`
      DELETE FROM item_decisions
      WHERE id IN (${sql.join(
        ids.map((id) => c.d.int8(Math.trunc(id))),
        sql`, `,
      )})
        AND EXISTS (SELECT 1 FROM item_decisions n
                    WHERE n.item_id = item_decisions.item_id AND n.question_set = item_decisions.question_set
                      AND n.question_key = item_decisions.question_key AND n.id > item_decisions.id)`),
  );
}
