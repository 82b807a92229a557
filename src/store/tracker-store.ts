import type { TrackerReads } from './tracker-reads.js';
import type { TrackerWrites } from './tracker-writes.js';

/**
 * The tracker-facing part of the Store (public, DESIGN §16.1): the write doors a tracker calls and
 * the tracker reads. Everything else (the queue, answers, operations) is internal to Verdict's
 * worker and CLI; a host reaches it only through `createVerdict`'s worker and reader.
 * `TRACKER_STORE_METHODS` lists exactly these names (the public facade exposes only them).
 */
export interface TrackerStore extends TrackerWrites, TrackerReads {
  /** Epoch milliseconds, from the store's clock. */
  now(): Promise<number>;
}

/**
 * The names of the TrackerStore methods, for facades that must expose exactly the public part
 * (`createVerdict`'s `store`). A test holds it equal to the interface.
 */
export const TRACKER_STORE_METHODS = [
  'now',
  'createWorkspace',
  'softDeleteWorkspace',
  'restoreWorkspace',
  'createCollection',
  'updateCollection',
  'softDeleteCollection',
  'restoreCollection',
  'createItem',
  'updateItem',
  'upsertItem',
  'moveItem',
  'softDeleteItem',
  'restoreItem',
  'addComment',
  'upsertComment',
  'editComment',
  'deleteComment',
  'addLink',
  'removeLink',
  'getWorkspaceBySlug',
  'listWorkspaces',
  'getWorkspace',
  'listCollections',
  'getItem',
  'getItemByRef',
  'getComment',
  'getLink',
  'listComments',
  'listLinks',
  'listItems',
  'countItems',
] as const satisfies ReadonlyArray<keyof TrackerStore>;

// Every TrackerStore method is listed (a compile error names the missing one).
const _everyTrackerMethodListed: [Exclude<keyof TrackerStore, (typeof TRACKER_STORE_METHODS)[number]>] extends [never]
  ? true
  : never = true;
void _everyTrackerMethodListed;

/**
 * The store `createVerdict` hands a tracker (DESIGN §16.1): the write doors and tracker reads,
 * plus `transaction` to run several doors all or nothing (see Store.transaction).
 */
export interface VerdictStore extends TrackerStore {
  transaction<T>(fn: (tx: TrackerStore) => Promise<T>): Promise<T>;
}
