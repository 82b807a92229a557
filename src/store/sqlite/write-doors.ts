import { and, eq, isNull, sql } from 'drizzle-orm';
import { emptyReport, normaliseText, type NormaliseReport } from '../normalise.js';
import {
  fieldsText,
  planCollectionPatch,
  planItemPatch,
  planItemUpsert,
  readsComments,
  readsLinks,
  setsForSlugChange,
  toCollectionRow,
  writeResult,
} from '../write-rules.js';
import {
  InvalidWrite,
  NotFound,
  type CollectionRow,
  type CollectionSchema,
  type CollectionSettings,
  type CommentRow,
  type ItemPatch,
  type ItemRow,
  type LinkRow,
  type NewComment,
  type NewItem,
  type NewLink,
  type OweOptions,
  type WorkspaceRow,
  type WriteResult,
} from '../store.js';
import { writeTx, type SqliteContext, type Tx } from './context.js';
import { oweCollectionChange } from './collection-owe.js';
import { oweForItem } from './owe.js';
import { collections, comments, itemLinks, items, workspaces } from './schema.js';

/**
 * Tracker write doors on SQLite (DESIGN §3). Each door changes the tracker rows and owes the
 * affected jobs in the same IMMEDIATE transaction; a write that changes no stored value is a
 * no-op (no seq bump, nothing owed). Text is normalised first (lone surrogates → U+FFFD, NUL
 * removed) and the counts are reported.
 */

type CollectionDb = typeof collections.$inferSelect;

export { fieldsText, toCollectionRow };

const result = writeResult;

function getItemTx(tx: Tx, id: string): ItemRow {
  const row = tx.select().from(items).where(eq(items.id, id)).get();
  if (!row) throw new NotFound('item', id);
  return row;
}

function bumpItem(tx: Tx, id: string, now: number, set: Partial<typeof items.$inferInsert> = {}): ItemRow {
  return tx
    .update(items)
    .set({ ...set, seq: sql`${items.seq} + 1`, updatedAt: now })
    .where(eq(items.id, id))
    .returning()
    .get()!;
}

function requireCollection(tx: Tx, id: string, workspaceId: string): CollectionDb {
  const c = tx.select().from(collections).where(eq(collections.id, id)).get();
  if (!c) throw new NotFound('collection', id);
  if (c.workspaceId !== workspaceId) throw new InvalidWrite(`collection ${id} is not in workspace ${workspaceId}`);
  return c;
}

// ------------------------------------------------------------------ workspaces and collections

export function createWorkspace(ctx: SqliteContext, w: { id?: string; slug: string }): WorkspaceRow {
  return writeTx(ctx, (tx) =>
    tx.insert(workspaces).values({ id: w.id ?? ctx.newId(), slug: w.slug, createdAt: ctx.clock.now() }).returning().get(),
  );
}

/** Soft-deletes or restores a workspace. Its jobs are held by the claim, not re-owed. */
export function setWorkspaceDeleted(ctx: SqliteContext, id: string, deleted: boolean): WriteResult<WorkspaceRow> {
  return writeTx(ctx, (tx) => {
    const w = tx.select().from(workspaces).where(eq(workspaces.id, id)).get();
    if (!w) throw new NotFound('workspace', id);
    if ((w.deletedAt !== null) === deleted) return result(w, false, emptyReport());
    const row = tx
      .update(workspaces)
      .set({ deletedAt: deleted ? ctx.clock.now() : null })
      .where(eq(workspaces.id, id))
      .returning()
      .get()!;
    return result(row, true, emptyReport());
  });
}

export function createCollection(
  ctx: SqliteContext,
  c: { id?: string; workspaceId: string; slug: string; isSystem?: boolean; schema?: CollectionSchema; settings?: CollectionSettings },
): CollectionRow {
  return writeTx(ctx, (tx) => {
    const row = tx
      .insert(collections)
      .values({
        id: c.id ?? ctx.newId(),
        workspaceId: c.workspaceId,
        slug: c.slug,
        isSystem: c.isSystem ?? false,
        schema: JSON.stringify(c.schema ?? { fields: [] }),
        settings: JSON.stringify(c.settings ?? {}),
        createdAt: ctx.clock.now(),
      })
      .returning()
      .get();
    return toCollectionRow(row);
  });
}

/**
 * Renames a collection or changes its settings, schema or deleted state. Owes every live item of
 * the collection at backfill priority, for the sets of its old and new slug (DESIGN §3), in
 * chunks (DESIGN §16.12): this transaction owes the first `COLLECTION_OWE_CHUNK` items and leaves
 * a continuation for the rest (`advanceCollectionOwes`). `owed` counts the first chunk's rows.
 */
export function updateCollection(
  ctx: SqliteContext,
  id: string,
  patch: { slug?: string; settings?: CollectionSettings; schema?: CollectionSchema; deleted?: boolean },
): WriteResult<CollectionRow> {
  return writeTx(ctx, (tx) => {
    const c = tx.select().from(collections).where(eq(collections.id, id)).get();
    if (!c) throw new NotFound('collection', id);
    const { next, changed } = planCollectionPatch(c, patch, ctx.clock.now());
    if (!changed) return result(toCollectionRow(c), false, emptyReport());
    const row = tx.update(collections).set(next).where(eq(collections.id, id)).returning().get()!;
    const sets = setsForSlugChange(ctx.registry, c.slug, next.slug);
    // The first chunk here, the rest by the worker from the continuation (DESIGN §16.12).
    const owed = oweCollectionChange(tx, ctx, id, sets);
    return result(toCollectionRow(row), true, emptyReport(), owed);
  });
}

// ------------------------------------------------------------------ items

function insertItem(tx: Tx, ctx: SqliteContext, item: NewItem, report: NormaliseReport, opts: OweOptions): WriteResult<ItemRow> {
  requireCollection(tx, item.collectionId, item.workspaceId);
  const now = ctx.clock.now();
  const row = tx
    .insert(items)
    .values({
      id: item.id ?? ctx.newId(),
      workspaceId: item.workspaceId,
      collectionId: item.collectionId,
      ref: normaliseText(item.ref, report),
      title: normaliseText(item.title, report),
      content: normaliseText(item.content ?? '', report),
      fields: fieldsText(item.fields, report),
      seq: 1,
      createdAt: item.createdAt ?? now,
      updatedAt: now,
      deletedAt: item.deletedAt ?? null,
    })
    .returning()
    .get();
  const owed = oweForItem(tx, ctx, row, opts, () => true, true);
  return result(row, true, report, owed);
}

/** @throws NotFound (collection), InvalidWrite (fields, workspace mismatch), a UNIQUE error on a duplicate ref. */
export function createItem(ctx: SqliteContext, item: NewItem, opts: OweOptions = {}): WriteResult<ItemRow> {
  const report = emptyReport();
  return writeTx(ctx, (tx) => insertItem(tx, ctx, item, report, opts));
}

/** Title, content or fields. A title change also owes the items whose state shows this title. */
export function updateItem(ctx: SqliteContext, id: string, patch: ItemPatch, opts: OweOptions = {}): WriteResult<ItemRow> {
  const report = emptyReport();
  return writeTx(ctx, (tx) => {
    const cur = getItemTx(tx, id);
    const { next, changed, titleChanged } = planItemPatch(cur, patch, report);
    if (!changed) return result(cur, false, report);
    const row = bumpItem(tx, id, ctx.clock.now(), next);
    const owed = oweForItem(tx, ctx, row, opts, () => true, titleChanged);
    return result(row, true, report, owed);
  });
}

/** The importer's door: create, or set every value (including deleted state and collection), or nothing. */
export function upsertItem(ctx: SqliteContext, item: NewItem & { id: string }, opts: OweOptions = {}): WriteResult<ItemRow> {
  const report = emptyReport();
  return writeTx(ctx, (tx) => {
    const cur = tx.select().from(items).where(eq(items.id, item.id)).get();
    if (!cur) return insertItem(tx, ctx, item, report, opts);
    const { next, changed, linkers } = planItemUpsert(cur, item, report);
    requireCollection(tx, item.collectionId, item.workspaceId);
    if (!changed) return result(cur, false, report);
    const row = bumpItem(tx, item.id, ctx.clock.now(), next);
    const owed = oweForItem(tx, ctx, row, opts, () => true, linkers);
    return result(row, true, report, owed);
  });
}

/** Moves an item to another collection of its workspace; owes the target collection's sets. */
export function moveItem(ctx: SqliteContext, id: string, collectionId: string, opts: OweOptions = {}): WriteResult<ItemRow> {
  return writeTx(ctx, (tx) => {
    const cur = getItemTx(tx, id);
    requireCollection(tx, collectionId, cur.workspaceId);
    if (cur.collectionId === collectionId) return result(cur, false, emptyReport());
    const row = bumpItem(tx, id, ctx.clock.now(), { collectionId });
    return result(row, true, emptyReport(), oweForItem(tx, ctx, row, opts));
  });
}

/** Soft delete or restore; also owes the items whose state shows this item. */
export function setItemDeleted(ctx: SqliteContext, id: string, deleted: boolean, opts: OweOptions = {}): WriteResult<ItemRow> {
  return writeTx(ctx, (tx) => {
    const cur = getItemTx(tx, id);
    if ((cur.deletedAt !== null) === deleted) return result(cur, false, emptyReport());
    const now = ctx.clock.now();
    const row = bumpItem(tx, id, now, { deletedAt: deleted ? now : null });
    return result(row, true, emptyReport(), oweForItem(tx, ctx, row, opts, () => true, true));
  });
}

// ------------------------------------------------------------------ comments

function oweForComment(tx: Tx, ctx: SqliteContext, itemId: string, opts: OweOptions): number {
  const item = bumpItem(tx, itemId, ctx.clock.now());
  return oweForItem(tx, ctx, item, opts, readsComments);
}

function insertComment(tx: Tx, ctx: SqliteContext, c: NewComment, report: NormaliseReport, opts: OweOptions): WriteResult<CommentRow> {
  getItemTx(tx, c.itemId);
  const now = ctx.clock.now();
  const row = tx
    .insert(comments)
    .values({
      id: c.id ?? ctx.newId(),
      itemId: c.itemId,
      parentCommentId: c.parentCommentId ?? null,
      author: normaliseText(c.author, report),
      body: normaliseText(c.body, report),
      createdAt: c.createdAt ?? now,
      updatedAt: now,
    })
    .returning()
    .get();
  return result(row, true, report, oweForComment(tx, ctx, c.itemId, opts));
}

/** @throws NotFound when the item does not exist. */
export function addComment(ctx: SqliteContext, c: NewComment, opts: OweOptions = {}): WriteResult<CommentRow> {
  const report = emptyReport();
  return writeTx(ctx, (tx) => insertComment(tx, ctx, c, report, opts));
}

/** The importer's door for comments: create, or set author and body, or nothing. */
export function upsertComment(ctx: SqliteContext, c: NewComment & { id: string }, opts: OweOptions = {}): WriteResult<CommentRow> {
  const report = emptyReport();
  return writeTx(ctx, (tx) => {
    const cur = tx.select().from(comments).where(eq(comments.id, c.id)).get();
    if (!cur) return insertComment(tx, ctx, c, report, opts);
    const author = normaliseText(c.author, report);
    const body = normaliseText(c.body, report);
    if (cur.author === author && cur.body === body && cur.deletedAt === null) return result(cur, false, report);
    const row = tx
      .update(comments)
      .set({ author, body, deletedAt: null, updatedAt: ctx.clock.now() })
      .where(eq(comments.id, c.id))
      .returning()
      .get()!;
    return result(row, true, report, oweForComment(tx, ctx, cur.itemId, opts));
  });
}

/** Owes work only when the body changes. @throws NotFound */
export function editComment(ctx: SqliteContext, id: string, body: string, opts: OweOptions = {}): WriteResult<CommentRow> {
  const report = emptyReport();
  return writeTx(ctx, (tx) => {
    const cur = tx.select().from(comments).where(and(eq(comments.id, id), isNull(comments.deletedAt))).get();
    if (!cur) throw new NotFound('comment', id);
    const next = normaliseText(body, report);
    if (next === cur.body) return result(cur, false, report);
    const row = tx.update(comments).set({ body: next, updatedAt: ctx.clock.now() }).where(eq(comments.id, id)).returning().get()!;
    return result(row, true, report, oweForComment(tx, ctx, cur.itemId, opts));
  });
}

/** A comment with replies becomes a tombstone with a blank body; one without replies is removed. */
export function deleteComment(ctx: SqliteContext, id: string, opts: OweOptions = {}): WriteResult<CommentRow | null> {
  return writeTx(ctx, (tx) => {
    const cur = tx.select().from(comments).where(eq(comments.id, id)).get();
    if (!cur) throw new NotFound('comment', id);
    if (cur.deletedAt !== null) return result(cur, false, emptyReport());
    const replies = tx.get<{ n: number }>(sql`SELECT count(*) AS n FROM comments WHERE parent_comment_id = ${id}`)!.n;
    let row: CommentRow | null = null;
    if (replies > 0) {
      const now = ctx.clock.now();
      row = tx.update(comments).set({ body: '', deletedAt: now, updatedAt: now }).where(eq(comments.id, id)).returning().get()!;
    } else {
      tx.delete(comments).where(eq(comments.id, id)).run();
    }
    return result(row, true, emptyReport(), oweForComment(tx, ctx, cur.itemId, opts));
  });
}

// ------------------------------------------------------------------ links

/** Adds a link, or nothing when one with the same ends and type exists. Owes both ends (sets that read links). */
export function addLink(ctx: SqliteContext, l: NewLink, opts: OweOptions = {}): WriteResult<LinkRow> {
  return writeTx(ctx, (tx) => {
    const src = getItemTx(tx, l.sourceId);
    const dst = getItemTx(tx, l.targetId);
    if (src.workspaceId !== l.workspaceId || dst.workspaceId !== l.workspaceId) {
      throw new InvalidWrite('a link must join two items of its workspace');
    }
    if (l.sourceId === l.targetId) throw new InvalidWrite('an item cannot link to itself');
    const existing = tx
      .select()
      .from(itemLinks)
      .where(and(eq(itemLinks.sourceId, l.sourceId), eq(itemLinks.targetId, l.targetId), eq(itemLinks.linkType, l.linkType)))
      .get();
    if (existing) return result(existing, false, emptyReport());
    const row = tx
      .insert(itemLinks)
      .values({ id: l.id ?? ctx.newId(), workspaceId: l.workspaceId, sourceId: l.sourceId, targetId: l.targetId, linkType: l.linkType, createdAt: l.createdAt ?? ctx.clock.now() })
      .returning()
      .get();
    const now = ctx.clock.now();
    const owed =
      oweForItem(tx, ctx, bumpItem(tx, src.id, now), opts, readsLinks) + oweForItem(tx, ctx, bumpItem(tx, dst.id, now), opts, readsLinks);
    return result(row, true, emptyReport(), owed);
  });
}

export function removeLink(ctx: SqliteContext, id: string, opts: OweOptions = {}): WriteResult<LinkRow | null> {
  return writeTx(ctx, (tx) => {
    const cur = tx.select().from(itemLinks).where(eq(itemLinks.id, id)).get();
    if (!cur) return result(null, false, emptyReport());
    tx.delete(itemLinks).where(eq(itemLinks.id, id)).run();
    const now = ctx.clock.now();
    const owed =
      oweForItem(tx, ctx, bumpItem(tx, cur.sourceId, now), opts, readsLinks) +
      oweForItem(tx, ctx, bumpItem(tx, cur.targetId, now), opts, readsLinks);
    return result(null, true, emptyReport(), owed);
  });
}
