import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import type { StateLink, TrailComment } from '../../decision/state.js';
import type { SurfacingContext } from '../events.js';
import type {
  AnswerKey,
  Claim,
  ClaimCheck,
  ClaimRequest,
  FinishedJob,
  ItemForEvaluation,
  JobFinish,
  JobFinishResult,
  Liveness,
  NewDecision,
  OutcomeResult,
  SpendRecord,
} from '../store.js';
import type { FinishOutcome } from '../throughput.js';
import type { CollectionRow, ItemRow, WorkspaceRow } from '../tracker-reads.js';
import { HOUR_MS, livenessOf, spendValues, type LivenessRow, type SpendValues } from '../sql/decisions.js';
import { surfacingMoves, watchedAnswers, type SurfacingWatch } from '../sql/events.js';
import { moveEvent, type KeyMemory } from '../sql/surfacing.js';
import type { VerdictKind } from '../verdicts.js';
import { backsOff, completionFenceSteps, firstOfGroupPairs, park, putBack } from '../sql/jobs.js';
import type { SqlContext } from '../sql/steps.js';
import { ABANDON_BACKOFF_CAP_MS, abandonReason, toClaim, type RawJob } from '../write-rules.js';
import { appliedByOutcome } from '../sql/throughput.js';
import { isBusy, storageProblemOf, type SqliteContext } from './context.js';
import type { SqliteDialect } from './dialect.js';

/**
 * The job path on SQLite (DESIGN §3, §7, §10.6): its reads (the state, the one check before a
 * call, the idempotency read) and its writes (the claim, the siblings' claim, the finish and the
 * group commit's many finishes), each as SQL text with its reason beside it, prepared once per
 * connection (`prepared`) and run synchronously on better-sqlite3: no statement builder, no step
 * driver, no row mapping but the few lines here. The same statements for both dialects are in
 * ../sql/ (Postgres runs those); rare branches (a park at the abandon limit, a put-back, the
 * completion's fence when the claim moved, surfacing) run those shared rules on this connection
 * (`SqliteDialect.runNow`), so each rule is written once. The conformance suite
 * (test/store/conformance.ts) holds both dialects to the same answers.
 */

type Statement = Database.Statement<unknown[], unknown>;

/**
 * Each connection's prepared statements by SQL text, those whose rows are objects and those whose
 * rows are arrays (`raw`); a closed connection's go with it.
 */
const statements = new WeakMap<
  Database.Database,
  { objects: Map<string, Statement>; arrays: Map<string, Statement> }
>();

/**
 * The statement for `text` on `db`, prepared on its first use and kept for the connection's life:
 * a statement is compiled by SQLite once, and every later run only binds its values. Prepared past
 * the connection's text-keyed cache (open.ts `cacheStatements`), which drizzle shares: these
 * statements are the hot paths' alone (this file's and write-statements.ts'), so nothing else can
 * switch one to raw (array) rows.
 * @param rows `arrays`: rows come back as arrays in the SELECT's column order, which the caller
 *   names. For a hot read of many columns: better-sqlite3 builds a row object one property at a
 *   time, interning each column name again for every row, and that cost more than the read itself
 *   (write-statements.ts `ITEM_FOR_WRITE`'s 16 columns: 3.3 µs per read as an object, 2.0 µs as an
 *   array named by hand; a tight loop on an in-memory copy, CPU time). @defaultValue 'objects'
 */
export function prepared(db: Database.Database, text: string, rows: 'objects' | 'arrays' = 'objects'): Statement {
  let kept = statements.get(db);
  if (!kept) statements.set(db, (kept = { objects: new Map(), arrays: new Map() }));
  const byText = kept[rows];
  let s = byText.get(text);
  if (!s) {
    s = Database.prototype.prepare.call(db, text) as Statement;
    if (rows === 'arrays') s.raw(true);
    byText.set(text, s);
  }
  return s;
}

/**
 * A statement text builder whose texts are kept by their arguments: the hot path builds each shape
 * of text once, not on every run (a claim's text is about 1 KB, built twice per claim), and the
 * same string object is handed to `prepared`, so its hash is worked out once too.
 */
function memoText<A extends Array<string | number | boolean>>(build: (...a: A) => string): (...a: A) => string {
  const known = new Map<string, string>();
  return (...a) => {
    const key = a.join(',');
    let text = known.get(key);
    if (text === undefined) known.set(key, (text = build(...a)));
    return text;
  };
}

/**
 * An item's columns in a hot read whose rows are arrays (`prepared(…, 'arrays')`), under the
 * alias `i`, in the order `itemRowOf` names them: the state load (`LOAD_ITEM`) and `updateItem`'s
 * read (write-statements.ts `ITEM_FOR_WRITE`) both start their rows with them.
 */
export const ITEM_ARRAY_COLUMNS = `i.id, i.workspace_id, i.collection_id, i.ref, i.title, i.content, i.fields, i.seq,
  i.created_at, i.updated_at, i.deleted_at, i.source_url`;

/** The ItemRow of an array row whose first 12 values are `ITEM_ARRAY_COLUMNS`. */
export function itemRowOf(r: readonly unknown[]): ItemRow {
  return {
    id: r[0] as string,
    workspaceId: r[1] as string,
    collectionId: r[2] as string,
    ref: r[3] as string,
    title: r[4] as string,
    content: r[5] as string,
    fields: r[6] as string,
    seq: r[7] as number,
    createdAt: r[8] as number,
    updatedAt: r[9] as number,
    deletedAt: r[10] as number | null,
    sourceUrl: r[11] as string | null,
  };
}

/**
 * The item, its collection and workspace in one statement (LEFT JOINs: a missing collection or
 * workspace row reads as null, and the load is null), by primary key. Its rows are arrays: 24
 * columns named by hand (`itemRowOf`, then `loadState`) instead of interned into a row object on
 * every load. Comments and links are two more reads (`STATE_COMMENTS`, `STATE_LINKS`).
 */
const LOAD_ITEM = `
  SELECT ${ITEM_ARRAY_COLUMNS},
         c.id, c.workspace_id, c.slug, c.is_system, c.schema, c.settings, c.created_at, c.deleted_at,
         w.id, w.slug, w.created_at, w.deleted_at
  FROM items i
  LEFT JOIN collections c ON c.id = i.collection_id
  LEFT JOIN workspaces w ON w.id = i.workspace_id
  WHERE i.id = @itemId`;

/** The item's live comments, oldest first (DESIGN §5: tombstones are never sent). */
const STATE_COMMENTS = `
  SELECT id, author, body, created_at AS createdAt FROM comments
  WHERE item_id = @itemId AND deleted_at IS NULL ORDER BY created_at, id`;

/**
 * The links the item's state shows, from its point of view (DESIGN §5): its parent, the items it
 * blocks, the items that block it; links to a deleted item or to an item of a deleted collection
 * are left out, so their titles are never sent.
 */
const STATE_LINKS = `
  SELECT 'parent' AS relation, t.ref AS ref, t.title AS title FROM item_links l JOIN items t ON t.id = l.target_id
    JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
    WHERE l.source_id = @itemId AND l.link_type = 'parent' AND t.deleted_at IS NULL
  UNION ALL
  SELECT 'blocks', t.ref, t.title FROM item_links l JOIN items t ON t.id = l.target_id
    JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
    WHERE l.source_id = @itemId AND l.link_type = 'blocks' AND t.deleted_at IS NULL
  UNION ALL
  SELECT 'blocked_by', s.ref, s.title FROM item_links l JOIN items s ON s.id = l.source_id
    JOIN collections sc ON sc.id = s.collection_id AND sc.deleted_at IS NULL
    WHERE l.target_id = @itemId AND l.link_type = 'blocks' AND s.deleted_at IS NULL`;

/**
 * Everything the state builder needs (Store.loadItemForEvaluation): null when the item, its
 * collection or its workspace row is missing; with `links` false the links are not read (empty).
 * Not one snapshot: a write landing between the statements bumps the job's generation, so an
 * evaluation that read a torn state is superseded and runs again.
 */
export function loadState(db: Database.Database, itemId: string, o?: { links?: boolean }): ItemForEvaluation | null {
  const r = prepared(db, LOAD_ITEM, 'arrays').get({ itemId }) as unknown[] | undefined;
  // LOAD_ITEM's columns 12-19 are the collection's, 20-23 the workspace's.
  if (!r || r[12] === null || r[20] === null) return null;
  const collection: CollectionRow = {
    id: r[12] as string,
    workspaceId: r[13] as string,
    slug: r[14] as string,
    isSystem: r[15] !== 0,
    schema: JSON.parse(r[16] as string) as CollectionRow['schema'],
    settings: JSON.parse(r[17] as string) as CollectionRow['settings'],
    createdAt: r[18] as number,
    deletedAt: r[19] as number | null,
  };
  const workspace: WorkspaceRow = {
    id: r[20] as string,
    slug: r[21] as string,
    createdAt: r[22] as number,
    deletedAt: r[23] as number | null,
  };
  const comments = prepared(db, STATE_COMMENTS).all({ itemId }) as TrailComment[];
  const links = o?.links === false ? [] : (prepared(db, STATE_LINKS).all({ itemId }) as StateLink[]);
  return { item: itemRowOf(r), collection, workspace, comments, links };
}

/**
 * The runner's one read before a call (DESIGN §7 step 6, §7.6): item, collection and workspace
 * live, the claim still held at its generation, and the lease it has left, in one statement, so a
 * lease is renewed (a write) only when less than half of it is left.
 */
const CHECK_CLAIM = `
  SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w, j.question_set AS qs,
         j.claim_token AS token, j.generation AS generation, j.lease_expires_at - @now AS lease_left
  FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
  LEFT JOIN decision_jobs j ON j.item_id = i.id AND j.question_set = @questionSet
  WHERE i.id = @itemId`;

/**
 * The LivenessRow of a claim check's array row (`CHECK_CLAIM`, `checkClaimsSql`: i, c, w, the job
 * row's set, token, generation, lease left). Rows are arrays for the reason `CLAIM_RETURNING`'s are.
 */
function livenessRowOf(r: readonly unknown[]): LivenessRow {
  return {
    i: r[0] as number | null,
    c: r[1] as number | null,
    w: r[2] as number | null,
    token: r[4] as string | null,
    generation: r[5] as number | null,
    lease_left: r[6] as number | null,
  };
}

/**
 * Store.checkClaim on SQLite: `now` is the store's clock (epoch ms).
 * @returns `leaseLeftMs` ≤ 0 once the lease ran out; -Infinity when the row is gone or holds no lease.
 */
export function checkClaim(db: Database.Database, now: number, claim: Claim): ClaimCheck {
  const got = prepared(db, CHECK_CLAIM, 'arrays').get({ now, itemId: claim.itemId, questionSet: claim.questionSet }) as
    unknown[] | undefined;
  const r = got && livenessRowOf(got);
  const left = r?.lease_left;
  return {
    liveness: livenessOf(r, claim),
    leaseLeftMs: left === null || left === undefined ? -Infinity : Number(left),
  };
}

/**
 * `CHECK_CLAIM` for several claims of one item (a co-asked call's parts, DESIGN §7.2): the item,
 * collection and workspace read once, and each claimed job's row (`@set0…`) by primary key; one
 * row per job row found, or one row with a null set when none is. One text per number of sets.
 */
const checkClaimsSql = memoText((n: number): string => {
  return `
  SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w, j.question_set AS qs,
         j.claim_token AS token, j.generation AS generation, j.lease_expires_at - @now AS lease_left
  FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
  LEFT JOIN decision_jobs j ON j.item_id = i.id AND j.question_set IN (${Array.from({ length: n }, (_, k) => `@set${k}`).join(', ')})
  WHERE i.id = @itemId`;
});

/**
 * Store.checkClaims on SQLite: each claim's `checkClaim`, in one statement when the claims are of
 * one item (`checkClaimsSql`, as a co-asked call's are), else one read per claim.
 */
export function checkClaims(db: Database.Database, now: number, claims: readonly Claim[]): ClaimCheck[] {
  const first = claims[0];
  if (!first || claims.length === 1 || claims.some((c) => c.itemId !== first.itemId))
    return claims.map((claim) => checkClaim(db, now, claim));
  const values: Record<string, string | number> = { now, itemId: first.itemId };
  claims.forEach((c, k) => (values[`set${k}`] = c.questionSet));
  const got = prepared(db, checkClaimsSql(claims.length), 'arrays').all(values) as unknown[][];
  const base = got[0];
  return claims.map((claim) => {
    const found = got.find((g) => g[3] === claim.questionSet);
    const r = found
      ? livenessRowOf(found)
      : base && { i: base[0] as number | null, c: base[1] as number | null, w: base[2] as number | null };
    const left = r?.lease_left;
    return {
      liveness: livenessOf(r, claim),
      leaseLeftMs: left === null || left === undefined ? -Infinity : Number(left),
    };
  });
}

/**
 * The liveness of an item without a claim (DESIGN §7 step 6): item, collection and workspace not
 * deleted, one statement by primary key. With a claim the read is `CHECK_CLAIM`.
 */
const ITEM_LIVENESS = `
  SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w
  FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
  WHERE i.id = @itemId`;

/** Store.checkLiveness on SQLite: the claim's liveness (`checkClaim`) when given, else the item's alone. */
export function checkLiveness(db: Database.Database, now: number, itemId: string, claim?: Claim): Liveness {
  if (claim) return checkClaim(db, now, claim).liveness;
  return livenessOf(prepared(db, ITEM_LIVENESS).get({ itemId }) as LivenessRow | undefined);
}

/**
 * The idempotency read for `n` keys (DESIGN §7 step 5): one exact-key term per key, ORed, each a
 * seek on item_decisions_idem_uq (a row-value `IN (VALUES …)` made SQLite build a temporary table:
 * 61 µs against 33 for three keys, measured). One text, so one prepared statement, per `n`.
 */
const answeredKeysSql = memoText((n: number): string => {
  const term = '(question_key = ? AND state_hash = ? AND question_hash = ? AND state_version = ?)';
  return `SELECT question_key AS k FROM item_decisions WHERE item_id = ? AND question_set = ? AND (${Array.from({ length: n }, () => term).join(' OR ')})`;
});

/** Store.answeredKeys on SQLite: which wanted keys already have a row at exactly that key. */
export function answeredKeys(
  db: Database.Database,
  itemId: string,
  questionSet: string,
  keys: readonly AnswerKey[],
): Set<string> {
  if (keys.length === 0) return new Set();
  const values: unknown[] = [itemId, questionSet];
  for (const k of keys) values.push(k.questionKey, k.stateHash, k.questionHash, k.stateVersion);
  const hits = prepared(db, answeredKeysSql(keys.length)).all(...values) as Array<{ k: string }>;
  return new Set(hits.map((h) => h.k));
}

/**
 * The idempotency read of a co-asked group (DESIGN §7 step 5, §7.2): `answeredKeysSql` with the
 * set in each term, so the group's sets are one statement, a walk of the item's entries of
 * item_decisions_idem_uq (as `answeredKeysSql` walks the item's and set's); `counts[i]` keys of
 * the i-th set. One text per list of counts.
 */
const answeredKeysOfSetsSql = memoText((...counts: number[]): string => {
  const term = '(question_set = ? AND question_key = ? AND state_hash = ? AND question_hash = ? AND state_version = ?)';
  const terms = counts.flatMap((n) => Array.from({ length: n }, () => term));
  return `SELECT question_set AS s, question_key AS k FROM item_decisions WHERE item_id = ? AND (${terms.join(' OR ')})`;
});

/** Store.answeredKeysOfSets on SQLite: `answeredKeys` of each set, in one statement when there are several (`answeredKeysOfSetsSql`). */
export function answeredKeysOfSets(
  db: Database.Database,
  itemId: string,
  wanted: ReadonlyArray<{ questionSet: string; keys: readonly AnswerKey[] }>,
): Array<Set<string>> {
  const asked = wanted.filter((w) => w.keys.length > 0);
  if (asked.length <= 1) return wanted.map((w) => answeredKeys(db, itemId, w.questionSet, w.keys));
  const values: unknown[] = [itemId];
  for (const w of asked)
    for (const k of w.keys) values.push(w.questionSet, k.questionKey, k.stateHash, k.questionHash, k.stateVersion);
  const hits = prepared(db, answeredKeysOfSetsSql(...asked.map((w) => w.keys.length))).all(...values) as Array<{
    s: string;
    k: string;
  }>;
  return wanted.map((w) => new Set(hits.filter((h) => h.s === w.questionSet).map((h) => h.k)));
}

// ------------------------------------------------------------------ the claim and the finish

/**
 * What the job writes use beside their arguments: the connection, the store's context (its
 * dialect runs the cold rules written once for both dialects, `SqliteDialect.runNow`) and the
 * claim token source.
 */
export interface JobWriter {
  readonly db: Database.Database;
  readonly c: SqlContext;
  readonly d: SqliteDialect;
  readonly newToken: () => string;
}

/**
 * A store's claim tokens (DESIGN §3: unique per claim): 16 random bytes drawn once, base64url, then
 * a counter in base 36, e.g. `Jx1…Qw.1a`: unique across processes and stores by the random part,
 * within one by the counter. The token fences outcomes (it only has to differ from every other
 * claim's); 16 fresh random bytes per claim cost about 4 % of a 0 ms evaluation's CPU (profile of
 * scripts/cpu-per-job.ts).
 */
export function claimTokens(): () => string {
  const prefix = `${randomBytes(16).toString('base64url')}.`;
  let n = 0;
  return () => prefix + (++n).toString(36);
}

/** Each connection's one transaction function (better-sqlite3 makes a SAVEPOINT of it inside an open transaction). */
const transactions = new WeakMap<Database.Database, Database.Transaction<(run: () => unknown) => unknown>>();

/**
 * Runs `fn` in one IMMEDIATE transaction on the store's connection, with "now" read once after
 * the write lock is held (the store's clock, epoch ms), and records the storage outcome for
 * /healthz as context.ts `writeTx` does. `fn` must not await. One try: SQLITE_BUSY is retried by
 * the caller (sqlite-store.ts `onConnection`), which re-runs the whole call.
 * @throws SQLITE_BUSY after the busy timeout, and whatever `fn` throws (after the rollback).
 */
export function inWriteTx<T>(ctx: SqliteContext, fn: (now: number) => T): T {
  const db = ctx.db.$client;
  let tx = transactions.get(db);
  if (!tx) transactions.set(db, (tx = db.transaction((run: () => unknown) => run())));
  try {
    const r = tx.immediate(() => fn(ctx.clock.now())) as T;
    ctx.storage.problem = null;
    return r;
  } catch (err) {
    const problem = storageProblemOf(err);
    if (problem) ctx.storage.problem = problem;
    throw err;
  }
}

/**
 * The claim row's columns a claim reads (`toClaim`, `backsOff`), in the order `claimedRowOf` names
 * them: the claim statements' rows are arrays (`prepared(…, 'arrays')`), since a row object costs
 * better-sqlite3 an interned name per column per row (`prepared`).
 */
const CLAIM_RETURNING = `RETURNING item_id, question_set, workspace_id, priority, generation, enqueued_at, not_before,
  claimed_by, claim_token, lease_expires_at, attempts, refusals, abandons, defers`;

/**
 * The RawJob of a claim statement's array row (`CLAIM_RETURNING`'s 14 columns); the row's other
 * columns, which a claim does not read, are absent, as they were from the row object.
 */
function claimedRowOf(r: readonly unknown[]): RawJob {
  return {
    item_id: r[0] as string,
    question_set: r[1] as string,
    workspace_id: r[2] as string,
    priority: r[3] as number,
    generation: r[4] as number,
    enqueued_at: r[5] as number,
    not_before: r[6] as number,
    claimed_by: r[7] as string | null,
    claim_token: r[8] as string | null,
    lease_expires_at: r[9] as number | null,
    attempts: r[10] as number,
    refusals: r[11] as number,
    abandons: r[12] as number,
    defers: r[13] as number,
  } as RawJob;
}

/** A fresh claim's SET: the claimant, its token, the lease, the attempt counted. not_before is left alone. */
const FRESH_SET = `claimed_by = @workerId, claim_token = @token, lease_expires_at = @now + @leaseMs, attempts = attempts + 1`;

/**
 * The SET of a claim that finds the row still under an expired claim (its claimant died without an
 * outcome): `FRESH_SET`, the abandon counted, and the abandon backoff (DESIGN §3 "Abandons"):
 * `not_before = max(not_before, dead lease's end + min(1 h, lease × 2^(abandons − 1)))`, abandons
 * counting this one (SET reads the old row, so `abandons` here is the count before it). Kept out of
 * the fresh claim: writing not_before, even to its own value, makes SQLite rewrite the row's
 * `decision_jobs_claim_idx` entry on every claim.
 */
const ABANDON_SET = `${FRESH_SET}, abandons = abandons + 1,
  not_before = max(not_before, lease_expires_at + min(${ABANDON_BACKOFF_CAP_MS}, @leaseMs << min(abandons, 7)))`;

/**
 * The claim's candidate: the key of the first claimable job in claim order, as ../sql/jobs.ts
 * `claimCandidateSql` says it (the forced walk of decision_jobs_claim_order_idx, the sets cooling
 * off `@skip0…`, live work only, and the co-asking `@groupSet0`/`@groupFirst0…` pairs whose first
 * set is claimed for the whole group). One text per shape of request.
 */
function candidateSql(skipped: number, pairs: number, liveOnly: boolean): string {
  const list = (n: number, f: (i: number) => string, sep: string) =>
    Array.from({ length: n }, (_, i) => f(i)).join(sep);
  const skip = skipped ? ` AND j.question_set NOT IN (${list(skipped, (i) => `@skip${i}`, ', ')})` : '';
  const live = liveOnly ? ' AND j.priority = 0' : '';
  const group = pairs
    ? ` AND NOT EXISTS (SELECT 1 FROM decision_jobs p WHERE p.item_id = j.item_id
        AND (${list(pairs, (i) => `(j.question_set = @groupSet${i} AND p.question_set = @groupFirst${i})`, ' OR ')})
        AND p.state = 'owed' AND p.not_before <= @now AND (p.lease_expires_at IS NULL OR p.lease_expires_at <= @now)${live.replace('j.', 'p.')})`
    : '';
  return `SELECT j.item_id, j.question_set FROM decision_jobs j INDEXED BY decision_jobs_claim_order_idx
    WHERE j.state = 'owed' AND j.not_before <= @now AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= @now)
      AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL)${skip}${live}${group}
    ORDER BY j.priority, j.fair_tag, j.enqueued_at, j.item_id, j.question_set LIMIT 1`;
}

/**
 * The claim, in two texts on the same candidate: the fresh claim (`FRESH_SET`), which takes the
 * candidate only when it carries no claim, and, when that took nothing, the abandon claim
 * (`ABANDON_SET`), which takes it only when it still carries an expired one. In one IMMEDIATE
 * transaction the candidate is the same row both times; the common claim is one statement.
 */
const claimSql = memoText((abandoned: boolean, skipped: number, pairs: number, liveOnly: boolean): string => {
  return `UPDATE decision_jobs SET ${abandoned ? ABANDON_SET : FRESH_SET}
    WHERE (item_id, question_set) = (${candidateSql(skipped, pairs, liveOnly)}) AND claim_token IS ${abandoned ? 'NOT NULL' : 'NULL'}
    ${CLAIM_RETURNING}`;
});

/**
 * Store.claimNextJob on SQLite, inside the caller's write transaction (`inWriteTx`): the claim
 * (`claimSql`), then, for the claimed job, its co-asked siblings (`claimSiblings`). A job found at
 * the abandon limit is parked under the fresh claim's token and the next one tried; a claim that
 * counted an abandon whose backoff still runs is put back with its partners (../sql/jobs.ts
 * `backsOff`, `putBack`, `park`: the rules are written once there and run here on the same
 * transaction).
 */
export function claimNext(w: JobWriter, now: number, r: ClaimRequest): Claim | null {
  const skipSets = r.skipSets ?? [];
  const pairs = firstOfGroupPairs(r.coAsk);
  const liveOnly = r.liveOnly === true;
  const values: Record<string, string | number> = { workerId: r.workerId, now, leaseMs: r.leaseMs, token: '' };
  skipSets.forEach((s, i) => (values[`skip${i}`] = s));
  pairs.forEach(([set, first], i) => {
    values[`groupSet${i}`] = set;
    values[`groupFirst${i}`] = first;
  });
  for (;;) {
    values.token = w.newToken();
    const got = (prepared(w.db, claimSql(false, skipSets.length, pairs.length, liveOnly), 'arrays').get(values) ??
      prepared(w.db, claimSql(true, skipSets.length, pairs.length, liveOnly), 'arrays').get(values)) as
      unknown[] | undefined;
    if (!got) return null;
    const row = claimedRowOf(got);
    if (row.abandons >= r.abandonLimit) {
      w.d.runNow(park(w.c, now, row.item_id, row.question_set, abandonReason(row.abandons), row.claim_token!), now);
      continue;
    }
    if (backsOff(row, r.leaseMs)) {
      w.d.runNow(putBack(row, r.coAsk?.[row.question_set], now), now);
      continue;
    }
    const claim = toClaim(row);
    const partners = r.coAsk?.[claim.questionSet] ?? [];
    if (partners.length === 0) return claim;
    const coAsked = claimSiblings(w, now, claim, partners, r);
    return coAsked.length ? { ...claim, coAsked } : claim;
  }
}

/**
 * The sibling claim (co-asking, DESIGN §7.2): the item's other owed jobs in `@set0…` that are
 * claimable now and below the abandon limit, under the claimed job's lease, by primary key (no
 * sub-select: SQLite has no row locks to skip). Fresh and abandoned rows in two texts, as the claim;
 * an abandoned sibling's abandon is counted but it gets no backoff: it runs with its group
 * (../sql/jobs.ts `claimSiblingJobs`).
 */
const siblingSql = memoText((abandoned: boolean, n: number): string => {
  const sets = Array.from({ length: n }, (_, i) => `@set${i}`).join(', ');
  return `UPDATE decision_jobs SET ${FRESH_SET}${abandoned ? ', abandons = abandons + 1' : ''}
    WHERE item_id = @itemId AND question_set IN (${sets}) AND state = 'owed' AND not_before <= @now
      AND (lease_expires_at IS NULL OR lease_expires_at <= @now) AND abandons < @abandonLimit
      AND claim_token IS ${abandoned ? 'NOT NULL' : 'NULL'}
    ${CLAIM_RETURNING}`;
});

/**
 * Store.claimSiblingJobs on SQLite, inside the caller's write transaction: the siblings claimed
 * under one fresh token, an abandoned one too (its abandon counted).
 * @returns the sibling claims in set-name order (empty when none is claimable).
 */
export function claimSiblings(
  w: JobWriter,
  now: number,
  claim: Claim,
  sets: readonly string[],
  o: { leaseMs: number; abandonLimit: number },
): Claim[] {
  const wanted = [...new Set(sets)].filter((s) => s !== claim.questionSet).sort();
  if (wanted.length === 0) return [];
  const values: Record<string, string | number> = {
    itemId: claim.itemId,
    workerId: claim.claimedBy,
    token: w.newToken(),
    now,
    leaseMs: o.leaseMs,
    abandonLimit: o.abandonLimit,
  };
  wanted.forEach((s, i) => (values[`set${i}`] = s));
  const got = prepared(w.db, siblingSql(false, wanted.length), 'arrays').all(values) as unknown[][];
  // Each wanted set is one row: when the fresh claim took them all, the abandon claim cannot match
  // (they now hold a live lease), so its statement is skipped (a third of the claim UPDATEs at 16 slots).
  if (got.length < wanted.length)
    got.push(...(prepared(w.db, siblingSql(true, wanted.length), 'arrays').all(values) as unknown[][]));
  return got.map((r) => toClaim(claimedRowOf(r))).sort((a, b) => (a.questionSet < b.questionSet ? -1 : 1));
}

/**
 * The completion (DESIGN §3.4): the row deleted when the claim still holds it at its generation,
 * the common case; when this deletes nothing, the fence (../sql/jobs.ts `completionFenceSteps`)
 * tells `lost` from `superseded`.
 */
const COMPLETE = `DELETE FROM decision_jobs
  WHERE item_id = @itemId AND question_set = @questionSet AND claim_token = @token AND generation = @generation`;

/** A settled daily-cap reservation goes (DESIGN §10.3): its spend is recorded in the same transaction. */
const SETTLE_RESERVATION = `DELETE FROM decision_spend_reservations WHERE id = @id`;

/**
 * One call's spend added to its hour's row (DESIGN §7 step 7), the hour floored in SQL (bound
 * numbers are REAL in better-sqlite3, so the CAST floors the division).
 */
const RECORD_SPEND = `
  INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
  VALUES (CAST(@now / ${HOUR_MS} AS bigint) * ${HOUR_MS}, @questionSet, @provider, @model, @outcome, @calls,
          @input, @output, @cacheRead, @cacheWrite)
  ON CONFLICT (hour, question_set, provider, model, outcome, shard) DO UPDATE SET
    calls = decision_spend.calls + excluded.calls,
    input_tokens = decision_spend.input_tokens + excluded.input_tokens,
    output_tokens = decision_spend.output_tokens + excluded.output_tokens,
    cache_read_tokens = decision_spend.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = decision_spend.cache_write_tokens + excluded.cache_write_tokens`;

/**
 * The insert of `n` answers of one call (DESIGN §2): a conflict on the idempotency key inserts
 * nothing (the same state answered again), so a re-run never doubles an answer. With `returning`,
 * the keys inserted, which surfacing needs; without, `changes` counts them and no row is built. One
 * text per `n` and `returning`.
 */
const insertAnswersSql = memoText((n: number, returning: boolean): string => {
  const row = `(${Array.from({ length: 20 }, () => '?').join(', ')})`;
  return `INSERT INTO item_decisions (workspace_id, item_id, question_set, question_key, kind, answer, confidence,
      provider, model, state_hash, question_hash, state_version, state_parts, input_tokens, output_tokens, item_seq,
      state_truncated, rationale, fingerprint_context, evaluated_at)
    VALUES ${Array.from({ length: n }, () => row).join(', ')}
    ON CONFLICT DO NOTHING${returning ? ' RETURNING question_key AS k' : ''}`;
});

/**
 * The surfacing memory of `n` watched keys of one (item, set) (../sql/surfacing.ts `readMemory`:
 * each key's latest answer, latest change and latest verdict) and the enabled event targets, in
 * one statement: one row per key, each latest row a seek on its table's key index
 * (`ORDER BY id DESC LIMIT 1`, `max(id)`), the targets' count an uncorrelated subquery SQLite runs
 * once. The shared read (`memoryShape`: `id IN (… GROUP BY question_key)` per table, then the
 * targets' read and, with a target, the item's row) cost 2.5× this in CPU; on SQLite the IMMEDIATE
 * transaction already serialises writers, so no row is read to lock the item. One text per `n`.
 */
const surfacingMemorySql = memoText((n: number): string => {
  const key = (i: number) => `(SELECT @k${i} AS k,
      (SELECT answer FROM item_decisions WHERE item_id = @itemId AND question_set = @questionSet AND question_key = @k${i} ORDER BY id DESC LIMIT 1) AS answer,
      (SELECT surfaced FROM surfacing_changes WHERE item_id = @itemId AND question_set = @questionSet AND question_key = @k${i} ORDER BY id DESC LIMIT 1) AS surfaced,
      v.verdict AS verdict, v.value AS value,
      (SELECT count(*) FROM event_targets WHERE disabled_at IS NULL) AS targets
    FROM (SELECT 1) LEFT JOIN human_verdicts v ON v.id = (SELECT max(id) FROM human_verdicts
      WHERE item_id = @itemId AND question_set = @questionSet AND question_key = @k${i}))`;
  return `SELECT * FROM ${Array.from({ length: n }, (_, i) => key(i)).join(' UNION ALL SELECT * FROM ')}`;
});

/**
 * ../sql/events.ts `watchSurfacing` on this connection, inside the caller's write transaction:
 * the answers that could move a key's surfacing (`watchedAnswers`) and their memory, read in one
 * statement (`surfacingMemorySql`). Null when no row is watched.
 * @throws TypeError when the rows span more than one (item, set).
 */
function watchSurfacingNow(
  w: JobWriter,
  now: number,
  list: readonly NewDecision[],
  s: SurfacingContext,
): SurfacingWatch | null {
  const next = watchedAnswers(list, s);
  if (next.size === 0) return null;
  const first = list[0]!;
  const values: Record<string, string> = { itemId: first.itemId, questionSet: first.questionSet };
  let n = 0;
  for (const k of next.keys()) values[`k${n++}`] = k;
  // Rows are arrays for the reason CLAIM_RETURNING's are: k, answer, surfaced, verdict, value, targets.
  const got = prepared(w.db, surfacingMemorySql(n), 'arrays').all(values) as unknown[][];
  const memory = new Map<string, KeyMemory>();
  for (const r of got)
    memory.set(r[0] as string, {
      answer: r[1] as string | null,
      surfaced: r[2] === null ? null : r[2] !== 0,
      verdict: r[3] === null ? null : { verdict: r[3] as VerdictKind, value: r[4] as string | null },
    });
  return {
    nowMs: now,
    context: s,
    workspaceId: first.workspaceId,
    itemId: first.itemId,
    questionSet: first.questionSet,
    targets: got[0]![5] as number,
    memory,
    next,
  };
}

/**
 * A key's surfacing move (DESIGN §16.2): its change row, and its `decision.surfaced` /
 * `decision.cleared` event once per enabled target in url order. The rows ../sql/surfacing.ts
 * `recordMove` writes on the other dialects, written here as plain text: that shared rule builds
 * its statements with drizzle and runs them through the step driver, which cost more CPU than the
 * two inserts (the job path's only drizzle statements at 16 slots, one move per surfacing set's
 * first answer). Booleans are 1 and 0, as SQLite stores them.
 */
const INSERT_CHANGE = `
  INSERT INTO surfacing_changes (workspace_id, item_id, question_set, question_key, surfaced, flip, probability, cause, state_hash, changed_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const QUEUE_EVENT = `
  INSERT INTO decision_events (target_url, event_id, workspace_id, item_id, type, payload, created_at, attempts, next_attempt_at)
  SELECT url, ?, ?, ?, ?, ?, ?, 0, ? FROM event_targets WHERE disabled_at IS NULL ORDER BY url`;

/**
 * After the insert: each move of ../sql/events.ts `surfacingMoves` (`inserted`: the stored keys the
 * insert returned) recorded in key order (`INSERT_CHANGE`, `QUEUE_EVENT`), inside the caller's
 * write transaction. @returns the event rows queued (moves × enabled targets).
 */
function queueSurfacing(w: JobWriter, watch: SurfacingWatch, inserted: ReadonlySet<string>): number {
  let queued = 0;
  for (const m of surfacingMoves(watch, inserted)) {
    prepared(w.db, INSERT_CHANGE).run(
      m.workspaceId,
      m.itemId,
      m.questionSet,
      m.questionKey,
      m.surfaced ? 1 : 0,
      m.flip ? 1 : 0,
      m.probability,
      m.cause,
      m.stateHash,
      watch.nowMs,
    );
    if (watch.targets === 0) continue;
    const e = moveEvent(w.c.newId(), watch.nowMs, m);
    queued += prepared(w.db, QUEUE_EVENT).run(
      e.eventId,
      m.workspaceId,
      m.itemId,
      e.type,
      e.payload,
      watch.nowMs,
      watch.nowMs,
    ).changes;
  }
  return queued;
}

/**
 * Stores one call's answers at `now`; with `surfacing`, the surfacing events they move are queued
 * in the same transaction (`watchSurfacingNow` before the insert, which reads only when a watched
 * noul is among them, and `queueSurfacing` after it).
 * @returns rows inserted.
 */
function insertAnswers(w: JobWriter, now: number, list: readonly NewDecision[], surfacing?: SurfacingContext): number {
  if (list.length === 0) return 0;
  const watch = surfacing ? watchSurfacingNow(w, now, list, surfacing) : null;
  const values: unknown[] = [];
  for (const r of list) {
    values.push(
      r.workspaceId,
      r.itemId,
      r.questionSet,
      r.questionKey,
      r.kind,
      r.answer,
      r.confidence,
      r.provider,
      r.model,
      r.stateHash,
      r.questionHash,
      r.stateVersion,
      r.stateParts,
      r.inputTokens,
      r.outputTokens,
      r.itemSeq,
      r.stateTruncated ? 1 : 0,
      r.rationale ?? null,
      r.fingerprintContext ?? null,
      now,
    );
  }
  if (!watch) return prepared(w.db, insertAnswersSql(list.length, false)).run(...values).changes;
  const inserted = prepared(w.db, insertAnswersSql(list.length, true)).all(...values) as Array<{ k: string }>;
  queueSurfacing(w, watch, new Set(inserted.map((r) => r.k)));
  return inserted.length;
}

/**
 * Store.finishJob on SQLite, inside the caller's write transaction: the last call's answers
 * (stored whatever the fence says: they were paid for), the completion (`COMPLETE`, the fence only
 * when it deleted nothing), the slot's next claim (`claimNext`), then the reservation settled and
 * the spend recorded.
 */
// The throughput count (DESIGN §2 job_throughput): one row per (minute, outcome), updated in place,
// so a group commit adds one statement per outcome it holds, not one per job.
const COUNT_OUTCOMES = `
  INSERT INTO job_throughput (minute, outcome, jobs) VALUES ((CAST(:now / 60000 AS INTEGER) * 60000), :outcome, :jobs)
  ON CONFLICT (minute, outcome, shard) DO UPDATE SET jobs = job_throughput.jobs + excluded.jobs`;

/** Adds the applied finishes among `done` to the current minute's throughput, by outcome (`appliedByOutcome`). */
function countFinished(w: JobWriter, now: number, done: ReadonlyArray<{ finish: JobFinish; result: OutcomeResult }>) {
  const jobs = appliedByOutcome(done.map((d) => ({ finish: d.finish, done: d })));
  for (const [outcome, n] of jobs) prepared(w.db, COUNT_OUTCOMES).run({ now, outcome, jobs: n });
}

/** `finish` with its throughput count, for a transaction that holds this one finish. */
export function finishOne(w: JobWriter, now: number, claim: Claim, f: JobFinish): FinishedJob {
  const finished = finish(w, now, claim, f);
  countFinished(w, now, [{ finish: f, result: finished.result }]);
  return finished;
}

/**
 * The lease extended from now (DESIGN §7.6), fenced by the claim token: a claim lost to another
 * claimant (or completed) is left alone and reported lost. By primary key.
 */
const RENEW_LEASE = `UPDATE decision_jobs SET lease_expires_at = @now + @leaseMs
  WHERE item_id = @itemId AND question_set = @questionSet AND claim_token = @token`;

/** Store.renewLease on SQLite, inside the caller's write transaction. @returns false when the claim was lost. */
export function renewLease(w: JobWriter, now: number, claim: Claim, leaseMs: number): boolean {
  const values = { now, leaseMs, itemId: claim.itemId, questionSet: claim.questionSet, token: claim.claimToken };
  return prepared(w.db, RENEW_LEASE).run(values).changes === 1;
}

/**
 * Store.completeJob (and dropJob, `outcome` drop) on SQLite, inside the caller's write transaction:
 * the completion without answers (`COMPLETE`; the fence only when it deleted nothing), counted in
 * the minute's throughput when applied.
 */
export function completeJob(w: JobWriter, now: number, claim: Claim, outcome: FinishOutcome): OutcomeResult {
  const result = complete(w, now, claim);
  if (result === 'applied') prepared(w.db, COUNT_OUTCOMES).run({ now, outcome, jobs: 1 });
  return result;
}

/** The fenced completion: `COMPLETE`, and when it deleted nothing the shared fence (`completionFenceSteps`). */
function complete(w: JobWriter, now: number, claim: Claim): OutcomeResult {
  const done = prepared(w.db, COMPLETE).run({
    itemId: claim.itemId,
    questionSet: claim.questionSet,
    token: claim.claimToken,
    generation: claim.generation,
  }).changes;
  return done === 1 ? 'applied' : w.d.runNow(completionFenceSteps(w.c, claim), now);
}

/**
 * Store.insertDecisions on SQLite, inside the caller's write transaction: answers stored on their
 * own (a co-asked part's answers, or a failed finish's), with their surfacing events when given.
 * @returns rows inserted (a conflict on the idempotency key inserts nothing).
 * @throws TypeError when `surfacing` is given and the rows span more than one (item, set).
 */
export function insertDecisions(
  w: JobWriter,
  now: number,
  list: readonly NewDecision[],
  surfacing?: SurfacingContext,
): number {
  return insertAnswers(w, now, list, surfacing);
}

/**
 * One finish: its answers, its fenced completion, its next claim, its reservation settled, and its
 * spend, recorded at once or, with `spend`, added to it for the transaction to record in one
 * upsert per hour row (`recordSpendSums`).
 */
function finish(w: JobWriter, now: number, claim: Claim, f: JobFinish, spend?: SpendSums): FinishedJob {
  const a = f.answers;
  const answersStored = a ? insertAnswers(w, now, a.decisions, a.surfacing) : 0;
  const result = complete(w, now, claim);
  const next = f.claimNext ? claimNext(w, now, f.claimNext) : null;
  if (a) {
    if (a.reservationId !== null) prepared(w.db, SETTLE_RESERVATION).run({ id: a.reservationId });
    if (spend) addSpend(spend, a.spend);
    else recordSpend(w, now, spendValues(a.spend));
  }
  return { result, answersStored, next };
}

/** One hour row's increments (`RECORD_SPEND`'s parameters but `now`). */
function recordSpend(w: JobWriter, now: number, v: SpendValues): void {
  prepared(w.db, RECORD_SPEND).run({ now, ...v });
}

/**
 * A group commit's spend by hour row (set, provider, model, outcome; the hour is the
 * transaction's): the entries of one transaction add to the same few rows, so their sums are
 * written in one upsert per row instead of one per entry (a group of 16 slots of two sets: 2
 * upserts instead of about 30). The row's totals are the same; only the number of statements that
 * reach them changes.
 */
type SpendSums = Map<string, SpendValues>;

function addSpend(sums: SpendSums, r: SpendRecord): void {
  // NUL cannot occur in a set name, provider, model or outcome word, so the key is unambiguous.
  const key = `${r.questionSet}\0${r.provider}\0${r.model}\0${r.outcome}`;
  const had = sums.get(key);
  if (!had) {
    sums.set(key, spendValues(r));
    return;
  }
  const u = r.usage;
  had.calls += r.calls;
  had.input += u.inputTokens;
  had.output += u.outputTokens;
  had.cacheRead += u.cacheReadTokens;
  had.cacheWrite += u.cacheWriteTokens;
}

function recordSpendSums(w: JobWriter, now: number, sums: SpendSums): void {
  for (const v of sums.values()) recordSpend(w, now, v);
}

/**
 * Store.finishJobs on SQLite (group commit, DESIGN §10.6): every entry's `finish` in one IMMEDIATE
 * transaction with no savepoint (`finishAll`), the common case; when an entry's statements throw,
 * that transaction is rolled back whole and the batch runs again in a second one, each entry in its
 * own savepoint (`finishMany`), so only the failing entry is undone and reports its error. Why not
 * savepoints every time: while a savepoint is open, SQLite copies each page a statement first
 * changes into the statement journal so that ROLLBACK TO can restore it; with a savepoint per entry
 * every finish paid that copy for the pages it shared with the entry before it (measured at 16
 * slots, CPU µs per call: answers insert 146 → 91, completion DELETE 98 → 32, spend upsert 40 → 25).
 * A failure of the transaction itself (BEGIN, COMMIT) is not retried: every entry gets it, as before.
 * @returns what `finishMany` would: nothing of the first try is left when the second runs.
 * @throws SQLITE_BUSY (the caller retries the whole call: sqlite-store.ts `onConnection`), and a
 * transaction's error (nothing of any entry written).
 */
export function finishJobs(
  ctx: SqliteContext,
  w: JobWriter,
  entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>,
): JobFinishResult[] {
  try {
    return inWriteTx(ctx, (now) => finishAll(w, now, entries));
  } catch (err) {
    if (!(err instanceof EntryThrew)) throw err;
    if (isBusy(err.error)) throw err.error;
    return inWriteTx(ctx, (now) => finishMany(w, now, entries));
  }
}

/** An entry's own statement threw inside `finishAll` (not BEGIN or COMMIT): the batch is worth a second try with savepoints. */
class EntryThrew extends Error {
  constructor(readonly error: unknown) {
    super('a group commit entry threw');
  }
}

/**
 * Every entry's `finish`, their spend summed per hour row (`SpendSums`) and the throughput count,
 * no savepoint.
 * @throws EntryThrew wrapping the first error of an entry's statements (its transaction then rolls back).
 */
function finishAll(
  w: JobWriter,
  now: number,
  entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>,
): JobFinishResult[] {
  let done;
  const spend: SpendSums = new Map();
  try {
    done = entries.map((e) => ({ finish: e.finish, finished: finish(w, now, e.claim, e.finish, spend) }));
    recordSpendSums(w, now, spend);
  } catch (error) {
    throw new EntryThrew(error);
  }
  countFinished(
    w,
    now,
    done.map((d) => ({ finish: d.finish, result: d.finished.result })),
  );
  return done.map((d) => ({ ok: true, finished: d.finished }));
}

/**
 * The second try of `finishJobs`, inside the caller's write transaction:
 * each entry's `finish` in its own savepoint, so an entry whose statements throw is undone alone and
 * reports its error while the others commit; when the savepoint itself is gone (SQLite rolled the
 * whole transaction back on an I/O error), the call throws and nothing of any entry is written.
 * @returns one result per entry, in the order given.
 */
function finishMany(
  w: JobWriter,
  now: number,
  entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>,
): JobFinishResult[] {
  const results: JobFinishResult[] = [];
  for (const e of entries) {
    prepared(w.db, 'SAVEPOINT finish_entry').run();
    try {
      const finished = finish(w, now, e.claim, e.finish);
      prepared(w.db, 'RELEASE SAVEPOINT finish_entry').run();
      results.push({ ok: true, finished });
    } catch (error) {
      try {
        prepared(w.db, 'ROLLBACK TO SAVEPOINT finish_entry').run();
        prepared(w.db, 'RELEASE SAVEPOINT finish_entry').run();
      } catch {
        throw error;
      }
      results.push({ ok: false, error });
    }
  }
  countFinished(
    w,
    now,
    results.flatMap((r, i) => (r.ok ? [{ finish: entries[i]!.finish, result: r.finished.result }] : [])),
  );
  return results;
}
