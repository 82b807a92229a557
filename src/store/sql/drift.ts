import { sql } from 'drizzle-orm';
import { driftScanItems, type RawDriftItem } from '../shared-rows.js';
import type { DriftScanItem } from '../store.js';
import { read, rows, type SqlContext } from './steps.js';

/**
 * The drift sweep's read (DESIGN §8 "Drift sweep"): one batch of live items in id order with, per
 * item, the question hash of its latest row per key, its job state, and its newest live comment
 * ids. Reads only, three statements outside any transaction: the sweep holds no lock between (or
 * within) batches, and a write landing between the statements only makes the sweep owe a job it
 * would owe on the next pass anyway.
 *
 * Id order is the database collation's, the order of the `items` primary key that the range scan
 * walks (byte order on SQLite and on a C-collated Postgres database); the cursor `id > afterItemId`
 * uses the same collation, so every item is visited once whatever the collation.
 */
export function scanItemsForDrift(
  c: SqlContext,
  q: { workspaceId: string; questionSet: string; afterItemId: string | null; limit: number; withComments: boolean },
): Promise<DriftScanItem[]> {
  return read(c, function* () {
    // Items by primary key order after the cursor: a range scan, so each batch costs O(limit).
    const items = yield* rows<RawDriftItem>(sql`
      SELECT i.*, j.state AS job FROM items i
      LEFT JOIN decision_jobs j ON j.item_id = i.id AND j.question_set = ${q.questionSet}
      WHERE i.workspace_id = ${q.workspaceId} AND i.deleted_at IS NULL AND i.id > ${q.afterItemId ?? ''}
      ORDER BY i.id LIMIT ${c.d.int4(Math.trunc(q.limit))}`);
    if (items.length === 0) return [];
    const ids = sql.join(items.map((i) => sql`${i.id}`), sql`, `);
    // The latest row per (item, set, key): one probe of item_decisions_latest_idx per row.
    const latest = yield* rows<{ item_id: string; question_key: string; question_hash: string; state_version: number }>(sql`
      SELECT d.item_id, d.question_key, d.question_hash, d.state_version FROM item_decisions d
      WHERE d.item_id IN (${ids}) AND d.question_set = ${q.questionSet}
        AND d.id = (SELECT max(m.id) FROM item_decisions m
                    WHERE m.item_id = d.item_id AND m.question_set = d.question_set AND m.question_key = d.question_key)`);
    const commentRows = q.withComments
      ? yield* rows<{ id: string; item_id: string; created_at: number }>(sql`
          SELECT id, item_id, created_at FROM comments WHERE item_id IN (${ids}) AND deleted_at IS NULL`)
      : [];
    return driftScanItems(items, latest, commentRows);
  });
}
