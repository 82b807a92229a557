import { sql } from 'drizzle-orm';
import { eventPayload, type SurfacingContext } from '../events.js';
import type {
  HumanVerdictRow,
  NewVerdict,
  SurfacingCause,
  SurfacingChangeRow,
  VerdictKind,
  VerdictSurfacing,
} from '../verdicts.js';
import { overrideValue, surfacingNow } from '../verdicts.js';
import { noulProbability } from '../events.js';
import {
  bind,
  changes,
  nowMs,
  one,
  read,
  rows,
  shape,
  shapeFamily,
  write,
  type Expr,
  type SqlContext,
  type Steps,
} from './steps.js';

/**
 * Surfacing with memory and people's verdicts (DESIGN §8.1, §8.2), on both dialects.
 *
 * The memory of a key is the latest row of `surfacing_changes`: whether the (item, set, key)
 * surfaced at its previous state. Every write that can move it (an answer stored, a verdict
 * recorded) reads the memory, the latest answer and the verdict in force in one statement
 * (`readMemory`), decides with the one rule (../verdicts.ts `surfacingNow`), and when the
 * surfacing moved appends a change row and queues its outbound event per enabled target, all in
 * the transaction of the write. Keys with no change row yet (answers stored before migration 0007)
 * fall back to the plain rule on their latest answer, which is what surfaced before.
 */

/** What one key's surfacing is judged against. */
export interface KeyMemory {
  /** The latest answer JSON of the key, or null. */
  answer: string | null;
  /** The latest change's side, or null when the key has none. */
  surfaced: boolean | null;
  /** The latest verdict of the key, or null. */
  verdict: { verdict: VerdictKind; value: string | null } | null;
}

/**
 * The memory of `n` keys of one (item, set): parameters itemId, questionSet, k0…; each max(id) a
 * seek on the key index of its table. Columns w (a: answer, c: change, v: verdict), k, v (answer
 * JSON or verdict value), s (`1`/`0` for a change, the verdict kind for a verdict).
 */
const memoryShape = shapeFamily((n: number) =>
  shape('surfacing memory', (d, p: Record<string, Expr>) => {
    const keys = sql.join(
      Array.from({ length: n }, (_, i) => d.text(p[`k${i}`])),
      sql`, `,
    );
    const latest = (table: string) =>
      sql`SELECT max(id) FROM ${sql.raw(table)} WHERE item_id = ${p.itemId} AND question_set = ${p.questionSet} AND question_key IN (${keys}) GROUP BY question_key`;
    return sql`
      SELECT 'a' AS w, question_key AS k, answer AS v, NULL AS s FROM item_decisions WHERE id IN (${latest('item_decisions')})
      UNION ALL
      SELECT 'c', question_key, NULL, CASE WHEN surfaced THEN '1' ELSE '0' END FROM surfacing_changes WHERE id IN (${latest('surfacing_changes')})
      UNION ALL
      SELECT 'v', question_key, value, verdict FROM human_verdicts WHERE id IN (${latest('human_verdicts')})`;
  }),
);

/** Reads the memory of `keys` of one (item, set) (see `memoryShape`). */
export function* readMemory(
  itemId: string,
  questionSet: string,
  keys: readonly string[],
): Steps<Map<string, KeyMemory>> {
  if (keys.length === 0) return memoryOf(keys, []);
  const values: Record<string, Expr> = { itemId, questionSet };
  keys.forEach((k, i) => (values[`k${i}`] = k));
  return memoryOf(keys, yield* rows<MemoryRow>(bind(memoryShape(keys.length), values)));
}

/** One row of the memory read (see `memoryShape` for its columns). */
export interface MemoryRow {
  w: string;
  k: string;
  v: string | null;
  s: string | null;
}

/** Each of `keys`' memory from the memory read's rows (a key with none: no answer, no change, no verdict). */
export function memoryOf(keys: readonly string[], got: readonly MemoryRow[]): Map<string, KeyMemory> {
  const out = new Map<string, KeyMemory>(keys.map((k) => [k, { answer: null, surfaced: null, verdict: null }]));
  for (const r of got) {
    const m = out.get(r.k);
    if (!m) continue;
    if (r.w === 'a') m.answer = r.v;
    else if (r.w === 'c') m.surfaced = r.s === '1';
    else m.verdict = { verdict: r.s as VerdictKind, value: r.v };
  }
  return out;
}

/** Whether the key surfaced at its previous state: its latest change, else the plain rule on its latest answer. */
export function wasSurfaced(m: KeyMemory, threshold: number): boolean {
  if (m.surfaced !== null) return m.surfaced;
  const p = m.answer === null ? null : noulProbability(m.answer);
  return p !== null && p >= threshold;
}

/** The set's hysteresis, or DESIGN §8.2's default (0.05, at most the threshold) when the context gives none. */
export function hysteresisOf(s: SurfacingContext): number {
  return s.hysteresis ?? Math.min(0.05, s.threshold);
}

const bool = (b: boolean) => sql.raw(b ? 'TRUE' : 'FALSE');

/**
 * The change row's insert; the side and the flip mark are part of the statement (`TRUE`/`FALSE`:
 * SQLite reads them as 1/0), so no boolean is bound. Variants: `<surfaced><flip>` as 0/1 digits.
 */
const insertChangeShape = shapeFamily((variant: '00' | '01' | '10' | '11') =>
  shape<'workspaceId' | 'itemId' | 'questionSet' | 'questionKey' | 'probability' | 'cause' | 'stateHash' | 'now'>(
    'insert surfacing change',
    (d, p) => sql`
    INSERT INTO surfacing_changes (workspace_id, item_id, question_set, question_key, surfaced, flip, probability, cause, state_hash, changed_at)
    VALUES (${d.text(p.workspaceId)}, ${d.text(p.itemId)}, ${d.text(p.questionSet)}, ${d.text(p.questionKey)}, ${bool(variant[0] === '1')}, ${bool(variant[1] === '1')},
            ${p.probability}, ${d.text(p.cause)}, ${d.text(p.stateHash)}, ${d.int8(p.now)})`,
  ),
);

const queueEventShape = shape<'eventId' | 'workspaceId' | 'itemId' | 'type' | 'payload' | 'now'>(
  'queue event',
  (d, p) => sql`
  INSERT INTO decision_events (target_url, event_id, workspace_id, item_id, type, payload, created_at, attempts, next_attempt_at)
  SELECT url, ${d.text(p.eventId)}, ${d.text(p.workspaceId)}, ${d.text(p.itemId)}, ${d.text(p.type)}, ${d.text(p.payload)}, ${d.int8(p.now)}, 0, ${d.int8(p.now)}
  FROM event_targets WHERE disabled_at IS NULL ORDER BY url`,
);

/** One move of a key's surfacing, to record: a change row without its id and time, and the item's ref for the event. */
export type SurfacingMove = Omit<SurfacingChangeRow, 'id' | 'changedAt'> & { ref: string };

/**
 * Appends the change row and, when `targets > 0`, queues its `decision.surfaced` /
 * `decision.cleared` event once per enabled target (DESIGN §16.2), in the caller's transaction.
 * @param nowMs the operation's time, epoch ms. @returns event rows queued.
 */
export function* recordMove(c: SqlContext, nowMs: number, m: SurfacingMove, targets: number): Steps<number> {
  yield* changes(
    bind(insertChangeShape(`${m.surfaced ? 1 : 0}${m.flip ? 1 : 0}` as '00'), {
      workspaceId: m.workspaceId,
      itemId: m.itemId,
      questionSet: m.questionSet,
      questionKey: m.questionKey,
      probability: m.probability,
      cause: m.cause,
      stateHash: m.stateHash,
      now: nowMs,
    }),
  );
  if (targets === 0) return 0;
  const e = moveEvent(c.newId(), nowMs, m);
  return yield* changes(
    bind(queueEventShape, {
      eventId: e.eventId,
      workspaceId: m.workspaceId,
      itemId: m.itemId,
      type: e.type,
      payload: e.payload,
      now: nowMs,
    }),
  );
}

/**
 * A move's `decision.surfaced` / `decision.cleared` event (DESIGN §16.2): its type and the JSON
 * body sent to every enabled target, exactly (ids, ref, set, key, probability, state hash).
 * @param nowMs the operation's time, epoch ms (the body's `created_at`).
 */
export function moveEvent(
  eventId: string,
  nowMs: number,
  m: SurfacingMove,
): { eventId: string; type: 'decision.surfaced' | 'decision.cleared'; payload: string } {
  const type = m.surfaced ? 'decision.surfaced' : 'decision.cleared';
  const payload = eventPayload({
    id: eventId,
    type,
    created_at: new Date(nowMs).toISOString(),
    workspace_id: m.workspaceId,
    item: { id: m.itemId, ref: m.ref },
    set: m.questionSet,
    key: m.questionKey,
    probability: m.probability,
    state_hash: m.stateHash,
    source: m.cause,
  });
  return { eventId, type, payload };
}

// ------------------------------------------------------------------ verdicts

const targetsNowShape = shape<'now'>(
  'event targets now',
  (d, p) => sql`
  SELECT ${p.now} AS now, ${d.int4(sql`count(*)`)} AS targets FROM event_targets WHERE disabled_at IS NULL`,
);

/** Locks the item's row (Postgres; SQLite's IMMEDIATE transaction serialises writers), so two writes of one item judge their surfacing in commit order. */
export const lockItemRowShape = shape<'itemId'>(
  'lock item for surfacing',
  (d, p) => sql`SELECT id FROM items WHERE id = ${p.itemId}${d.forUpdate}`,
);

/** The enabled targets' count and the operation's time (epoch ms), in one read. */
export function* targetsAndNow(now: Expr): Steps<{ nowMs: number; targets: number }> {
  const t = (yield* one<{ now: number | string; targets: number | string }>(bind(targetsNowShape, { now })))!;
  return { nowMs: Number(t.now), targets: Number(t.targets) };
}

interface VerdictDbRow {
  id: number | string;
  workspace_id: string;
  item_id: string;
  question_set: string;
  question_key: string;
  verdict: string;
  value: string | null;
  state_hash: string;
  state_version: number | string;
  state_parts: string;
  decision_id: number | string | null;
  author: string;
  note: string | null;
  created_at: number | string;
}

function toVerdictRow(r: VerdictDbRow): HumanVerdictRow {
  return {
    id: Number(r.id),
    workspaceId: r.workspace_id,
    itemId: r.item_id,
    questionSet: r.question_set,
    questionKey: r.question_key,
    verdict: r.verdict as VerdictKind,
    value: r.value,
    stateHash: r.state_hash,
    stateVersion: Number(r.state_version),
    stateParts: r.state_parts,
    decisionId: r.decision_id === null ? null : Number(r.decision_id),
    author: r.author,
    note: r.note,
    createdAt: Number(r.created_at),
  };
}

const VERDICT_COLUMNS = sql`id, workspace_id, item_id, question_set, question_key, verdict, value, state_hash, state_version, state_parts, decision_id, author, note, created_at`;

/**
 * Appends a verdict (DESIGN §8.1) and, for a noul that may surface, moves its surfacing when
 * the verdict changes what is in force (a value put in force, or withdrawn back to the model's
 * answer), with the change row and its events, in one transaction.
 * @returns the stored row.
 */
export function insertVerdict(c: SqlContext, v: NewVerdict, surfacing: VerdictSurfacing): Promise<HumanVerdictRow> {
  return write(c, function* () {
    const now = yield* nowMs();
    let before: { was: boolean; memory: KeyMemory } | null = null;
    let targets = 0;
    if (surfacing) {
      targets = (yield* targetsAndNow(now)).targets;
      yield* one(bind(lockItemRowShape, { itemId: v.itemId }));
      const memory = (yield* readMemory(v.itemId, v.questionSet, [v.questionKey])).get(v.questionKey)!;
      before = { was: wasSurfaced(memory, surfacing.threshold), memory };
    }
    const inserted = yield* one<VerdictDbRow>(sql`
      INSERT INTO human_verdicts (workspace_id, item_id, question_set, question_key, verdict, value, state_hash, state_version, state_parts, decision_id, author, note, created_at)
      VALUES (${v.workspaceId}, ${v.itemId}, ${v.questionSet}, ${v.questionKey}, ${v.verdict}, ${v.value}, ${v.stateHash}, ${c.d.int4(v.stateVersion)}, ${v.stateParts},
              ${v.decisionId === null ? null : c.d.int8(v.decisionId)}, ${v.author}, ${v.note}, ${c.d.int8(now)})
      RETURNING ${VERDICT_COLUMNS}`);
    if (surfacing && before) {
      const after = surfacingNow({
        wasSurfaced: before.was,
        override: overrideValue(v),
        modelAnswer: before.memory.answer,
        threshold: surfacing.threshold,
        hysteresis: hysteresisOf(surfacing),
      });
      if (after.surfaced !== before.was) {
        yield* recordMove(
          c,
          now,
          {
            ...v,
            ref: surfacing.ref,
            surfaced: after.surfaced,
            flip: true,
            probability: after.probability,
            cause: 'human',
          },
          targets,
        );
      }
    }
    return toVerdictRow(inserted!);
  });
}

/** Verdicts, oldest first (by id), of one workspace, optionally one set and one item. */
export function listVerdicts(
  c: SqlContext,
  q: { workspaceId: string; questionSet?: string; itemId?: string },
): Promise<HumanVerdictRow[]> {
  return read(c, function* () {
    const list = yield* rows<VerdictDbRow>(sql`
      SELECT ${VERDICT_COLUMNS} FROM human_verdicts WHERE workspace_id = ${q.workspaceId}
      ${q.questionSet === undefined ? sql`` : sql`AND question_set = ${q.questionSet}`}
      ${q.itemId === undefined ? sql`` : sql`AND item_id = ${q.itemId}`}
      ORDER BY id`);
    return list.map(toVerdictRow);
  });
}

interface ChangeDbRow {
  id: number | string;
  workspace_id: string;
  item_id: string;
  question_set: string;
  question_key: string;
  surfaced: boolean | number;
  flip: boolean | number;
  probability: number | string;
  cause: string;
  state_hash: string;
  changed_at: number | string;
}

/**
 * Surfacing changes, oldest first: of one item (every set), or of one (workspace, set); since
 * `sinceMs` (epoch ms) when given.
 */
export function listSurfacingChanges(
  c: SqlContext,
  q: { itemId: string; sinceMs?: number } | { workspaceId: string; questionSet: string; sinceMs?: number },
): Promise<SurfacingChangeRow[]> {
  return read(c, function* () {
    const where =
      'itemId' in q
        ? sql`item_id = ${q.itemId}`
        : sql`workspace_id = ${q.workspaceId} AND question_set = ${q.questionSet}`;
    const list = yield* rows<ChangeDbRow>(sql`
      SELECT id, workspace_id, item_id, question_set, question_key, surfaced, flip, probability, cause, state_hash, changed_at
      FROM surfacing_changes WHERE ${where}${q.sinceMs === undefined ? sql`` : sql` AND changed_at >= ${c.d.int8(q.sinceMs)}`}
      ORDER BY id`);
    return list.map(toChangeRow);
  });
}

function toChangeRow(r: ChangeDbRow): SurfacingChangeRow {
  return {
    id: Number(r.id),
    workspaceId: r.workspace_id,
    itemId: r.item_id,
    questionSet: r.question_set,
    questionKey: r.question_key,
    surfaced: r.surfaced === true || Number(r.surfaced) === 1,
    flip: r.flip === true || Number(r.flip) === 1,
    probability: Number(r.probability),
    cause: r.cause as SurfacingCause,
    stateHash: r.state_hash,
    changedAt: Number(r.changed_at),
  };
}

/**
 * The item view's reads of people's verdicts and the surfacing memory (sql/item-view.ts): one
 * item's, oldest first, as `listVerdicts` and `listSurfacingChanges` return them, written as
 * shapes so SQLite prepares them once (an item read runs them on every request).
 */
const itemVerdictsShape = shape<'itemId'>(
  'item verdicts',
  (_d, p) => sql`SELECT ${VERDICT_COLUMNS} FROM human_verdicts WHERE item_id = ${p.itemId} ORDER BY id`,
);
const itemChangesShape = shape<'itemId'>(
  'item surfacing changes',
  (_d, p) => sql`
    SELECT id, workspace_id, item_id, question_set, question_key, surfaced, flip, probability, cause, state_hash, changed_at
    FROM surfacing_changes WHERE item_id = ${p.itemId} ORDER BY id`,
);

/** One item's verdicts, oldest first (by id). */
export function* itemVerdicts(itemId: string): Steps<HumanVerdictRow[]> {
  return (yield* rows<VerdictDbRow>(bind(itemVerdictsShape, { itemId }))).map(toVerdictRow);
}

/** One item's surfacing changes, oldest first (by id). */
export function* itemSurfacingChanges(itemId: string): Steps<SurfacingChangeRow[]> {
  return (yield* rows<ChangeDbRow>(bind(itemChangesShape, { itemId }))).map(toChangeRow);
}
