import { sql, type SQL } from 'drizzle-orm';
import { oweTargetsSql, type OweTargets } from '../shared-rows.js';
import type { QuestionSet } from '../../decision/registry.js';
import { PRIORITY_LIVE, type OweOptions } from '../store.js';
import { readsLinks } from '../write-rules.js';
import { changes, one, readNow, rows, writeTx, type PgContext, type PgTx } from './context.js';
import { setMetaTx } from './operations.js';

/**
 * Marks (item, set) jobs owed inside the caller's transaction (DESIGN §3), the Postgres twin of
 * `../sqlite/owe.ts`: one `INSERT … SELECT … ON CONFLICT DO UPDATE` per set, so one item and a
 * whole collection go through the same rule:
 *
 *   not_before = max(not_before, now + quietPeriod, latest stored answer + reaskDebounce),
 *                capped at max(enqueued_at, latest stored answer) + maxDelay   (DESIGN §16.1)
 *
 * (Why the cap counts from the latest answer too: beside `../sqlite/owe.ts` `oweItems`.)
 * On conflict: generation += 1, counters reset to 0, state owed, priority the lower of the two,
 * owed_at = now; the claim, enqueued_at and fair_tag are left alone. With `insertOnly` an existing row is left
 * alone entirely. `now` is the transaction's database time (context.ts `readNow`).
 *
 * The debounce anchor is the latest *stored answer*, never a failed attempt. With
 * `reaskDebounce: false` (drift sweep, backfill, `verdict reask`) only the quiet period applies.
 *
 * Postgres' upsert takes the row lock, so a write racing a claim waits for the claim's
 * transaction and then bumps the generation the runner's outcome is fenced by.
 * @returns rows inserted or updated.
 */
export async function oweItems(
  tx: PgTx,
  now: number,
  items: OweTargets,
  sets: readonly QuestionSet[],
  opts: OweOptions & { insertOnly?: boolean } = {},
): Promise<number> {
  if (sets.length === 0) return 0;
  const priority = opts.priority ?? PRIORITY_LIVE;
  const where = oweTargetsSql(items);
  if (where === null) return 0;
  let changed = 0;
  for (const set of sets) {
    const quiet = opts.quietPeriod === false ? 0 : set.quietPeriodMs;
    // Candidate not_before of this write for each item, before the max with the existing value.
    const candidate =
      opts.reaskDebounce === false
        ? sql`${now + quiet}::bigint`
        : sql`greatest(${now + quiet}::bigint, coalesce(${latestAnswerSql(sql`i.id`, set.name)} + ${set.reaskDebounceMs}::bigint, 0))`;
    const onConflict = opts.insertOnly
      ? sql`ON CONFLICT (item_id, question_set) DO NOTHING`
      : sql`ON CONFLICT (item_id, question_set) DO UPDATE SET
          generation = decision_jobs.generation + 1,
          attempts = 0, refusals = 0, abandons = 0, defers = 0,
          state = 'owed',
          priority = least(decision_jobs.priority, excluded.priority),
          workspace_id = excluded.workspace_id,
          owed_at = excluded.owed_at,
          not_before = least(greatest(decision_jobs.not_before, excluded.not_before),
                             ${delayCapSql(sql`decision_jobs.enqueued_at`, sql`decision_jobs.item_id`, set.name, set.maxDelayMs)})`;
    changed += await changes(
      tx,
      sql`
      INSERT INTO decision_jobs (item_id, question_set, workspace_id, priority, generation,
                                 enqueued_at, not_before, state, fair_tag, owed_at)
      SELECT i.id, ${set.name}::text, i.workspace_id, ${priority}::int, 1, ${now}::bigint,
             least(${candidate}, ${delayCapSql(sql`${now}::bigint`, sql`i.id`, set.name, set.maxDelayMs)}), 'owed',
             ${fairTagSql(priority, now, items.itemIds?.length === 1)}, ${now}::bigint
      FROM items i WHERE ${where}
      ${onConflict}`,
    );
  }
  return changed;
}

/** The latest stored answer of (item, set), epoch ms, or NULL (see ../sqlite/owe.ts `latestAnswerSql`). */
export function latestAnswerSql(itemId: SQL, setName: string): SQL {
  return sql`(SELECT max(d.evaluated_at) FROM item_decisions d WHERE d.item_id = ${itemId} AND d.question_set = ${setName}::text)`;
}

/** The delay cap, max(enqueued_at, latest stored answer) + maxDelay, ms (DESIGN §16.1; see ../sqlite/owe.ts `delayCapSql`). */
export function delayCapSql(enqueuedAt: SQL, itemId: SQL, setName: string, maxDelayMs: number): SQL {
  return sql`(greatest(${enqueuedAt}, coalesce(${latestAnswerSql(itemId, setName)}, 0)) + ${maxDelayMs}::bigint)`;
}

/**
 * The fair-queuing tag of each owed row (start-time fair queuing; the reasoning is beside
 * `../sqlite/owe.ts` `fairTagSql`): max(virtual time, the workspace's latest tag) + rank.
 * `not_before + 0` keeps the planner off `decision_jobs_claim_idx` (whose not_before range would
 * make it read every due row and sort them), so virtual time walks the claim-order index and stops
 * at the first due row, as on SQLite (see jobs.ts `claimNextJob`); the walk runs only when a due
 * row exists (the EXISTS seeks decision_jobs_claim_idx), for the reason given on SQLite's.
 */
export function fairTagSql(priority: number, now: number, singleRow = false) {
  return sql`greatest(
      coalesce(CASE WHEN EXISTS (SELECT 1 FROM decision_jobs e
                                 WHERE e.state = 'owed' AND e.priority = ${priority}::int AND e.not_before <= ${now}::bigint)
               THEN (SELECT v.fair_tag FROM decision_jobs v
                     WHERE v.state = 'owed' AND v.priority = ${priority}::int AND v.not_before + 0 <= ${now}::bigint
                     ORDER BY v.fair_tag LIMIT 1) END, 0),
      coalesce((SELECT l.fair_tag FROM decision_jobs l
                WHERE l.workspace_id = i.workspace_id AND l.priority = ${priority}::int
                ORDER BY l.fair_tag DESC LIMIT 1), 0))
    + ${singleRow ? sql`1` : sql`row_number() OVER (PARTITION BY i.workspace_id ORDER BY i.id)`}`;
}

/**
 * Items whose state shows this item's title: sources of `parent`/`blocks` links to it and targets
 * of `blocks` links from it (`blocked_by` on their side).
 */
export async function linkingItemIds(tx: PgTx, itemId: string): Promise<string[]> {
  const r = await rows<{ id: string }>(
    tx,
    sql`
    SELECT source_id AS id FROM item_links WHERE target_id = ${itemId} AND link_type IN ('parent', 'blocks')
    UNION
    SELECT target_id AS id FROM item_links WHERE source_id = ${itemId} AND link_type = 'blocks'`,
  );
  return r.map((x) => x.id);
}

async function collectionSlug(tx: PgTx, collectionId: string): Promise<string | null> {
  return (await one<{ slug: string }>(tx, sql`SELECT slug FROM collections WHERE id = ${collectionId}`))?.slug ?? null;
}

/**
 * Owes an item's jobs for the sets covering its collection slug that pass `filter`, plus (when
 * `linkers`) the jobs of the items whose state shows its title, for sets that read links.
 */
export async function oweForItem(
  tx: PgTx,
  ctx: PgContext,
  now: number,
  item: { id: string; collectionId: string },
  opts: OweOptions,
  filter: (s: QuestionSet) => boolean = () => true,
  linkers = false,
): Promise<number> {
  const slug = await collectionSlug(tx, item.collectionId);
  let n = slug === null ? 0 : await oweItems(tx, now, { itemIds: [item.id] }, ctx.registry.setsFor(slug).filter(filter), opts);
  if (linkers) {
    for (const other of await linkingItemIds(tx, item.id)) {
      const row = await one<{ collection_id: string }>(tx, sql`SELECT collection_id FROM items WHERE id = ${other}`);
      if (!row) continue;
      const s = await collectionSlug(tx, row.collection_id);
      if (s !== null) n += await oweItems(tx, now, { itemIds: [other] }, ctx.registry.setsFor(s).filter(readsLinks), opts);
    }
  }
  return n;
}

/**
 * Owes explicit (item, set) pairs without a tracker write (backfill, drift sweep, reask), grouped
 * per set in one transaction, with `meta` (a cursor) written in that same transaction. Unknown
 * sets are skipped. @returns rows inserted or updated.
 */
export async function owePairs(
  ctx: PgContext,
  pairs: ReadonlyArray<{ itemId: string; questionSet: string }>,
  opts: OweOptions & { insertOnly?: boolean; meta?: { key: string; value: string } },
): Promise<number> {
  const bySet = new Map<string, string[]>();
  for (const p of pairs) {
    const list = bySet.get(p.questionSet) ?? [];
    list.push(p.itemId);
    bySet.set(p.questionSet, list);
  }
  return writeTx(ctx, async (tx) => {
    const now = await readNow(ctx, tx);
    let n = 0;
    for (const [name, ids] of bySet) {
      const set = ctx.registry.get(name);
      if (!set) continue;
      for (let i = 0; i < ids.length; i += 500) n += await oweItems(tx, now, { itemIds: ids.slice(i, i + 500) }, [set], opts);
    }
    // The backfill cursor commits with the work it records: a crash never leaves it ahead.
    if (opts.meta) await setMetaTx(ctx, tx, opts.meta.key, opts.meta.value);
    return n;
  });
}
