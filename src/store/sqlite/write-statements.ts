import type { QuestionSet, Registry } from '../../decision/registry.js';
import type { NormaliseReport } from '../input-rules.js';
import { PRIORITY_LIVE, type OweOptions } from '../queue-store.js';
import { oweItems } from '../sql/owe.js';
import { setMetaTx } from '../sql/operations.js';
import { InvalidWrite, NotFound } from '../store.js';
import type { ItemRow } from '../tracker-reads.js';
import type { ItemPatch, WriteResult } from '../tracker-writes.js';
import { checkFieldOptions, planItemPatch, readsLinks, writeResult } from '../write-rules.js';
import { ITEM_ARRAY_COLUMNS, itemRowOf, prepared, type JobWriter } from './job-statements.js';

/**
 * The hot write doors on SQLite (DESIGN §3): `updateItem` (a tracker's edit, the most frequent
 * write) and `oweJobs` (the enqueue behind reask, backfill and the drift sweep), each as SQL text
 * with its reason beside it, prepared once per connection and run synchronously inside the
 * caller's write transaction (sqlite-store.ts runs them in job-statements.ts `inWriteTx`). The
 * same doors for both dialects are in ../sql/write-doors.ts and ../sql/owe.ts (Postgres runs
 * those, and SQLite runs them for every other door); the rules they share (what a patch changes,
 * the field options, the owe rule of DESIGN §3.4) are written once, in ../write-rules.ts and in the
 * owe statement's text below, which says the same as owe.ts `makeOweShape`. The conformance suite
 * (test/store/conformance.ts) holds both paths to the same rows.
 *
 * An update owing sets runs, besides BEGIN and COMMIT: the item read (`ITEM_FOR_WRITE`), the
 * update (`BUMP_ITEM`) and per owed set the re-owe in place (`reoweSql`), then the upsert
 * (`oweSql`) only when that touched nothing (a new, parked, batched or backfill job); the read of
 * the items that show this one's title (`LINKERS`) only when its title changed and such a link
 * exists. Bench part h's updates after its warm-up round all re-owe in place: 8 statements per
 * update against the raw reference's 7 (BEGIN, UPDATE, 4 upserts, COMMIT).
 */

/**
 * Everything `updateItem` decides on, in one read by primary key: the item, its collection's
 * slug (the sets to owe), workspace and schema (the field options; null when the collection row
 * is missing), and whether any item shows this one's title (`has_linkers`: two index seeks, so
 * the `LINKERS` read runs only for an item that has such a link). Read as an array (`prepared`'s `arrays` rows)
 * and named by `itemForWrite`, in this column order.
 */
const ITEM_FOR_WRITE = `
  SELECT ${ITEM_ARRAY_COLUMNS},
         c.slug, c.workspace_id, c.schema,
         EXISTS (SELECT 1 FROM item_links WHERE target_id = i.id AND link_type IN ('parent', 'blocks'))
           OR EXISTS (SELECT 1 FROM item_links WHERE source_id = i.id AND link_type = 'blocks')
  FROM items i LEFT JOIN collections c ON c.id = i.collection_id
  WHERE i.id = @id`;

/** `ITEM_FOR_WRITE`'s row: the item as an ItemRow, and what it decides on beside it. */
interface ItemForWrite {
  cur: ItemRow;
  slug: string | null;
  colWorkspace: string | null;
  schema: string | null;
  hasLinkers: boolean;
}

/** Names `ITEM_FOR_WRITE`'s array row (its SELECT's column order). */
function itemForWrite(r: readonly unknown[]): ItemForWrite {
  return {
    cur: itemRowOf(r),
    slug: r[12] as string | null,
    colWorkspace: r[13] as string | null,
    schema: r[14] as string | null,
    hasLinkers: r[15] !== 0,
  };
}

/**
 * `updateItem`'s write: the edited columns, seq bumped, updated_at now. A column the patch leaves
 * as it is is bound NULL and kept (`coalesce`), so an unchanged body is not copied into SQLite
 * again. No RETURNING: the row after it is the row read in the same transaction with these values
 * (`updateItem` builds it), and RETURNING cost SQLite about 15,000 instructions per update, as
 * much as the update itself (SQLite's instructions inside sqlite3_step, `valgrind --tool=callgrind
 * --toggle-collect=sqlite3_step`, 2,000 title edits of bench part h's items, less as many empty
 * transactions).
 */
const BUMP_ITEM = `
  UPDATE items SET title = coalesce(@title, title), content = coalesce(@content, content),
    fields = coalesce(@fields, fields), seq = seq + 1, updated_at = @now
  WHERE id = @id`;

/**
 * The items whose state shows an item's title, with their collection's slug (as ../sql/owe.ts
 * `linkersShape`): sources of `parent`/`blocks` links to it and targets of `blocks` links from it.
 */
const LINKERS = `
  SELECT l.id, col.slug FROM (
    SELECT source_id AS id FROM item_links WHERE target_id = @itemId AND link_type IN ('parent', 'blocks')
    UNION
    SELECT target_id AS id FROM item_links WHERE source_id = @itemId AND link_type = 'blocks') l
  JOIN items i ON i.id = l.id JOIN collections col ON col.id = i.collection_id`;

/** The latest stored answer of (item, set), epoch ms, or NULL (../sql/owe.ts `latestAnswerSql`). */
const latestAnswer = (itemId: string) =>
  `(SELECT max(d.evaluated_at) FROM item_decisions d WHERE d.item_id = ${itemId} AND d.question_set = @setName)`;

/** The delay cap (../sql/owe.ts `delayCapSql`): max(enqueued_at, latest answer) + maxDelay. */
const delayCap = (enqueuedAt: string, itemId: string) =>
  `(max(${enqueuedAt}, coalesce(${latestAnswer(itemId)}, 0)) + @maxDelay)`;

/**
 * The not_before an owe asks for (the upsert's `excluded.not_before`): max(now + quiet period,
 * latest answer + re-ask debounce), capped at max(now, latest answer) + maxDelay.
 */
const wantedNotBefore = (debounce: boolean, itemId: string) =>
  `min(${debounce ? `max(@quiet, coalesce(${latestAnswer(itemId)} + @debounce, 0))` : '@quiet'}, ${delayCap('@now', itemId)})`;

/**
 * The owe upsert of one (item, set), the rule of ../sql/owe.ts `oweItems` (DESIGN §3, §3.4)
 * written out for one item by id: not_before = max(not_before, now + quiet period, latest answer +
 * re-ask debounce), capped at max(enqueued_at, latest answer) + maxDelay; on conflict the
 * generation bumped, counters reset, state owed, the lower priority, owed_at now, the claim,
 * enqueued_at, fair_tag and workspace_id kept (`insertOnly`: an existing row left alone). The
 * workspace is not set again: a job's is its item's, and no door moves an item to another
 * workspace; naming it in the SET made SQLite rewrite the row's entries in decision_jobs_ws_idx and
 * decision_jobs_ws_fair_idx on every upsert (about 22 of 108 µs for four upserts, measured with
 * synchronous OFF). The fair tag is a
 * one-row insert's (owe.ts `fairTagSql`): max(virtual time, the workspace's latest tag) + 1, both
 * index seeks. Read from `items`, so a missing item owes nothing and a deleted one is owed.
 * Parameters: `id`, `now`, `quiet` (now + the set's quiet period, or now), `debounce`,
 * `maxDelay`, `setName`, `priority`. One text per (debounce, insertOnly).
 */
function oweSql(debounce: boolean, insertOnly: boolean): string {
  const onConflict = insertOnly
    ? 'ON CONFLICT (item_id, question_set) DO NOTHING'
    : `ON CONFLICT (item_id, question_set) DO UPDATE SET
        generation = decision_jobs.generation + 1,
        attempts = 0, refusals = 0, abandons = 0, defers = 0,
        state = 'owed',
        priority = min(decision_jobs.priority, excluded.priority),
        owed_at = excluded.owed_at,
        not_before = min(max(decision_jobs.not_before, excluded.not_before),
                         ${delayCap('decision_jobs.enqueued_at', 'decision_jobs.item_id')})`;
  return `
    INSERT INTO decision_jobs (item_id, question_set, workspace_id, priority, generation,
                               enqueued_at, not_before, state, fair_tag, owed_at)
    SELECT i.id, @setName, i.workspace_id, @priority, 1, @now, ${wantedNotBefore(debounce, 'i.id')}, 'owed',
      max(coalesce(CASE WHEN EXISTS (SELECT 1 FROM decision_jobs e INDEXED BY decision_jobs_claim_idx
                                     WHERE e.state = 'owed' AND e.priority = @priority AND e.not_before <= @now)
                   THEN (SELECT v.fair_tag FROM decision_jobs v INDEXED BY decision_jobs_claim_order_idx
                         WHERE v.state = 'owed' AND v.priority = @priority AND v.not_before <= @now
                         ORDER BY v.fair_tag LIMIT 1) END, 0),
          coalesce((SELECT l.fair_tag FROM decision_jobs l INDEXED BY decision_jobs_ws_fair_idx
                    WHERE l.workspace_id = i.workspace_id AND l.priority = @priority
                    ORDER BY l.fair_tag DESC LIMIT 1), 0)) + 1,
      @now
    FROM items i WHERE i.id = @id AND true
    ${onConflict}`;
}

/**
 * The owe of one (item, set) whose job is owed already at this priority or a more urgent one (an
 * item edited again before its job ran): the upsert's conflict branch as an UPDATE that names
 * only the columns that change. The upsert's SET names `state` and `priority` too (a parked or
 * batched job is owed again, a backfill job raised to live), so SQLite rewrites the row's entries
 * in decision_jobs_claim_order_idx and decision_jobs_ws_fair_idx even when the values stay; here
 * only decision_jobs_claim_idx (not_before) moves, and the fair tag (three index seeks) is not
 * computed for an insert that does not happen: an update owing 4 sets took 141 CPU µs before, 95
 * after (scripts/profile-write-door.ts at synchronous OFF). The values are the upsert's: with
 * state = 'owed' and priority <= @priority its SET leaves both as they are. Touches nothing when
 * the item is gone (the upsert reads `items`) or the job is missing, parked, batched or of a
 * later priority: then `oweItem` runs the upsert, so a new job costs one more primary-key seek.
 * The latest answer is read inside the SET, so a miss does not read it; reading it once per item
 * in a statement of its own instead made a new job's enqueue (bench part a) about 2 µs dearer.
 * `itemWritten`: the caller wrote the item's row in this transaction (`updateItem`, and the items
 * its `LINKERS` read joined), so the check that it exists is left out: about 2,100 of the
 * statement's 30,400 SQLite instructions (counted as for `BUMP_ITEM`).
 * Parameters as `oweSql`.
 */
function reoweSql(debounce: boolean, itemWritten: boolean): string {
  return `
    UPDATE decision_jobs SET
      generation = generation + 1,
      attempts = 0, refusals = 0, abandons = 0, defers = 0,
      owed_at = @now,
      not_before = min(max(not_before, ${wantedNotBefore(debounce, '@id')}), ${delayCap('enqueued_at', '@id')})
    WHERE item_id = @id AND question_set = @setName AND state = 'owed' AND priority <= @priority
      ${itemWritten ? '' : 'AND EXISTS (SELECT 1 FROM items WHERE id = @id)'}`;
}

const OWE_SQL = {
  debounce: {
    upsert: oweSql(true, false),
    insert: oweSql(true, true),
    reowe: reoweSql(true, false),
    reoweWritten: reoweSql(true, true),
  },
  quiet: {
    upsert: oweSql(false, false),
    insert: oweSql(false, true),
    reowe: reoweSql(false, false),
    reoweWritten: reoweSql(false, true),
  },
};

/** The parameters of one owe upsert, reused across its sets (only the set's own values change). */
interface OweValues {
  id: string;
  now: number;
  quiet: number;
  debounce: number;
  maxDelay: number;
  setName: string;
  priority: number;
}

/**
 * Owes one item's jobs for `sets` (in the sets' order, as `oweItems`): each set's job re-owed in
 * place when it is owed already (`reoweSql`), else upserted (`oweSql`; with `insertOnly`, only
 * inserted). `itemWritten`: the item's row was written in this transaction (see `reoweSql`).
 * @returns rows inserted or updated.
 */
function oweItem(
  w: JobWriter,
  now: number,
  itemId: string,
  sets: readonly QuestionSet[],
  opts: OweOptions & { insertOnly?: boolean },
  itemWritten = false,
): number {
  if (sets.length === 0) return 0;
  const texts = OWE_SQL[opts.reaskDebounce === false ? 'quiet' : 'debounce'];
  const insertOnly = opts.insertOnly === true;
  const upsert = prepared(w.db, insertOnly ? texts.insert : texts.upsert);
  const reowe = insertOnly ? null : prepared(w.db, itemWritten ? texts.reoweWritten : texts.reowe);
  const quiet = opts.quietPeriod !== false;
  const v: OweValues = {
    id: itemId,
    now,
    quiet: now,
    debounce: 0,
    maxDelay: 0,
    setName: '',
    priority: opts.priority ?? PRIORITY_LIVE,
  };
  let n = 0;
  for (const set of sets) {
    v.quiet = quiet ? now + set.quietPeriodMs : now;
    v.debounce = set.reaskDebounceMs;
    v.maxDelay = set.maxDelayMs;
    v.setName = set.name;
    const again = reowe === null ? 0 : reowe.run(v).changes;
    n += again > 0 ? again : upsert.run(v).changes;
  }
  return n;
}

/**
 * `registry.setsFor(slug)` kept per registry and slug: the registry is immutable (a reload swaps
 * in a new one), so the filter over every set runs once per collection, not once per write.
 */
const setsBySlug = new WeakMap<Registry, Map<string, QuestionSet[]>>();

function setsFor(registry: Registry, slug: string): readonly QuestionSet[] {
  let bySlug = setsBySlug.get(registry);
  if (!bySlug) setsBySlug.set(registry, (bySlug = new Map()));
  let sets = bySlug.get(slug);
  if (!sets) bySlug.set(slug, (sets = registry.setsFor(slug)));
  return sets;
}

/**
 * ../sql/owe.ts `oweForItem` for one item whose collection slug is read already (null: the
 * collection row is missing, so none of its own sets): its own sets, and with `linkers` the sets
 * that read links of the items showing its title, upserted in item-id order (the order both
 * dialects keep; see `oweForItem`). Every item owed here is one whose row exists in this
 * transaction: the one `updateItem` just wrote, and those `LINKERS` read through `items`.
 */
function oweForItem(
  w: JobWriter,
  now: number,
  itemId: string,
  slug: string | null,
  opts: OweOptions,
  linkers: boolean,
) {
  const own = slug === null ? [] : setsFor(w.c.registry, slug);
  if (!linkers) return oweItem(w, now, itemId, own, opts, true);
  const others = prepared(w.db, LINKERS).all({ itemId }) as Array<{ id: string; slug: string }>;
  const targets = [
    { id: itemId, sets: own },
    ...others.map((o) => ({ id: o.id, sets: setsFor(w.c.registry, o.slug).filter(readsLinks) })),
  ];
  let n = 0;
  for (const t of targets.sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0)))
    n += oweItem(w, now, t.id, t.sets, opts, true);
  return n;
}

/**
 * Store.updateItem's statements on SQLite (../sql/write-doors.ts `updateItem` says the rule),
 * inside the caller's write transaction; the arguments are checked by the caller
 * (`checkDoorInput`) and `report` collects the text repairs.
 * @throws NotFound (item; collection when the fields change), InvalidWrite (fields, workspace).
 */
export function updateItem(
  w: JobWriter,
  now: number,
  id: string,
  patch: ItemPatch,
  opts: OweOptions,
  report: NormaliseReport,
): WriteResult<ItemRow> {
  const raw = prepared(w.db, ITEM_FOR_WRITE, 'arrays').get({ id }) as unknown[] | undefined;
  if (!raw) throw new NotFound('item', id);
  const { cur, slug, colWorkspace, schema, hasLinkers } = itemForWrite(raw);
  const { next, changed, titleChanged } = planItemPatch(cur, patch, report);
  if (!changed) return writeResult<ItemRow>(cur, false, report);
  if (next.fields !== cur.fields) {
    if (schema === null) throw new NotFound('collection', cur.collectionId);
    if (colWorkspace !== cur.workspaceId)
      throw new InvalidWrite(`collection ${cur.collectionId} is not in workspace ${cur.workspaceId}`);
    checkFieldOptions(schema, next.fields, cur.fields);
  }
  prepared(w.db, BUMP_ITEM).run({
    id,
    now,
    title: titleChanged ? next.title : null,
    content: next.content !== cur.content ? next.content : null,
    fields: next.fields !== cur.fields ? next.fields : null,
  });
  const row: ItemRow = { ...cur, ...next, seq: cur.seq + 1, updatedAt: now };
  return writeResult(row, true, report, oweForItem(w, now, id, slug, opts, titleChanged && hasLinkers));
}

/**
 * Store.oweJobs on SQLite (../sql/owe.ts `owePairs` says the rule), inside the caller's write
 * transaction: a set owed for one item runs the one-item upsert (`oweItem`); a set owed for
 * several runs the shared statement over up to 500 of them (its fair tags number the items in id
 * order), then `meta` is written. Unknown sets are skipped. @returns rows inserted or updated.
 */
export function owePairs(
  w: JobWriter,
  now: number,
  pairs: ReadonlyArray<{ itemId: string; questionSet: string }>,
  opts: OweOptions & { insertOnly?: boolean; meta?: { key: string; value: string } },
): number {
  let n = 0;
  if (pairs.length === 1) {
    const set = w.c.registry.get(pairs[0].questionSet);
    if (set) n = oweItem(w, now, pairs[0].itemId, [set], opts);
  } else {
    const bySet = new Map<string, string[]>();
    for (const p of pairs) {
      const list = bySet.get(p.questionSet);
      if (list) list.push(p.itemId);
      else bySet.set(p.questionSet, [p.itemId]);
    }
    for (const [name, ids] of bySet) {
      const set = w.c.registry.get(name);
      if (!set) continue;
      if (ids.length === 1) n += oweItem(w, now, ids[0], [set], opts);
      else
        for (let i = 0; i < ids.length; i += 500)
          n += w.d.runNow(oweItems(w.c, now, { itemIds: ids.slice(i, i + 500) }, [set], opts), now);
    }
  }
  // The backfill cursor commits with the work it records: a crash never leaves it ahead.
  if (opts.meta) w.d.runNow(setMetaTx(w.c, opts.meta.key, opts.meta.value), now);
  return n;
}
