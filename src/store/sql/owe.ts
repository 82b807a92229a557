import { sql, type SQL } from 'drizzle-orm';
import type { QuestionSet } from '../../decision/registry.js';
import { PRIORITY_LIVE, type OweOptions } from '../queue-store.js';
import { readsLinks } from '../write-rules.js';
import { setMetaTx } from './operations.js';
import {
  bind,
  builtWithValues,
  changes,
  nowMs,
  one,
  rows,
  shape,
  shapeFamily,
  write,
  type Dialect,
  type Expr,
  type SqlContext,
  type Steps,
} from './steps.js';

/** The items an owe statement covers; see `oweTargetsSql`. */
export interface OweTargets {
  itemIds?: readonly string[];
  collectionId?: string;
  /** With `collectionId`: only ids in (afterId, throughId], a chunk of a collection change (DESIGN §3.3). */
  range?: { afterId: string; throughId: string };
}

/**
 * Which items an owe statement covers, as a statement shape sees it: `n` given ids (parameters
 * id0…), a collection's live items (`collectionId`), or those within an id range (`afterId`,
 * `throughId`: a range read on items_collection_idx).
 */
type TargetKind = { ids: number } | 'collection' | 'range';

function targetKind(items: OweTargets): TargetKind | null {
  if (items.itemIds) return items.itemIds.length === 0 ? null : { ids: items.itemIds.length };
  if (items.collectionId) return items.range ? 'range' : 'collection';
  throw new TypeError('oweItems: give itemIds or collectionId');
}

function targetValues(items: OweTargets): Record<string, string> {
  if (items.itemIds) return Object.fromEntries(items.itemIds.map((id, i) => [`id${i}`, id]));
  return items.range
    ? { collectionId: items.collectionId!, afterId: items.range.afterId, throughId: items.range.throughId }
    : { collectionId: items.collectionId! };
}

/** The `WHERE` of an owe statement's `INSERT … SELECT … FROM items i` (deleted items included for given ids: a delete owes work too). */
function oweTargetsSql(kind: TargetKind, p: Record<string, Expr>): SQL {
  if (typeof kind === 'object')
    return sql`i.id IN (${sql.join(
      Array.from({ length: kind.ids }, (_, i) => sql`${p[`id${i}`]}`),
      sql`, `,
    )})`;
  const range = kind === 'range' ? sql` AND i.id > ${p.afterId} AND i.id <= ${p.throughId}` : sql``;
  return sql`i.collection_id = ${p.collectionId} AND i.deleted_at IS NULL${range}`;
}

/**
 * Marks (item, set) jobs owed inside the caller's transaction (DESIGN §3). One statement per set,
 * `INSERT … SELECT` over the chosen items, so one item and a whole collection go through the same
 * rule:
 *
 *   not_before = max(not_before, now + quietPeriod, latest stored answer + reaskDebounce),
 *                capped at max(enqueued_at, latest stored answer) + maxDelay   (DESIGN §3.4)
 *
 * The cap counts from the latest answer as well as from enqueued_at: a job that survived its
 * completion keeps an old enqueued_at, and a cap counted from it alone lies in the past, so the
 * item was re-asked after every evaluation (361 evaluations in the third hour of constant editing,
 * measured by scripts/fault-delay-cap.ts). With the latest answer in the cap, an item edited
 * without pause is asked at most once per reaskDebounce.
 *
 * On conflict: generation += 1, counters reset to 0, state owed, priority the lower of the two,
 * owed_at = now; the claim, enqueued_at and fair_tag are left alone so continuous editing cannot
 * starve a job. workspace_id is left alone too: a job's is its item's, and no door moves an item to
 * another workspace (a SET naming it made SQLite rewrite two index entries per upsert for nothing). With `insertOnly` an existing row is left alone entirely (backfill never un-parks
 * or resets). On Postgres the upsert takes the row lock, so a write racing a claim waits for the
 * claim's transaction and then bumps the generation the runner's outcome is fenced by.
 *
 * The debounce anchor is the latest *stored answer*, never a failed attempt. With
 * `reaskDebounce: false` (drift sweep, `verdict reask`) only the quiet period applies.
 * @param now the operation's `nowMs()`.
 * @returns rows inserted or updated.
 */
export function* oweItems(
  c: SqlContext,
  now: number,
  items: OweTargets,
  sets: readonly QuestionSet[],
  opts: OweOptions & { insertOnly?: boolean } = {},
): Steps<number> {
  if (sets.length === 0) return 0;
  const kind = targetKind(items);
  if (kind === null) return 0;
  const debounce = opts.reaskDebounce !== false;
  const insertOnly = opts.insertOnly === true;
  // One item or one collection (every write door, every chunk of a collection change): a prepared
  // statement per variant. A list of ids (backfill, reask, drift: up to 500 a statement) is built
  // each time, so the cache does not keep one statement per list length.
  const shaped = kind === 'collection' || kind === 'range' || kind.ids === 1;
  const variant = `${typeof kind === 'object' ? `ids${kind.ids}` : kind}|${debounce ? 'debounce' : 'quiet'}|${insertOnly ? 'insert' : 'upsert'}`;
  const s = shaped ? oweShape(variant) : makeOweShape(variant);
  const targets = targetValues(items);
  const priority = opts.priority ?? PRIORITY_LIVE;
  let changed = 0;
  for (const set of sets) {
    const values = {
      ...targets,
      now,
      quiet: now + (opts.quietPeriod === false ? 0 : set.quietPeriodMs),
      debounce: set.reaskDebounceMs,
      maxDelay: set.maxDelayMs,
      setName: set.name,
      priority,
    };
    const b = bind(s, values);
    changed += yield* changes(shaped ? b : builtWithValues(c.d, b));
  }
  return changed;
}

/**
 * The owe statement of one variant (`<targets>|debounce|quiet>|<insert|upsert>`, see `oweItems`);
 * parameters `now`, `quiet` (now + the set's quiet period, or now), `debounce` and `maxDelay` (the
 * set's, ms), `setName`, `priority` and the targets' (see `oweTargetsSql`). `AND true` is
 * SQLite's required disambiguation for an upsert on INSERT … SELECT.
 */
function makeOweShape(variant: string) {
  const [targets, debounce, mode] = variant.split('|');
  const kind: TargetKind = targets.startsWith('ids')
    ? { ids: Number(targets.slice(3)) }
    : (targets as 'collection' | 'range');
  return shape('owe', (d, p: Record<string, Expr>) => {
    const quiet = d.int8(p.quiet);
    const now = d.int8(p.now);
    const setName = p.setName;
    // Candidate not_before of this write for each item, before the max with the existing value.
    const candidate =
      debounce === 'debounce'
        ? sql`${d.max}(${quiet}, coalesce(${latestAnswerSql(d, sql`i.id`, setName)} + ${d.int8(p.debounce)}, 0))`
        : quiet;
    const onConflict =
      mode === 'insert'
        ? sql`ON CONFLICT (item_id, question_set) DO NOTHING`
        : sql`ON CONFLICT (item_id, question_set) DO UPDATE SET
          generation = decision_jobs.generation + 1,
          attempts = 0, refusals = 0, abandons = 0, defers = 0,
          state = 'owed',
          priority = ${d.min}(decision_jobs.priority, excluded.priority),
          owed_at = excluded.owed_at,
          not_before = ${d.min}(${d.max}(decision_jobs.not_before, excluded.not_before),
                                ${delayCapSql(d, sql`decision_jobs.enqueued_at`, sql`decision_jobs.item_id`, setName, p.maxDelay)})`;
    return sql`
      INSERT INTO decision_jobs (item_id, question_set, workspace_id, priority, generation,
                                 enqueued_at, not_before, state, fair_tag, owed_at)
      SELECT i.id, ${d.text(setName)}, i.workspace_id, ${d.int4(p.priority)}, 1, ${now},
             ${d.min}(${candidate}, ${delayCapSql(d, now, sql`i.id`, setName, p.maxDelay)}), 'owed',
             ${fairTagSql(d, p.priority, p.now, typeof kind === 'object' && kind.ids === 1)}, ${now}
      FROM items i WHERE ${oweTargetsSql(kind, p)} AND true
      ${onConflict}`;
  });
}

const oweShape = shapeFamily(makeOweShape);

/**
 * The latest stored answer of (item, set), epoch ms, or NULL: the debounce anchor and, with
 * enqueued_at, the delay cap's (DESIGN §3, §3.4). An index seek on item_decisions_latest_idx.
 */
export function latestAnswerSql(d: Dialect, itemId: SQL, setName: Expr): SQL {
  return sql`(SELECT max(d.evaluated_at) FROM item_decisions d WHERE d.item_id = ${itemId} AND d.question_set = ${d.text(setName)})`;
}

/**
 * The delay cap on a job's not_before (DESIGN §3.4): max(enqueued_at, latest stored answer of
 * (item, set)) + maxDelay, in ms. Never a time in the past relative to the latest answer, so an
 * evaluation always buys the item at least maxDelay of quiet under constant editing.
 */
export function delayCapSql(d: Dialect, enqueuedAt: Expr, itemId: SQL, setName: Expr, maxDelayMs: Expr): SQL {
  return sql`(${d.max}(${enqueuedAt}, coalesce(${latestAnswerSql(d, itemId, setName)}, 0)) + ${d.int8(maxDelayMs)})`;
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
 *
 * Both reads are index seeks: `decision_jobs_ws_fair_idx` for the workspace's latest tag, and the
 * claim-order index walked to the first due row for virtual time (`not_before + 0` keeps the
 * Postgres planner off `decision_jobs_claim_idx`, whose not_before range would make it read every
 * due row and sort them; see jobs.ts `claimCandidateSql`). The walk runs only when a due row
 * exists (one seek on `decision_jobs_claim_idx`): with none due it would read every owed row of
 * the priority, which made each 1,000-item chunk of a collection change slower than the last
 * (336 ms at 100,000 items, scripts/fault-collection-chunks.ts) while its own earlier chunks sat
 * in their quiet period. A one-item write (the common case) skips the window function, which
 * makes SQLite materialise the rows first.
 */
function fairTagSql(d: Dialect, priority: Expr, now: Expr, singleRow: boolean): SQL {
  const p = d.int4(priority);
  const t = d.int8(now);
  return sql`${d.max}(
    coalesce(CASE WHEN EXISTS (SELECT 1 FROM decision_jobs e ${d.indexedBy('decision_jobs_claim_idx')}
                                   WHERE e.state = 'owed' AND e.priority = ${p} AND e.not_before <= ${t})
                 THEN (SELECT v.fair_tag FROM decision_jobs v ${d.indexedBy('decision_jobs_claim_order_idx')}
                       WHERE v.state = 'owed' AND v.priority = ${p} AND ${d.unindexed('v.not_before')} <= ${t}
                       ORDER BY v.fair_tag LIMIT 1) END, 0),
    coalesce((SELECT l.fair_tag FROM decision_jobs l ${d.indexedBy('decision_jobs_ws_fair_idx')}
                  WHERE l.workspace_id = i.workspace_id AND l.priority = ${p}
                  ORDER BY l.fair_tag DESC LIMIT 1), 0)) + ${singleRow ? sql`1` : sql`row_number() OVER (PARTITION BY i.workspace_id ORDER BY i.id)`}`;
}

/**
 * Owes an item's jobs for the sets covering its collection slug that pass `filter`, plus (when
 * `linkers`) the jobs of the items whose state shows its title, for sets that read links: sources
 * of `parent`/`blocks` links to it and targets of `blocks` links from it (`blocked_by` on their side).
 */
export function* oweForItem(
  c: SqlContext,
  now: number,
  item: { id: string; collectionId: string },
  opts: OweOptions,
  filter: (s: QuestionSet) => boolean = () => true,
  linkers = false,
): Steps<number> {
  const slug = yield* collectionSlug(item.collectionId);
  const own = slug === null ? [] : c.registry.setsFor(slug).filter(filter);
  if (!linkers) return yield* oweItems(c, now, { itemIds: [item.id] }, own, opts);
  const others = yield* rows<{ id: string; slug: string }>(bind(linkersShape, { itemId: item.id }));
  // Job rows are upserted (row-locked on Postgres) in item-id order, whichever item the write
  // was to: two writes to two linked items otherwise lock each other's jobs in opposite orders
  // and deadlock (40P01 in 30 of 30 concurrent retitles of a blocks pair, measured).
  const targets = [
    { id: item.id, sets: own },
    ...others.map((o) => ({ id: o.id, sets: c.registry.setsFor(o.slug).filter(readsLinks) })),
  ];
  let n = 0;
  for (const t of targets.sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0)))
    n += yield* oweItems(c, now, { itemIds: [t.id] }, t.sets, opts);
  return n;
}

/** The items whose state shows an item's title (see `oweForItem`), with their collection's slug. */
const linkersShape = shape<'itemId'>(
  'linkers',
  (_d, p) => sql`
  SELECT l.id, col.slug FROM (
    SELECT source_id AS id FROM item_links WHERE target_id = ${p.itemId} AND link_type IN ('parent', 'blocks')
    UNION
    SELECT target_id AS id FROM item_links WHERE source_id = ${p.itemId} AND link_type = 'blocks') l
  JOIN items i ON i.id = l.id JOIN collections col ON col.id = i.collection_id`,
);

const collectionSlugShape = shape<'id'>(
  'collection slug',
  (_d, p) => sql`SELECT slug FROM collections WHERE id = ${p.id}`,
);

/** The slug of a collection, or null when it does not exist. */
export function* collectionSlug(collectionId: string): Steps<string | null> {
  return (yield* one<{ slug: string }>(bind(collectionSlugShape, { id: collectionId })))?.slug ?? null;
}

/**
 * Owes explicit (item, set) pairs without a tracker write (backfill, drift sweep, reask), grouped
 * per set in one transaction, with `meta` (a cursor) written in that same transaction. Unknown
 * sets are skipped. @returns rows inserted or updated.
 */
export function owePairs(
  c: SqlContext,
  pairs: ReadonlyArray<{ itemId: string; questionSet: string }>,
  opts: OweOptions & { insertOnly?: boolean; meta?: { key: string; value: string } },
): Promise<number> {
  const bySet = new Map<string, string[]>();
  for (const p of pairs) {
    const list = bySet.get(p.questionSet) ?? [];
    list.push(p.itemId);
    bySet.set(p.questionSet, list);
  }
  return write(c, function* () {
    const now = yield* nowMs();
    let n = 0;
    for (const [name, ids] of bySet) {
      const set = c.registry.get(name);
      if (!set) continue;
      for (let i = 0; i < ids.length; i += 500)
        n += yield* oweItems(c, now, { itemIds: ids.slice(i, i + 500) }, [set], opts);
    }
    // The backfill cursor commits with the work it records: a crash never leaves it ahead.
    if (opts.meta) yield* setMetaTx(c, opts.meta.key, opts.meta.value);
    return n;
  });
}
