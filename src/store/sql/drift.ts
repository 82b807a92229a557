import { sql } from 'drizzle-orm';
import { LIMITS, newestComments } from '../../decision/state.js';
import type { ItemRow } from '../tracker-reads.js';
import type { RawItem } from '../write-rules.js';
import type { DriftScanItem } from '../decision-store.js';
import { read, rows, type SqlContext } from './steps.js';

/**
 * The drift and expiry sweeps' read (DESIGN §8 "Drift sweep", §5.2): one batch of live items in
 * id order with, per item, the question hash, state version and `evaluated_at` of its latest row
 * per key, its job state, and its newest live comment ids. Reads only, three statements outside
 * any transaction: the sweep holds no lock between (or within) batches, and a write landing
 * between the statements only makes the sweep owe a job it would owe on the next pass anyway.
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
    const ids = sql.join(
      items.map((i) => sql`${i.id}`),
      sql`, `,
    );
    // The latest row per (item, set, key): one probe of item_decisions_latest_idx per row.
    const latest = yield* rows<LatestRow>(sql`
      SELECT d.item_id, d.question_key, d.question_hash, d.state_version, d.evaluated_at FROM item_decisions d
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

/** An item row of the drift scan as both dialects return it (snake_case columns, plus its job state). */
export interface RawDriftItem extends RawItem {
  job: 'owed' | 'parked' | null;
}

/** The latest row of one (item, key), as both dialects return it (Postgres may give a bigint as a string). */
export interface LatestRow {
  item_id: string;
  question_key: string;
  question_hash: string;
  state_version: number | string;
  evaluated_at: number | string;
}

/**
 * Shapes one drift-scan batch: each item with its latest question hash, state version and time
 * stored per key, and the ids of its newest 10 live comments (the ones a per-comment set asks about).
 */
function driftScanItems(
  items: readonly RawDriftItem[],
  latest: ReadonlyArray<LatestRow>,
  commentRows: ReadonlyArray<{ id: string; item_id: string; created_at: number }>,
): DriftScanItem[] {
  const byItem = new Map<string, DriftScanItem['latest']>();
  for (const r of latest) {
    const list = byItem.get(r.item_id) ?? [];
    list.push({
      questionKey: r.question_key,
      questionHash: r.question_hash,
      stateVersion: Number(r.state_version),
      evaluatedAt: Number(r.evaluated_at),
    });
    byItem.set(r.item_id, list);
  }
  const comments = new Map<string, Array<{ id: string; author: string; body: string; createdAt: number }>>();
  for (const c of commentRows) {
    const list = comments.get(c.item_id) ?? [];
    list.push({ id: c.id, author: '', body: '', createdAt: Number(c.created_at) });
    comments.set(c.item_id, list);
  }
  return items.map((i) => {
    const item: ItemRow = {
      id: i.id,
      workspaceId: i.workspace_id,
      collectionId: i.collection_id,
      ref: i.ref,
      title: i.title,
      content: i.content,
      fields: i.fields,
      seq: i.seq,
      createdAt: i.created_at,
      updatedAt: i.updated_at,
      deletedAt: i.deleted_at,
      sourceUrl: i.source_url,
    };
    return {
      item,
      latest: byItem.get(i.id) ?? [],
      commentIds: newestComments(comments.get(i.id) ?? [], LIMITS.trailComments).map((c) => c.id),
      job: i.job,
    };
  });
}
