import { InvalidInput } from '../errors.js';
import { fieldsForDisplay } from '../reads/reads.js';
import type { WorkspaceRow } from '../store/tracker-reads.js';
import type { ItemSearchReads, TrackerReads } from '../store/tracker-reads.js';

/**
 * `VerdictReader.searchItems`: one workspace's items found by text in their ref or title,
 * filtered by collection and deleted state, newest write first, in pages. The dashboard's items
 * page reads it; it is a read of the tracker, so it answers whether decisions are on or off.
 */

/** Most items one `searchItems` call returns. */
const ITEM_SEARCH_MAX_LIMIT = 200;
/** Longest search text, in code points: a ref or a few words of a title, never a whole body. */
export const ITEM_SEARCH_MAX_TEXT = 200;

/** What `searchItems` finds and pages by. */
export interface ItemSearchQuery {
  workspace: string;
  /** Items whose ref or title contains this (ASCII case ignored; `%` and `_` literal). @defaultValue '' (every item) */
  text?: string;
  /** A collection's slug; an unknown slug matches nothing. */
  collection?: string;
  /** @defaultValue 'live' */
  deleted?: 'live' | 'deleted' | 'all';
  /** Items to skip. @defaultValue 0 */
  offset?: number;
  /** At most this many (1 to 200). @defaultValue 50 */
  limit?: number;
}

/** One item found: its ref, title, collection slug, fields (numbers kept lossless) and times (epoch ms). */
export interface ItemSearchRow {
  ref: string;
  title: string;
  collection: string;
  fieldsObject: Record<string, unknown>;
  updatedAt: number;
  deletedAt: number | null;
}

/** A page of `searchItems`, with how many items match in all. */
export interface ItemSearchPage {
  rows: ItemSearchRow[];
  total: number;
}

const DELETED = ['live', 'deleted', 'all'] as const;

/**
 * Reads one page of items of `ws` (see `ItemSearchQuery`).
 * @throws InvalidInput naming `text`, `deleted`, `offset` or `limit` when one is out of range.
 */
export async function searchItemsPage(
  store: Pick<TrackerReads, 'listCollections'> & ItemSearchReads,
  ws: WorkspaceRow,
  q: ItemSearchQuery,
): Promise<ItemSearchPage> {
  const text = q.text ?? '';
  if (typeof text !== 'string' || [...text].length > ITEM_SEARCH_MAX_TEXT)
    throw new InvalidInput(`text must be a string of at most ${ITEM_SEARCH_MAX_TEXT} characters`);
  const deleted = q.deleted ?? 'live';
  if (!DELETED.includes(deleted))
    throw new InvalidInput(`deleted must be live, deleted or all; got ${String(deleted)}`);
  const offset = q.offset ?? 0;
  if (!Number.isInteger(offset) || offset < 0)
    throw new InvalidInput(`offset must be a whole number of 0 or more; got ${offset}`);
  const limit = q.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > ITEM_SEARCH_MAX_LIMIT)
    throw new InvalidInput(`limit must be a whole number from 1 to ${ITEM_SEARCH_MAX_LIMIT}; got ${limit}`);
  const collections = await store.listCollections(ws.id);
  let collectionId: string | undefined;
  if (q.collection) {
    collectionId = collections.find((c) => c.slug === q.collection)?.id;
    if (!collectionId) return { rows: [], total: 0 };
  }
  const slugOf = new Map(collections.map((c) => [c.id, c.slug]));
  const found = await store.searchItems({ workspaceId: ws.id, text, collectionId, deleted, offset, limit });
  return {
    total: found.total,
    rows: found.rows.map((i) => ({
      ref: i.ref,
      title: i.title,
      collection: slugOf.get(i.collectionId) ?? '',
      fieldsObject: fieldsForDisplay(i.fields),
      updatedAt: i.updatedAt,
      deletedAt: i.deletedAt,
    })),
  };
}
