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
import { one, readNow, rows, writeTx, type PgContext, type PgTx } from './context.js';
import { setMetaTx } from './operations.js';
import { oweItems } from './owe.js';

/**
 * Collection changes owed in chunks on Postgres (DESIGN §16.12), the twin of
 * `../sqlite/collection-owe.ts`. The continuation row is read `FOR UPDATE`: the door waits for an
 * advancing chunk to commit and then restarts from the cursor it left, and concurrent advancers
 * (several workers) skip a continuation another holds (`SKIP LOCKED`) instead of owing its chunk
 * twice.
 */

/** The door's part, inside its transaction: restarts the continuation and owes the first chunk. @returns job rows written. */
export async function oweCollectionChange(tx: PgTx, ctx: PgContext, now: number, collectionId: string, sets: readonly QuestionSet[]): Promise<number> {
  const key = continuationKey(collectionId);
  const row = await one<{ value: string }>(tx, sql`SELECT value FROM verdict_meta WHERE key = ${key} FOR UPDATE`);
  const prev = parseContinuation(row?.value, await currentSetNames(tx, ctx, collectionId));
  return (await oweChunk(tx, ctx, now, collectionId, restartContinuation(prev, sets.map((s) => s.name)))).owed;
}

/** Owes the next chunk of the pending change that waited longest, in one transaction with its cursor. */
export async function advanceCollectionOwes(ctx: PgContext): Promise<CollectionOweStep> {
  // The worker asks every pass: with nothing pending, answer from one read, without a transaction.
  if ((await countPending(ctx.db)) === 0) return { collectionId: null, items: 0, owed: 0, pending: 0 };
  return writeTx(ctx, async (tx) => {
    const row = await one<{ key: string; value: string }>(
      tx,
      sql`
      SELECT key, value FROM verdict_meta
      WHERE left(key, length(${COLLECTION_OWE_PREFIX}::text)) = ${COLLECTION_OWE_PREFIX}::text
      ORDER BY updated_at, key COLLATE "C" LIMIT 1
      FOR UPDATE SKIP LOCKED`,
    );
    if (!row) return { collectionId: null, items: 0, owed: 0, pending: await countPending(tx) };
    const collectionId = collectionIdOfKey(row.key);
    const c = parseContinuation(row.value, await currentSetNames(tx, ctx, collectionId))!;
    const now = await readNow(ctx, tx);
    const step = await oweChunk(tx, ctx, now, collectionId, c);
    return { collectionId, ...step, pending: await countPending(tx) };
  });
}

async function countPending(tx: PgTx): Promise<number> {
  return (await one<{ n: number }>(
    tx,
    sql`SELECT count(*)::int AS n FROM verdict_meta WHERE left(key, length(${COLLECTION_OWE_PREFIX}::text)) = ${COLLECTION_OWE_PREFIX}::text`,
  ))!.n;
}

async function oweChunk(tx: PgTx, ctx: PgContext, now: number, collectionId: string, c: CollectionContinuation): Promise<{ items: number; owed: number }> {
  const key = continuationKey(collectionId);
  // items_collection_idx (collection_id, id): a range read from the cursor, in the index's order.
  const ids = await rows<{ id: string }>(
    tx,
    sql`
    SELECT id FROM items WHERE collection_id = ${collectionId} AND deleted_at IS NULL AND id > ${c.after}
    ORDER BY id LIMIT ${COLLECTION_OWE_CHUNK}`,
  );
  let owed = 0;
  if (ids.length > 0) {
    const sets = c.sets.map((n) => ctx.registry.get(n)).filter((s): s is QuestionSet => s !== undefined);
    const range = { afterId: c.after, throughId: ids[ids.length - 1].id };
    owed = await oweItems(tx, now, { collectionId, range }, sets, { priority: PRIORITY_BACKFILL });
  }
  if (ids.length < COLLECTION_OWE_CHUNK) await tx.execute(sql`DELETE FROM verdict_meta WHERE key = ${key}`);
  else await setMetaTx(ctx, tx, key, JSON.stringify({ ...c, after: ids[ids.length - 1].id }));
  return { items: ids.length, owed };
}

async function currentSetNames(tx: PgTx, ctx: PgContext, collectionId: string): Promise<string[]> {
  const slug = (await one<{ slug: string }>(tx, sql`SELECT slug FROM collections WHERE id = ${collectionId}`))?.slug;
  return slug === undefined ? [] : ctx.registry.setsFor(slug).map((s) => s.name);
}
