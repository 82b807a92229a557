import type { QuestionSet, Registry } from '../decision/registry.js';
import type { SpendBacklog } from './spend-backlog.js';
import type { Provider } from '../providers/provider.js';
import type { Claim, JobFinish, JobFinishResult, OutcomeResult } from '../store/store.js';
import { JOB_OUTCOMES } from '../store/throughput.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { SpendStore } from '../store/spend-store.js';
import type { Store } from '../store/whole-store.js';
import type { Logger } from '../log.js';
import { systemClock, type Clock } from '../clock.js';
import { DEFER_LIMIT } from '../store/write-rules.js';
import { backoffMs } from './backoff.js';
import type { Committer } from './committer.js';
import { errCode } from './error-code.js';
import { askGroup, planGroup, type EvaluateDeps, type Evaluation } from './evaluate.js';
import type { EvalOutcome, EvalStats, Recorded } from './outcome.js';
import { SET_COOLOFF_BASE_MS, type SetCooloffs } from './set-cooloff.js';

/** Runner settings (DESIGN §3, §10). Durations in milliseconds. */
export interface RunnerOptions {
  store: Pick<TrackerStore, 'listCollections' | 'listItems' | 'now'> &
    Pick<DecisionStore, 'listDecisions'> &
    Pick<SpendStore, 'settleSpendReservation' | 'recordSpooledSpend' | 'forgetSpooledSpend'> &
    Pick<
      Store,
      | 'answeredKeys'
      | 'answeredKeysOfSets'
      | 'checkClaim'
      | 'checkClaims'
      | 'checkLiveness'
      | 'claimNextJob'
      | 'completeJob'
      | 'deferJob'
      | 'dropJob'
      | 'failJob'
      | 'finishJob'
      | 'finishJobs'
      | 'insertDecisions'
      | 'loadItemForEvaluation'
      | 'parkJob'
      | 'recordSpend'
      | 'refuseJob'
      | 'releaseJob'
      | 'renewLease'
    >;
  registry: Registry;
  provider: Provider;
  logger: Logger;
  /** Identifies this runner in `claimed_by`. */
  workerId: string;
  /** Claim lease; must cover one provider call's worst case. @defaultValue 600 000 */
  leaseMs: number;
  /** Claims ended without an outcome before the job parks. @defaultValue 8 */
  abandonLimit?: number;
  /** The refusal that brings the count to this parks. @defaultValue 5 */
  refusalLimit?: number;
  /** Jitter source for backoff, in [0, 1). */
  random?: () => number;
  acquirePermit?: EvaluateDeps['acquirePermit'];
  beforeAsk?: EvaluateDeps['beforeAsk'];
  /** Spend whose write failed is kept here and written at the start of a later run (`SpendBacklog`). */
  spendBacklog?: SpendBacklog;
  /**
   * Sets cooling off after a rejected schema (DESIGN §3.8), shared by a worker's slots. Without
   * it, a rejected job is still held for SET_COOLOFF_BASE_MS, but other jobs of its set are claimed.
   */
  setCooloffs?: SetCooloffs;
  /** Consecutive defers before the next counts as a fail (DESIGN §3.7). @defaultValue 20 */
  deferLimit?: number;
  /** Called once per recorded outcome (metrics). */
  onOutcome?: (e: RunReport) => void;
  /**
   * Called once with each spend record a call of this runner writes (the metrics' provider
   * counters): as it is written, or, for the last call's spend, once the completion that holds it
   * committed. Spend kept in `spendBacklog` and written later is not reported again.
   */
  onSpend?: EvaluateDeps['onSpend'];
  /**
   * Claim the next job in the transaction that completes this one (`Store.finishJob`) and return
   * it in `RunReport.next`; the caller passes it to the next `runOnce` or releases it. The worker's
   * slots do; a caller that runs one job at a time leaves it off. @defaultValue false
   */
  claimNext?: boolean;
  /**
   * Co-asking (DESIGN §7.2): with the claimed job, claim the item's other owed jobs that are due
   * now and whose sets may read the same state (`coAskPartners`), and ask sets whose state bytes
   * are identical in one call. @defaultValue true
   */
  coAsk?: boolean;
  /**
   * The process's group committer (DESIGN §10.6): a group's complete or drop outcomes are handed to
   * it together and committed with the other slots' in one transaction. Without it each group's
   * finishes are one transaction of their own (`Store.finishJobs`, `Store.finishJob` for one).
   */
  committer?: Committer;
  /** Claim live work only (priority 0), leaving backfill-priority jobs to provider batches (DESIGN §7.3). @defaultValue false */
  liveOnly?: boolean;
  /** Times each report's `durationMs` (the worker passes its own). @defaultValue systemClock */
  clock?: Clock;
}

const DEFAULT_ABANDON_LIMIT = 8;
export const DEFAULT_REFUSAL_LIMIT = 5;

/** What one `runOnce` did. */
export interface RunReport {
  claim: Claim;
  /**
   * The outcome as recorded: a refusal that reached the refusal limit reads `park`, a defer past
   * the defer limit `fail` (DESIGN §3.7), as the store applied them.
   */
  outcome: EvalOutcome;
  /** What the fenced write did (`applied`, `superseded`, `lost`), or `unrecorded` when it failed. */
  recorded: Recorded;
  stats: EvalStats;
  /** From the claim in hand to the outcome recorded, ms of `RunnerOptions.clock`. */
  durationMs: number;
  /** With `claimNext`: the job claimed in the completion's transaction, held for the next `runOnce`; else null. */
  next: Claim | null;
}

/**
 * One job's life (DESIGN §3 "One job at a time", §7), read top to bottom; each step names the
 * function it calls and the file a reader opens next:
 * 1. claim: the job the previous completion claimed (`held`), else `claimJob`: `committer.claim`
 *    (src/runner/committer.ts; `store.claimNextJobs`) or `store.claimNextJob`, with the item's
 *    co-asked jobs (JobStore, src/store/job-store.ts; SQLite: src/store/sqlite/sqlite-store.ts).
 * 2. load and skip: `planGroup` (src/runner/evaluate.ts) loads the item once
 *    (`store.loadItemForEvaluation`), ends each job that needs no call (gone, no longer applies,
 *    nothing to ask, already answered: `answeredNowOfSets`, src/runner/answered.ts, one read for
 *    the group) and plans the calls.
 * 3. liveness, ask and record: `askGroup` (evaluate.ts), per call `store.checkClaims` (the one
 *    read before the call, for every job in it), the permits, `provider.ask`, the answers and spend stored; the last
 *    call's answers are handed back to be stored with the completion.
 * 4. complete: `recordGroup` here: every job of the group that ended complete or drop goes through
 *    `finishGroup` → `committer.finishAll` (src/runner/committer.ts), else `store.finishJobs`
 *    (answers + spend + fenced completion of each, and the slot's next claim, one transaction; on
 *    SQLite src/store/sqlite/job-statements.ts `finishJobs`); any other outcome through
 *    `recordOutcome`.
 *
 * Returns null when nothing is claimable. Never throws for a job's failure; a store failure while
 * claiming propagates so the caller can back off.
 */
export async function runOnce(
  opts: RunnerOptions,
  signal: AbortSignal,
  held: Claim | null = null,
): Promise<RunReport | null> {
  if (signal.aborted) {
    if (held) await releaseHeld(opts, held);
    return null;
  }
  // Spend kept from an earlier failed write goes first: the disk may have room again.
  if (opts.spendBacklog?.size) await opts.spendBacklog.flush(opts.store);

  const claim = held ?? (await claimJob(opts));
  if (!claim) return null;
  const started = (opts.clock ?? systemClock).now();
  const siblings = claim.coAsked ?? [];
  const claims = [claim, ...siblings];
  const deps = evaluateDeps(opts, signal);

  const plan = await planGroup(claims, deps);
  const evaluations = await askGroup(claims, plan, deps);

  const reports = await recordGroup(opts, claims, evaluations, started);
  return reports[0]!;
}

/**
 * Claims the next job (with the sets cooling off passed over and the co-asked jobs taken with it):
 * through the process's committer when there is one (`Committer.claim`: the slots that claim in
 * the same turn share one commit), else `store.claimNextJob`.
 */
async function claimJob(opts: RunnerOptions): Promise<Claim | null> {
  const skip = await skipSets(opts);
  const abandonLimit = opts.abandonLimit ?? DEFAULT_ABANDON_LIMIT;
  if (opts.committer)
    return opts.committer.claim({
      workerId: opts.workerId,
      leaseMs: opts.leaseMs,
      abandonLimit,
      skipSets: skip,
      ...claimOptions(opts, skip),
    });
  return opts.store.claimNextJob(opts.workerId, opts.leaseMs, abandonLimit, skip, claimOptions(opts, skip));
}

/**
 * What the evaluation of a claimed group needs from the runner's settings: made once per settings
 * object and signal, not once per job (a worker's slot keeps its settings while nothing changes).
 */
function evaluateDeps(opts: RunnerOptions, signal: AbortSignal): EvaluateDeps {
  const known = depsByOptions.get(opts);
  if (known?.signal === signal) return known;
  const deps: EvaluateDeps = {
    store: opts.store,
    registry: opts.registry,
    provider: opts.provider,
    logger: opts.logger,
    leaseMs: opts.leaseMs,
    signal,
    acquirePermit: opts.acquirePermit,
    beforeAsk: opts.beforeAsk,
    finishInCompletion: true,
    spendBacklog: opts.spendBacklog,
    onSpend: opts.onSpend,
  };
  depsByOptions.set(opts, deps);
  return deps;
}
const depsByOptions = new WeakMap<RunnerOptions, EvaluateDeps>();

/**
 * What a claim takes besides its job (DESIGN §7.2, §7.3): with co-asking on, each set's
 * partners (`coAskPartners`) less the sets cooling off, claimed with the job when due; with
 * `liveOnly`, live work only.
 */
function claimOptions(
  opts: RunnerOptions,
  skip: readonly string[],
): { liveOnly: boolean; coAsk?: Record<string, string[]> } {
  const liveOnly = opts.liveOnly === true;
  if (opts.coAsk === false) return { liveOnly };
  let coAsk = partnersOf(opts.registry);
  if (skip.length) {
    const skipped = new Set(skip);
    coAsk = Object.fromEntries(
      Object.entries(coAsk)
        .map(([set, p]) => [set, p.filter((s) => !skipped.has(s))])
        .filter(([, p]) => p.length > 0),
    );
  }
  return Object.keys(coAsk).length ? { liveOnly, coAsk } : { liveOnly };
}

/** Each set's co-asking partners, worked out once per registry (a reload installs a new one), not on every claim. */
const partnersByRegistry = new WeakMap<Registry, Record<string, string[]>>();
function partnersOf(registry: Registry): Record<string, string[]> {
  const known = partnersByRegistry.get(registry);
  if (known) return known;
  const all = registry.all();
  const m: Record<string, string[]> = {};
  for (const set of all) {
    const p = coAskPartners(set, all);
    if (p.length) m[set.name] = p;
  }
  partnersByRegistry.set(registry, m);
  return m;
}

/**
 * The sets whose state of an item can be byte-identical to `set`'s, so their jobs may share a
 * call (DESIGN §7.2): the same state recipe (item or per-comment state, links, trail) and both
 * dated or both undated (§5.2's `as_of`). Whether the bytes really are identical is decided per
 * call (`coAskCalls`); this only spares the claim query when no set could match.
 */
export function coAskPartners(set: QuestionSet, all: readonly QuestionSet[]): string[] {
  return all
    .filter(
      (s) =>
        s.name !== set.name &&
        s.perComment === set.perComment &&
        s.withLinks === set.withLinks &&
        s.noTrail === set.noTrail &&
        (s.maxAgeMs === null) === (set.maxAgeMs === null),
    )
    .map((s) => s.name);
}

/** What recording one job's evaluation did. */
interface JobRecord {
  outcome: EvalOutcome;
  recorded: RunReport['recorded'];
  next: Claim | null;
}

/**
 * Records a claimed group's evaluations (the slot's job first in `claims`), logs and reports each,
 * the co-asked jobs before the slot's job. Every job that ended complete or drop is finished
 * together (`finishGroup`: one transaction, so one commit covers the group), the slot's job with
 * the slot's next claim when `claimNext`; any other outcome is recorded on its own first
 * (`recordOrLog`).
 * @returns one report per claim, in the order of `claims`.
 */
async function recordGroup(
  opts: RunnerOptions,
  claims: readonly Claim[],
  evaluations: readonly Evaluation[],
  started: number,
): Promise<RunReport[]> {
  const done: JobRecord[] = [];
  const finishing: number[] = [];
  for (const [i, claim] of claims.entries()) {
    const outcome = evaluations[i]!.outcome;
    if (outcome.kind === 'complete' || outcome.kind === 'drop') finishing.push(i);
    else done[i] = { ...(await recordOrLog(opts, claim, outcome)), next: null };
  }
  if (finishing.length) {
    const finished = await finishGroup(
      opts,
      finishing.map((i) => ({
        claim: claims[i]!,
        evaluation: evaluations[i]!,
        withNext: i === 0 && opts.claimNext === true,
      })),
    );
    finishing.forEach((i, k) => (done[i] = finished[k]!));
  }
  const cool = opts.setCooloffs;
  const reports: RunReport[] = [];
  // The co-asked jobs first, the slot's job (index 0) last.
  for (let k = 1; k <= claims.length; k++) {
    const i = k % claims.length;
    const claim = claims[i]!;
    const { stats, ref } = evaluations[i]!;
    const { outcome, recorded, next } = done[i]!;
    // The set's schema was accepted: any cooling-off of the set ends (no I/O when it had none).
    if (cool && outcome.kind === 'complete' && stats.questions > 0) await cool.clear(claim.questionSet);
    const durationMs = (opts.clock ?? systemClock).now() - started;
    const report: RunReport = { claim, outcome, recorded, stats, durationMs, next };
    logReport(opts.logger, report, ref);
    opts.onOutcome?.(report);
    reports[i] = report;
  }
  return reports;
}

/** Sets a claim passes over now: those cooling off after a rejected schema (no I/O when none is). */
async function skipSets(opts: RunnerOptions): Promise<string[]> {
  const cool = opts.setCooloffs;
  return cool?.any ? cool.active(await opts.store.now()) : [];
}

/**
 * Gives back a claim taken for a next run that will not happen (shutdown, a cancelled pass, a
 * spend cap): released without an attempt, so it is claimable at once, with the jobs claimed with
 * it for co-asking. A failure is logged; the lease bounds the job.
 */
export async function releaseHeld(opts: RunnerOptions, claim: Claim): Promise<void> {
  for (const c of [claim, ...(claim.coAsked ?? [])]) {
    try {
      await opts.store.releaseJob(c);
    } catch (err) {
      opts.logger.error({ set: c.questionSet, itemId: c.itemId, err: errCode(err) }, 'held claim not released');
    }
  }
}

/**
 * Finishes complete and drop outcomes of one group, each with its last call's answers and spend and
 * (`withNext`) the slot's next claim, in ONE transaction: handed to the process's committer
 * (`Committer.finishAll`, committed with the other slots' finishes), else `Store.finishJobs`
 * (`Store.finishJob` for a group of one). An entry that fails, or all of them when the
 * transaction fails, takes the per-job path (`finishAlone`).
 * @returns one result per entry, in the order given.
 */
async function finishGroup(
  opts: RunnerOptions,
  group: ReadonlyArray<{ claim: Claim; evaluation: Evaluation; withNext: boolean }>,
): Promise<JobRecord[]> {
  let results: JobFinishResult[];
  try {
    const skip = group.some((g) => g.withNext) ? await skipSets(opts) : [];
    const entries = group.map(({ claim, evaluation, withNext }) => ({
      claim,
      finish: {
        answers: evaluation.finish,
        outcome: evaluation.outcome.kind === 'drop' ? JOB_OUTCOMES.drop : JOB_OUTCOMES.complete,
        claimNext: withNext
          ? {
              workerId: opts.workerId,
              leaseMs: opts.leaseMs,
              abandonLimit: opts.abandonLimit ?? DEFAULT_ABANDON_LIMIT,
              skipSets: skip,
              ...claimOptions(opts, skip),
            }
          : undefined,
      },
    }));
    if (opts.committer) results = await opts.committer.finishAll(entries);
    else if (entries.length === 1)
      results = [{ ok: true, finished: await opts.store.finishJob(entries[0]!.claim, entries[0]!.finish) }];
    else results = await opts.store.finishJobs(entries);
  } catch (error) {
    results = group.map(() => ({ ok: false, error }));
  }
  const out: JobRecord[] = [];
  for (const [k, { claim, evaluation }] of group.entries()) {
    const r = results[k];
    if (r?.ok) {
      evaluation.stats.answersStored += r.finished.answersStored;
      if (evaluation.finish) opts.onSpend?.(evaluation.finish.spend);
      out.push({ outcome: evaluation.outcome, recorded: r.finished.result, next: r.finished.next });
      continue;
    }
    opts.logger.warn(
      { set: claim.questionSet, itemId: claim.itemId, err: errCode(r?.error) },
      'completion with answers failed: storing them on their own',
    );
    try {
      out.push(await finishAlone(opts, claim, evaluation.outcome, evaluation.finish, evaluation.stats));
    } catch (err) {
      out.push({ outcome: evaluation.outcome, recorded: unrecorded(opts, claim, err), next: null });
    }
  }
  return out;
}

/**
 * A failed finish's per-job path: nothing of it was written, so the answers are stored on their
 * own first (they were paid for) and the job completed separately; an answer insert that fails
 * then records a transient fail, as when answers are stored per call.
 */
async function finishAlone(
  opts: RunnerOptions,
  claim: Claim,
  outcome: EvalOutcome,
  answers: JobFinish['answers'],
  stats: EvalStats,
): Promise<JobRecord> {
  const { store } = opts;
  if (answers) {
    opts.onSpend?.(answers.spend);
    try {
      if (answers.reservationId !== null) await store.settleSpendReservation(answers.reservationId, answers.spend);
      else await store.recordSpend(answers.spend);
    } catch (err) {
      if (opts.spendBacklog) opts.spendBacklog.keep(answers.spend, err);
      else opts.logger.warn({ set: claim.questionSet, err: errCode(err) }, 'spend record failed');
    }
    try {
      stats.answersStored += await store.insertDecisions(answers.decisions, answers.surfacing);
    } catch (err) {
      // The outcome is a fail even when recording it fails too (a full disk): the report and the
      // worker's summary say so, not `complete`.
      const failed: EvalOutcome = { kind: 'fail', reason: `answer insert failed: ${errCode(err)}` };
      return { ...(await recordOrLog(opts, claim, failed)), next: null };
    }
  }
  return { ...(await recordOrLog(opts, claim, outcome)), next: null };
}

/**
 * `recordOutcome`, with a failure to record (disk full or locked) logged and reported as
 * `unrecorded`: the lease still bounds the job, and the idempotency key makes the re-run free
 * when its answers were stored.
 */
async function recordOrLog(
  opts: RunnerOptions,
  claim: Claim,
  o: EvalOutcome,
): Promise<{ outcome: EvalOutcome; recorded: Recorded }> {
  try {
    return await recordOutcome(opts, claim, o);
  } catch (err) {
    return { outcome: o, recorded: unrecorded(opts, claim, err) };
  }
}

function unrecorded(opts: RunnerOptions, claim: Claim, err: unknown): 'unrecorded' {
  opts.logger.error({ set: claim.questionSet, itemId: claim.itemId, err: errCode(err) }, 'outcome not recorded');
  return 'unrecorded';
}

/**
 * Records an evaluation outcome as its fenced store outcome. Returns the outcome the store applied
 * (a refusal at the refusal limit parks, a defer past the defer limit fails: DESIGN §3.7) and what
 * the fence did.
 * @throws the store's error when the write fails.
 */
export async function recordOutcome(
  opts: RunnerOptions,
  claim: Claim,
  o: EvalOutcome,
): Promise<{ outcome: EvalOutcome; recorded: OutcomeResult }> {
  const { store } = opts;
  const as = (recorded: OutcomeResult) => ({ outcome: o, recorded });
  switch (o.kind) {
    case 'complete':
      return as(await store.completeJob(claim));
    case 'drop':
      return as(await store.dropJob(claim, o.reason));
    case 'park':
      return as(await store.parkJob(claim, o.reason));
    case 'refuse': {
      const r = await store.refuseJob(claim, {
        backoffMs: backoffMs(claim.attempts, opts.random),
        error: o.reason,
        refusalLimit: opts.refusalLimit ?? DEFAULT_REFUSAL_LIMIT,
      });
      return r === 'parked' ? { outcome: { kind: 'park', reason: o.reason }, recorded: 'applied' } : as(r);
    }
    case 'fail':
      // DESIGN §3.7: not_before = now + max(backoff(attempts), retry-after).
      return as(
        await store.failJob(claim, {
          backoffMs: Math.max(backoffMs(claim.attempts, opts.random), o.retryAfterMs ?? 0),
          error: o.reason,
        }),
      );
    case 'defer': {
      const r = await store.deferJob(claim, {
        delayMs: o.delayMs,
        reason: o.reason,
        deferLimit: opts.deferLimit ?? DEFER_LIMIT,
        failBackoffMs: backoffMs(claim.attempts, opts.random),
      });
      return r === 'failed' ? { outcome: { kind: 'fail', reason: o.reason }, recorded: 'applied' } : as(r);
    }
    case 'schema_rejected': {
      // DESIGN §3.8: released without an attempt; the set is not claimed for the cooling-off period.
      const holdMs = opts.setCooloffs ? await opts.setCooloffs.enter(claim.questionSet, o.reason) : SET_COOLOFF_BASE_MS;
      return as(await store.releaseJob(claim, { holdMs, error: o.reason }));
    }
    case 'release':
    case 'misconfigured':
      return as(await store.releaseJob(claim));
  }
}

/**
 * One spend line per evaluation that made a call (DESIGN §7 step 7), and one line for every
 * outcome other than complete. Ids, counts and outcomes only. Per-job lines are at debug (a reask
 * of thousands of items must not print thousands of lines at the default level; the totals are in
 * the worker's summary, `status` and /metrics); a park, a misconfigured provider and a rejected
 * schema are warnings, since each needs a person.
 */
function logReport(logger: Logger, r: RunReport, ref: string | undefined): void {
  const needsPerson =
    r.outcome.kind === 'park' || r.outcome.kind === 'misconfigured' || r.outcome.kind === 'schema_rejected';
  // Every other line is at debug: when debug is off, none of their objects is built (two per job).
  if (!needsPerson && !logger.isLevelEnabled('debug')) return;
  const base = { set: r.claim.questionSet, workspaceId: r.claim.workspaceId, itemId: r.claim.itemId, ref };
  if (r.stats.calls > 0) {
    logger.debug(
      {
        ...base,
        questions: r.stats.questions,
        calls: r.stats.calls,
        inputTokens: r.stats.inputTokens,
        outputTokens: r.stats.outputTokens,
        truncated: r.stats.truncated,
        outcome: r.outcome.kind,
      },
      'spend',
    );
  }
  if (r.outcome.kind !== 'complete') {
    const level = needsPerson ? 'warn' : 'debug';
    logger[level](
      { ...base, outcome: r.outcome.kind, reason: r.outcome.reason, recorded: r.recorded, attempts: r.claim.attempts },
      'job outcome',
    );
  } else {
    logger.debug({ ...base, outcome: 'complete', reason: r.outcome.reason, recorded: r.recorded }, 'job outcome');
  }
}
