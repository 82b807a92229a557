import type { CollectionRow, CollectionSchema, CollectionSettings, FieldDef, ItemRow } from '../tracker-rows.js';

export interface WorkspaceRow {
  id: string;
  slug: string;
  createdAt: number;
  deletedAt: number | null;
}

/** Re-exported: the tracker rows live in src/tracker-rows.ts, below both the store and decision/, which names them too. */
export type { FieldDef, CollectionSchema, CollectionSettings, CollectionRow, ItemRow };

export interface CommentRow {
  id: string;
  itemId: string;
  parentCommentId: string | null;
  author: string;
  body: string;
  createdAt: number;
  updatedAt: number;
  deletedAt: number | null;
}

export interface LinkRow {
  id: string;
  workspaceId: string;
  sourceId: string;
  targetId: string;
  linkType: string;
  createdAt: number;
}

/** A JSON scalar a field is compared with (`ItemQuery.fieldsEqual`). */
export type FieldScalar = string | number | boolean | null;

/** What `listItems` filters on; every filter given must hold. */
export interface ItemQuery {
  workspaceId?: string;
  collectionId?: string;
  /** Soft-deleted items too. @defaultValue false */
  includeDeleted?: boolean;
  /** Refs that start with this, compared code point by code point (case matters; `''` is no filter). */
  refPrefix?: string;
  /**
   * Top-level fields equal to these JSON scalars: a string equals a JSON string, a number a JSON
   * number (`1` equals `1.0`), a boolean a boolean, `null` a field present and null. A field that
   * holds an array or object never equals a scalar; a missing field equals nothing.
   */
  fieldsEqual?: Readonly<Record<string, FieldScalar>>;
  /** Items with an id after this one (the previous page's last id). Only with the id order. */
  afterId?: string;
  /** Items updated at or after this time (epoch ms). */
  updatedSince?: number;
  /**
   * Titles holding this text, ignoring case (`lower()` on both databases: ASCII letters on SQLite,
   * every letter on Postgres); `%` and `_` match themselves.
   */
  titleContains?: string;
  /** Only these item ids (at most `ITEM_IDS_FILTER_MAX`). */
  ids?: readonly string[];
  /**
   * The order: `id` (time-ordered ids, the primary key's index), `updated` (`updatedAt`), `created`
   * (`createdAt`) or `ref` (byte order); ties broken by id. @defaultValue 'id'
   */
  orderBy?: 'id' | 'updated' | 'created' | 'ref';
  /** Reverse the order (ties too). @defaultValue false */
  descending?: boolean;
  /**
   * Keyset paging for `orderBy` other than `id`: only rows strictly after this one in the order
   * (its sort value, a number for times and a string for `ref`, and its id).
   */
  after?: { value: number | string; id: string };
  /** At most this many. @defaultValue no limit */
  limit?: number;
}

/** What `searchItems` filters and pages by. */
export interface ItemSearch {
  workspaceId: string;
  /**
   * Items whose ref or title contains this (surrounding spaces ignored; `''` matches all). `%`,
   * `_` and `\` are literal. Case is ignored for ASCII letters on both databases; other letters
   * are folded by the database's `lower()` (PostgreSQL folds them, SQLite does not).
   */
  text?: string;
  collectionId?: string;
  /** @defaultValue 'live' */
  deleted?: 'live' | 'deleted' | 'all';
  offset: number;
  limit: number;
}

/**
 * Most ids `ItemQuery.ids` takes: each is one bound parameter, and SQLite allows 32,766 a
 * statement; well below, so the other filters keep their parameters.
 */
export const ITEM_IDS_FILTER_MAX = 20_000;

/** The tracker reads (DESIGN §16.1; statements in sql/tracker-reads.ts): part of the public `TrackerStore`. */
export interface TrackerReads {
  getWorkspaceBySlug(slug: string): Promise<WorkspaceRow | null>;
  /** Every workspace, deleted ones included, by slug. */
  listWorkspaces(): Promise<WorkspaceRow[]>;
  getWorkspace(id: string): Promise<WorkspaceRow | null>;
  listCollections(workspaceId: string): Promise<CollectionRow[]>;
  getItem(id: string): Promise<ItemRow | null>;
  getItemByRef(workspaceId: string, ref: string): Promise<ItemRow | null>;
  /** One comment by id, tombstones included (`deletedAt` set). */
  getComment(id: string): Promise<CommentRow | null>;
  /** One link by id. */
  getLink(id: string): Promise<LinkRow | null>;
  /** An item's comments, tombstones included (`deletedAt` set), oldest first. */
  listComments(itemId: string): Promise<CommentRow[]>;
  /** The links with the item at either end, oldest first. */
  listLinks(itemId: string): Promise<LinkRow[]>;
  /**
   * Items in id order (ids are time-ordered), after the cursor id when given, live ones unless
   * `includeDeleted`; narrowed by workspace, collection, ref prefix and field equality (ItemQuery).
   */
  listItems(q: ItemQuery): Promise<ItemRow[]>;
  countItems(workspaceId?: string): Promise<number>;
}

/** The dashboard's item search (DESIGN §16.4; sql/tracker-reads.ts): internal, not part of `TrackerStore`. */
export interface ItemSearchReads {
  /**
   * One workspace's items whose ref or title contains `text` (ItemSearch), newest write first
   * (then by id), one page at a time, with how many match in all: the dashboard's items page.
   */
  searchItems(q: ItemSearch): Promise<{ rows: ItemRow[]; total: number }>;
}
