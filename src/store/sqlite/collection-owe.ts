import { sql } from 'drizzle-orm';
import type { QuestionSet } from '../../decision/registry.js';
import {
  COLLECTION_OWE_CHUNK,
  COLLECTION_OWE_PREFIX,
  collectionIdOfKey,
  continuationKey,
  parseContinuation,
  restartContinuation,
  type CollectionContinuation,
  type CollectionOweStep,
} from '../collection-owe.js';
import { PRIORITY_BACKFILL } from '../store.js';
import { writeTx, type SqliteContext, type Tx } from './context.js';
import { getMeta, setMetaTx } from './operations.js';
import { oweItems } from './owe.js';

/**
 * Collection changes owed in chunks on SQLite (DESIGN §16.12; the continuation's design is in
 * `../collection-owe.ts`). Each function runs inside one IMMEDIATE transaction and touches at most
 * `COLLECTION_OWE_CHUNK` items, so no transaction of a collection change holds the write lock for
 * long, whatever the collection's size.
 */

/**
 * The door's part, inside its transaction: restarts the collection's continuation with `sets`
 * (plus any still pending) and owes the first chunk. @returns job rows inserted or updated.
 */
export function oweCollectionChange(tx: Tx, ctx: SqliteContext, collectionId: string, sets: readonly QuestionSet[]): number {
  const key = continuationKey(collectionId);
  const prev = parseContinuation(getMeta(ctx, key), currentSetNames(tx, ctx, collectionId));
  return oweChunk(tx, ctx, collectionId, restartContinuation(prev, sets.map((s) => s.name))).owed;
}

/**
 * Owes the next chunk of the pending change that waited longest, in one transaction with its
 * cursor (or the continuation's removal after the last chunk).
 */
export function advanceCollectionOwes(ctx: SqliteContext): CollectionOweStep {
  // The worker asks every pass: with nothing pending, answer from a read, without the write lock.
  if (countPending(ctx.db as unknown as Tx) === 0) return { collectionId: null, items: 0, owed: 0, pending: 0 };
  return writeTx(ctx, (tx) => {
    const row = tx.get<{ key: string; value: string }>(sql`
      SELECT key, value FROM verdict_meta
      WHERE substr(key, 1, length(${COLLECTION_OWE_PREFIX})) = ${COLLECTION_OWE_PREFIX}
      ORDER BY updated_at, key LIMIT 1`);
    if (!row) return { collectionId: null, items: 0, owed: 0, pending: 0 };
    const collectionId = collectionIdOfKey(row.key);
    const c = parseContinuation(row.value, currentSetNames(tx, ctx, collectionId))!;
    const step = oweChunk(tx, ctx, collectionId, c);
    return { collectionId, ...step, pending: countPending(tx) };
  });
}

/** Pending continuations (collections whose change is not yet fully owed). */
export function countPending(tx: Tx): number {
  return tx.get<{ n: number }>(sql`
    SELECT count(*) AS n FROM verdict_meta WHERE substr(key, 1, length(${COLLECTION_OWE_PREFIX})) = ${COLLECTION_OWE_PREFIX}`)!.n;
}

function oweChunk(tx: Tx, ctx: SqliteContext, collectionId: string, c: CollectionContinuation): { items: number; owed: number } {
  const key = continuationKey(collectionId);
  // items_collection_idx (collection_id, id): a range read from the cursor, never a scan.
  const ids = tx.all<{ id: string }>(sql`
    SELECT id FROM items WHERE collection_id = ${collectionId} AND deleted_at IS NULL AND id > ${c.after}
    ORDER BY id LIMIT ${COLLECTION_OWE_CHUNK}`);
  let owed = 0;
  if (ids.length > 0) {
    const sets = c.sets.map((n) => ctx.registry.get(n)).filter((s): s is QuestionSet => s !== undefined);
    const range = { afterId: c.after, throughId: ids[ids.length - 1].id };
    owed = oweItems(tx, ctx, { collectionId, range }, sets, { priority: PRIORITY_BACKFILL });
  }
  if (ids.length < COLLECTION_OWE_CHUNK) tx.run(sql`DELETE FROM verdict_meta WHERE key = ${key}`);
  else setMetaTx(tx, ctx.clock.now(), key, JSON.stringify({ ...c, after: ids[ids.length - 1].id }));
  return { items: ids.length, owed };
}

function currentSetNames(tx: Tx, ctx: SqliteContext, collectionId: string): string[] {
  const slug = tx.get<{ slug: string }>(sql`SELECT slug FROM collections WHERE id = ${collectionId}`)?.slug;
  return slug === undefined ? [] : ctx.registry.setsFor(slug).map((s) => s.name);
}
