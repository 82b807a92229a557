import { and, eq, sql, type SQLWrapper } from 'drizzle-orm';
import { checkDoorInput, DOOR_INPUT as IN, emptyReport, normaliseText, type NormaliseReport } from '../input-rules.js';
import { InvalidWrite, NotFound } from '../store.js';
import type { OweOptions } from '../queue-store.js';
import type {
  CollectionRow,
  CollectionSchema,
  CollectionSettings,
  CommentRow,
  ItemRow,
  LinkRow,
  WorkspaceRow,
} from '../tracker-reads.js';
import type { ItemPatch, NewComment, NewItem, NewLink, WriteResult } from '../tracker-writes.js';
import {
  fieldsText,
  planCollectionPatch,
  checkFieldOptions,
  planItemPatch,
  planItemUpsert,
  readsComments,
  readsLinks,
  setsForSlugChange,
  toCollectionRow,
  writeResult as result,
} from '../write-rules.js';
import { oweCollectionChange } from './collection-owe.js';
import { oweForItem } from './owe.js';
import { bind, exec, nowMs, one, shape, shapeFamily, write, type Expr, type SqlContext, type Steps } from './steps.js';

/**
 * Tracker write doors (DESIGN §3). Each door changes the tracker rows and owes the affected jobs
 * in the same transaction; a write that changes no stored value is a no-op (no seq bump, nothing
 * owed). Each door checks its arguments first (`checkDoorInput`: InvalidInput naming the member,
 * before any statement); text is then put in its stored form (`normaliseText`: NFC, LF line ends,
 * lone surrogates → U+FFFD and NUL removed, the repairs counted and reported). What to write is decided by the shared rules in `../write-rules.ts`; this file only
 * runs the statements. Rows a decision depends on are read with `c.d.lock` (`FOR UPDATE` on
 * Postgres), so two writers of one item take turns instead of both seeing the old value; on
 * SQLite the IMMEDIATE transaction serialises all writers. "Now" is read once per door, after the
 * no-op checks where it can be (on Postgres it is a round trip to the database clock).
 */

const lockItemShape = shape<'id'>(
  'lock item',
  (d, p) => (db) =>
    d.lock(
      db
        .select()
        .from(d.t.items)
        .where(eq(d.t.items.id, p.id as SQLWrapper)),
    ),
);

function* lockItem(c: SqlContext, id: string): Steps<ItemRow> {
  const row = yield* one<ItemRow>(bind(lockItemShape, { id }));
  if (!row) throw new NotFound('item', id);
  return row;
}

/** The item update that bumps seq and updated_at and sets the given columns (parameters: those columns, `id`, `now`); one shape per set of columns. */
const bumpItemShape = shapeFamily((columns: string) =>
  shape('bump item', (d, p: Record<string, Expr>) => (db) => {
    const { items } = d.t;
    const set = Object.fromEntries(columns === '' ? [] : columns.split(',').map((k) => [k, p[k]]));
    return db
      .update(items)
      .set({ ...set, seq: sql`${items.seq} + 1`, updatedAt: sql`${p.now}` })
      .where(eq(items.id, p.id as SQLWrapper))
      .returning();
  }),
);

function* bumpItem(c: SqlContext, id: string, now: number, set: Partial<ItemRow> = {}): Steps<ItemRow> {
  const columns = Object.keys(set)
    .filter((k) => set[k as keyof ItemRow] !== undefined)
    .sort();
  const values: Record<string, Expr | null> = { id, now };
  for (const k of columns) values[k] = set[k as keyof ItemRow] as Expr | null;
  const row = yield* one<ItemRow>(bind(bumpItemShape(columns.join(',')), values));
  return row!;
}

/** @returns the collection's stored schema JSON (for `checkFieldOptions`). */
function* requireCollection(c: SqlContext, id: string, workspaceId: string): Steps<string> {
  const col = yield* one((db) => db.select().from(c.d.t.collections).where(eq(c.d.t.collections.id, id)));
  if (!col) throw new NotFound('collection', id);
  if (col.workspaceId !== workspaceId) throw new InvalidWrite(`collection ${id} is not in workspace ${workspaceId}`);
  return col.schema;
}

// ------------------------------------------------------------------ workspaces and collections

export function createWorkspace(c: SqlContext, w: { id?: string; slug: string }): Promise<WorkspaceRow> {
  checkDoorInput('createWorkspace', 'workspace', IN.createWorkspace, w);
  return write(c, function* () {
    const now = yield* nowMs();
    return (yield* one((db) =>
      db
        .insert(c.d.t.workspaces)
        .values({ id: w.id ?? c.newId(), slug: w.slug, createdAt: now })
        .returning(),
    ))!;
  });
}

/** Soft-deletes or restores a workspace. Its jobs are held by the claim, not re-owed. */
export function setWorkspaceDeleted(c: SqlContext, id: string, deleted: boolean): Promise<WriteResult<WorkspaceRow>> {
  checkDoorInput(deleted ? 'softDeleteWorkspace' : 'restoreWorkspace', 'id', IN.id, id);
  const { workspaces } = c.d.t;
  return write(c, function* () {
    const w = yield* one((db) => c.d.lock(db.select().from(workspaces).where(eq(workspaces.id, id))));
    if (!w) throw new NotFound('workspace', id);
    if ((w.deletedAt !== null) === deleted) return result(w, false, emptyReport());
    const now = yield* nowMs();
    const row = yield* one((db) =>
      db
        .update(workspaces)
        .set({ deletedAt: deleted ? now : null })
        .where(eq(workspaces.id, id))
        .returning(),
    );
    return result(row!, true, emptyReport());
  });
}

export function createCollection(
  c: SqlContext,
  col: {
    id?: string;
    workspaceId: string;
    slug: string;
    isSystem?: boolean;
    schema?: CollectionSchema;
    settings?: CollectionSettings;
  },
): Promise<CollectionRow> {
  checkDoorInput('createCollection', 'collection', IN.createCollection, col);
  return write(c, function* () {
    const now = yield* nowMs();
    const row = yield* one((db) =>
      db
        .insert(c.d.t.collections)
        .values({
          id: col.id ?? c.newId(),
          workspaceId: col.workspaceId,
          slug: col.slug,
          isSystem: col.isSystem ?? false,
          schema: JSON.stringify(col.schema ?? { fields: [] }),
          settings: JSON.stringify(col.settings ?? {}),
          createdAt: now,
        })
        .returning(),
    );
    return toCollectionRow(row!);
  });
}

/**
 * Renames a collection or changes its settings, schema or deleted state. Owes every live item of
 * the collection at backfill priority, for the sets of its old and new slug (DESIGN §3), in
 * chunks (DESIGN §3.3): this transaction owes the first `COLLECTION_OWE_CHUNK` items and leaves
 * a continuation for the rest (`advanceCollectionOwes`). `owed` counts the first chunk's rows.
 */
export function updateCollection(
  c: SqlContext,
  id: string,
  patch: { slug?: string; settings?: CollectionSettings; schema?: CollectionSchema; deleted?: boolean },
): Promise<WriteResult<CollectionRow>> {
  checkDoorInput('updateCollection', 'id', IN.id, id);
  checkDoorInput('updateCollection', 'patch', IN.updateCollection, patch);
  const { collections } = c.d.t;
  return write(c, function* () {
    const cur = yield* one((db) => c.d.lock(db.select().from(collections).where(eq(collections.id, id))));
    if (!cur) throw new NotFound('collection', id);
    const now = yield* nowMs();
    const { next, changed } = planCollectionPatch(cur, patch, now);
    if (!changed) return result(toCollectionRow(cur), false, emptyReport());
    const row = yield* one((db) => db.update(collections).set(next).where(eq(collections.id, id)).returning());
    const owed = yield* oweCollectionChange(c, now, id, setsForSlugChange(c.registry, cur.slug, next.slug));
    return result(toCollectionRow(row!), true, emptyReport(), owed);
  });
}

// ------------------------------------------------------------------ items

function* insertItem(
  c: SqlContext,
  now: number,
  item: NewItem,
  report: NormaliseReport,
  opts: OweOptions,
): Steps<WriteResult<ItemRow>> {
  const schema = yield* requireCollection(c, item.collectionId, item.workspaceId);
  const fields = fieldsText(item.fields, report);
  checkFieldOptions(schema, fields, null);
  const row = (yield* one((db) =>
    db
      .insert(c.d.t.items)
      .values({
        id: item.id ?? c.newId(),
        workspaceId: item.workspaceId,
        collectionId: item.collectionId,
        ref: normaliseText(item.ref, report),
        title: normaliseText(item.title, report),
        content: normaliseText(item.content ?? '', report),
        fields,
        seq: 1,
        createdAt: item.createdAt ?? now,
        updatedAt: now,
        deletedAt: item.deletedAt ?? null,
        sourceUrl: item.sourceUrl ?? null,
      })
      .returning(),
  ))!;
  return result(row, true, report, yield* oweForItem(c, now, row, opts, () => true, true));
}

/** @throws NotFound (collection), InvalidWrite (fields, workspace mismatch), a unique violation on a duplicate ref. */
export function createItem(c: SqlContext, item: NewItem, opts: OweOptions = {}): Promise<WriteResult<ItemRow>> {
  checkDoorInput('createItem', 'item', IN.newItem, item);
  checkDoorInput('createItem', 'opts', IN.oweOptions, opts);
  return write(c, function* () {
    return yield* insertItem(c, yield* nowMs(), item, emptyReport(), opts);
  });
}

/** Title, content or fields. A title change also owes the items whose state shows this title. */
export function updateItem(
  c: SqlContext,
  id: string,
  patch: ItemPatch,
  opts: OweOptions = {},
): Promise<WriteResult<ItemRow>> {
  checkDoorInput('updateItem', 'id', IN.id, id);
  checkDoorInput('updateItem', 'patch', IN.itemPatch, patch);
  checkDoorInput('updateItem', 'opts', IN.oweOptions, opts);
  const report = emptyReport();
  return write(c, function* () {
    const cur = yield* lockItem(c, id);
    const { next, changed, titleChanged } = planItemPatch(cur, patch, report);
    if (!changed) return result(cur, false, report);
    if (next.fields !== cur.fields)
      checkFieldOptions(yield* requireCollection(c, cur.collectionId, cur.workspaceId), next.fields, cur.fields);
    const now = yield* nowMs();
    const row = yield* bumpItem(c, id, now, next);
    return result(row, true, report, yield* oweForItem(c, now, row, opts, () => true, titleChanged));
  });
}

/** The importer's door: create, or set every value (including deleted state and collection), or nothing. */
export function upsertItem(
  c: SqlContext,
  item: NewItem & { id: string },
  opts: OweOptions = {},
): Promise<WriteResult<ItemRow>> {
  checkDoorInput('upsertItem', 'item', IN.newItem, item);
  checkDoorInput('upsertItem', 'item', IN.upsertItem, item);
  checkDoorInput('upsertItem', 'opts', IN.oweOptions, opts);
  const report = emptyReport();
  const { items } = c.d.t;
  return write(c, function* () {
    const now = yield* nowMs();
    const cur = yield* one((db) => c.d.lock(db.select().from(items).where(eq(items.id, item.id))));
    if (!cur) return yield* insertItem(c, now, item, report, opts);
    const { next, changed, linkers, sourceUrlChanged } = planItemUpsert(cur, item, report);
    const schema = yield* requireCollection(c, item.collectionId, item.workspaceId);
    checkFieldOptions(schema, next.fields, next.collectionId === cur.collectionId ? cur.fields : null);
    if (!changed && !sourceUrlChanged) return result(cur, false, report);
    if (!changed) {
      // The source URL alone is not part of the state: stored without a seq bump, nothing owed.
      const row = yield* one((db) =>
        db.update(items).set({ sourceUrl: next.sourceUrl }).where(eq(items.id, item.id)).returning(),
      );
      return result(row as ItemRow, true, report);
    }
    const row = yield* bumpItem(c, item.id, now, next);
    return result(row, true, report, yield* oweForItem(c, now, row, opts, () => true, linkers));
  });
}

/** Moves an item to another collection of its workspace; owes the target collection's sets. */
export function moveItem(
  c: SqlContext,
  id: string,
  collectionId: string,
  opts: OweOptions = {},
): Promise<WriteResult<ItemRow>> {
  checkDoorInput('moveItem', 'id', IN.id, id);
  checkDoorInput('moveItem', 'collectionId', IN.id, collectionId);
  checkDoorInput('moveItem', 'opts', IN.oweOptions, opts);
  return write(c, function* () {
    const cur = yield* lockItem(c, id);
    const schema = yield* requireCollection(c, collectionId, cur.workspaceId);
    if (cur.collectionId === collectionId) return result(cur, false, emptyReport());
    checkFieldOptions(schema, cur.fields, null);
    const now = yield* nowMs();
    const row = yield* bumpItem(c, id, now, { collectionId });
    return result(row, true, emptyReport(), yield* oweForItem(c, now, row, opts));
  });
}

/** Soft delete or restore; also owes the items whose state shows this item. */
export function setItemDeleted(
  c: SqlContext,
  id: string,
  deleted: boolean,
  opts: OweOptions = {},
): Promise<WriteResult<ItemRow>> {
  checkDoorInput(deleted ? 'softDeleteItem' : 'restoreItem', 'id', IN.id, id);
  checkDoorInput(deleted ? 'softDeleteItem' : 'restoreItem', 'opts', IN.oweOptions, opts);
  return write(c, function* () {
    const cur = yield* lockItem(c, id);
    if ((cur.deletedAt !== null) === deleted) return result(cur, false, emptyReport());
    const now = yield* nowMs();
    const row = yield* bumpItem(c, id, now, { deletedAt: deleted ? now : null });
    return result(row, true, emptyReport(), yield* oweForItem(c, now, row, opts, () => true, true));
  });
}

// ------------------------------------------------------------------ comments

function* oweForComment(c: SqlContext, now: number, itemId: string, opts: OweOptions): Steps<number> {
  return yield* oweForItem(c, now, yield* bumpItem(c, itemId, now), opts, readsComments);
}

function* lockComment(c: SqlContext, id: string): Steps<CommentRow | undefined> {
  return yield* one((db) => c.d.lock(db.select().from(c.d.t.comments).where(eq(c.d.t.comments.id, id))));
}

function* insertComment(
  c: SqlContext,
  now: number,
  cm: NewComment,
  report: NormaliseReport,
  opts: OweOptions,
): Steps<WriteResult<CommentRow>> {
  yield* lockItem(c, cm.itemId);
  const row = (yield* one((db) =>
    db
      .insert(c.d.t.comments)
      .values({
        id: cm.id ?? c.newId(),
        itemId: cm.itemId,
        parentCommentId: cm.parentCommentId ?? null,
        author: normaliseText(cm.author, report),
        body: normaliseText(cm.body, report),
        createdAt: cm.createdAt ?? now,
        updatedAt: now,
      })
      .returning(),
  ))!;
  return result(row, true, report, yield* oweForComment(c, now, cm.itemId, opts));
}

/** @throws NotFound when the item does not exist. */
export function addComment(c: SqlContext, cm: NewComment, opts: OweOptions = {}): Promise<WriteResult<CommentRow>> {
  checkDoorInput('addComment', 'comment', IN.newComment, cm);
  checkDoorInput('addComment', 'opts', IN.oweOptions, opts);
  return write(c, function* () {
    return yield* insertComment(c, yield* nowMs(), cm, emptyReport(), opts);
  });
}

/** The importer's door for comments: create, or set author and body, or nothing. */
export function upsertComment(
  c: SqlContext,
  cm: NewComment & { id: string },
  opts: OweOptions = {},
): Promise<WriteResult<CommentRow>> {
  checkDoorInput('upsertComment', 'comment', IN.newComment, cm);
  checkDoorInput('upsertComment', 'comment', IN.upsertComment, cm);
  checkDoorInput('upsertComment', 'opts', IN.oweOptions, opts);
  const report = emptyReport();
  const { comments } = c.d.t;
  return write(c, function* () {
    const now = yield* nowMs();
    const cur = yield* lockComment(c, cm.id);
    if (!cur) return yield* insertComment(c, now, cm, report, opts);
    const author = normaliseText(cm.author, report);
    const body = normaliseText(cm.body, report);
    if (cur.author === author && cur.body === body && cur.deletedAt === null) return result(cur, false, report);
    const row = yield* one((db) =>
      db
        .update(comments)
        .set({ author, body, deletedAt: null, updatedAt: now })
        .where(eq(comments.id, cm.id))
        .returning(),
    );
    return result(row!, true, report, yield* oweForComment(c, now, cur.itemId, opts));
  });
}

/** Owes work only when the body changes. @throws NotFound */
export function editComment(
  c: SqlContext,
  id: string,
  body: string,
  opts: OweOptions = {},
): Promise<WriteResult<CommentRow>> {
  checkDoorInput('editComment', 'id', IN.id, id);
  checkDoorInput('editComment', 'body', IN.commentBody, body);
  checkDoorInput('editComment', 'opts', IN.oweOptions, opts);
  const report = emptyReport();
  const { comments } = c.d.t;
  return write(c, function* () {
    const cur = yield* lockComment(c, id);
    if (!cur || cur.deletedAt !== null) throw new NotFound('comment', id);
    const next = normaliseText(body, report);
    if (next === cur.body) return result(cur, false, report);
    const now = yield* nowMs();
    const row = yield* one((db) =>
      db.update(comments).set({ body: next, updatedAt: now }).where(eq(comments.id, id)).returning(),
    );
    return result(row!, true, report, yield* oweForComment(c, now, cur.itemId, opts));
  });
}

/** A comment with replies becomes a tombstone with a blank body; one without replies is removed. */
export function deleteComment(
  c: SqlContext,
  id: string,
  opts: OweOptions = {},
): Promise<WriteResult<CommentRow | null>> {
  checkDoorInput('deleteComment', 'id', IN.id, id);
  checkDoorInput('deleteComment', 'opts', IN.oweOptions, opts);
  const { comments } = c.d.t;
  return write(c, function* () {
    const cur = yield* lockComment(c, id);
    if (!cur) throw new NotFound('comment', id);
    if (cur.deletedAt !== null) return result(cur, false, emptyReport());
    // The item lock orders this delete after a concurrent reply's insert (which locks the item too).
    yield* lockItem(c, cur.itemId);
    const replies = (yield* one<{ n: number }>(
      sql`SELECT ${c.d.int4(sql`count(*)`)} AS n FROM comments WHERE parent_comment_id = ${id}`,
    ))!.n;
    const now = yield* nowMs();
    let row: CommentRow | null = null;
    if (replies > 0) {
      row = (yield* one((db) =>
        db.update(comments).set({ body: '', deletedAt: now, updatedAt: now }).where(eq(comments.id, id)).returning(),
      ))!;
    } else {
      yield* exec(sql`DELETE FROM comments WHERE id = ${id}`);
    }
    return result(row, true, emptyReport(), yield* oweForComment(c, now, cur.itemId, opts));
  });
}

// ------------------------------------------------------------------ links

/** Owes both ends of a link (sets that read links), each bumped. */
function* oweLinkEnds(c: SqlContext, now: number, sourceId: string, targetId: string, opts: OweOptions): Steps<number> {
  // In id order, as addLink locks them: two link writes over one pair in opposite directions
  // otherwise bump (lock) the two items in opposite orders and deadlock on Postgres.
  const [first, second] = [sourceId, targetId].sort();
  const a = yield* bumpItem(c, first, now);
  const b = yield* bumpItem(c, second, now);
  return (yield* oweForItem(c, now, a, opts, readsLinks)) + (yield* oweForItem(c, now, b, opts, readsLinks));
}

/** Adds a link, or nothing when one with the same ends and type exists. Owes both ends (sets that read links). */
export function addLink(c: SqlContext, l: NewLink, opts: OweOptions = {}): Promise<WriteResult<LinkRow>> {
  checkDoorInput('addLink', 'link', IN.newLink, l);
  checkDoorInput('addLink', 'opts', IN.oweOptions, opts);
  const { itemLinks } = c.d.t;
  return write(c, function* () {
    // Both ends locked in id order, so two link writes over the same pair cannot deadlock.
    const [first, second] = [l.sourceId, l.targetId].sort();
    const a = yield* lockItem(c, first);
    const b = first === second ? a : yield* lockItem(c, second);
    const [src, dst] = a.id === l.sourceId ? [a, b] : [b, a];
    if (src.workspaceId !== l.workspaceId || dst.workspaceId !== l.workspaceId) {
      throw new InvalidWrite('a link must join two items of its workspace');
    }
    if (l.sourceId === l.targetId) throw new InvalidWrite('an item cannot link to itself');
    const existing = yield* one((db) =>
      db
        .select()
        .from(itemLinks)
        .where(
          and(
            eq(itemLinks.sourceId, l.sourceId),
            eq(itemLinks.targetId, l.targetId),
            eq(itemLinks.linkType, l.linkType),
          ),
        ),
    );
    if (existing) return result(existing, false, emptyReport());
    const now = yield* nowMs();
    const row = yield* one((db) =>
      db
        .insert(itemLinks)
        .values({
          id: l.id ?? c.newId(),
          workspaceId: l.workspaceId,
          sourceId: l.sourceId,
          targetId: l.targetId,
          linkType: l.linkType,
          createdAt: l.createdAt ?? now,
        })
        .returning(),
    );
    return result(row!, true, emptyReport(), yield* oweLinkEnds(c, now, src.id, dst.id, opts));
  });
}

export function removeLink(c: SqlContext, id: string, opts: OweOptions = {}): Promise<WriteResult<LinkRow | null>> {
  checkDoorInput('removeLink', 'id', IN.id, id);
  checkDoorInput('removeLink', 'opts', IN.oweOptions, opts);
  const { itemLinks } = c.d.t;
  return write(c, function* () {
    const cur = yield* one((db) => db.delete(itemLinks).where(eq(itemLinks.id, id)).returning());
    if (!cur) return result(null, false, emptyReport());
    const now = yield* nowMs();
    return result(null, true, emptyReport(), yield* oweLinkEnds(c, now, cur.sourceId, cur.targetId, opts));
  });
}
