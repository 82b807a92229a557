import { and, eq, sql } from 'drizzle-orm';
import { emptyReport, normaliseText, type NormaliseReport } from '../normalise.js';
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
import {
  fieldsText,
  planCollectionPatch,
  planItemPatch,
  planItemUpsert,
  readsComments,
  readsLinks,
  setsForSlugChange,
  toCollectionRow,
  writeResult as result,
} from '../write-rules.js';
import { one, readNow, writeTx, type PgContext, type PgTx } from './context.js';
import { oweCollectionChange } from './collection-owe.js';
import { oweForItem } from './owe.js';
import { collections, comments, itemLinks, items, workspaces } from './schema.js';

/**
 * Tracker write doors on Postgres (DESIGN §3), the twin of `../sqlite/write-doors.ts`: each door
 * changes the tracker rows and owes the affected jobs in the same transaction, and a write that
 * changes no stored value is a no-op. What to write is decided by the shared rules in
 * `../write-rules.ts`; this file only runs the statements. Rows a decision depends on are read
 * `FOR UPDATE`, so two writers of one item take turns instead of both seeing the old value (on
 * SQLite the IMMEDIATE transaction serialises all writers). Times are the database's now.
 */

async function lockItem(tx: PgTx, id: string): Promise<ItemRow> {
  const [row] = await tx.select().from(items).where(eq(items.id, id)).for('update');
  if (!row) throw new NotFound('item', id);
  return row;
}

async function bumpItem(tx: PgTx, id: string, now: number, set: Partial<typeof items.$inferInsert> = {}): Promise<ItemRow> {
  const [row] = await tx
    .update(items)
    .set({ ...set, seq: sql`${items.seq} + 1`, updatedAt: now })
    .where(eq(items.id, id))
    .returning();
  return row;
}

async function requireCollection(tx: PgTx, id: string, workspaceId: string) {
  const [c] = await tx.select().from(collections).where(eq(collections.id, id));
  if (!c) throw new NotFound('collection', id);
  if (c.workspaceId !== workspaceId) throw new InvalidWrite(`collection ${id} is not in workspace ${workspaceId}`);
  return c;
}

// ------------------------------------------------------------------ workspaces and collections

export async function createWorkspace(ctx: PgContext, w: { id?: string; slug: string }): Promise<WorkspaceRow> {
  return writeTx(ctx, async (tx) => {
    const now = await readNow(ctx, tx);
    const [row] = await tx.insert(workspaces).values({ id: w.id ?? ctx.newId(), slug: w.slug, createdAt: now }).returning();
    return row;
  });
}

/** Soft-deletes or restores a workspace. Its jobs are held by the claim, not re-owed. */
export async function setWorkspaceDeleted(ctx: PgContext, id: string, deleted: boolean): Promise<WriteResult<WorkspaceRow>> {
  return writeTx(ctx, async (tx) => {
    const [w] = await tx.select().from(workspaces).where(eq(workspaces.id, id)).for('update');
    if (!w) throw new NotFound('workspace', id);
    if ((w.deletedAt !== null) === deleted) return result(w, false, emptyReport());
    const now = await readNow(ctx, tx);
    const [row] = await tx.update(workspaces).set({ deletedAt: deleted ? now : null }).where(eq(workspaces.id, id)).returning();
    return result(row, true, emptyReport());
  });
}

export async function createCollection(
  ctx: PgContext,
  c: { id?: string; workspaceId: string; slug: string; isSystem?: boolean; schema?: CollectionSchema; settings?: CollectionSettings },
): Promise<CollectionRow> {
  return writeTx(ctx, async (tx) => {
    const now = await readNow(ctx, tx);
    const [row] = await tx
      .insert(collections)
      .values({
        id: c.id ?? ctx.newId(),
        workspaceId: c.workspaceId,
        slug: c.slug,
        isSystem: c.isSystem ?? false,
        schema: JSON.stringify(c.schema ?? { fields: [] }),
        settings: JSON.stringify(c.settings ?? {}),
        createdAt: now,
      })
      .returning();
    return toCollectionRow(row);
  });
}

/**
 * Renames a collection or changes its settings, schema or deleted state; owes its live items at
 * backfill priority, in chunks (DESIGN §16.12): the first chunk here, the rest from the
 * continuation this transaction writes (`advanceCollectionOwes`). `owed` counts the first chunk.
 */
export async function updateCollection(
  ctx: PgContext,
  id: string,
  patch: { slug?: string; settings?: CollectionSettings; schema?: CollectionSchema; deleted?: boolean },
): Promise<WriteResult<CollectionRow>> {
  return writeTx(ctx, async (tx) => {
    const [c] = await tx.select().from(collections).where(eq(collections.id, id)).for('update');
    if (!c) throw new NotFound('collection', id);
    const now = await readNow(ctx, tx);
    const { next, changed } = planCollectionPatch(c, patch, now);
    if (!changed) return result(toCollectionRow(c), false, emptyReport());
    const [row] = await tx.update(collections).set(next).where(eq(collections.id, id)).returning();
    // The first chunk here, the rest by the worker from the continuation (DESIGN §16.12).
    const owed = await oweCollectionChange(tx, ctx, now, id, setsForSlugChange(ctx.registry, c.slug, next.slug));
    return result(toCollectionRow(row), true, emptyReport(), owed);
  });
}

// ------------------------------------------------------------------ items

async function insertItem(tx: PgTx, ctx: PgContext, now: number, item: NewItem, report: NormaliseReport, opts: OweOptions): Promise<WriteResult<ItemRow>> {
  await requireCollection(tx, item.collectionId, item.workspaceId);
  const [row] = await tx
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
    .returning();
  const owed = await oweForItem(tx, ctx, now, row, opts, () => true, true);
  return result(row, true, report, owed);
}

/** @throws NotFound (collection), InvalidWrite (fields, workspace mismatch), a unique violation on a duplicate ref. */
export async function createItem(ctx: PgContext, item: NewItem, opts: OweOptions = {}): Promise<WriteResult<ItemRow>> {
  const report = emptyReport();
  return writeTx(ctx, async (tx) => insertItem(tx, ctx, await readNow(ctx, tx), item, report, opts));
}

/** Title, content or fields. A title change also owes the items whose state shows this title. */
export async function updateItem(ctx: PgContext, id: string, patch: ItemPatch, opts: OweOptions = {}): Promise<WriteResult<ItemRow>> {
  const report = emptyReport();
  return writeTx(ctx, async (tx) => {
    const cur = await lockItem(tx, id);
    const { next, changed, titleChanged } = planItemPatch(cur, patch, report);
    if (!changed) return result(cur, false, report);
    const now = await readNow(ctx, tx);
    const row = await bumpItem(tx, id, now, next);
    return result(row, true, report, await oweForItem(tx, ctx, now, row, opts, () => true, titleChanged));
  });
}

/** The importer's door: create, or set every value (including deleted state and collection), or nothing. */
export async function upsertItem(ctx: PgContext, item: NewItem & { id: string }, opts: OweOptions = {}): Promise<WriteResult<ItemRow>> {
  const report = emptyReport();
  return writeTx(ctx, async (tx) => {
    const now = await readNow(ctx, tx);
    const [cur] = await tx.select().from(items).where(eq(items.id, item.id)).for('update');
    if (!cur) return insertItem(tx, ctx, now, item, report, opts);
    const { next, changed, linkers } = planItemUpsert(cur, item, report);
    await requireCollection(tx, item.collectionId, item.workspaceId);
    if (!changed) return result(cur, false, report);
    const row = await bumpItem(tx, item.id, now, next);
    return result(row, true, report, await oweForItem(tx, ctx, now, row, opts, () => true, linkers));
  });
}

/** Moves an item to another collection of its workspace; owes the target collection's sets. */
export async function moveItem(ctx: PgContext, id: string, collectionId: string, opts: OweOptions = {}): Promise<WriteResult<ItemRow>> {
  return writeTx(ctx, async (tx) => {
    const cur = await lockItem(tx, id);
    await requireCollection(tx, collectionId, cur.workspaceId);
    if (cur.collectionId === collectionId) return result(cur, false, emptyReport());
    const now = await readNow(ctx, tx);
    const row = await bumpItem(tx, id, now, { collectionId });
    return result(row, true, emptyReport(), await oweForItem(tx, ctx, now, row, opts));
  });
}

/** Soft delete or restore; also owes the items whose state shows this item. */
export async function setItemDeleted(ctx: PgContext, id: string, deleted: boolean, opts: OweOptions = {}): Promise<WriteResult<ItemRow>> {
  return writeTx(ctx, async (tx) => {
    const cur = await lockItem(tx, id);
    if ((cur.deletedAt !== null) === deleted) return result(cur, false, emptyReport());
    const now = await readNow(ctx, tx);
    const row = await bumpItem(tx, id, now, { deletedAt: deleted ? now : null });
    return result(row, true, emptyReport(), await oweForItem(tx, ctx, now, row, opts, () => true, true));
  });
}

// ------------------------------------------------------------------ comments

async function oweForComment(tx: PgTx, ctx: PgContext, now: number, itemId: string, opts: OweOptions): Promise<number> {
  const item = await bumpItem(tx, itemId, now);
  return oweForItem(tx, ctx, now, item, opts, readsComments);
}

async function insertComment(tx: PgTx, ctx: PgContext, now: number, c: NewComment, report: NormaliseReport, opts: OweOptions): Promise<WriteResult<CommentRow>> {
  await lockItem(tx, c.itemId);
  const [row] = await tx
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
    .returning();
  return result(row, true, report, await oweForComment(tx, ctx, now, c.itemId, opts));
}

/** @throws NotFound when the item does not exist. */
export async function addComment(ctx: PgContext, c: NewComment, opts: OweOptions = {}): Promise<WriteResult<CommentRow>> {
  const report = emptyReport();
  return writeTx(ctx, async (tx) => insertComment(tx, ctx, await readNow(ctx, tx), c, report, opts));
}

/** The importer's door for comments: create, or set author and body, or nothing. */
export async function upsertComment(ctx: PgContext, c: NewComment & { id: string }, opts: OweOptions = {}): Promise<WriteResult<CommentRow>> {
  const report = emptyReport();
  return writeTx(ctx, async (tx) => {
    const now = await readNow(ctx, tx);
    const [cur] = await tx.select().from(comments).where(eq(comments.id, c.id)).for('update');
    if (!cur) return insertComment(tx, ctx, now, c, report, opts);
    const author = normaliseText(c.author, report);
    const body = normaliseText(c.body, report);
    if (cur.author === author && cur.body === body && cur.deletedAt === null) return result(cur, false, report);
    const [row] = await tx.update(comments).set({ author, body, deletedAt: null, updatedAt: now }).where(eq(comments.id, c.id)).returning();
    return result(row, true, report, await oweForComment(tx, ctx, now, cur.itemId, opts));
  });
}

/** Owes work only when the body changes. @throws NotFound */
export async function editComment(ctx: PgContext, id: string, body: string, opts: OweOptions = {}): Promise<WriteResult<CommentRow>> {
  const report = emptyReport();
  return writeTx(ctx, async (tx) => {
    const [cur] = await tx.select().from(comments).where(eq(comments.id, id)).for('update');
    if (!cur || cur.deletedAt !== null) throw new NotFound('comment', id);
    const next = normaliseText(body, report);
    if (next === cur.body) return result(cur, false, report);
    const now = await readNow(ctx, tx);
    const [row] = await tx.update(comments).set({ body: next, updatedAt: now }).where(eq(comments.id, id)).returning();
    return result(row, true, report, await oweForComment(tx, ctx, now, cur.itemId, opts));
  });
}

/** A comment with replies becomes a tombstone with a blank body; one without replies is removed. */
export async function deleteComment(ctx: PgContext, id: string, opts: OweOptions = {}): Promise<WriteResult<CommentRow | null>> {
  return writeTx(ctx, async (tx) => {
    const [cur] = await tx.select().from(comments).where(eq(comments.id, id)).for('update');
    if (!cur) throw new NotFound('comment', id);
    if (cur.deletedAt !== null) return result(cur, false, emptyReport());
    // The item lock orders this delete after a concurrent reply's insert (which locks the item too).
    await lockItem(tx, cur.itemId);
    const replies = (await one<{ n: number }>(tx, sql`SELECT count(*)::int AS n FROM comments WHERE parent_comment_id = ${id}`))!.n;
    const now = await readNow(ctx, tx);
    let row: CommentRow | null = null;
    if (replies > 0) {
      [row] = await tx.update(comments).set({ body: '', deletedAt: now, updatedAt: now }).where(eq(comments.id, id)).returning();
    } else {
      await tx.delete(comments).where(eq(comments.id, id));
    }
    return result(row, true, emptyReport(), await oweForComment(tx, ctx, now, cur.itemId, opts));
  });
}

// ------------------------------------------------------------------ links

/** Adds a link, or nothing when one with the same ends and type exists. Owes both ends (sets that read links). */
export async function addLink(ctx: PgContext, l: NewLink, opts: OweOptions = {}): Promise<WriteResult<LinkRow>> {
  return writeTx(ctx, async (tx) => {
    // Lock both ends in id order, so two link writes over the same pair cannot deadlock.
    const [first, second] = [l.sourceId, l.targetId].sort();
    const a = await lockItem(tx, first);
    const b = first === second ? a : await lockItem(tx, second);
    const src = a.id === l.sourceId ? a : b;
    const dst = a.id === l.targetId ? a : b;
    if (src.workspaceId !== l.workspaceId || dst.workspaceId !== l.workspaceId) {
      throw new InvalidWrite('a link must join two items of its workspace');
    }
    if (l.sourceId === l.targetId) throw new InvalidWrite('an item cannot link to itself');
    const [existing] = await tx
      .select()
      .from(itemLinks)
      .where(and(eq(itemLinks.sourceId, l.sourceId), eq(itemLinks.targetId, l.targetId), eq(itemLinks.linkType, l.linkType)));
    if (existing) return result(existing, false, emptyReport());
    const now = await readNow(ctx, tx);
    const [row] = await tx
      .insert(itemLinks)
      .values({ id: l.id ?? ctx.newId(), workspaceId: l.workspaceId, sourceId: l.sourceId, targetId: l.targetId, linkType: l.linkType, createdAt: l.createdAt ?? now })
      .returning();
    const owed =
      (await oweForItem(tx, ctx, now, await bumpItem(tx, src.id, now), opts, readsLinks)) +
      (await oweForItem(tx, ctx, now, await bumpItem(tx, dst.id, now), opts, readsLinks));
    return result(row, true, emptyReport(), owed);
  });
}

export async function removeLink(ctx: PgContext, id: string, opts: OweOptions = {}): Promise<WriteResult<LinkRow | null>> {
  return writeTx(ctx, async (tx) => {
    const [cur] = await tx.delete(itemLinks).where(eq(itemLinks.id, id)).returning();
    if (!cur) return result(null, false, emptyReport());
    const now = await readNow(ctx, tx);
    const owed =
      (await oweForItem(tx, ctx, now, await bumpItem(tx, cur.sourceId, now), opts, readsLinks)) +
      (await oweForItem(tx, ctx, now, await bumpItem(tx, cur.targetId, now), opts, readsLinks));
    return result(null, true, emptyReport(), owed);
  });
}
