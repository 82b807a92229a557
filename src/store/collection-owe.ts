/**
 * The continuation of a collection change (DESIGN §3.3), shared by both stores.
 *
 * A collection rename, soft delete, restore or settings change owes every live item of the
 * collection. Owing a million items in the door's own transaction held the write lock for ~23 s
 * (measured by scripts/fault-collection-chunks.ts), so the door owes only the first chunk of
 * `COLLECTION_OWE_CHUNK` items and writes a continuation row in the same transaction; the worker
 * (`Store.advanceCollectionOwes`) owes the rest one chunk per transaction, each chunk committing
 * with the cursor it advances, so a crash resumes from the last committed chunk and owes each
 * remaining item once. A second change to the collection while one is pending restarts the walk
 * from the first item with the union of both changes' sets (items already passed may read
 * differently again).
 *
 * The continuation lives in `verdict_meta` (no table of its own): key
 * `collection-owe:<collectionId>`, value the JSON of `CollectionContinuation`.
 */

/** Items owed per transaction by a collection change (DESIGN §3.3: 1,000). */
export const COLLECTION_OWE_CHUNK = 1_000;

/** The `verdict_meta` key prefix of continuation rows. */
export const COLLECTION_OWE_PREFIX = 'collection-owe:';

/** A pending collection change: which sets to owe, and the last item id already owed (ids ascending). */
export interface CollectionContinuation {
  /** Set names to owe (those of the old and the new slug); names unknown in a process are skipped there. */
  sets: string[];
  /** Items with an id above this one are still to owe; '' before the first chunk. */
  after: string;
  /** Bumped by every change of the collection; a restart of the walk is a new generation. */
  generation: number;
}

/** What one `advanceCollectionOwes` step did. */
export interface CollectionOweStep {
  /** The collection whose chunk was owed; null when no change was pending. */
  collectionId: string | null;
  /** Items in the chunk (at most `COLLECTION_OWE_CHUNK`). */
  items: number;
  /** Job rows inserted or updated. */
  owed: number;
  /** Continuations still pending after this step (0: every collection change is fully owed). */
  pending: number;
}

export function continuationKey(collectionId: string): string {
  return COLLECTION_OWE_PREFIX + collectionId;
}

export function collectionIdOfKey(key: string): string {
  return key.slice(COLLECTION_OWE_PREFIX.length);
}

/**
 * Reads a stored continuation. A row that does not parse is not dropped: it reads as a walk from
 * the first item with `fallbackSets` (the current slug's sets), so bad data owes more, never less.
 */
export function parseContinuation(
  value: string | null | undefined,
  fallbackSets: readonly string[],
): CollectionContinuation | null {
  if (value === null || value === undefined) return null;
  try {
    const v = JSON.parse(value) as Partial<CollectionContinuation>;
    if (
      Array.isArray(v.sets) &&
      v.sets.every((s) => typeof s === 'string') &&
      typeof v.after === 'string' &&
      Number.isInteger(v.generation)
    ) {
      return { sets: v.sets, after: v.after, generation: v.generation! };
    }
  } catch {
    // fall through
  }
  return { sets: [...fallbackSets], after: '', generation: 0 };
}

/** The continuation a new change starts: from the first item, with its sets and any pending ones. */
export function restartContinuation(
  prev: CollectionContinuation | null,
  sets: readonly string[],
): CollectionContinuation {
  return {
    sets: [...new Set([...(prev?.sets ?? []), ...sets])].sort(),
    after: '',
    generation: (prev?.generation ?? 0) + 1,
  };
}

/**
 * The sets a pending change of an item's collection still owes, for readers: an item of that
 * collection has its job owed in effect, whether or not its chunk has been written yet. (The
 * cursor is not compared: ids order by the database's collation, which JavaScript cannot mirror,
 * and an item already passed has its job row owed anyway.)
 */
export function pendingSets(c: CollectionContinuation | null): string[] {
  return c === null ? [] : c.sets;
}
