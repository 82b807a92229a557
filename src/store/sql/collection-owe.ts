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
import { PRIORITY_BACKFILL } from '../queue-store.js';
import { keyHasPrefix, setMetaTx } from './operations.js';
import { collectionSlug, oweItems } from './owe.js';
import { exec, nowMs, one, read, rows, write, type SqlContext, type Steps } from './steps.js';

/**
 * Collection changes owed in chunks (DESIGN §3.3; the continuation's design is in
 * `../collection-owe.ts`). Each step runs in one transaction and touches at most
 * `COLLECTION_OWE_CHUNK` items, so no transaction of a collection change holds the write lock for
 * long, whatever the collection's size. On Postgres the continuation row is read `FOR UPDATE`: the
 * door waits for an advancing chunk to commit and then restarts from the cursor it left, and
 * concurrent advancers (several workers) skip a continuation another holds (`SKIP LOCKED`) instead
 * of owing its chunk twice.
 */

/**
 * The door's part, inside its transaction: restarts the collection's continuation with `sets`
 * (plus any still pending) and owes the first chunk. @returns job rows inserted or updated.
 */
export function* oweCollectionChange(
  c: SqlContext,
  now: number,
  collectionId: string,
  sets: readonly QuestionSet[],
): Steps<number> {
  const row = yield* one<{ value: string }>(
    sql`SELECT value FROM verdict_meta WHERE key = ${continuationKey(collectionId)}${c.d.forUpdate}`,
  );
  const prev = parseContinuation(row?.value, yield* currentSetNames(c, collectionId));
  return (yield* oweChunk(
    c,
    now,
    collectionId,
    restartContinuation(
      prev,
      sets.map((s) => s.name),
    ),
  )).owed;
}

/**
 * Owes the next chunk of the pending change that waited longest, in one transaction with its
 * cursor (or the continuation's removal after the last chunk).
 */
export async function advanceCollectionOwes(c: SqlContext): Promise<CollectionOweStep> {
  // The worker asks every pass: with nothing pending, answer from one read, without the write lock.
  if ((await read(c, countPending(c))) === 0) return { collectionId: null, items: 0, owed: 0, pending: 0 };
  return write(c, function* () {
    // Aliased `j` for the dialect's `FOR UPDATE OF j SKIP LOCKED`.
    const row = yield* one<{ key: string; value: string }>(sql`
      SELECT key, value FROM verdict_meta j WHERE ${keyHasPrefix(c, COLLECTION_OWE_PREFIX)}
      ORDER BY updated_at, ${c.d.byteOrder(sql`key`)} LIMIT 1${c.d.skipLocked}`);
    // None free: every pending continuation is held by another advancer (Postgres).
    if (!row) return { collectionId: null, items: 0, owed: 0, pending: yield* countPending(c) };
    const collectionId = collectionIdOfKey(row.key);
    const cont = parseContinuation(row.value, yield* currentSetNames(c, collectionId))!;
    const step = yield* oweChunk(c, yield* nowMs(), collectionId, cont);
    return { collectionId, ...step, pending: yield* countPending(c) };
  });
}

function* countPending(c: SqlContext): Steps<number> {
  return (yield* one<{ n: number }>(
    sql`SELECT ${c.d.int4(sql`count(*)`)} AS n FROM verdict_meta WHERE ${keyHasPrefix(c, COLLECTION_OWE_PREFIX)}`,
  ))!.n;
}

function* oweChunk(
  c: SqlContext,
  now: number,
  collectionId: string,
  cont: CollectionContinuation,
): Steps<{ items: number; owed: number }> {
  const key = continuationKey(collectionId);
  // items_collection_idx (collection_id, id): a range read from the cursor, in the index's order.
  const ids = yield* rows<{ id: string }>(sql`
    SELECT id FROM items WHERE collection_id = ${collectionId} AND deleted_at IS NULL AND id > ${cont.after}
    ORDER BY id LIMIT ${COLLECTION_OWE_CHUNK}`);
  let owed = 0;
  if (ids.length > 0) {
    const sets = cont.sets.map((n) => c.registry.get(n)).filter((s): s is QuestionSet => s !== undefined);
    const range = { afterId: cont.after, throughId: ids[ids.length - 1].id };
    owed = yield* oweItems(c, now, { collectionId, range }, sets, { priority: PRIORITY_BACKFILL });
  }
  if (ids.length < COLLECTION_OWE_CHUNK) yield* exec(sql`DELETE FROM verdict_meta WHERE key = ${key}`);
  else yield* setMetaTx(c, key, JSON.stringify({ ...cont, after: ids[ids.length - 1].id }));
  return { items: ids.length, owed };
}

function* currentSetNames(c: SqlContext, collectionId: string): Steps<string[]> {
  const slug = yield* collectionSlug(collectionId);
  return slug === null ? [] : c.registry.setsFor(slug).map((s) => s.name);
}
