import { and, asc, eq, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { StateLink, TrailComment } from '../../decision/state.js';
import type { AnswerKey, Claim, ClaimCheck, ItemForEvaluation, Liveness, NewDecision, SpendRecord } from '../store.js';
import type { ItemRow, WorkspaceRow } from '../tracker-reads.js';
import type { DecisionRow } from '../decision-store.js';
import type { SpendTotals } from '../spend-store.js';
import { toCollectionRow } from '../write-rules.js';
import type { SurfacingContext } from '../events.js';
import { queueSurfacingEvents, watchSurfacing } from './events.js';
import {
  autocommit,
  bind,
  changes,
  exec,
  inList,
  nowSql,
  one,
  read,
  rows,
  shape,
  shapeFamily,
  write,
  type Expr,
  type SqlContext,
  type Steps,
  type Tables,
} from './steps.js';

/** Evaluation reads, stored answers and spend (DESIGN §2, §7). */

/**
 * The links an item's state shows (DESIGN §5), from its point of view: its parent, the items it
 * blocks, the items that block it. Links to deleted items, or to items of a deleted collection,
 * are left out, so their titles are never sent. Columns: relation, ref, title.
 */
function stateLinksSql(itemId: Expr): SQL {
  return sql`
    SELECT 'parent' AS relation, t.ref AS ref, t.title AS title FROM item_links l JOIN items t ON t.id = l.target_id
      JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
      WHERE l.source_id = ${itemId} AND l.link_type = 'parent' AND t.deleted_at IS NULL
    UNION ALL
    SELECT 'blocks', t.ref, t.title FROM item_links l JOIN items t ON t.id = l.target_id
      JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
      WHERE l.source_id = ${itemId} AND l.link_type = 'blocks' AND t.deleted_at IS NULL
    UNION ALL
    SELECT 'blocked_by', s.ref, s.title FROM item_links l JOIN items s ON s.id = l.source_id
      JOIN collections sc ON sc.id = s.collection_id AND sc.deleted_at IS NULL
      WHERE l.target_id = ${itemId} AND l.link_type = 'blocks' AND s.deleted_at IS NULL`;
}

/**
 * Reads everything the state builder needs: the item, its collection and workspace by primary key
 * (three plain selects measured faster on SQLite than one joined select, whose nested row mapping
 * costs more than the two lookups), the live comments and, unless `links` is false, the links;
 * null when the item, its collection or workspace row is missing. Not one snapshot: a write
 * landing between the statements bumps the job's generation, so the outcome of an evaluation that
 * read a torn state is superseded and the job runs again.
 */
export function loadItemForEvaluation(
  c: SqlContext,
  itemId: string,
  o?: { links?: boolean },
): Promise<ItemForEvaluation | null> {
  return read(c, function* () {
    const item = yield* one<ItemRow>(bind(itemByIdShape, { id: itemId }));
    if (!item) return null;
    const collection = yield* one<CollectionDbRow>(bind(collectionByIdShape, { id: item.collectionId }));
    const workspace = yield* one<WorkspaceRow>(bind(workspaceByIdShape, { id: item.workspaceId }));
    if (!collection || !workspace) return null;
    const comments = yield* rows<TrailComment>(bind(stateCommentsShape, { itemId }));
    const links = o?.links === false ? [] : yield* rows<StateLink>(bind(stateLinksShape, { itemId }));
    return { item, collection: toCollectionRow(collection), workspace, comments, links };
  });
}

/** A row by primary key, as the table's builder maps it (camelCase, JSON columns as text). */
const itemByIdShape = shape<'id'>(
  'item by id',
  (d, p) => (db) =>
    db
      .select()
      .from(d.t.items)
      .where(eq(d.t.items.id, p.id as SQLWrapper)),
);
const collectionByIdShape = shape<'id'>(
  'collection by id',
  (d, p) => (db) =>
    db
      .select()
      .from(d.t.collections)
      .where(eq(d.t.collections.id, p.id as SQLWrapper)),
);
const workspaceByIdShape = shape<'id'>(
  'workspace by id',
  (d, p) => (db) =>
    db
      .select()
      .from(d.t.workspaces)
      .where(eq(d.t.workspaces.id, p.id as SQLWrapper)),
);
type CollectionDbRow = Tables['collections']['$inferSelect'];
export const stateCommentsShape = shape<'itemId'>(
  'state comments',
  (_d, p) => sql`
  SELECT id, author, body, created_at AS "createdAt" FROM comments
  WHERE item_id = ${p.itemId} AND deleted_at IS NULL ORDER BY created_at, id`,
);
export const stateLinksShape = shape<'itemId'>('state links', (_d, p) => stateLinksSql(p.itemId));

/** Liveness as the last statement before a send: item and collection live, workspace live, and the claim still held at its generation. */
export function checkLiveness(c: SqlContext, itemId: string, claim?: Claim): Promise<Liveness> {
  if (claim) return checkClaim(c, claim).then((r) => r.liveness);
  return read(c, function* (): Steps<Liveness> {
    return livenessOf(yield* one<LivenessRow>(bind(livenessShape(0), { itemId })));
  });
}

/**
 * The runner's one read before a call (DESIGN §7 step 6, §7.6): the claim's liveness and the
 * lease it has left, in the same statement, so a lease is renewed (a write) only when less than
 * half of it is left, and never on the way to a call that a fresh claim makes.
 * @returns `leaseLeftMs`: the store's lease_expires_at less its now, ms (≤ 0 once it ran out;
 *   -Infinity when the row is gone or holds no lease).
 */
export function checkClaim(c: SqlContext, claim: Claim): Promise<ClaimCheck> {
  return read(c, function* (): Steps<ClaimCheck> {
    const now = yield* nowSql();
    const r = yield* one<LivenessRow>(
      bind(livenessShape(1), { itemId: claim.itemId, jobItemId: claim.itemId, questionSet: claim.questionSet, now }),
    );
    const left = r?.lease_left;
    return {
      liveness: livenessOf(r, claim),
      leaseLeftMs: left === null || left === undefined ? -Infinity : Number(left),
    };
  });
}

/** The liveness read's row (see `livenessShape`; SQLite's text is sqlite/job-statements.ts `CHECK_CLAIM`). */
export type LivenessRow = {
  i: number | null;
  c: number | null;
  w: number | null;
  token?: string | null;
  generation?: number | null;
  lease_left?: number | string | null;
};

/** What a liveness row says: the first of item gone, workspace gone, claim lost, generation moved; else live. */
export function livenessOf(r: LivenessRow | undefined, claim?: Claim): Liveness {
  if (!r || r.i !== null || r.c !== null) return 'item_gone';
  if (r.w !== null) return 'workspace_gone';
  if (claim) {
    if (r.token !== claim.claimToken) return 'lost';
    if (Number(r.generation) !== claim.generation) return 'superseded';
  }
  return 'live';
}

/** The liveness read, with (1) or without (0) the claimed job's row (with it, the lease left: parameter `now`). */
const livenessShape = shapeFamily((withJob: 0 | 1) =>
  shape(
    'liveness',
    (_d, p: Record<string, Expr>) => sql`
    SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w${withJob ? sql`, j.claim_token AS token, j.generation AS generation, j.lease_expires_at - ${p.now} AS lease_left` : sql``}
    FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
    ${withJob ? sql`LEFT JOIN decision_jobs j ON j.item_id = ${p.jobItemId} AND j.question_set = ${p.questionSet}` : sql``}
    WHERE i.id = ${p.itemId}`,
  ),
);

/** Which wanted keys already have a stored row at exactly (state hash, question hash, state version); one query for all keys. */
export function answeredKeys(
  c: SqlContext,
  itemId: string,
  questionSet: string,
  keys: AnswerKey[],
): Promise<Set<string>> {
  if (keys.length === 0) return Promise.resolve(new Set());
  const values: Record<string, Expr> = { itemId, questionSet };
  keys.forEach((k, i) => {
    values[`k${i}`] = k.questionKey;
    values[`s${i}`] = k.stateHash;
    values[`q${i}`] = k.questionHash;
    values[`v${i}`] = k.stateVersion;
  });
  return read(c, function* () {
    const hits = yield* rows<{ k: string }>(bind(answeredShape(keys.length), values));
    return new Set(hits.map((h) => h.k));
  });
}

/**
 * The idempotency read for `n` keys: one exact-key term per key, ORed, each a seek on
 * item_decisions_idem_uq on both dialects (a row-value `IN (VALUES …)` made SQLite build a
 * temporary table: 61 µs against 33 for three keys, measured). Parameters k0, s0, q0, v0, … are
 * the key, state hash, question hash and state version of each.
 */
const answeredShape = shapeFamily((n: number) =>
  shape('answered keys', (d, p: Record<string, Expr>) => {
    const wanted = Array.from(
      { length: n },
      (_, i) =>
        sql`(question_key = ${d.text(p[`k${i}`])} AND state_hash = ${d.text(p[`s${i}`])} AND question_hash = ${d.text(p[`q${i}`])} AND state_version = ${d.int4(p[`v${i}`])})`,
    );
    return sql`
      SELECT question_key AS k FROM item_decisions
      WHERE item_id = ${p.itemId} AND question_set = ${p.questionSet}
        AND (${sql.join(wanted, sql` OR `)})`;
  }),
);

/**
 * Inserts one call's answers in one statement (all or none); a conflict on the idempotency key does
 * nothing. With `surfacing`, the surfacing events those answers move are queued in the same
 * transaction (see `insertDecisionsTx`).
 */
export function insertDecisions(c: SqlContext, list: NewDecision[], surfacing?: SurfacingContext): Promise<number> {
  if (list.length === 0) return Promise.resolve(0);
  // With a surfacing context it is several statements (events.ts), so one transaction on Postgres too.
  return (surfacing ? write : autocommit)(c, function* () {
    return yield* insertDecisionsTx(c, yield* nowSql(), list, surfacing);
  });
}

/**
 * `insertDecisions` inside the caller's transaction; `now` is the operation's `nowSql()`. With
 * `surfacing`, every inserted noul that starts or stops surfacing against the previous latest row of
 * its key queues a `decision.surfaced` or `decision.cleared` event for each enabled target, in this
 * transaction (DESIGN §16.2; events.ts `watchSurfacing`, `queueSurfacingEvents`).
 * @returns rows inserted.
 */
export function* insertDecisionsTx(
  c: SqlContext,
  now: Expr,
  list: readonly NewDecision[],
  surfacing?: SurfacingContext,
): Steps<number> {
  if (list.length === 0) return 0;
  const watch = surfacing ? yield* watchSurfacing(c, now, list, surfacing) : null;
  const values: Record<string, Expr | null> = { now };
  list.forEach((r, i) => {
    for (const col of DECISION_COLUMNS) values[`${col}${i}`] = (r[col] ?? null) as Expr | null;
  });
  const inserted = yield* rows<{ id: number; questionKey: string }>(bind(insertDecisionsShape(list.length), values));
  if (watch) yield* queueSurfacingEvents(c, watch, new Set(inserted.map((r) => r.questionKey)));
  return inserted.length;
}

/** The columns a caller gives for a stored answer (`evaluatedAt` is the statement's "now"). */
const DECISION_COLUMNS = [
  'workspaceId',
  'itemId',
  'questionSet',
  'questionKey',
  'kind',
  'answer',
  'confidence',
  'provider',
  'model',
  'stateHash',
  'questionHash',
  'stateVersion',
  'stateParts',
  'inputTokens',
  'outputTokens',
  'itemSeq',
  'stateTruncated',
  'rationale',
  'fingerprintContext',
] as const satisfies ReadonlyArray<keyof NewDecision>;

/**
 * The insert of `n` answers; parameters `<column><row>` (`answer0`, `itemId1`, …) and `now`. A
 * builder, so each value binds through its column's encoder (a boolean as 0/1 on SQLite).
 */
const insertDecisionsShape = shapeFamily((n: number) =>
  shape('insert answers', (d, p: Record<string, Expr>) => (db) => {
    const t = d.t.itemDecisions;
    const rowsOf = Array.from({ length: n }, (_, i) => ({
      ...Object.fromEntries(DECISION_COLUMNS.map((col) => [col, p[`${col}${i}`]])),
      evaluatedAt: sql`${p.now}`,
    })) as unknown as Array<typeof t.$inferInsert>;
    return db.insert(t).values(rowsOf).onConflictDoNothing().returning({ id: t.id, questionKey: t.questionKey });
  }),
);

/**
 * An item's stored answers, oldest first; with `questionSet`, that set's only (the runner's
 * "already answered" read for a set with `maxAgeMs`, DESIGN §5.2: a range of
 * item_decisions_latest_idx on (item_id, question_set)).
 */
export function listDecisions(c: SqlContext, itemId: string, questionSet?: string): Promise<DecisionRow[]> {
  const t = c.d.t.itemDecisions;
  const where =
    questionSet === undefined ? eq(t.itemId, itemId) : and(eq(t.itemId, itemId), eq(t.questionSet, questionSet));
  return read(
    c,
    rows((db) => db.select().from(t).where(where).orderBy(asc(t.id))),
  ) as Promise<DecisionRow[]>;
}

export function listWorkspaceDecisions(
  c: SqlContext,
  workspaceId: string,
  questionSet: string,
): Promise<DecisionRow[]> {
  const t = c.d.t.itemDecisions;
  return read(
    c,
    rows((db) =>
      db
        .select()
        .from(t)
        .where(and(eq(t.workspaceId, workspaceId), eq(t.questionSet, questionSet)))
        .orderBy(asc(t.id)),
    ),
  ) as Promise<DecisionRow[]>;
}

export const HOUR_MS = 3_600_000;

/**
 * Start of the hour of `ms` (epoch ms), in SQL. The CAST floors on both dialects: Postgres divides
 * bigints as integers, but better-sqlite3 binds every JS number as REAL, so SQLite's `/` is real.
 */
function hourOf(ms: Expr): SQL {
  return sql`(CAST((${ms}) / ${sql.raw(String(HOUR_MS))} AS bigint) * ${sql.raw(String(HOUR_MS))})`;
}

/** Adds one evaluation's spend to its hour bucket (on Postgres the database's hour). */
export function recordSpend(c: SqlContext, r: SpendRecord): Promise<void> {
  return autocommit(c, function* () {
    yield* recordSpendTx(c, yield* nowSql(), r);
  });
}

/**
 * Adds one evaluation's spend to its hour bucket, inside the caller's transaction.
 * @param now the operation's `nowSql()` (no round trip for the database clock on Postgres).
 */
export function* recordSpendTx(c: SqlContext, now: Expr, r: SpendRecord): Steps<void> {
  yield* exec(bind(recordSpendShape, { now, ...spendValues(r) }));
}

/** One evaluation's spend as the spend upsert's named values (tokens by kind, calls), for either dialect's statement. */
export interface SpendValues {
  questionSet: string;
  provider: string;
  model: string;
  outcome: string;
  calls: number;
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/** `r` flattened to the spend upsert's named values. */
export function spendValues(r: SpendRecord): SpendValues {
  const u = r.usage;
  return {
    questionSet: r.questionSet,
    provider: r.provider,
    model: r.model,
    outcome: r.outcome,
    calls: r.calls,
    input: u.inputTokens,
    output: u.outputTokens,
    cacheRead: u.cacheReadTokens,
    cacheWrite: u.cacheWriteTokens,
  };
}

const recordSpendShape = shape<
  'now' | 'questionSet' | 'provider' | 'model' | 'outcome' | 'calls' | 'input' | 'output' | 'cacheRead' | 'cacheWrite'
>(
  'record spend',
  (d, p) => sql`
    INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    VALUES (${hourOf(p.now)}, ${p.questionSet}, ${p.provider}, ${p.model}, ${p.outcome}, ${d.int8(p.calls)},
            ${d.int8(p.input)}, ${d.int8(p.output)}, ${d.int8(p.cacheRead)}, ${d.int8(p.cacheWrite)})
    ON CONFLICT (hour, question_set, provider, model, outcome, shard) DO UPDATE SET
      calls = decision_spend.calls + excluded.calls,
      input_tokens = decision_spend.input_tokens + excluded.input_tokens,
      output_tokens = decision_spend.output_tokens + excluded.output_tokens,
      cache_read_tokens = decision_spend.cache_read_tokens + excluded.cache_read_tokens,
      cache_write_tokens = decision_spend.cache_write_tokens + excluded.cache_write_tokens`,
);

/** `verdict_meta` key prefix of the markers of spooled spend records already added (DESIGN §10.5). */
const SPOOLED_SPEND_PREFIX = 'spend-spooled:';

/**
 * A spooled record's spend, added at most once: the marker insert and the spend share one
 * transaction, so either both are there or neither. The marker is the only trace of which spooled
 * records are in `decision_spend` (whose rows are hour sums, not calls), and is what lets a spool
 * be replayed again after a crash before it was cleared.
 */
export function recordSpooledSpend(c: SqlContext, id: string, r: SpendRecord): Promise<boolean> {
  return write(c, function* () {
    const now = yield* nowSql();
    const added = yield* changes(sql`
      INSERT INTO verdict_meta (key, value, updated_at) VALUES (${SPOOLED_SPEND_PREFIX + id}, ${r.questionSet}, ${now})
      ON CONFLICT (key) DO NOTHING`);
    if (added === 0) return false;
    yield* recordSpendTx(c, now, r);
    return true;
  });
}

/** Deletes spooled-spend markers by id; run once the spool that held them is cleared. */
export function forgetSpooledSpend(c: SqlContext, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return Promise.resolve();
  return autocommit(c, () =>
    exec(
      sql`DELETE FROM verdict_meta WHERE ${inList(
        sql`key`,
        ids.map((id) => SPOOLED_SPEND_PREFIX + id),
      )}`,
    ),
  );
}

/** Spend in the hour buckets overlapping the last `windowMs`. */
export function spendSince(c: SqlContext, windowMs: number): Promise<SpendTotals> {
  return read(c, function* () {
    const now = yield* nowSql();
    return (yield* one<SpendTotals>(sql`
      SELECT CAST(coalesce(sum(calls), 0) AS bigint) AS calls, CAST(coalesce(sum(input_tokens), 0) AS bigint) AS "inputTokens",
             CAST(coalesce(sum(output_tokens), 0) AS bigint) AS "outputTokens",
             CAST(coalesce(sum(cache_read_tokens), 0) AS bigint) AS "cacheReadTokens",
             CAST(coalesce(sum(cache_write_tokens), 0) AS bigint) AS "cacheWriteTokens"
      FROM decision_spend WHERE hour >= ${hourOf(sql`${now} - ${c.d.int8(Math.trunc(windowMs))}`)}`))!;
  });
}
