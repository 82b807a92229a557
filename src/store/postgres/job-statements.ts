import type { StateLink, TrailComment } from '../../decision/state.js';
import type { ItemRow } from '../../tracker-rows.js';
import type {
  AnswerKey,
  Claim,
  ClaimCheck,
  ClaimRequest,
  ItemForEvaluation,
  JobFinish,
  NewDecision,
} from '../store.js';
import { livenessOf, type LivenessRow } from '../sql/decisions.js';
import type { WorkspaceRow } from '../tracker-reads.js';
import {
  ABANDON_BACKOFF_CAP_MS,
  abandonReason,
  boundError,
  toClaim,
  toCollectionRow,
  type RawJob,
} from '../write-rules.js';
import { firstOfGroupPairs } from '../sql/jobs.js';
import { moveEvent, type MemoryRow, type SurfacingMove } from '../sql/surfacing.js';
import { MINUTE_MS } from '../sql/throughput.js';
import { JOB_OUTCOMES } from '../throughput.js';

/**
 * The job's hot path on PostgreSQL (DESIGN §3.1, §13): the claim, the state read and the finish,
 * each ONE statement sent as a named prepared statement, so a steady-state evaluation costs a few
 * round trips (the state read, the idempotency read, the liveness read, the finish with the next
 * claim) and no BEGIN/COMMIT (a set that surfaces adds one transaction around the finish, see
 * pg-store.ts `finishJob`). Each statement's text is fixed at load time: lists (answers, skipped
 * sets, co-asking pairs) travel as array parameters, so one text serves every count. The server
 * keeps one generic plan per connection for most of them; the fused finish-and-claim is planned on
 * every call, because its generic plan costs more than its custom ones (DESIGN §3.5 "The claim's
 * plan on Postgres").
 *
 * Lock order, the same in every statement that takes a job row (so two of them never wait on each
 * other in a cycle): the finished job's own row (held by this claim already), then the claimed
 * rows, each taken with `FOR UPDATE … SKIP LOCKED` (a claim never waits on a row), and the shared
 * spend row last, once everything else of the statement is written. The data-modifying CTEs are
 * chained (each reads the one before it), so PostgreSQL runs them in that order.
 */

/** Runs one named prepared statement: its rows, and the rows it changed. */
export type PgQuery = (
  name: string,
  text: string,
  values: readonly unknown[],
) => Promise<{ rows: Array<Record<string, unknown>>; rowCount: number }>;

/** What the statements need: how to send one, and the test-only clock offset (DESIGN §2). */
export interface PgJobContext {
  readonly query: PgQuery;
  /** Test-only milliseconds added to the database clock; 0 in production. Read at each statement. */
  readonly clockOffsetMs: () => number;
  /** A fresh random claim token. */
  readonly newToken: () => string;
}

/** "Now" in epoch ms from the database clock (the statement's transaction start) plus the test offset, parameter $1 of every statement here. */
const NOW = '(floor(extract(epoch from now()) * 1000)::bigint + $1::bigint)';

// ------------------------------------------------------------------------------------ the state

/** The state read's links column: the links the state shows, as a JSON array (see `loadStateSql`). */
const STATE_LINKS_JSON = `       coalesce((SELECT json_agg(json_build_object('relation', l.relation, 'ref', l.ref, 'title', l.title)) FROM (
           SELECT 'parent' AS relation, t.ref, t.title FROM item_links k JOIN items t ON t.id = k.target_id
             JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
             WHERE k.source_id = i.id AND k.link_type = 'parent' AND t.deleted_at IS NULL
           UNION ALL
           SELECT 'blocks', t.ref, t.title FROM item_links k JOIN items t ON t.id = k.target_id
             JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
             WHERE k.source_id = i.id AND k.link_type = 'blocks' AND t.deleted_at IS NULL
           UNION ALL
           SELECT 'blocked_by', s.ref, s.title FROM item_links k JOIN items s ON s.id = k.source_id
             JOIN collections sc ON sc.id = s.collection_id AND sc.deleted_at IS NULL
             WHERE k.target_id = i.id AND k.link_type = 'blocks' AND s.deleted_at IS NULL) l), '[]'::json) AS links
`;

/**
 * The state read (DESIGN §5, §7 step 2) in one statement: the item's columns, its collection and
 * workspace as JSON objects, its live comments (oldest first) and its links as JSON arrays, where
 * the shared store sends five selects. The links are those `sql/decisions.ts` `stateLinksSql`
 * reads (parent, blocks, blocked_by; never a deleted item or one of a deleted collection); the
 * state builder sorts them. JSON carries bigint times as numbers (below 2^53) and text columns
 * (`schema`, `settings`, `fields`) as the strings they are. One statement is one snapshot, so the
 * state is never torn.
 * With `links` false the links column is an empty array (`LOAD_STATE_NO_LINKS`).
 */
const loadStateSql = (links: boolean): string => `
SELECT i.id, i.workspace_id AS "workspaceId", i.collection_id AS "collectionId", i.ref, i.title, i.content, i.fields, i.seq,
       i.created_at AS "createdAt", i.updated_at AS "updatedAt", i.deleted_at AS "deletedAt", i.source_url AS "sourceUrl",
       json_build_object('id', c.id, 'workspaceId', c.workspace_id, 'slug', c.slug, 'isSystem', c.is_system, 'schema', c.schema,
                         'settings', c.settings, 'createdAt', c.created_at, 'deletedAt', c.deleted_at) AS collection,
       json_build_object('id', w.id, 'slug', w.slug, 'createdAt', w.created_at, 'deletedAt', w.deleted_at) AS workspace,
       coalesce((SELECT json_agg(json_build_object('id', m.id, 'author', m.author, 'body', m.body, 'createdAt', m.created_at) ORDER BY m.created_at, m.id)
                 FROM comments m WHERE m.item_id = i.id AND m.deleted_at IS NULL), '[]'::json) AS comments,
${links ? STATE_LINKS_JSON : `       '[]'::json AS links\n`}FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
WHERE i.id = $1`;
const LOAD_STATE = loadStateSql(true);
/**
 * `LOAD_STATE` without the links (`links: false`: no set of the caller shows them, DESIGN §5), so
 * the three link branches are neither planned nor run. Its own text, so its own prepared statement.
 */
const LOAD_STATE_NO_LINKS = loadStateSql(false);

/**
 * Everything the state builder needs about `itemId` in one round trip; null when the item (or its
 * collection or workspace row) is missing. With `links` false the links are not read (empty).
 */
export async function loadState(
  x: PgJobContext,
  itemId: string,
  o?: { links?: boolean },
): Promise<ItemForEvaluation | null> {
  const r = (
    o?.links === false
      ? await x.query('verdict_load_state_no_links', LOAD_STATE_NO_LINKS, [itemId])
      : await x.query('verdict_load_state', LOAD_STATE, [itemId])
  ).rows[0];
  if (!r) return null;
  const { collection, workspace, comments, links, ...item } = r as unknown as ItemRow & {
    collection: Parameters<typeof toCollectionRow>[0];
    workspace: WorkspaceRow;
    comments: TrailComment[];
    links: StateLink[];
  };
  // PGlite reads int8 columns as bigint; node-postgres as numbers (open.ts).
  const ms = (v: unknown) => (v === null ? null : Number(v));
  const row: ItemRow = {
    ...item,
    seq: Number(item.seq),
    createdAt: Number(item.createdAt),
    updatedAt: Number(item.updatedAt),
    deletedAt: ms(item.deletedAt),
  };
  return { item: row, collection: toCollectionRow(collection), workspace, comments, links };
}

// ------------------------------------------------------------------- the reads before a call

/**
 * The liveness read of every claim of one call (DESIGN §7 step 6, §7.6; one claim's form is
 * `sql/decisions.ts` `livenessShape`): per claim, its item's, collection's and workspace's
 * deletion times, its job row's token and generation, and the lease it has left. `present` is
 * false when the item, its collection or its workspace row is missing (the shared inner join's
 * "no row"). One statement for a co-asked group, so one snapshot judges every job of the call.
 * Parameters: $1 clock offset, $2 item ids, $3 sets (one pair per claim, in order).
 *
 * The claims are read through `LIMIT cardinality($2)`, which keeps every one of them, for the
 * plan the server keeps: without a value for `$2` it estimates 10 claims from `unnest`, and a
 * plan for 10 cost about 4× the custom plans (which know there are one or two), so it planned the
 * statement anew on every call (`pg_stat_statements`: 1,328 plans for 1,280 calls in bench part d's
 * 4-process drain). A limit it cannot see it estimates as a tenth of its input, one claim, so its
 * generic plan is the custom plan's (index lookups per claim) and it is planned once per connection.
 */
export const CHECK_CLAIMS = `
SELECT k.ord, (i.id IS NOT NULL AND c.id IS NOT NULL AND w.id IS NOT NULL) AS present,
       i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w,
       j.claim_token AS token, j.generation AS generation, j.lease_expires_at - ${NOW} AS lease_left
FROM (SELECT * FROM unnest($2::text[], $3::text[]) WITH ORDINALITY u(item_id, question_set, ord) LIMIT cardinality($2::text[])) k
LEFT JOIN items i ON i.id = k.item_id
LEFT JOIN collections c ON c.id = i.collection_id
LEFT JOIN workspaces w ON w.id = i.workspace_id
LEFT JOIN decision_jobs j ON j.item_id = k.item_id AND j.question_set = k.question_set
ORDER BY k.ord`;

/** `Store.checkClaims` in one statement (see CHECK_CLAIMS). */
export async function checkClaims(x: PgJobContext, claims: readonly Claim[]): Promise<ClaimCheck[]> {
  if (claims.length === 0) return [];
  const rows = (
    await x.query('verdict_check_claims', CHECK_CLAIMS, [
      x.clockOffsetMs(),
      claims.map((c) => c.itemId),
      claims.map((c) => c.questionSet),
    ])
  ).rows as Array<LivenessRow & { present: boolean }>;
  return claims.map((claim, i) => {
    const r = rows[i]!;
    const left = r.lease_left;
    return {
      liveness: livenessOf(r.present ? r : undefined, claim),
      leaseLeftMs: left === null || left === undefined ? -Infinity : Number(left),
    };
  });
}

/**
 * The idempotency read of several sets of one item (DESIGN §7 step 5; one set's form is
 * `sql/decisions.ts` `answeredShape`): the wanted (set, key, state hash, question hash, state
 * version) rows as arrays, each joined to item_decisions by the whole idempotency key, so each is
 * a seek on item_decisions_idem_uq. One text for every count of sets and keys, planned once per
 * connection. Parameters: $1 item, $2 sets, $3 keys, $4 state hashes, $5 question hashes,
 * $6 state versions (one element per wanted key).
 */
const ANSWERED_OF_SETS = `
SELECT d.question_set AS s, d.question_key AS k
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[]) w(question_set, question_key, state_hash, question_hash, state_version)
JOIN item_decisions d ON d.item_id = $1 AND d.question_set = w.question_set AND d.question_key = w.question_key
  AND d.state_hash = w.state_hash AND d.question_hash = w.question_hash AND d.state_version = w.state_version`;

/** `Store.answeredKeysOfSets` in one statement (see ANSWERED_OF_SETS). */
export async function answeredKeysOfSets(
  x: PgJobContext,
  itemId: string,
  wanted: ReadonlyArray<{ questionSet: string; keys: readonly AnswerKey[] }>,
): Promise<Array<Set<string>>> {
  const out = wanted.map(() => new Set<string>());
  const flat = wanted.flatMap((w) => w.keys.map((k) => ({ set: w.questionSet, ...k })));
  if (flat.length === 0) return out;
  const hits = (
    await x.query('verdict_answered_of_sets', ANSWERED_OF_SETS, [
      itemId,
      flat.map((k) => k.set),
      flat.map((k) => k.questionKey),
      flat.map((k) => k.stateHash),
      flat.map((k) => k.questionHash),
      flat.map((k) => k.stateVersion),
    ])
  ).rows as Array<{ s: string; k: string }>;
  // A set named twice gets the hits of its keys in each entry that wanted them.
  for (const h of hits)
    wanted.forEach((w, i) => {
      if (w.questionSet === h.s && w.keys.some((k) => k.questionKey === h.k)) out[i]!.add(h.k);
    });
  return out;
}

// ------------------------------------------------------------------------------------ the claim

/** The abandon backoff's length (`sql/jobs.ts` `abandonBackoffSql`): lease ($4) × 2^(abandons − 1), abandons counting this one, capped. */
const ABANDON_BACKOFF = `least(${ABANDON_BACKOFF_CAP_MS}::bigint, $4::bigint << least(abandons, 7))`;

/**
 * Whether the claim of a row puts it back instead (DESIGN §3 "Abandons"), from the row's old
 * values: it still carries an expired claim, counting that abandon leaves it below the limit ($5),
 * and its backoff from the dead lease's end still runs (`sql/jobs.ts` `backsOff` tells it from the
 * returned row on the shared path).
 */
const BACKS_OFF = `(claim_token IS NOT NULL AND abandons + 1 < $5::int AND lease_expires_at + ${ABANDON_BACKOFF} > ${NOW})`;

/**
 * The latest not_before among the claimed row's co-asking partners ($10/$11: each set and its
 * partners) that are owed and hold no live claim: the group's not_before when the row is put back.
 */
const GROUP_NOT_BEFORE = `(SELECT max(p.not_before) FROM unnest($10::text[], $11::text[]) g(set_name, partner)
           JOIN decision_jobs p ON p.item_id = decision_jobs.item_id AND p.question_set = g.partner
           WHERE g.set_name = decision_jobs.question_set AND p.state = 'owed' AND (p.lease_expires_at IS NULL OR p.lease_expires_at <= ${NOW}))`;

/**
 * What the claim of the next job writes (`sql/jobs.ts` `claimSet`): the claimant ($2), its token
 * ($3), the lease ($4), the attempt counted, and an abandon counted when the row still carried an
 * expired claim, with its abandon backoff. A row whose backoff still runs (`BACKS_OFF`) is put
 * back by the same write: no claim, no attempt, the abandon counted, not_before the group's (its
 * backoff or a partner's later not_before, `GROUP_NOT_BEFORE`). One statement, so a process killed
 * between a claim and its put-back cannot leave a claim that never ran: that claim kept the
 * group's first set unclaimable for a lease (its partner was then claimed and asked alone) and
 * counted one more abandon when it ran out.
 */
const NEXT_SET = `claimed_by = CASE WHEN ${BACKS_OFF} THEN NULL ELSE $2 END,
       claim_token = CASE WHEN ${BACKS_OFF} THEN NULL ELSE $3 END,
       lease_expires_at = CASE WHEN ${BACKS_OFF} THEN NULL ELSE ${NOW} + $4::bigint END,
       attempts = attempts + (CASE WHEN ${BACKS_OFF} THEN 0 ELSE 1 END),
       abandons = abandons + (CASE WHEN claim_token IS NOT NULL THEN 1 ELSE 0 END),
       not_before = CASE WHEN claim_token IS NULL THEN not_before
         WHEN ${BACKS_OFF} THEN greatest(not_before, lease_expires_at + ${ABANDON_BACKOFF}, ${GROUP_NOT_BEFORE})
         ELSE greatest(not_before, lease_expires_at + ${ABANDON_BACKOFF}) END`;

/**
 * What a sibling claim writes (`sql/jobs.ts` `claimSet` without the backoff): the claimant, the
 * siblings' token ($12), the lease, the attempt, and an abandon counted for a sibling that still
 * carried an expired claim; it runs with its group, so it gets no backoff.
 */
const SIBLING_SET = `claimed_by = $2, claim_token = $12, lease_expires_at = ${NOW} + $4::bigint,
       attempts = attempts + 1, abandons = abandons + (CASE WHEN claim_token IS NOT NULL THEN 1 ELSE 0 END)`;

/**
 * The claim and its co-asked siblings as CTEs, `nxt`, `sib` and `grp` (`sql/jobs.ts`
 * `claimCandidateSql` and `claimSiblingJobs` give the why of each condition). The candidate is
 * the first claimable row in claim order, walking `decision_jobs_claim_order_idx` (state leads the
 * ORDER BY and `not_before + 0` offers no other index, whatever the statistics), locked with
 * `SKIP LOCKED`. The server keeps a generic plan for a prepared statement, made without the
 * parameters' values (DESIGN §3.5 "The claim's plan"), so no filter may be estimated to keep
 * almost no row, or "read every owed row and sort" wins: the skip list's `<> ALL` (0.1 % for an
 * array of unknown length) sits behind a CASE on its length, and the workspace and partner checks
 * are `coalesce((SELECT false … LIMIT 1), true)`, a per-row lookup (as NOT EXISTS they became
 * anti-joins estimated to keep one row, or a hash of every owed partner); a job is no candidate while a co-asking partner of its item that sorts first is
 * claimable ($8/$9: each pair's set and partner), so a co-asked group is claimed from its first
 * set by one claimer. The siblings are the claimed job's partners ($10/$11: each set and its
 * partners) that are claimable now and below the abandon limit, taken in set order with
 * `SKIP LOCKED`, only when the claimed job itself is below the limit and not put back for its
 * abandon backoff (one at the limit is parked, and the siblings left for the next claim). When
 * `nxt` puts its row back (`NEXT_SET`), `grp` puts back its partners that are owed and hold no
 * live claim (an expired claim cleared, its abandon counted) under the same not_before (DESIGN §3
 * "Abandons": `sql/jobs.ts` `putBack`), in the same statement.
 * Parameters: $1 clock offset, $2 worker id, $3 token, $4 lease ms, $5 abandon limit,
 * $6 skipped sets, $7 live only, $8/$9 first-of-group pairs, $10/$11 partners, $12 siblings' token.
 */
const CLAIM_CTES = `
nxt AS (
  UPDATE decision_jobs SET ${NEXT_SET}
  WHERE (item_id, question_set) = (
    SELECT j.item_id, j.question_set FROM decision_jobs j
    WHERE j.state > 'batched' AND j.state <> 'parked' AND j.not_before + 0 <= ${NOW}
      AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${NOW})
      AND coalesce((SELECT false FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL LIMIT 1), true)
      AND (CASE WHEN cardinality($6::text[]) = 0 THEN true ELSE j.question_set <> ALL ($6::text[]) END)
      AND (NOT $7::boolean OR j.priority = 0)
      AND coalesce((SELECT false FROM unnest($8::text[], $9::text[]) g(set_name, partner) JOIN decision_jobs p ON p.question_set = g.partner
        WHERE g.set_name = j.question_set AND p.item_id = j.item_id AND p.state = 'owed' AND p.not_before <= ${NOW}
          AND (p.lease_expires_at IS NULL OR p.lease_expires_at <= ${NOW}) AND (NOT $7::boolean OR p.priority = 0) LIMIT 1), true)
    ORDER BY j.state, j.priority, j.fair_tag, j.enqueued_at, j.item_id, j.question_set
    LIMIT 1 FOR UPDATE OF j SKIP LOCKED)
  RETURNING *),
sib AS (
  UPDATE decision_jobs SET ${SIBLING_SET}
  WHERE (item_id, question_set) IN (
    SELECT j.item_id, j.question_set FROM nxt JOIN unnest($10::text[], $11::text[]) g(set_name, partner) ON g.set_name = nxt.question_set
      JOIN decision_jobs j ON j.item_id = nxt.item_id AND j.question_set = g.partner
    WHERE nxt.claim_token IS NOT NULL AND nxt.abandons < $5::int AND j.state = 'owed' AND j.not_before <= ${NOW}
      AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${NOW}) AND j.abandons < $5::int
    ORDER BY j.question_set FOR UPDATE OF j SKIP LOCKED)
  RETURNING *),
grp AS (
  UPDATE decision_jobs SET claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
         abandons = abandons + (CASE WHEN claim_token IS NOT NULL THEN 1 ELSE 0 END),
         not_before = greatest(not_before, (SELECT n.not_before FROM nxt n))
  WHERE (item_id, question_set) IN (
    SELECT j.item_id, j.question_set FROM nxt JOIN unnest($10::text[], $11::text[]) g(set_name, partner) ON g.set_name = nxt.question_set
      JOIN decision_jobs j ON j.item_id = nxt.item_id AND j.question_set = g.partner
    WHERE nxt.claim_token IS NULL AND (SELECT count(*) FROM sib) >= 0 AND j.state = 'owed'
      AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${NOW})
    ORDER BY j.question_set FOR UPDATE OF j SKIP LOCKED)
  RETURNING 1)`;

const CLAIM_RESULT = `(SELECT row_to_json(n) FROM nxt n) AS next,
  (SELECT coalesce(json_agg(row_to_json(s)), '[]'::json) FROM sib s) AS siblings`;

/** The claim on its own (`claimNext`), exported for the plan test. */
export const CLAIM = `WITH ${CLAIM_CTES}
SELECT ${CLAIM_RESULT}`;

/** The claim's parameters $2…$12, from a request (`runOnce`'s `claimNext`). */
function claimValues(x: PgJobContext, r: ClaimRequest): unknown[] {
  const skip = [...(r.skipSets ?? [])];
  const skipped = new Set(skip);
  const coAsk = Object.fromEntries(Object.entries(r.coAsk ?? {}).filter(([set]) => !skipped.has(set)));
  const first = firstOfGroupPairs(coAsk);
  const partners: Array<[string, string]> = [];
  for (const set of Object.keys(coAsk).sort())
    for (const p of [...new Set(coAsk[set])].sort()) if (p !== set) partners.push([set, p]);
  return [
    r.workerId,
    x.newToken(),
    r.leaseMs,
    r.abandonLimit,
    skip,
    r.liveOnly === true,
    first.map((p) => p[0]),
    first.map((p) => p[1]),
    partners.map((p) => p[0]),
    partners.map((p) => p[1]),
    x.newToken(),
  ];
}

/**
 * A claim from the statement's `next` and `siblings` columns, or null: none claimed, or one the
 * caller must handle first (`atLimit`: park it), or a row the statement put back for its abandon
 * backoff (`putBack`: no claim; the caller claims again).
 */
function claimOf(
  r: Record<string, unknown>,
  req: ClaimRequest,
): { claim: Claim | null; atLimit: RawJob | null; putBack?: true } {
  const row = r.next as RawJob | null;
  if (!row) return { claim: null, atLimit: null };
  if (row.claim_token === null) return { claim: null, atLimit: null, putBack: true };
  if (row.abandons >= req.abandonLimit) return { claim: null, atLimit: row };
  const claim = toClaim(row);
  const siblings = (r.siblings as RawJob[]).map(toClaim).sort((a, b) => (a.questionSet < b.questionSet ? -1 : 1));
  return { claim: siblings.length ? { ...claim, coAsked: siblings } : claim, atLimit: null };
}

/**
 * Parks a job found at the abandon limit under its fresh claim's token, before any provider call
 * (`sql/jobs.ts` `claimNextJob`): should this process die first, the claim expires and the next
 * claim parks it. Parameters: $1 clock offset, $2 item, $3 set, $4 token, $5 reason.
 */
const PARK_CLAIMED = `
UPDATE decision_jobs SET state = 'parked', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL, defers = 0,
       last_error = $5, last_error_at = ${NOW}
WHERE item_id = $2 AND question_set = $3 AND claim_token = $4`;

/**
 * Claims the next job (with its co-asked siblings) in one autocommitted statement; a job found at
 * the abandon limit is parked, and one the statement put back for its abandon backoff passed over,
 * and the next one tried.
 */
export async function claimNext(x: PgJobContext, r: ClaimRequest): Promise<Claim | null> {
  for (;;) {
    const got = claimOf((await x.query('verdict_claim', CLAIM, [x.clockOffsetMs(), ...claimValues(x, r)])).rows[0], r);
    if (got.atLimit) await parkAtLimit(x, got.atLimit);
    else if (!got.putBack) return got.claim;
  }
}

async function parkAtLimit(x: PgJobContext, row: RawJob): Promise<void> {
  await x.query('verdict_park_claimed', PARK_CLAIMED, [
    x.clockOffsetMs(),
    row.item_id,
    row.question_set,
    row.claim_token,
    boundError(abandonReason(row.abandons)),
  ]);
}

// ----------------------------------------------------------------------------------- the finish

/**
 * The shared rows' CTEs, last in a statement, once everything else of it is written (DESIGN §3.5
 * "One lock order on Postgres"): `spend`, the call's spend added to its hour's row (`spend(0…8)`:
 * set, provider, model, outcome, calls, input, output, cache read, cache write tokens; NULL calls
 * for none), reading `after` so it runs after the CTEs before it; `rsv`, its daily-cap reservation
 * settled (`spend(9)`, NULL for none); `thr`, the throughput count (`sql/throughput.ts`
 * `countShape`: one row per minute and outcome) of the `outcome` word (NULL: none) when `applied`
 * holds. Every slot of every process adds to the same hour's and minute's rows (in its backend's
 * shard, the columns' default: DESIGN §2 decision_spend) and holds their locks until its
 * transaction commits, so these come last and in this order (spend row, then count row, the order
 * of the shared `finishJob` too).
 */
function sharedRowCtes(o: { spend: (i: number) => string; after: string; outcome: string; applied: string }): string {
  const s = o.spend;
  return `spend AS (
  INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
  SELECT (${NOW} / 3600000) * 3600000, ${s(0)}::text, ${s(1)}::text, ${s(2)}::text, ${s(3)}::text, ${s(4)}::bigint, ${s(5)}::bigint, ${s(6)}::bigint, ${s(7)}::bigint, ${s(8)}::bigint
  WHERE ${s(4)}::bigint IS NOT NULL AND ${o.after} >= 0
  ON CONFLICT (hour, question_set, provider, model, outcome, shard) DO UPDATE SET
    calls = decision_spend.calls + excluded.calls,
    input_tokens = decision_spend.input_tokens + excluded.input_tokens,
    output_tokens = decision_spend.output_tokens + excluded.output_tokens,
    cache_read_tokens = decision_spend.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = decision_spend.cache_write_tokens + excluded.cache_write_tokens
  RETURNING 1),
rsv AS (
  DELETE FROM decision_spend_reservations WHERE id = ${s(9)}::text AND (SELECT count(*) FROM spend) >= 0
  RETURNING 1),
thr AS (
  INSERT INTO job_throughput (minute, outcome, jobs)
  SELECT (${NOW} / ${MINUTE_MS}) * ${MINUTE_MS}, ${o.outcome}::text, 1
  WHERE ${o.outcome}::text IS NOT NULL AND ${o.applied} AND (SELECT count(*) FROM rsv) >= 0
  ON CONFLICT (minute, outcome, shard) DO UPDATE SET jobs = job_throughput.jobs + excluded.jobs
  RETURNING 1)`;
}

/** The answer columns, in the order of the insert's arrays (`evaluated_at` is the statement's now). */
const ANSWER_COLUMNS = [
  ['workspace_id', 'text'],
  ['item_id', 'text'],
  ['question_set', 'text'],
  ['question_key', 'text'],
  ['kind', 'text'],
  ['answer', 'text'],
  ['confidence', 'float8'],
  ['provider', 'text'],
  ['model', 'text'],
  ['state_hash', 'text'],
  ['question_hash', 'text'],
  ['state_version', 'int'],
  ['state_parts', 'text'],
  ['input_tokens', 'int'],
  ['output_tokens', 'int'],
  ['item_seq', 'int'],
  ['state_truncated', 'boolean'],
  ['rationale', 'text'],
  ['fingerprint_context', 'text'],
] as const;

/** The answers' parameters, one array per column, in ANSWER_COLUMNS' order. */
function answerArrays(list: readonly NewDecision[]): unknown[][] {
  return [
    list.map((d) => d.workspaceId),
    list.map((d) => d.itemId),
    list.map((d) => d.questionSet),
    list.map((d) => d.questionKey),
    list.map((d) => d.kind),
    list.map((d) => d.answer),
    list.map((d) => d.confidence),
    list.map((d) => d.provider),
    list.map((d) => d.model),
    list.map((d) => d.stateHash),
    list.map((d) => d.questionHash),
    list.map((d) => d.stateVersion),
    list.map((d) => d.stateParts),
    list.map((d) => d.inputTokens),
    list.map((d) => d.outputTokens),
    list.map((d) => d.itemSeq),
    list.map((d) => d.stateTruncated),
    list.map((d) => d.rationale ?? null),
    list.map((d) => d.fingerprintContext ?? null),
  ];
}

/** Where the finish's parameters start after $1 (the clock offset): past the claim's $2…$12 when the statement claims too. */
const finishBase = (withClaim: boolean) => (withClaim ? 13 : 2);
const ANSWERS_AT = 4; // the answer arrays, after the job's key, token and generation
const SPEND_AT = ANSWERS_AT + ANSWER_COLUMNS.length; // the spend's nine values, then the reservation id
const WATCHED_AT = SPEND_AT + 10; // the stored keys whose surfacing memory the statement returns
const OUTCOME_AT = WATCHED_AT + 1; // the throughput count's outcome word

/**
 * The finish of one job as CTEs (`sql/jobs.ts` `finishJob` gives the rules):
 * - `mem`: the surfacing memory of the watched keys (`sql/surfacing.ts` `memoryShape`; none when
 *   the answers move no surfacing), read by the same snapshot as the insert, so it is the memory
 *   before this statement's answers (no CTE sees another's writes);
 * - `ins`: the last call's answers (stored whatever the fence says: they were paid for); a
 *   conflict on the idempotency key does nothing;
 * - `done`: the fenced completion, the common case (token and generation unchanged) as one
 *   DELETE; when it deletes nothing the caller tells lost from superseded with the shared fence;
 * - then the claim CTEs when the statement claims the slot's next job;
 * - last the shared rows (`sharedRowCtes`): the spend, its reservation, and the throughput count
 *   only when `done` deleted the row (a finish that applied; the fence counts the others it
 *   applies). In a surfacing finish's transaction they are left to `finishTail`, the
 *   transaction's last statement, so no other finish waits on them across its round trips.
 * Parameters: $1 the clock offset, the claim's $2…$12 when it claims, then (from $2, or $13) the
 * item, set, token and generation, the 19 answer arrays (ANSWER_COLUMNS), the spend (set,
 * provider, model, outcome, calls, input, output, cache read, cache write tokens; NULL calls for
 * none), the reservation id (NULL for none), the watched stored keys (an empty array for none) and
 * the outcome word the throughput count records (`JOB_OUTCOMES`; NULL: the caller counts).
 */
function finishText(withClaim: boolean): string {
  const p = (i: number) => `$${finishBase(withClaim) + i}`;
  const after = withClaim ? '(SELECT count(*) FROM grp)' : '(SELECT count(*) FROM done)';
  const cols = ANSWER_COLUMNS.map(([c]) => c).join(', ');
  const arrays = ANSWER_COLUMNS.map(([, t], i) => `${p(ANSWERS_AT + i)}::${t}[]`).join(', ');
  const s = (i: number) => p(SPEND_AT + i);
  const latest = (table: string) =>
    `SELECT max(id) FROM ${table} WHERE item_id = ${p(0)} AND question_set = ${p(1)} AND question_key = ANY (${p(WATCHED_AT)}::text[]) GROUP BY question_key`;
  return `WITH
mem AS (
  SELECT 'a' AS w, question_key AS k, answer AS v, NULL::text AS s FROM item_decisions WHERE id IN (${latest('item_decisions')})
  UNION ALL
  SELECT 'c', question_key, NULL, CASE WHEN surfaced THEN '1' ELSE '0' END FROM surfacing_changes WHERE id IN (${latest('surfacing_changes')})
  UNION ALL
  SELECT 'v', question_key, value, verdict FROM human_verdicts WHERE id IN (${latest('human_verdicts')})),
ins AS (
  INSERT INTO item_decisions (${cols}, evaluated_at)
  SELECT a.*, ${NOW} FROM unnest(${arrays}) a
  ON CONFLICT DO NOTHING
  RETURNING question_key),
done AS (
  DELETE FROM decision_jobs
  WHERE item_id = ${p(0)} AND question_set = ${p(1)} AND claim_token = ${p(2)} AND generation = ${p(3)}::int AND (SELECT count(*) FROM ins) >= 0
  RETURNING 1),${withClaim ? `${CLAIM_CTES.replace('WHERE (item_id, question_set) = (', 'WHERE (SELECT count(*) FROM done) >= 0 AND (item_id, question_set) = (')},` : ''}
${sharedRowCtes({ spend: s, after, outcome: p(OUTCOME_AT), applied: '(SELECT count(*) FROM done) = 1' })}
SELECT (SELECT coalesce(json_agg(question_key), '[]'::json) FROM ins) AS stored, (SELECT count(*) FROM done)::int AS done, (SELECT count(*) FROM rsv)::int AS settled, (SELECT count(*) FROM thr)::int AS counted,
  (SELECT coalesce(json_agg(row_to_json(m)), '[]'::json) FROM mem m) AS memory${withClaim ? `, ${CLAIM_RESULT}` : ''}`;
}

const FINISH = finishText(false);
/** The finish with the slot's next claim (`finishStatement`), exported for the plan test. */
export const FINISH_AND_CLAIM = finishText(true);

/** The finish's parameters after the claim's. */
function finishValues(claim: Claim, f: JobFinish, watched: readonly string[], tail: boolean): unknown[] {
  const a = f.answers;
  return [
    claim.itemId,
    claim.questionSet,
    claim.claimToken,
    claim.generation,
    ...answerArrays(a?.decisions ?? []),
    ...(tail ? spendValues(undefined) : spendValues(f)),
    tail ? null : (a?.reservationId ?? null),
    watched,
    tail ? null : (f.outcome ?? JOB_OUTCOMES.complete),
  ];
}

/** The spend's nine values (set, provider, model, outcome, calls, four token counts); all NULL for none. */
function spendValues(f: JobFinish | undefined): unknown[] {
  const a = f?.answers;
  const u = a?.spend.usage;
  return a
    ? [
        a.spend.questionSet,
        a.spend.provider,
        a.spend.model,
        a.spend.outcome,
        a.spend.calls,
        u!.inputTokens,
        u!.outputTokens,
        u!.cacheReadTokens,
        u!.cacheWriteTokens,
      ]
    : [null, null, null, null, null, null, null, null, null];
}

/** What the finish statement did: whether the completion applied, the keys of the answers it stored, and the slot's next claim. */
export interface FinishDone {
  /** False when the fenced DELETE matched nothing: the caller tells lost from superseded (`sql/jobs.ts` `completeJob`). */
  completed: boolean;
  /** The question keys of the answers inserted (a conflict on the idempotency key inserts nothing). */
  stored: Set<string>;
  next: Claim | null;
  /** The watched keys' surfacing memory as it was before this statement's insert (`sql/surfacing.ts` `memoryOf` reads it). */
  memory: MemoryRow[];
}

/**
 * `Store.finishJob` in one statement: the answers, the fenced completion, the slot's next claim
 * (with its co-asked siblings) when asked for, the spend and its reservation, all or nothing. A
 * next job found at the abandon limit is parked and another claimed on its own. Runs on its own
 * (autocommit) or inside a transaction the caller opened on the connection `x.query` uses (answers
 * that move surfacing events: the caller queues them after it, `sql/events.ts`).
 * @param tail true inside a surfacing finish's transaction: the statement writes neither the spend,
 *   nor its reservation, nor the throughput count; the caller's `finishTail` does, last.
 */
export async function finishStatement(
  x: PgJobContext,
  claim: Claim,
  f: JobFinish,
  watched: readonly string[] = [],
  tail = false,
): Promise<FinishDone> {
  const r = f.claimNext;
  const values = r
    ? [x.clockOffsetMs(), ...claimValues(x, r), ...finishValues(claim, f, watched, tail)]
    : [x.clockOffsetMs(), ...finishValues(claim, f, watched, tail)];
  const row = (
    await (r ? x.query('verdict_finish_claim', FINISH_AND_CLAIM, values) : x.query('verdict_finish', FINISH, values))
  ).rows[0];
  let next: Claim | null = null;
  if (r) {
    const got = claimOf(row, r);
    next = got.claim;
    if (got.atLimit || got.putBack) {
      if (got.atLimit) await parkAtLimit(x, got.atLimit);
      next = await claimNext(x, r);
    }
  }
  return {
    completed: Number(row.done) === 1,
    stored: new Set(row.stored as string[]),
    next,
    memory: row.memory as MemoryRow[],
  };
}

/**
 * The last statement of a surfacing finish's transaction (DESIGN §3.5, §16.2), before its COMMIT:
 * the change rows of the keys whose surfacing moved (`sql/events.ts` `surfacingMoves`) and their
 * events, one per move and enabled target (target order, as `sql/surfacing.ts` `recordMove`
 * queues them), then the shared rows (`sharedRowCtes`): the spend, its reservation and the
 * throughput count. The shared rows are taken here and not by the finish statement, so they are
 * held from this statement to the COMMIT that follows it, never across the transaction's other
 * round trips; every other finish of every process writes the same hour's spend row.
 * Parameters: $1 clock offset, $2…$10 the moves (workspace, item, set, key, surfaced, flip,
 * probability, cause, state hash), $11 their time (epoch ms), $12…$16 the events (event id,
 * workspace, item, type, payload), then the spend's nine values and the reservation id, and the
 * outcome word to count (NULL: the completion did not apply, the fence counts it).
 */
const FINISH_TAIL = `WITH
chg AS (
  INSERT INTO surfacing_changes (workspace_id, item_id, question_set, question_key, surfaced, flip, probability, cause, state_hash, changed_at)
  SELECT m.workspace_id, m.item_id, m.question_set, m.question_key, m.surfaced, m.flip, m.probability, m.cause, m.state_hash, $11::bigint
  FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::boolean[], $8::float8[], $9::text[], $10::text[])
    WITH ORDINALITY m(workspace_id, item_id, question_set, question_key, surfaced, flip, probability, cause, state_hash, ord)
  ORDER BY m.ord
  RETURNING 1),
ev AS (
  INSERT INTO decision_events (target_url, event_id, workspace_id, item_id, type, payload, created_at, attempts, next_attempt_at)
  SELECT t.url, e.event_id, e.workspace_id, e.item_id, e.type, e.payload, $11::bigint, 0, $11::bigint
  FROM unnest($12::text[], $13::text[], $14::text[], $15::text[], $16::text[]) WITH ORDINALITY e(event_id, workspace_id, item_id, type, payload, ord)
    CROSS JOIN event_targets t
  WHERE t.disabled_at IS NULL AND (SELECT count(*) FROM chg) >= 0
  ORDER BY e.ord, t.url
  RETURNING 1),
${sharedRowCtes({ spend: (i) => `$${17 + i}`, after: '(SELECT count(*) FROM ev)', outcome: '$27', applied: 'true' })}
SELECT (SELECT count(*) FROM chg)::int AS changes, (SELECT count(*) FROM ev)::int AS events`;

/**
 * Writes a surfacing finish's moves, their events, its spend, reservation and throughput count in
 * one statement (see FINISH_TAIL), inside the caller's transaction, as its last statement.
 * @param moves the moves `surfacingMoves` found, recorded at `nowMs` (epoch ms, the transaction's time).
 * @param targets the enabled event targets the transaction read (0: no events).
 * @param applied whether the finish statement's completion applied (then its outcome is counted).
 * @returns the event rows queued.
 */
export async function finishTail(
  x: PgJobContext,
  f: JobFinish,
  moves: readonly SurfacingMove[],
  w: { nowMs: number; targets: number; newId: () => string },
  applied: boolean,
): Promise<number> {
  const events = w.targets > 0 ? moves.map((m) => ({ m, e: moveEvent(w.newId(), w.nowMs, m) })) : [];
  const row = (
    await x.query('verdict_finish_tail', FINISH_TAIL, [
      x.clockOffsetMs(),
      moves.map((m) => m.workspaceId),
      moves.map((m) => m.itemId),
      moves.map((m) => m.questionSet),
      moves.map((m) => m.questionKey),
      moves.map((m) => m.surfaced),
      moves.map((m) => m.flip),
      moves.map((m) => m.probability),
      moves.map((m) => m.cause),
      moves.map((m) => m.stateHash),
      w.nowMs,
      events.map((v) => v.e.eventId),
      events.map((v) => v.m.workspaceId),
      events.map((v) => v.m.itemId),
      events.map((v) => v.e.type),
      events.map((v) => v.e.payload),
      ...spendValues(f),
      f.answers?.reservationId ?? null,
      applied ? (f.outcome ?? JOB_OUTCOMES.complete) : null,
    ])
  ).rows[0];
  return Number(row.events);
}

/**
 * The first statement of a finish whose answers may move a key's surfacing (DESIGN §16.2), inside
 * the transaction the caller opened: the item's row locked, so an answer or verdict of the same
 * item committed by another transaction is either seen by the finish statement that follows (its
 * own snapshot, taken after this lock is held, reads the keys' memory) or waits for this commit;
 * with it the transaction's time and the enabled event targets, read in the same round trip. The
 * memory cannot be read here: this statement's snapshot is taken before it waits on the lock.
 * Parameters: $1 clock offset, $2 item.
 */
const LOCK_FOR_SURFACING = `
WITH locked AS (SELECT id FROM items WHERE id = $2 FOR UPDATE)
SELECT ${NOW} AS now, (SELECT count(*) FROM event_targets WHERE disabled_at IS NULL)::int AS targets, (SELECT count(*) FROM locked)::int AS locked`;

/** Locks `itemId`'s row for a surfacing finish (see LOCK_FOR_SURFACING); the transaction's time (epoch ms) and the enabled targets. */
export async function lockForSurfacing(x: PgJobContext, itemId: string): Promise<{ nowMs: number; targets: number }> {
  const r = (await x.query('verdict_lock_for_surfacing', LOCK_FOR_SURFACING, [x.clockOffsetMs(), itemId])).rows[0];
  return { nowMs: Number(r.now), targets: Number(r.targets) };
}
