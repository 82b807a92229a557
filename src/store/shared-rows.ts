import { sql, type SQL } from 'drizzle-orm';
import { LIMITS, newestComments } from '../decision/state.js';
import type { DriftScanItem, ItemRow } from './store.js';

/**
 * Statements and row shaping that read the same on SQLite and PostgreSQL, kept once so the two
 * stores cannot drift apart on a rule (which links a state shows, how a drift-scan row reads).
 */

/** The items an owe statement covers; see `oweTargetsSql`. */
export interface OweTargets {
  itemIds?: readonly string[];
  collectionId?: string;
  /** With `collectionId`: only ids in (afterId, throughId], a chunk of a collection change (DESIGN §16.12). */
  range?: { afterId: string; throughId: string };
}

/**
 * The items one owe statement covers (an `INSERT … SELECT … FROM items i WHERE <this>`): the
 * given ids (deleted ones included, since a delete owes work too), or a collection's live items,
 * optionally within an id range (a range read on items_collection_idx).
 * Null when `itemIds` is empty: nothing to owe.
 * @throws TypeError when neither is given.
 */
export function oweTargetsSql(items: OweTargets): SQL | null {
  if (items.itemIds) {
    if (items.itemIds.length === 0) return null;
    return sql`i.id IN (${sql.join(items.itemIds.map((id) => sql`${id}`), sql`, `)})`;
  }
  if (items.collectionId) {
    const range = items.range ? sql` AND i.id > ${items.range.afterId} AND i.id <= ${items.range.throughId}` : sql``;
    return sql`i.collection_id = ${items.collectionId} AND i.deleted_at IS NULL${range}`;
  }
  throw new TypeError('oweItems: give itemIds or collectionId');
}

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

/** An item row of the drift scan as both dialects return it (snake_case columns, plus its job state). */
export interface RawDriftItem {
  id: string;
  workspace_id: string;
  collection_id: string;
  ref: string;
  title: string;
  content: string;
  fields: string;
  seq: number;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
  job: 'owed' | 'parked' | null;
}

/**
 * Shapes one drift-scan batch: each item with its latest question hash (and state version) per key and the ids of its
 * newest 10 live comments (the ones a per-comment set asks about).
 */
export function driftScanItems(
  items: readonly RawDriftItem[],
  latest: ReadonlyArray<{ item_id: string; question_key: string; question_hash: string; state_version: number }>,
  commentRows: ReadonlyArray<{ id: string; item_id: string; created_at: number }>,
): DriftScanItem[] {
  const byItem = new Map<string, Array<{ questionKey: string; questionHash: string; stateVersion: number }>>();
  for (const r of latest) {
    const list = byItem.get(r.item_id) ?? [];
    list.push({ questionKey: r.question_key, questionHash: r.question_hash, stateVersion: Number(r.state_version) });
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
    };
    return {
      item,
      latest: byItem.get(i.id) ?? [],
      commentIds: newestComments(comments.get(i.id) ?? [], LIMITS.trailComments).map((c) => c.id),
      job: i.job,
    };
  });
}
