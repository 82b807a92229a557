import { sql, type SQL } from 'drizzle-orm';
import { oweTargetsSql, type OweTargets } from '../shared-rows.js';
import type { QuestionSet } from '../../decision/registry.js';
import { PRIORITY_LIVE, type OweOptions } from '../store.js';
import { readsComments, readsLinks } from '../write-rules.js';
import { writeTx, type SqliteContext, type Tx } from './context.js';
import { setMetaTx } from './operations.js';

/**
 * Marks (item, set) jobs owed inside the caller's transaction (DESIGN §3). One statement per set,
 * `INSERT … SELECT` over the chosen items, so one item and a whole collection go through the same
 * rule:
 *
 *   not_before = max(not_before, now + quietPeriod, latest stored answer + reaskDebounce),
 *                capped at max(enqueued_at, latest stored answer) + maxDelay   (DESIGN §16.1)
 *
 * The cap counts from the latest answer as well as from enqueued_at: a job that survived its
 * completion keeps an old enqueued_at, and a cap counted from it alone lies in the past, so the
 * item was re-asked after every evaluation (361 evaluations in the third hour of constant editing,
 * measured by scripts/fault-delay-cap.ts). With the latest answer in the cap, an item edited
 * without pause is asked at most once per reaskDebounce.
 *
 * On conflict: generation += 1, counters reset to 0, state owed, priority the lower of the two,
 * owed_at = now; the claim and enqueued_at are left alone so continuous editing cannot starve a
 * job. With `insertOnly` an existing row is left alone entirely (backfill never un-parks or resets).
 *
 * The debounce anchor is the latest *stored answer*, never a failed attempt. With
 * `reaskDebounce: false` (drift sweep, `verdict reask`) only the quiet period applies.
 * @returns rows inserted or updated.
 */
export function oweItems(
  tx: Tx,
  ctx: SqliteContext,
  items: OweTargets,
  sets: readonly QuestionSet[],
  opts: OweOptions & { insertOnly?: boolean } = {},
): number {
  if (sets.length === 0) return 0;
  const now = ctx.clock.now();
  const priority = opts.priority ?? PRIORITY_LIVE;
  const where = oweTargetsSql(items);
  if (where === null) return 0;
  let changed = 0;
  for (const set of sets) {
    const quiet = opts.quietPeriod === false ? 0 : set.quietPeriodMs;
    // Candidate not_before of this write for each item, before the max with the existing value.
    const candidate =
      opts.reaskDebounce === false
        ? sql`${now + quiet}`
        : sql`max(${now + quiet}, coalesce(${latestAnswerSql(sql`i.id`, set.name)} + ${set.reaskDebounceMs}, 0))`;
    const onConflict = opts.insertOnly
      ? sql`ON CONFLICT (item_id, question_set) DO NOTHING`
      : sql`ON CONFLICT (item_id, question_set) DO UPDATE SET
          generation = decision_jobs.generation + 1,
          attempts = 0, refusals = 0, abandons = 0, defers = 0,
          state = 'owed',
          priority = min(decision_jobs.priority, excluded.priority),
          workspace_id = excluded.workspace_id,
          owed_at = excluded.owed_at,
          not_before = min(max(decision_jobs.not_before, excluded.not_before),
                           ${delayCapSql(sql`decision_jobs.enqueued_at`, sql`decision_jobs.item_id`, set.name, set.maxDelayMs)})`;
    // `WHERE true` is SQLite's required disambiguation for an upsert on INSERT … SELECT.
    const r = tx.run(sql`
      INSERT INTO decision_jobs (item_id, question_set, workspace_id, priority, generation,
                                 enqueued_at, not_before, state, fair_tag, owed_at)
      SELECT i.id, ${set.name}, i.workspace_id, ${priority}, 1, ${now},
             min(${candidate}, ${delayCapSql(sql`${now}`, sql`i.id`, set.name, set.maxDelayMs)}), 'owed',
             ${fairTagSql(priority, now, items.itemIds?.length === 1)}, ${now}
      FROM items i WHERE ${where} AND true
      ${onConflict}`);
    changed += r.changes;
  }
  return changed;
}

/**
 * The latest stored answer of (item, set), epoch ms, or NULL: the debounce anchor and, with
 * enqueued_at, the delay cap's (DESIGN §3, §16.1). An index seek on item_decisions_latest_idx.
 */
export function latestAnswerSql(itemId: SQL, setName: string): SQL {
  return sql`(SELECT max(d.evaluated_at) FROM item_decisions d WHERE d.item_id = ${itemId} AND d.question_set = ${setName})`;
}

/**
 * The delay cap on a job's not_before (DESIGN §16.1): max(enqueued_at, latest stored answer of
 * (item, set)) + maxDelay, in ms. Never a time in the past relative to the latest answer, so an
 * evaluation always buys the item at least maxDelay of quiet under constant editing.
 */
export function delayCapSql(enqueuedAt: SQL, itemId: SQL, setName: string, maxDelayMs: number): SQL {
  return sql`(max(${enqueuedAt}, coalesce(${latestAnswerSql(itemId, setName)}, 0)) + ${maxDelayMs})`;
}

/**
 * The fair-queuing tag of each row an `INSERT … SELECT FROM items i` owes (start-time fair
 * queuing, as in packet schedulers): a workspace's new jobs are numbered on from
 * max(virtual time, that workspace's latest tag), where virtual time is the smallest tag among
 * the jobs of this priority that are due now. The claim orders by (priority, fair_tag, ...), so a
 * workspace with 10,000 owed jobs and one with 10 take turns: the second's jobs are tagged 1..10
 * beside the first's 1..10,000, not behind them. Because virtual time only counts due jobs, a
 * workspace that arrives late starts level with the others' current position rather than ahead
 * of their whole backlog. The tag is set once; a later enqueue (which keeps enqueued_at) keeps it.
 * Both reads are index seeks: `decision_jobs_ws_fair_idx` for the workspace's latest tag, and the
 * claim-order index walked to the first due row for virtual time. The walk runs only when a due
 * row exists (one seek on `decision_jobs_claim_idx`): with none due it would read every owed row
 * of the priority, which made each 1,000-item chunk of a collection change slower than the last
 * (336 ms at 100,000 items, scripts/fault-collection-chunks.ts) while its own earlier chunks sat
 * in their quiet period. A one-item write (the common
 * case) skips the window function, which makes SQLite materialise the rows first.
 */
export function fairTagSql(priority: number, now: number, singleRow = false) {
  return sql`max(
      coalesce(CASE WHEN EXISTS (SELECT 1 FROM decision_jobs e INDEXED BY decision_jobs_claim_idx
                                 WHERE e.state = 'owed' AND e.priority = ${priority} AND e.not_before <= ${now})
               THEN (SELECT v.fair_tag FROM decision_jobs v INDEXED BY decision_jobs_claim_order_idx
                     WHERE v.state = 'owed' AND v.priority = ${priority} AND v.not_before <= ${now}
                     ORDER BY v.fair_tag LIMIT 1) END, 0),
      coalesce((SELECT l.fair_tag FROM decision_jobs l INDEXED BY decision_jobs_ws_fair_idx
                WHERE l.workspace_id = i.workspace_id AND l.priority = ${priority}
                ORDER BY l.fair_tag DESC LIMIT 1), 0))
    + ${singleRow ? sql`1` : sql`row_number() OVER (PARTITION BY i.workspace_id ORDER BY i.id)`}`;
}

export { readsComments, readsLinks };

/**
 * Items whose state shows this item's title: sources of `parent`/`blocks` links to it and targets
 * of `blocks` links from it (`blocked_by` on their side).
 */
export function linkingItemIds(tx: Tx, itemId: string): string[] {
  const rows = tx.all<{ id: string }>(sql`
    SELECT source_id AS id FROM item_links WHERE target_id = ${itemId} AND link_type IN ('parent', 'blocks')
    UNION
    SELECT target_id AS id FROM item_links WHERE source_id = ${itemId} AND link_type = 'blocks'`);
  return rows.map((r) => r.id);
}

/**
 * Owes an item's jobs for the sets covering its collection slug that pass `filter`, plus (when
 * `linkers`) the jobs of the items whose state shows its title, for sets that read links.
 */
export function oweForItem(
  tx: Tx,
  ctx: SqliteContext,
  item: { id: string; collectionId: string },
  opts: OweOptions,
  filter: (s: QuestionSet) => boolean = () => true,
  linkers = false,
): number {
  const slug = collectionSlug(tx, item.collectionId);
  let n = slug === null ? 0 : oweItems(tx, ctx, { itemIds: [item.id] }, ctx.registry.setsFor(slug).filter(filter), opts);
  if (linkers) {
    for (const other of linkingItemIds(tx, item.id)) {
      const row = tx.get<{ collection_id: string }>(sql`SELECT collection_id FROM items WHERE id = ${other}`);
      if (!row) continue;
      const s = collectionSlug(tx, row.collection_id);
      if (s !== null) n += oweItems(tx, ctx, { itemIds: [other] }, ctx.registry.setsFor(s).filter(readsLinks), opts);
    }
  }
  return n;
}

function collectionSlug(tx: Tx, collectionId: string): string | null {
  return tx.get<{ slug: string }>(sql`SELECT slug FROM collections WHERE id = ${collectionId}`)?.slug ?? null;
}

/**
 * Owes explicit (item, set) pairs without a tracker write (backfill, drift sweep, reask), grouped
 * per set in one transaction, with `meta` (a cursor) written in that same transaction. Unknown
 * sets are skipped. @returns rows inserted or updated.
 */
export function owePairs(
  ctx: SqliteContext,
  pairs: ReadonlyArray<{ itemId: string; questionSet: string }>,
  opts: OweOptions & { insertOnly?: boolean; meta?: { key: string; value: string } },
): number {
  const bySet = new Map<string, string[]>();
  for (const p of pairs) {
    const list = bySet.get(p.questionSet) ?? [];
    list.push(p.itemId);
    bySet.set(p.questionSet, list);
  }
  return writeTx(ctx, (tx) => {
    let n = 0;
    for (const [name, ids] of bySet) {
      const set = ctx.registry.get(name);
      if (!set) continue;
      for (let i = 0; i < ids.length; i += 500) n += oweItems(tx, ctx, { itemIds: ids.slice(i, i + 500) }, [set], opts);
    }
    // The backfill cursor commits with the work it records: a crash never leaves it ahead.
    if (opts.meta) setMetaTx(tx, ctx.clock.now(), opts.meta.key, opts.meta.value);
    return n;
  });
}
