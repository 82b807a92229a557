import { and, asc, count, desc, eq, gt, inArray, isNotNull, isNull, or, sql, type Column, type SQL } from 'drizzle-orm';
import { InvalidInput } from '../../errors.js';
import {
  ITEM_IDS_FILTER_MAX,
  type CollectionRow,
  type CommentRow,
  type ItemQuery,
  type ItemRow,
  type ItemSearch,
  type LinkRow,
  type WorkspaceRow,
} from '../tracker-reads.js';
import { toCollectionRow } from '../write-rules.js';
import { one, read, rows, type SqlContext } from './steps.js';

/**
 * The tracker reads. Listings sort text in byte order (`Dialect.byteOrder`: COLLATE "C" on
 * Postgres, SQLite's BINARY), so both stores list in the same order whatever the database's
 * collation; id-order scans keep the primary key's order (its index), which callers only page through.
 */

export async function getWorkspaceBySlug(c: SqlContext, slug: string): Promise<WorkspaceRow | null> {
  const w = c.d.t.workspaces;
  return (
    (await read(
      c,
      one((db) => db.select().from(w).where(eq(w.slug, slug))),
    )) ?? null
  );
}

export function listWorkspaces(c: SqlContext): Promise<WorkspaceRow[]> {
  const w = c.d.t.workspaces;
  return read(
    c,
    rows((db) => db.select().from(w).orderBy(c.d.byteOrder(w.slug))),
  );
}

export async function getWorkspace(c: SqlContext, id: string): Promise<WorkspaceRow | null> {
  const w = c.d.t.workspaces;
  return (
    (await read(
      c,
      one((db) => db.select().from(w).where(eq(w.id, id))),
    )) ?? null
  );
}

export async function listCollections(c: SqlContext, workspaceId: string): Promise<CollectionRow[]> {
  const t = c.d.t.collections;
  return (
    await read(
      c,
      rows((db) => db.select().from(t).where(eq(t.workspaceId, workspaceId)).orderBy(c.d.byteOrder(t.slug))),
    )
  ).map(toCollectionRow);
}

export async function getItem(c: SqlContext, id: string): Promise<ItemRow | null> {
  const t = c.d.t.items;
  return (
    (await read(
      c,
      one((db) => db.select().from(t).where(eq(t.id, id))),
    )) ?? null
  );
}

export async function getItemByRef(c: SqlContext, workspaceId: string, ref: string): Promise<ItemRow | null> {
  const t = c.d.t.items;
  return (
    (await read(
      c,
      one((db) =>
        db
          .select()
          .from(t)
          .where(and(eq(t.workspaceId, workspaceId), eq(t.ref, ref))),
      ),
    )) ?? null
  );
}

export async function getComment(c: SqlContext, id: string): Promise<CommentRow | null> {
  const t = c.d.t.comments;
  return (
    (await read(
      c,
      one((db) => db.select().from(t).where(eq(t.id, id))),
    )) ?? null
  );
}

export async function getLink(c: SqlContext, id: string): Promise<LinkRow | null> {
  const t = c.d.t.itemLinks;
  return (
    (await read(
      c,
      one((db) => db.select().from(t).where(eq(t.id, id))),
    )) ?? null
  );
}

/** An item's comments, tombstones included (`deletedAt` set), oldest first (then by id). */
export function listComments(c: SqlContext, itemId: string): Promise<CommentRow[]> {
  const t = c.d.t.comments;
  return read(
    c,
    rows((db) => db.select().from(t).where(eq(t.itemId, itemId)).orderBy(asc(t.createdAt), asc(t.id))),
  );
}

/** The links with the item at either end, oldest first (then by id). */
export function listLinks(c: SqlContext, itemId: string): Promise<LinkRow[]> {
  const t = c.d.t.itemLinks;
  return read(
    c,
    rows((db) =>
      db
        .select()
        .from(t)
        .where(or(eq(t.sourceId, itemId), eq(t.targetId, itemId)))
        .orderBy(asc(t.createdAt), asc(t.id)),
    ),
  );
}

/** See Store.listItems and ItemQuery. @throws InvalidInput for a field value that is not a finite number, a string, a boolean or null. */
export async function listItems(c: SqlContext, q: ItemQuery): Promise<ItemRow[]> {
  const t = c.d.t.items;
  const conds: SQL[] = [];
  if (q.workspaceId) conds.push(eq(t.workspaceId, q.workspaceId));
  if (q.collectionId) conds.push(eq(t.collectionId, q.collectionId));
  if (!q.includeDeleted) conds.push(isNull(t.deletedAt));
  if (q.refPrefix) {
    // substr counts code points on both databases, as [...prefix] does.
    conds.push(sql`substr(${t.ref}, 1, ${c.d.int4([...q.refPrefix].length)}) = ${c.d.text(q.refPrefix)}`);
  }
  for (const [key, value] of Object.entries(q.fieldsEqual ?? {})) {
    const scalar =
      value === null ||
      typeof value === 'string' ||
      typeof value === 'boolean' ||
      (typeof value === 'number' && Number.isFinite(value));
    if (!scalar)
      throw new InvalidInput(`field ${JSON.stringify(key)}: compare with a string, a finite number, a boolean or null`);
    conds.push(c.d.jsonFieldEquals(t.fields, key, value));
  }
  if (q.afterId) conds.push(gt(t.id, q.afterId));
  if (q.updatedSince !== undefined) conds.push(sql`${t.updatedAt} >= ${c.d.int8(q.updatedSince)}`);
  if (q.titleContains) conds.push(containsText(c, t.title, q.titleContains));
  if (q.ids) {
    if (q.ids.length > ITEM_IDS_FILTER_MAX)
      throw new InvalidInput(`ids: at most ${ITEM_IDS_FILTER_MAX}; got ${q.ids.length}`);
    conds.push(q.ids.length ? inArray(t.id, [...q.ids]) : sql`1 = 0`);
  }
  const by = q.orderBy ?? 'id';
  if (by === 'id') {
    return read(
      c,
      rows((db) =>
        db
          .select()
          .from(t)
          .where(conds.length ? and(...conds) : undefined)
          .orderBy(q.descending ? desc(t.id) : asc(t.id))
          .limit(q.limit ?? 1_000_000),
      ),
    );
  }
  const col = by === 'updated' ? t.updatedAt : by === 'created' ? t.createdAt : c.d.byteOrder(t.ref);
  const id = c.d.byteOrder(t.id);
  const dir = sql.raw(q.descending ? 'DESC' : 'ASC');
  if (q.after) {
    // One row-value comparison: both databases plan it as a range on the order's columns.
    const v = typeof q.after.value === 'number' ? c.d.int8(q.after.value) : c.d.text(q.after.value);
    conds.push(sql`(${col}, ${id}) ${sql.raw(q.descending ? '<' : '>')} (${v}, ${c.d.text(q.after.id)})`);
  }
  const order = [sql`${col} ${dir}`, sql`${id} ${dir}`];
  return read(
    c,
    rows((db) =>
      db
        .select()
        .from(t)
        .where(conds.length ? and(...conds) : undefined)
        .orderBy(...order)
        .limit(q.limit ?? 1_000_000),
    ),
  );
}

/**
 * `column` contains `text`, case ignored as the database's `lower()` ignores it (ASCII letters on
 * SQLite, Unicode on Postgres), both sides lowered the same way. `%`, `_` and the escape itself are
 * literal: LIKE's wildcards are escaped with a backslash. The one text match of the item lists
 * (`listItems` titleContains, `searchItems`).
 */
function containsText(c: SqlContext, column: Column, text: string): SQL {
  const pattern = `%${text.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
  return sql`lower(${column}) LIKE lower(${c.d.text(pattern)}) ESCAPE '\\'`;
}

/**
 * See Store.searchItems. One workspace's items whose ref or title contains the text, newest write
 * first. A LIKE scan over the workspace's items (items_ws_id_idx narrows to the workspace): no
 * index serves a substring, and a dashboard search reads one page of 50 at a time, so the scan
 * stays within a person's patience (about 10 ms per 10,000 items on SQLite) without a full-text
 * index that every write would have to keep.
 */
export async function searchItems(c: SqlContext, q: ItemSearch): Promise<{ rows: ItemRow[]; total: number }> {
  const t = c.d.t.items;
  const conds: SQL[] = [eq(t.workspaceId, q.workspaceId)];
  if (q.collectionId) conds.push(eq(t.collectionId, q.collectionId));
  const deleted = q.deleted ?? 'live';
  if (deleted === 'live') conds.push(isNull(t.deletedAt));
  if (deleted === 'deleted') conds.push(isNotNull(t.deletedAt));
  const text = q.text?.trim() ?? '';
  if (text) {
    conds.push(or(containsText(c, t.ref, text), containsText(c, t.title, text))!);
  }
  const where = and(...conds);
  const total = (await read(
    c,
    one((db) => db.select({ n: count() }).from(t).where(where)),
  ))!.n;
  const found = await read(
    c,
    rows((db) =>
      db.select().from(t).where(where).orderBy(desc(t.updatedAt), asc(t.id)).limit(q.limit).offset(q.offset),
    ),
  );
  return { rows: found, total: Number(total) };
}

export async function countItems(c: SqlContext, workspaceId?: string): Promise<number> {
  const t = c.d.t.items;
  const live = isNull(t.deletedAt);
  return (await read(
    c,
    one((db) =>
      db
        .select({ n: count() })
        .from(t)
        .where(workspaceId ? and(eq(t.workspaceId, workspaceId), live) : live),
    ),
  ))!.n;
}

export async function countDecisions(c: SqlContext): Promise<number> {
  return (await read(
    c,
    one((db) => db.select({ n: count() }).from(c.d.t.itemDecisions)),
  ))!.n;
}
