/**
 * The tracker rows the decision rules read (DESIGN §2): a collection and an item as the store
 * returns them. A root file below both the store and decision/ (eligibility, conventions, resolvers),
 * which name them without importing each other; store/tracker-reads.ts re-exports them.
 */

/** A collection's field definition (DESIGN §2 `schema`). */
export interface FieldDef {
  key: string;
  type: 'select' | 'text' | 'number' | 'multi' | 'user' | string;
  options?: string[];
  /** For a select: options that make the item terminal (for example `closed`). */
  terminal_options?: string[];
}

export interface CollectionSchema {
  fields: FieldDef[];
}

export interface CollectionSettings {
  /** Whether items of this collection are work to track. @defaultValue true */
  tracks_work?: boolean;
  /** `conventions` marks a workspace's conventions collection. */
  role?: string;
  [k: string]: unknown;
}

export interface CollectionRow {
  id: string;
  workspaceId: string;
  slug: string;
  isSystem: boolean;
  schema: CollectionSchema;
  settings: CollectionSettings;
  createdAt: number;
  deletedAt: number | null;
}

export interface ItemRow {
  id: string;
  workspaceId: string;
  collectionId: string;
  ref: string;
  title: string;
  content: string;
  /** JSON object text, exactly as stored. */
  fields: string;
  seq: number;
  createdAt: number;
  updatedAt: number;
  deletedAt: number | null;
  /**
   * Where the item lives in its tracker, for a person to open (a GitHub issue's `html_url`): an
   * absolute http(s) URL, or null (beads items and items made by hand have none). Not part of the
   * item's state: never sent to a provider, and setting it owes nothing (DESIGN §16.4).
   */
  sourceUrl: string | null;
}
