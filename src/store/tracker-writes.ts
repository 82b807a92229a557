import type { NormaliseReport } from './input-rules.js';
import type { CollectionRow, CollectionSchema, CollectionSettings, ItemRow } from '../tracker-rows.js';
import type { OweOptions } from './queue-store.js';
import type { CommentRow, LinkRow, WorkspaceRow } from './tracker-reads.js';

/** What a write door did. */
export interface WriteResult<T> {
  /** The row after the write (null after a hard delete). */
  row: T;
  /** False when the write changed no stored value: no seq bump, nothing owed. */
  changed: boolean;
  /** Lone surrogates replaced and NULs removed (DESIGN §2). */
  normalised: NormaliseReport;
  /** Job rows upserted in the same transaction. */
  owed: number;
}

export interface NewItem {
  /** Defaults to a fresh random id; importers pass a derived one. */
  id?: string;
  workspaceId: string;
  collectionId: string;
  ref: string;
  title: string;
  content?: string;
  /** A JSON object (or its text). Stored as text. */
  fields?: Record<string, unknown> | string;
  /** Defaults to now. Importers pass the source's times. */
  createdAt?: number;
  /** Create the item already soft-deleted (imported tombstones). */
  deletedAt?: number | null;
  /**
   * Where the item lives in its tracker (`ItemRow.sourceUrl`): an absolute http(s) URL of at most
   * 2,048 characters, or null. `upsertItem` leaves the stored one alone when this is undefined.
   * @defaultValue null
   */
  sourceUrl?: string | null;
}

/**
 * An item edit. Fields edits keep every byte of the stored fields they do not touch (DESIGN
 * §3.2); a value equal to the stored one (the same number however written) is no change, and a
 * patch that changes nothing is a no-op (no seq bump, nothing owed).
 */
export interface ItemPatch {
  title?: string;
  content?: string;
  /**
   * The whole fields object. As text: stored exactly as given. As an object: every key set to its
   * value and keys it lacks removed, with unchanged members keeping their stored bytes.
   */
  fields?: Record<string, unknown> | string;
  /**
   * Sets only these keys, leaving every other member's bytes alone; not with `fields`. Pass a
   * lossless-json `LosslessNumber` to store a number literal exactly (`3.0`, integers beyond 2^53).
   */
  setFields?: Record<string, unknown>;
}

export interface NewComment {
  id?: string;
  itemId: string;
  parentCommentId?: string | null;
  author: string;
  body: string;
  createdAt?: number;
}

export interface NewLink {
  id?: string;
  workspaceId: string;
  sourceId: string;
  targetId: string;
  linkType: string;
  createdAt?: number;
}

/**
 * The tracker write doors (DESIGN §3; statements in sql/write-doors.ts): each writes its rows and
 * owes the jobs the write makes due in one transaction. Part of the public `TrackerStore`.
 */
export interface TrackerWrites {
  createWorkspace(w: { id?: string; slug: string }): Promise<WorkspaceRow>;
  /** Holds the workspace's jobs (the claim skips them) until a restore. */
  softDeleteWorkspace(id: string): Promise<WriteResult<WorkspaceRow>>;
  restoreWorkspace(id: string): Promise<WriteResult<WorkspaceRow>>;
  createCollection(c: {
    id?: string;
    workspaceId: string;
    slug: string;
    isSystem?: boolean;
    schema?: CollectionSchema;
    settings?: CollectionSettings;
  }): Promise<CollectionRow>;
  /**
   * Rename or change settings; owes every live item of the collection at backfill priority, in
   * chunks of 1,000 per transaction (DESIGN §3.3): the first chunk in the door's transaction
   * (`owed` counts its rows), the rest through a continuation that `advanceCollectionOwes` works
   * off and a crash resumes. Soft delete and restore do the same.
   */
  updateCollection(
    id: string,
    patch: { slug?: string; settings?: CollectionSettings; schema?: CollectionSchema },
  ): Promise<WriteResult<CollectionRow>>;
  softDeleteCollection(id: string): Promise<WriteResult<CollectionRow>>;
  restoreCollection(id: string): Promise<WriteResult<CollectionRow>>;
  createItem(item: NewItem, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  /** @throws NotFound when the item does not exist; InvalidWrite for bad fields (nothing written). */
  updateItem(id: string, patch: ItemPatch, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  /**
   * Creates the item, or updates it to exactly these values (including its deleted state), or
   * does nothing when nothing differs. The importer's door: a re-import owes nothing.
   */
  upsertItem(item: NewItem & { id: string }, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  moveItem(id: string, collectionId: string, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  softDeleteItem(id: string, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  restoreItem(id: string, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  addComment(c: NewComment, opts?: OweOptions): Promise<WriteResult<CommentRow>>;
  /** Creates the comment or sets its author/body; nothing when unchanged. */
  upsertComment(c: NewComment & { id: string }, opts?: OweOptions): Promise<WriteResult<CommentRow>>;
  /** Owes work only when the body changes. */
  editComment(id: string, body: string, opts?: OweOptions): Promise<WriteResult<CommentRow>>;
  /** A comment with replies stays as a tombstone with its body blanked; one without is removed. */
  deleteComment(id: string, opts?: OweOptions): Promise<WriteResult<CommentRow | null>>;
  /** Adds a link (nothing when the same source, target and type exist). Owes both ends for sets that read links. */
  addLink(l: NewLink, opts?: OweOptions): Promise<WriteResult<LinkRow>>;
  removeLink(id: string, opts?: OweOptions): Promise<WriteResult<LinkRow | null>>;
}
