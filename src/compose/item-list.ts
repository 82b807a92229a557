import { InvalidInput } from '../errors.js';
import type { DecisionReader } from '../reads/reads.js';
import type { Registry } from '../decision/registry.js';
import {
  ITEM_IDS_FILTER_MAX,
  type FieldScalar,
  type ItemQuery,
  type ItemRow,
  type WorkspaceRow,
} from '../store/tracker-reads.js';
import type { TrackerReads } from '../store/tracker-reads.js';

/**
 * `VerdictReader.items`: a workspace's live items as a list people can use (DESIGN §16.2's list
 * rules): sorted, filtered, paged by an opaque keyset cursor, without their full text unless asked.
 * The HTTP API (`GET /v1/items`), the dashboard and the CLI are thin users of it.
 */

/** What `items` sorts by: `updated` (`updatedAt`), `created` (`createdAt`) or `ref` (byte order); ties by id. */
export type ItemSort = 'updated' | 'created' | 'ref';

/** What `VerdictReader.items` filters, sorts and pages by. Every filter given must hold. */
export interface ItemListQuery {
  workspace: string;
  /** Only items of this collection (slug). An unknown slug is InvalidInput (param `collection`). */
  collection?: string;
  /** Top-level fields equal to these scalars, e.g. `{status: 'open'}` (store.ts `ItemQuery.fieldsEqual` says what equals what). */
  fields?: Readonly<Record<string, FieldScalar>>;
  /** Only items updated at or after this time (epoch ms). */
  updatedSince?: number;
  /** Only items whose title holds this text, ignoring case (ASCII letters on SQLite). */
  search?: string;
  /** Only items with at least one key surfaced in this question set now (as `flags` reads it). Unknown set: InvalidInput (param `surfaced`). */
  surfaced?: string;
  /** @defaultValue 'updated' */
  sort?: ItemSort;
  /** @defaultValue 'desc' for `updated` and `created` (newest first), 'asc' for `ref` */
  order?: 'asc' | 'desc';
  /** The previous page's `nextCursor`; it carries its sort, so a cursor with another sort or order is refused. */
  cursor?: string;
  /** Items a page, 1 to `ITEM_LIST_MAX_LIMIT`. @defaultValue 50 */
  limit?: number;
  /** Put each item's `content` in the page (its full text; a page without it is about a tenth the size on real data). @defaultValue false */
  includeContent?: boolean;
}

/** Most items one `items` page returns. */
const ITEM_LIST_MAX_LIMIT = 500;
/** Items a page when `limit` is not given. */
const ITEM_LIST_DEFAULT_LIMIT = 50;

/** One item of an `items` page. Times are epoch ms; `fields` is the parsed object. */
export interface ItemListEntry {
  id: string;
  ref: string;
  /** The collection's slug. */
  collection: string;
  /** Tracker text, for display only (never put it in a URL or a log). */
  title: string;
  fields: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** Present only with `includeContent`. */
  content?: string;
}

/** A page of `items`. */
export interface ItemListPage {
  items: ItemListEntry[];
  /** More items match after this page. */
  hasMore: boolean;
  /** Pass as `cursor` for the next page; null on the last one. */
  nextCursor: string | null;
}

/** The cursor's content: the sort it belongs to and the last row's sort value and id. */
interface CursorState {
  s: ItemSort;
  o: 'asc' | 'desc';
  v: number | string;
  i: string;
}

/** An opaque cursor: base64url of the keyset position's JSON. Opaque so its form may change; not secret. */
function encodeCursor(c: CursorState): string {
  return Buffer.from(JSON.stringify(c), 'utf8').toString('base64url');
}

/** @throws InvalidInput (param `cursor`) for a cursor this read did not make, or one made with another sort or order. */
function decodeCursor(text: string, sort: ItemSort, order: 'asc' | 'desc'): CursorState {
  const bad = (why: string) =>
    new InvalidInput(`cursor: ${why}; pass the nextCursor of the previous page unchanged`, { param: 'cursor' });
  let parsed: unknown;
  try {
    parsed = /^[A-Za-z0-9_-]{1,2000}$/.test(text)
      ? JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))
      : undefined;
  } catch {
    parsed = undefined;
  }
  const c = parsed as Partial<CursorState> | undefined;
  const valueOk = sort === 'ref' ? typeof c?.v === 'string' : typeof c?.v === 'number' && Number.isSafeInteger(c.v);
  if (
    !c ||
    typeof c !== 'object' ||
    typeof c.i !== 'string' ||
    !valueOk ||
    (c.s !== 'updated' && c.s !== 'created' && c.s !== 'ref')
  )
    throw bad('not a cursor of this list');
  if (c.s !== sort || c.o !== order) throw bad(`made for sort ${c.s} ${c.o}, not ${sort} ${order}`);
  return c as CursorState;
}

/**
 * Reads one page of `q` in workspace `ws`. `reader` is asked only for `surfaced`.
 * @throws InvalidInput, naming the member in `param`, for a bad sort, order, limit, cursor, collection, set or time.
 */
export async function itemListPage(
  store: Pick<TrackerReads, 'listCollections' | 'listItems'>,
  registry: Registry,
  reader: () => Promise<DecisionReader>,
  ws: WorkspaceRow,
  q: ItemListQuery,
): Promise<ItemListPage> {
  const sort = q.sort ?? 'updated';
  if (!['updated', 'created', 'ref'].includes(sort))
    throw new InvalidInput(`sort must be updated, created or ref; got ${String(sort)}`, { param: 'sort' });
  const order = q.order ?? (sort === 'ref' ? 'asc' : 'desc');
  if (order !== 'asc' && order !== 'desc')
    throw new InvalidInput(`order must be asc or desc; got ${String(order)}`, { param: 'order' });
  const limit = q.limit ?? ITEM_LIST_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > ITEM_LIST_MAX_LIMIT)
    throw new InvalidInput(`limit must be a whole number from 1 to ${ITEM_LIST_MAX_LIMIT}; got ${limit}`, {
      param: 'limit',
    });
  if (q.updatedSince !== undefined && !Number.isSafeInteger(q.updatedSince))
    throw new InvalidInput(`updatedSince must be a time in epoch ms; got ${q.updatedSince}`, { param: 'updatedSince' });
  const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor, sort, order);

  const collections = await store.listCollections(ws.id);
  const slugs = new Map(collections.map((c) => [c.id, c.slug]));
  let collectionId: string | undefined;
  if (q.collection !== undefined) {
    const c = collections.find((x) => x.slug === q.collection && x.deletedAt === null);
    if (!c)
      throw new InvalidInput(`collection: no live collection of that slug in workspace ${ws.slug}`, {
        param: 'collection',
      });
    collectionId = c.id;
  }
  let ids: string[] | undefined;
  if (q.surfaced !== undefined) {
    if (!registry.get(q.surfaced))
      throw new InvalidInput('surfaced: no question set of that name', { param: 'surfaced' });
    ids = (await (await reader()).surfacedViews(ws.id, q.surfaced)).items
      .filter((s) => s.views.length > 0)
      .map((s) => s.item.id);
    if (ids.length > ITEM_IDS_FILTER_MAX)
      throw new InvalidInput(
        `surfaced: more than ${ITEM_IDS_FILTER_MAX} items surface in this set; narrow by another filter first`,
        { param: 'surfaced' },
      );
  }
  const query: ItemQuery = {
    workspaceId: ws.id,
    collectionId,
    fieldsEqual: q.fields,
    updatedSince: q.updatedSince,
    titleContains: q.search || undefined,
    ids,
    orderBy: sort,
    descending: order === 'desc',
    after: cursor ? { value: cursor.v, id: cursor.i } : undefined,
    // One more than the page: whether another page exists without a count.
    limit: limit + 1,
  };
  const found = await store.listItems(query);
  const page = found.slice(0, limit);
  const last = page[page.length - 1];
  const hasMore = found.length > limit;
  return {
    items: page.map((i) => entryOf(i, slugs.get(i.collectionId) ?? '', q.includeContent === true)),
    hasMore,
    nextCursor: hasMore && last ? encodeCursor({ s: sort, o: order, v: sortValue(last, sort), i: last.id }) : null,
  };
}

function sortValue(i: ItemRow, sort: ItemSort): number | string {
  return sort === 'updated' ? i.updatedAt : sort === 'created' ? i.createdAt : i.ref;
}

function entryOf(i: ItemRow, collection: string, withContent: boolean): ItemListEntry {
  const e: ItemListEntry = {
    id: i.id,
    ref: i.ref,
    collection,
    title: i.title,
    fields: parseFields(i.fields),
    createdAt: i.createdAt,
    updatedAt: i.updatedAt,
  };
  if (withContent) e.content = i.content;
  return e;
}

/** The stored fields object (numbers beyond 2^53 lose digits here, as in every JSON read of the API). */
function parseFields(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {}; // the doors store only objects; an old row that is not reads as {}
  }
}
