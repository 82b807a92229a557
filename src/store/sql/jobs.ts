import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { Claim, ClaimRequest, FinishedJob, JobFinish, OutcomeResult } from '../store.js';
import type { JobFilter, JobRow, QueueStats } from '../queue-store.js';
import { insertDecisionsTx, recordSpendTx } from './decisions.js';
import { settleReservationTx } from './spend-reservations.js';
import { countFinishes, countOutcomes, countOutcomesNow } from './throughput.js';
import { JOB_OUTCOMES, type FinishOutcome } from '../throughput.js';
import {
  ABANDON_BACKOFF_CAP_MS,
  abandonReason,
  boundError as bound,
  deferLimitReason,
  refusalParkReason,
  setTiming,
  toClaim,
  type RawJob,
} from '../write-rules.js';
import { delayCapSql, latestAnswerSql } from './owe.js';
import {
  autocommit,
  bind,
  changes,
  exec,
  nowSql,
  one,
  read,
  rows,
  shape,
  shapeFamily,
  write,
  type Dialect,
  type Expr,
  type SqlContext,
  type Steps,
} from './steps.js';

/**
 * The owed-job queue (DESIGN §3, §13): the claim and each outcome, with their SQL and the reason
 * for it together. Every outcome is fenced by the claim token, under a row lock on Postgres (on
 * SQLite the IMMEDIATE transaction serialises all writers); when the generation moved since the
 * claim (a write landed during the evaluation), every outcome only clears the claim and
 * recomputes not_before, so the newer generation runs. On Postgres every time is the database's,
 * so a worker whose own clock is fast cannot expire another machine's live lease.
 */

/**
 * The claim's sub-select: the key of the first claimable job in claim order (priority, fair_tag,
 * enqueued_at, key; fair_tag interleaves workspaces, see owe.ts `fairTagSql`). Claimable: owed,
 * due, no live lease, workspace not soft-deleted, set not cooling off after a rejected schema
 * (DESIGN §3.8). It walks `decision_jobs_claim_order_idx (state, priority, fair_tag,
 * enqueued_at, key)` in order and stops at the first claimable row, so a claim reads one index
 * range and never sorts, whatever the queue's size. SQLite is told so (`INDEXED BY`). Postgres has
 * no hints, and on a table autovacuum has not yet analysed (a fresh database, a big backfill) its
 * default estimates make "read every due row and sort" look cheaper: 26 ms a claim at 6,000 rows
 * (measured), against 0.07 ms for the walk. So the statement makes the walk the plan whatever the
 * statistics (`Dialect.claimStates`, `Dialect.unindexed`): `state <> 'parked'` (the only other state; estimated to keep nearly every row) with
 * `ORDER BY state, …` so the whole index order is the sort order, and `not_before + 0` so no index
 * offers a not_before range. `SKIP LOCKED` lets concurrent claimers on many machines pass over
 * each other's rows instead of queueing on them. With co-asking, `firstOfGroup` pairs (set, partner)
 * where the partner sorts first: a job is not a candidate while such a partner of its item is
 * claimable, since the claim of that partner takes it too (`siblingSteps`). So a co-asked group is
 * only ever claimed from its first set, by one claimer: on Postgres two claimers starting on the
 * same item from two ends each took one row and then waited on the other's (a deadlock), or, with
 * the siblings skipped, asked the item twice. Exported so a test can check its plan.
 */
export function claimCandidateSql(
  d: Dialect,
  now: Expr,
  skipSets: readonly Expr[] = [],
  liveOnly = false,
  firstOfGroup: ReadonlyArray<readonly [Expr, Expr]> = [],
): SQL {
  const skip = skipSets.length
    ? sql`AND j.question_set NOT IN (${sql.join(
        skipSets.map((s) => sql`${s}`),
        sql`, `,
      )})`
    : sql``;
  const live = liveOnly ? sql`AND j.priority = 0` : sql``;
  const group = firstOfGroup.length
    ? sql`AND NOT EXISTS (SELECT 1 FROM decision_jobs p
        WHERE p.item_id = j.item_id AND (${sql.join(
          firstOfGroup.map(([set, partner]) => sql`(j.question_set = ${set} AND p.question_set = ${partner})`),
          sql` OR `,
        )})
          AND p.state = 'owed' AND p.not_before <= ${now} AND (p.lease_expires_at IS NULL OR p.lease_expires_at <= ${now})${liveOnly ? sql` AND p.priority = 0` : sql``})`
    : sql``;
  return sql`
    SELECT j.item_id, j.question_set FROM decision_jobs j ${d.indexedBy('decision_jobs_claim_order_idx')}
    WHERE ${d.claimStates.where} AND ${d.unindexed('j.not_before')} <= ${now}
      AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
      AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = j.workspace_id AND w.deleted_at IS NOT NULL)
      ${skip} ${live} ${group}
    ORDER BY ${d.claimStates.orderPrefix}j.priority, j.fair_tag, j.enqueued_at, j.item_id, j.question_set
    LIMIT 1${d.skipLocked}`;
}

/**
 * Claims the first claimable job (see `claimCandidateSql`) in one UPDATE … RETURNING; the sub-select
 * is scalar (run once), so the UPDATE can never touch a second row. The same statement counts the
 * attempt, and counts an abandon when the row still carried an expired claim (its claimant died
 * without recording an outcome). A job found at the abandon limit is parked instead, before any
 * provider call, under the fresh claim's token (should this process die first, the claim expires
 * and the next claim parks it), and the next one is tried. On Postgres each statement commits on
 * its own (one round trip a claim).
 */
export function claimNextJob(
  c: SqlContext,
  workerId: string,
  leaseMs: number,
  abandonLimit: number,
  skipSets: readonly string[] = [],
  opts: Pick<ClaimRequest, 'liveOnly' | 'coAsk'> = {},
): Promise<Claim | null> {
  // With co-asking partners the claim and its siblings' claim are one transaction: on Postgres,
  // with the claimed row committed alone, another claimer could take a sibling between the two.
  const steps = () => claimSteps(c, { workerId, leaseMs, abandonLimit, skipSets, ...opts });
  return Object.keys(opts.coAsk ?? {}).length ? write(c, steps) : autocommit(c, steps);
}

function* claimSteps(c: SqlContext, r: ClaimRequest): Steps<Claim | null> {
  const skipSets = r.skipSets ?? [];
  const pairs = firstOfGroupPairs(r.coAsk);
  const claimSql = claimShape(`${skipSets.length}:${pairs.length}${r.liveOnly ? ':live' : ''}`);
  const named = Object.fromEntries([
    ...skipSets.map((s, i) => [`skip${i}`, s]),
    ...pairs.flatMap(([set, partner], i) => [
      [`groupSet${i}`, set],
      [`groupFirst${i}`, partner],
    ]),
  ]);
  for (;;) {
    const now = yield* nowSql();
    const row = yield* one<RawJob>(
      bind(claimSql, { ...named, workerId: r.workerId, token: c.newToken(), now, leaseMs: r.leaseMs }),
    );
    if (!row) return null;
    if (row.abandons >= r.abandonLimit) {
      yield* park(c, now, row.item_id, row.question_set, abandonReason(row.abandons), row.claim_token!);
      continue;
    }
    if (backsOff(row, r.leaseMs)) {
      yield* putBack(row, r.coAsk?.[row.question_set], now);
      continue;
    }
    const claim = toClaim(row);
    const partners = r.coAsk?.[claim.questionSet] ?? [];
    if (partners.length === 0) return claim;
    // In the claim's own statements: on SQLite nothing else runs between them.
    const coAsked = yield* siblingSteps(c, claim, partners, { leaseMs: r.leaseMs, abandonLimit: r.abandonLimit });
    return coAsked.length ? { ...claim, coAsked } : claim;
  }
}

/**
 * What every claim writes (the next job, its co-asked siblings, a batch's jobs): the claimant, a
 * fresh token, the lease, the attempt counted, and an abandon counted when the row still carried
 * an expired claim (its claimant died without recording an outcome). With `backoff` (the next
 * job, a batch's jobs) such a row also gets its abandon backoff (`abandonBackoffSql`), so the claim
 * that found it puts it back (`backsOff`); a co-asked sibling gets none, as it runs with its
 * group (`siblingSteps`).
 */
export function claimSet(d: Dialect, workerId: Expr, token: Expr, now: Expr, leaseMs: Expr, backoff = true): SQL {
  const claim = sql`claimed_by = ${workerId}, claim_token = ${token}, lease_expires_at = ${now} + ${d.int8(leaseMs)},
          attempts = attempts + 1,
          abandons = abandons + (CASE WHEN claim_token IS NOT NULL THEN 1 ELSE 0 END)`;
  return backoff ? sql`${claim}, not_before = ${abandonBackoffSql(d, leaseMs)}` : claim;
}

/**
 * The abandon backoff (DESIGN §3, "Abandons"), as the claim's SET computes it from the row's old
 * values: a row that still carried an expired claim is due again only at `max(not_before, its dead
 * lease's end + min(1 h, lease × 2^(abandons − 1)))`, abandons counting this one and `lease` the
 * claimer's; any other row keeps its not_before. No jitter: a co-asked group is put back under
 * one not_before (`putBack`), so it comes due again as one and is asked in one call. The
 * shift is bounded (7: past the cap for any lease of 30 s or more).
 */
function abandonBackoffSql(d: Dialect, leaseMs: Expr): SQL {
  const cap = sql.raw(String(ABANDON_BACKOFF_CAP_MS));
  return sql`CASE WHEN claim_token IS NULL THEN not_before
            ELSE ${d.max}(not_before, lease_expires_at + ${d.min}(${cap}, ${d.int8(leaseMs)} << ${d.min}(abandons, 7))) END`;
}

/**
 * True when the claim that returned `row` counted an abandon whose backoff is still running: the
 * claim's candidate was due (not_before ≤ the claim's now, which is its lease end − `leaseMs`), so
 * a later not_before can only be the abandon backoff the claim's SET wrote. Such a claim is put
 * back (`putBack`), not run: it is not re-claimed first after every kill of its worker.
 */
export function backsOff(row: RawJob, leaseMs: number): boolean {
  return Number(row.not_before) > Number(row.lease_expires_at) - leaseMs;
}

/**
 * Gives back a claim that `backsOff`: clears it and takes back its attempt (it never ran); its
 * abandon stays counted and its not_before is the abandon backoff. Fenced by the claim's token.
 * With `partners` (its co-asking sets) and `now`, the group is put back as one (DESIGN §3
 * "Abandons"): every partner row of the item that is owed and holds no live claim is put back with
 * it (an expired claim cleared and its abandon counted), and all of them, this row included, get
 * one not_before, the largest among them. The parts of a dead worker's group can expire apart (a
 * call's leases are renewed part by part, each at its own now) and so be put back one by one,
 * each with its own backoff: the later put-back then lifts the earlier one to its own, and the
 * group comes due as one and is asked in one call again.
 */
export function* putBack(row: RawJob, partners: readonly string[] = [], now?: Expr): Steps<void> {
  const others = [...new Set(partners)].filter((p) => p !== row.question_set);
  let notBefore = Number(row.not_before);
  if (others.length > 0 && now !== undefined) {
    const free = sql`item_id = ${row.item_id} AND question_set IN (${sql.join(
      others.map((p) => sql`${p}`),
      sql`, `,
    )}) AND state = 'owed' AND (lease_expires_at IS NULL OR lease_expires_at <= ${now})`;
    const got = yield* one<{ nb: unknown }>(sql`SELECT max(not_before) AS nb FROM decision_jobs WHERE ${free}`);
    if (got?.nb !== null && got?.nb !== undefined) notBefore = Math.max(notBefore, Number(got.nb));
    yield* exec(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, abandons = abandons + (CASE WHEN claim_token IS NOT NULL THEN 1 ELSE 0 END),
        not_before = CASE WHEN not_before > ${notBefore} THEN not_before ELSE ${notBefore} END
      WHERE ${free}`);
  }
  // not_before only when a partner's lifts it: the claim wrote its backoff already (SQLite rewrites
  // the row's claim-index entry whenever the column is SET).
  const lift =
    notBefore > Number(row.not_before)
      ? sql`, not_before = CASE WHEN not_before > ${notBefore} THEN not_before ELSE ${notBefore} END`
      : sql``;
  yield* exec(sql`
    UPDATE decision_jobs SET ${CLEAR_CLAIM}, attempts = attempts - (CASE WHEN attempts > 0 THEN 1 ELSE 0 END)${lift}
    WHERE ${whereKey({ itemId: row.item_id, questionSet: row.question_set })} AND claim_token = ${row.claim_token}`);
}

/**
 * The (set, partner) pairs of `claimCandidateSql`'s `firstOfGroup`: each set with every co-asking
 * partner that sorts before it (byte order, as the sets are stored), in a stable order.
 */
export function firstOfGroupPairs(
  coAsk: Readonly<Record<string, readonly string[]>> | undefined,
): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (const set of Object.keys(coAsk ?? {}).sort()) {
    for (const partner of [...new Set(coAsk![set])].sort()) if (partner < set) pairs.push([set, partner]);
  }
  return pairs;
}

/**
 * The claim statement, one shape per number of sets skipped (cooling off, DESIGN §3.8), per
 * number of first-of-group pairs and per `liveOnly` (variant `<skipped>:<pairs>` or
 * `<skipped>:<pairs>:live`); parameters `skip0`… name the skipped sets, `groupSet0`/`groupFirst0`…
 * the pairs.
 */
const claimShape = shapeFamily((variant: string) =>
  shape('claim', (d, p: Record<string, Expr>) => {
    const now = p.now;
    const [skipped, paired] = variant.split(':').map((n) => Number.parseInt(n, 10));
    const liveOnly = variant.endsWith(':live');
    const skip = Array.from({ length: skipped }, (_, i) => p[`skip${i}`]);
    const pairs = Array.from({ length: paired }, (_, i) => [p[`groupSet${i}`], p[`groupFirst${i}`]] as const);
    return sql`
      UPDATE decision_jobs
      SET ${claimSet(d, p.workerId, p.token, now, p.leaseMs)}
      WHERE (item_id, question_set) = (${claimCandidateSql(d, now, skip, liveOnly, pairs)})
      RETURNING *`;
  }),
);

/**
 * Claims the other owed jobs of a claimed job's item in `sets` that are claimable now (owed, due,
 * no live lease, below the abandon limit), under the same lease and counting their attempt as any
 * claim does, so one call can ask all their keys (co-asking, DESIGN §7.2). One UPDATE …
 * RETURNING on the item's rows of the primary key; a row another claimant holds is simply not
 * claimed, and on Postgres one another transaction is locking is passed over (`SKIP LOCKED`), never
 * waited on: a claim waits on no row, so two claims cannot deadlock. A sibling found at the abandon limit is left for the normal
 * claim, which parks it. A sibling still under a dead worker's expired claim is claimed too, its
 * abandon counted and no backoff set (DESIGN §3 "Abandons"): it is not claimed first, and put back
 * alone it would be asked in a call of its own. The claims share one fresh token: each outcome is
 * still fenced per row.
 * @returns the sibling claims, in set-name order (empty when none is claimable).
 */
export function claimSiblingJobs(
  c: SqlContext,
  claim: Claim,
  sets: readonly string[],
  o: { leaseMs: number; abandonLimit: number },
): Promise<Claim[]> {
  return autocommit(c, () => siblingSteps(c, claim, sets, o));
}

function* siblingSteps(
  c: SqlContext,
  claim: Claim,
  sets: readonly string[],
  o: { leaseMs: number; abandonLimit: number },
): Steps<Claim[]> {
  const wanted = [...new Set(sets)].filter((s) => s !== claim.questionSet).sort();
  if (wanted.length === 0) return [];
  const now = yield* nowSql();
  const named = Object.fromEntries(wanted.map((s, i) => [`set${i}`, s]));
  const got = yield* rows<RawJob>(
    bind(siblingShape(wanted.length), {
      ...named,
      itemId: claim.itemId,
      workerId: claim.claimedBy,
      token: c.newToken(),
      now,
      leaseMs: o.leaseMs,
      abandonLimit: o.abandonLimit,
    }),
  );
  return got.map(toClaim).sort((a, b) => (a.questionSet < b.questionSet ? -1 : 1));
}

/** The sibling claim, one shape per number of sets; parameters `set0`… name them. */
const siblingShape = shapeFamily((n: number) =>
  shape('claim siblings', (d, p: Record<string, Expr>) => {
    const now = p.now;
    const sets = Array.from({ length: n }, (_, i) => p[`set${i}`]);
    return sql`
      UPDATE decision_jobs
      SET ${claimSet(d, p.workerId, p.token, now, p.leaseMs, false)}
      WHERE (item_id, question_set) IN (
        SELECT j.item_id, j.question_set FROM decision_jobs j
        WHERE j.item_id = ${p.itemId} AND j.question_set IN (${sql.join(
          sets.map((s) => sql`${s}`),
          sql`, `,
        )})
          AND j.state = 'owed' AND j.not_before <= ${now}
          AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${now})
          AND j.abandons < ${p.abandonLimit}
        ORDER BY j.question_set${d.skipLocked})
      RETURNING *`;
  }),
);

const CLEAR_CLAIM = sql`claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL`;

function whereKey(k: { itemId: string; questionSet: string }): SQL {
  return sql`item_id = ${k.itemId} AND question_set = ${k.questionSet}`;
}

export function* park(
  c: SqlContext,
  now: Expr,
  itemId: string,
  questionSet: string,
  reason: string,
  token?: string,
): Steps<void> {
  yield* exec(sql`
    UPDATE decision_jobs SET state = 'parked', ${CLEAR_CLAIM}, defers = 0,
           last_error = ${bound(reason)}, last_error_at = ${now}
    WHERE ${whereKey({ itemId, questionSet })}${token === undefined ? sql`` : sql` AND claim_token = ${token}`}`);
}

const renewShape = shape<'now' | 'leaseMs' | 'itemId' | 'questionSet' | 'token'>(
  'renew lease',
  (d, p) => sql`
  UPDATE decision_jobs SET lease_expires_at = ${p.now} + ${d.int8(p.leaseMs)}
  WHERE item_id = ${p.itemId} AND question_set = ${p.questionSet} AND claim_token = ${p.token}`,
);

/** Extends the lease when the token still matches; false when the claim was lost. */
export function renewLease(c: SqlContext, claim: Claim, leaseMs: number): Promise<boolean> {
  return autocommit(c, function* () {
    const now = yield* nowSql();
    const n = yield* changes(
      bind(renewShape, { now, leaseMs, itemId: claim.itemId, questionSet: claim.questionSet, token: claim.claimToken }),
    );
    return n === 1;
  });
}

const lockJobShape = shape<'itemId' | 'questionSet'>(
  'lock job',
  (d, p) => sql`
  SELECT * FROM decision_jobs WHERE item_id = ${p.itemId} AND question_set = ${p.questionSet}${d.forUpdate}`,
);

/**
 * Runs one outcome under the fence, in one transaction with the row locked: `lost` when the token
 * no longer matches; `superseded` when the generation moved (only the claim is cleared and
 * not_before recomputed from the debounce rule); otherwise `apply` runs and the outcome is
 * `applied`. `completion` marks the complete and drop outcomes: a job that survives its completion
 * gets enqueued_at = owed_at, the time of the write the evaluation did not see (DESIGN §3.4), so
 * its delay cap counts from that write. Other outcomes keep enqueued_at: their owed work is still
 * the old one.
 */
function fenced(
  c: SqlContext,
  claim: Claim,
  apply: (row: RawJob, now: Expr) => Steps<void>,
  completion = false,
): Promise<OutcomeResult> {
  return write(c, () => fencedSteps(c, claim, apply, completion));
}

function* fencedSteps(
  c: SqlContext,
  claim: Claim,
  apply: (row: RawJob, now: Expr) => Steps<void>,
  completion: boolean,
): Steps<OutcomeResult> {
  const row = yield* one<RawJob>(bind(lockJobShape, { itemId: claim.itemId, questionSet: claim.questionSet }));
  if (!row || row.claim_token !== claim.claimToken) return 'lost';
  const now = yield* nowSql();
  if (row.generation !== claim.generation) {
    const t = setTiming(c.registry, claim.questionSet);
    const { max, min } = c.d;
    const enqueuedAt = completion ? sql`${max}(enqueued_at, owed_at)` : sql`enqueued_at`;
    const latest = latestAnswerSql(c.d, sql`${claim.itemId}`, claim.questionSet);
    yield* exec(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, enqueued_at = ${enqueuedAt},
        not_before = ${min}(${max}(not_before, ${now} + ${c.d.int8(t.quietPeriodMs)}, coalesce(${latest} + ${c.d.int8(t.reaskDebounceMs)}, 0)),
                           ${delayCapSql(c.d, enqueuedAt, sql`${claim.itemId}`, claim.questionSet, t.maxDelayMs)})
      WHERE ${whereKey(claim)}`);
    return 'superseded';
  }
  yield* apply(row, now);
  return 'applied';
}

/**
 * The fence of a completion whose plain DELETE matched no row (token or generation moved since the
 * claim): `lost`, or `superseded` with the claim cleared and not_before recomputed, as
 * `completeJob` decides it. For SQLite's own finish (sqlite/job-statements.ts), which runs it
 * inside its open transaction: a cold path, kept here so the rule exists once.
 */
export function completionFenceSteps(c: SqlContext, claim: Claim): Steps<OutcomeResult> {
  return fencedSteps(c, claim, () => exec(sql`DELETE FROM decision_jobs WHERE ${whereKey(claim)}`), true);
}

const completeShape = shape<'itemId' | 'questionSet' | 'token' | 'generation'>(
  'complete job',
  (d, p) => sql`
  DELETE FROM decision_jobs WHERE item_id = ${p.itemId} AND question_set = ${p.questionSet} AND claim_token = ${p.token} AND generation = ${d.int4(p.generation)}`,
);

/**
 * Evaluation succeeded (including "already answered" and "nothing to ask"): delete the row. The
 * common case, token and generation both unchanged, is one DELETE on its own; anything else goes
 * through the fence to tell `lost` from `superseded`.
 */
export async function completeJob(
  c: SqlContext,
  claim: Claim,
  outcome: FinishOutcome = JOB_OUTCOMES.complete,
): Promise<OutcomeResult> {
  const done = await write(c, function* () {
    const n = yield* changes(bind(completeShape, completeValues(claim)));
    if (n === 1) yield* countOutcomesNow(outcome);
    return n;
  });
  if (done === 1) return 'applied';
  return fenced(
    c,
    claim,
    function* (_row, now) {
      yield* exec(sql`DELETE FROM decision_jobs WHERE ${whereKey(claim)}`);
      yield* countOutcomes(now, outcome);
    },
    true,
  );
}

const completeValues = (claim: Claim) => ({
  itemId: claim.itemId,
  questionSet: claim.questionSet,
  token: claim.claimToken,
  generation: claim.generation,
});

/**
 * `completeJob` with the last call's answers and spend and the slot's next claim, in one write
 * transaction (see `JobFinish`): the answers (stored whatever the fence says), the completion
 * (one DELETE in the common case, the fence otherwise), the claim, then the spend.
 */
export function finishJob(c: SqlContext, claim: Claim, f: JobFinish): Promise<FinishedJob> {
  return write(c, function* () {
    const done = yield* finishSteps(c, claim, f);
    yield* countFinishes([{ finish: f, done }]);
    return done;
  });
}

/** `finishJob`'s statements, for a caller that runs several finishes in one transaction (finish-many.ts). */
export function finishSteps(c: SqlContext, claim: Claim, f: JobFinish): Steps<FinishedJob> {
  return (function* (): Steps<FinishedJob> {
    const now = yield* nowSql();
    const answersStored = f.answers ? yield* insertDecisionsTx(c, now, f.answers.decisions, f.answers.surfacing) : 0;
    let result: OutcomeResult = 'applied';
    if ((yield* changes(bind(completeShape, completeValues(claim)))) !== 1) {
      result = yield* fencedSteps(c, claim, () => exec(sql`DELETE FROM decision_jobs WHERE ${whereKey(claim)}`), true);
    }
    const next = f.claimNext ? yield* claimSteps(c, f.claimNext) : null;
    // The spend last: every slot of every process adds to the same hour's row, whose row lock (on
    // Postgres) is held until the commit; taken first, it serialised the whole transaction
    // across the slots (bench part d: 4 processes 59 jobs/s against 35 for one; with the spend last
    // 89–93, level with the code before finishJob, 84.5 measured alongside).
    if (f.answers) {
      if (f.answers.reservationId !== null) yield* settleReservationTx(f.answers.reservationId);
      yield* recordSpendTx(c, now, f.answers.spend);
    }
    return { result, answersStored, next };
  })();
}

/** The item or its collection is gone, or the set no longer applies: delete the row. */
export function dropJob(c: SqlContext, claim: Claim): Promise<OutcomeResult> {
  return completeJob(c, claim, JOB_OUTCOMES.drop);
}

/** Parks the job with a reason: visible, re-owed by the next write or `jobs retry`. */
export function parkJob(c: SqlContext, claim: Claim, reason: string): Promise<OutcomeResult> {
  return fenced(c, claim, function* (_row, now) {
    yield* park(c, now, claim.itemId, claim.questionSet, reason);
    yield* countOutcomes(now, JOB_OUTCOMES.park);
  });
}

/**
 * A permanent refusal: `refusals += 1`, clear the claim, back off; the refusal that brings the
 * count to `refusalLimit` parks instead (DESIGN §3: the 5th refusal parks).
 */
export async function refuseJob(
  c: SqlContext,
  claim: Claim,
  o: { backoffMs: number; error: string; refusalLimit: number },
): Promise<OutcomeResult | 'parked'> {
  let parked = false;
  const r = await fenced(c, claim, function* (row, now) {
    if (row.refusals + 1 >= o.refusalLimit) {
      parked = true;
      yield* exec(sql`UPDATE decision_jobs SET refusals = refusals + 1 WHERE ${whereKey(claim)}`);
      yield* park(c, now, claim.itemId, claim.questionSet, refusalParkReason(row.refusals + 1, o.error));
      yield* countOutcomes(now, JOB_OUTCOMES.park);
      return;
    }
    yield* exec(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, refusals = refusals + 1, defers = 0,
        not_before = ${c.d.max}(not_before, ${now} + ${c.d.int8(o.backoffMs)}),
        last_error = ${bound(o.error)}, last_error_at = ${now}
      WHERE ${whereKey(claim)}`);
    yield* countOutcomes(now, JOB_OUTCOMES.refuse);
  });
  return r === 'applied' && parked ? 'parked' : r;
}

/** A transient failure: clear the claim, back off, reset the defer count. Never dropped. `refusals` is kept. */
export function failJob(c: SqlContext, claim: Claim, o: { backoffMs: number; error: string }): Promise<OutcomeResult> {
  return fenced(c, claim, function* (_row, now) {
    yield* fail(c, claim, now, o.backoffMs, o.error);
    yield* countOutcomes(now, JOB_OUTCOMES.fail);
  });
}

function fail(c: SqlContext, claim: Claim, now: Expr, backoffMs: number, error: string): Steps<void> {
  return exec(sql`
    UPDATE decision_jobs SET ${CLEAR_CLAIM}, defers = 0,
      not_before = ${c.d.max}(not_before, ${now} + ${c.d.int8(Math.ceil(backoffMs))}),
      last_error = ${bound(error)}, last_error_at = ${now}
    WHERE ${whereKey(claim)}`);
}

/**
 * A rate limit, a Retry-After above the provider's cap, or the limiter or spend cap says wait: no
 * attempt counted, due at reset time, one more consecutive defer. The defer past `deferLimit` in a
 * row is recorded as a fail instead (DESIGN §3.7), read and written under the same fence.
 */
export async function deferJob(
  c: SqlContext,
  claim: Claim,
  o: { delayMs: number; reason: string; deferLimit: number; failBackoffMs: number },
): Promise<OutcomeResult | 'failed'> {
  let failed = false;
  const r = await fenced(c, claim, function* (row, now) {
    if (row.defers >= o.deferLimit) {
      failed = true;
      yield* fail(c, claim, now, Math.max(o.failBackoffMs, o.delayMs), deferLimitReason(row.defers, o.reason));
      yield* countOutcomes(now, JOB_OUTCOMES.fail);
      return;
    }
    yield* exec(sql`
      UPDATE decision_jobs SET ${CLEAR_CLAIM}, attempts = ${c.d.max}(attempts - 1, 0), defers = defers + 1,
        not_before = ${c.d.max}(not_before, ${now} + ${c.d.int8(Math.ceil(o.delayMs))}),
        last_error = ${bound(o.reason)}, last_error_at = ${now}
      WHERE ${whereKey(claim)}`);
    yield* countOutcomes(now, JOB_OUTCOMES.defer);
  });
  return r === 'applied' && failed ? 'failed' : r;
}

/**
 * Shutdown, provider swap, workspace deleted, a set cooling off: no attempt counted; claimable at
 * once, or from now + `holdMs`. `defers` is kept (a release is no verdict of the provider's).
 */
export function releaseJob(
  c: SqlContext,
  claim: Claim,
  o: { holdMs?: number; error?: string } = {},
): Promise<OutcomeResult> {
  return fenced(c, claim, function* (_row, now) {
    yield* exec(sql`UPDATE decision_jobs SET ${CLEAR_CLAIM}, attempts = ${c.d.max}(attempts - 1, 0)
      ${o.holdMs ? sql`, not_before = ${c.d.max}(not_before, ${now} + ${c.d.int8(Math.ceil(o.holdMs))})` : sql``}
      ${o.error !== undefined ? sql`, last_error = ${bound(o.error)}, last_error_at = ${now}` : sql``}
      WHERE ${whereKey(claim)}`);
    yield* countOutcomes(now, JOB_OUTCOMES.release);
  });
}

// ------------------------------------------------------------------ operator reads and commands

/** The filter's conditions; `errorWithinMs` only when `now` is given (`listJobs` alone reads it). */
function filterWhere(c: SqlContext, f: JobFilter, now?: Expr): SQL | undefined {
  const j = c.d.t.decisionJobs;
  const conds: SQL[] = [];
  if (f.errorWithinMs !== undefined && now !== undefined)
    conds.push(sql`${j.lastErrorAt} >= ${now} - ${c.d.int8(Math.trunc(f.errorWithinMs))}`);
  if (f.questionSet) conds.push(eq(j.questionSet, f.questionSet));
  if (f.state) conds.push(eq(j.state, f.state));
  if (f.workspaceId) conds.push(eq(j.workspaceId, f.workspaceId));
  if (f.itemId) conds.push(eq(j.itemId, f.itemId));
  return conds.length ? and(...conds) : undefined;
}

export function getJob(c: SqlContext, itemId: string, questionSet: string): Promise<JobRow | null> {
  const j = c.d.t.decisionJobs;
  return read(c, function* () {
    const r = yield* one((db) =>
      db
        .select()
        .from(j)
        .where(and(eq(j.itemId, itemId), eq(j.questionSet, questionSet))),
    );
    return (r as JobRow | undefined) ?? null;
  });
}

export function listJobs(c: SqlContext, f: JobFilter): Promise<JobRow[]> {
  const j = c.d.t.decisionJobs;
  return read(c, function* () {
    const where = filterWhere(c, f, yield* nowSql());
    return (yield* rows((db) =>
      db
        .select()
        .from(j)
        .where(where)
        .orderBy(j.priority, j.enqueuedAt, c.d.byteOrder(j.itemId))
        .limit(f.limit ?? 1000),
    )) as JobRow[];
  });
}

/**
 * `jobs retry` (DESIGN §3): owed, counters 0, not_before = now (the one writer that may lower it).
 * A batched job leaves its batch (`batch_id` cleared, DESIGN §7.4): the result that comes later
 * finds it no longer in the batch and stores nothing for it (batches.ts `storeBatchResult`).
 */
export function retryJobs(c: SqlContext, f: JobFilter): Promise<number> {
  const w = filterWhere(c, f);
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return yield* changes(sql`
      UPDATE decision_jobs SET state = 'owed', batch_id = NULL, attempts = 0, refusals = 0, abandons = 0, defers = 0, not_before = ${now}
      ${w ? sql`WHERE ${w}` : sql``}`);
  });
}

/**
 * `jobs drop`: deletes matching rows that are not under a live lease. A batched job has no lease
 * and is dropped too: its batch's result stores nothing for it (DESIGN §7.4).
 */
export function dropJobs(c: SqlContext, f: JobFilter): Promise<number> {
  const w = filterWhere(c, f);
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return yield* changes(sql`
      DELETE FROM decision_jobs
      WHERE (lease_expires_at IS NULL OR lease_expires_at <= ${now}) ${w ? sql`AND ${w}` : sql``}`);
  });
}

/** Queue counts at one instant, and the per-(set, state) counts in byte order of the set name. */
export function queueStats(c: SqlContext): Promise<QueueStats> {
  return read(c, function* () {
    const n = yield* nowSql();
    const owedFree = sql`state = 'owed' AND (lease_expires_at IS NULL OR lease_expires_at <= ${n})`;
    const s = (yield* one<{
      now: number;
      due: number;
      waiting: number;
      inflight: number;
      parked: number;
      batched: number;
      oldest: number | null;
      next_due: number | null;
      leases_end: number | null;
    }>(sql`
      SELECT ${n} AS now,
        coalesce(sum(CASE WHEN ${owedFree} AND not_before <= ${n} THEN 1 ELSE 0 END), 0) AS due,
        coalesce(sum(CASE WHEN ${owedFree} AND not_before > ${n} THEN 1 ELSE 0 END), 0) AS waiting,
        coalesce(sum(CASE WHEN state = 'owed' AND lease_expires_at > ${n} THEN 1 ELSE 0 END), 0) AS inflight,
        coalesce(sum(CASE WHEN state = 'parked' THEN 1 ELSE 0 END), 0) AS parked,
        coalesce(sum(CASE WHEN state = 'batched' THEN 1 ELSE 0 END), 0) AS batched,
        min(CASE WHEN state = 'owed' THEN enqueued_at END) AS oldest,
        min(CASE WHEN state = 'owed' AND not_before > ${n} THEN not_before END) AS next_due,
        max(CASE WHEN state = 'owed' AND lease_expires_at > ${n} THEN lease_expires_at END) AS leases_end
      FROM decision_jobs`))!;
    const bySet = yield* rows<{ questionSet: string; state: string; count: number }>(sql`
      SELECT question_set AS "questionSet", state, count(*) AS count FROM decision_jobs
      GROUP BY question_set, state ORDER BY ${c.d.byteOrder(sql`question_set`)}, ${c.d.byteOrder(sql`state`)}`);
    return {
      owedDue: Number(s.due),
      owedWaiting: Number(s.waiting),
      inFlight: Number(s.inflight),
      parked: Number(s.parked),
      batched: Number(s.batched),
      oldestOwedAgeMs: s.oldest === null ? null : Number(s.now) - Number(s.oldest),
      nextDueAt: s.next_due === null ? null : Number(s.next_due),
      leasesEndAt: s.leases_end === null ? null : Number(s.leases_end),
      bySet: bySet.map((b) => ({ ...b, count: Number(b.count) })),
    };
  });
}
