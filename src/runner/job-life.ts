import type { QuestionSet, Registry } from '../decision/registry.js';
import type { SpendBacklog } from './spend-backlog.js';
import type { Provider } from '../providers/provider.js';
import type { Claim, JobFinish, OutcomeResult } from '../store/store.js';
import { JOB_OUTCOMES } from '../store/throughput.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { SpendStore } from '../store/spend-store.js';
import type { Store } from '../store/whole-store.js';
import type { Logger } from '../log.js';
import { DEFER_LIMIT } from '../store/write-rules.js';
import { backoffMs } from './backoff.js';
import type { Committer } from './committer.js';
import { errCode } from './error-code.js';
import { askGroup, planGroup, type EvaluateDeps, type Evaluation } from './evaluate.js';
import type { EvalOutcome, EvalStats } from './outcome.js';
import { SET_COOLOFF_BASE_MS, type SetCooloffs } from './set-cooloff.js';

/** Runner settings (DESIGN §3, §10). Durations in milliseconds. */
export interface RunnerOptions {
  store: Pick<TrackerStore, 'listCollections' | 'listItems' | 'now'> &
    Pick<DecisionStore, 'listDecisions'> &
    Pick<SpendStore, 'settleSpendReservation'> &
    Pick<
      Store,
      | 'answeredKeys'
      | 'checkClaim'
      | 'checkLiveness'
      | 'claimNextJob'
      | 'completeJob'
      | 'deferJob'
      | 'dropJob'
      | 'failJob'
      | 'finishJob'
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
   * The process's group committer (DESIGN §10.6): a complete or drop outcome's finish is handed to
   * it and committed with the other slots' in one transaction. Without it each finish is its own
   * transaction (`Store.finishJob`).
   */
  committer?: Committer;
  /** Claim live work only (priority 0), leaving backfill-priority jobs to provider batches (DESIGN §7.3). @defaultValue false */
  liveOnly?: boolean;
}

const DEFAULT_ABANDON_LIMIT = 8;
export const DEFAULT_REFUSAL_LIMIT = 5;

/** What one `runOnce` did. */
export interface RunReport {
  claim: Claim;
  outcome: EvalOutcome;
  /**
   * What the fenced store outcome did, or `unrecorded` when recording it failed (the lease bounds
   * the job); `parked` when a refusal reached the limit, `failed` when a defer past the defer limit
   * was recorded as a fail.
   */
  recorded: OutcomeResult | 'parked' | 'failed' | 'unrecorded' | 'not_recorded';
  stats: EvalStats;
  durationMs: number;
  /** With `claimNext`: the job claimed in the completion's transaction, held for the next `runOnce`; else null. */
  next: Claim | null;
}

/**
 * One job's life (DESIGN §3 "One job at a time", §7), read top to bottom; each step names the
 * function it calls and the file a reader opens next:
 * 1. claim: the job the previous completion claimed (`held`), else `store.claimNextJob`, with
 *    the item's co-asked jobs (JobStore, src/store/job-store.ts; SQLite: src/store/sqlite/sqlite-store.ts).
 * 2. load and skip: `planGroup` (src/runner/evaluate.ts) loads the item once
 *    (`store.loadItemForEvaluation`), ends each job that needs no call (gone, no longer applies,
 *    nothing to ask, already answered: `answeredNow`, src/runner/answered.ts) and plans the calls.
 * 3. liveness, ask and record: `askGroup` (evaluate.ts), per call `store.checkClaim` (the one
 *    read before the call), the permits, `provider.ask`, the answers and spend stored; the last
 *    call's answers are handed back to be stored with the completion.
 * 4. complete: `record` here, for the co-asked jobs and then the slot's job: a completion goes
 *    through `finishWithAnswers` → `store.finishJob` (answers + spend + fenced completion + the
 *    slot's next claim, one transaction); any other outcome through `recordOutcome`.
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
  const started = Date.now();
  const siblings = claim.coAsked ?? [];
  const claims = [claim, ...siblings];
  const deps = evaluateDeps(opts, signal);

  const plan = await planGroup(claims, deps);
  const evaluations = await askGroup(claims, plan, deps);

  // The co-asked siblings first, each recorded on its own; then the slot's job, whose completion
  // claims the slot's next job in the same transaction.
  for (const [i, sibling] of siblings.entries()) await record(opts, sibling, evaluations[i + 1], started, false);
  return record(opts, claim, evaluations[0], started, opts.claimNext === true);
}

/** Claims the next job (with the sets cooling off passed over and the co-asked jobs taken with it). */
async function claimJob(opts: RunnerOptions): Promise<Claim | null> {
  const skip = await skipSets(opts);
  return opts.store.claimNextJob(
    opts.workerId,
    opts.leaseMs,
    opts.abandonLimit ?? DEFAULT_ABANDON_LIMIT,
    skip,
    claimOptions(opts, skip),
  );
}

/** What the evaluation of a claimed group needs from the runner's settings. */
function evaluateDeps(opts: RunnerOptions, signal: AbortSignal): EvaluateDeps {
  return {
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
  };
}

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

/** Records one job's evaluation (with its answers, and with `claimNext` the slot's next claim), logs it and reports it. */
async function record(
  opts: RunnerOptions,
  claim: Claim,
  evaluation: Evaluation,
  started: number,
  claimNext: boolean,
): Promise<RunReport> {
  const cool = opts.setCooloffs;
  const { stats, ref, finish } = evaluation;
  let { outcome } = evaluation;
  let recorded: RunReport['recorded'];
  let next: Claim | null = null;
  if (outcome.kind === 'complete' || outcome.kind === 'drop') {
    try {
      ({ outcome, recorded, next } = await finishWithAnswers(opts, claim, outcome, finish, stats, claimNext));
    } catch (err) {
      recorded = unrecorded(opts, claim, err);
    }
  } else recorded = await recordOrLog(opts, claim, outcome);
  // The set's schema was accepted: any cooling-off of the set ends (no I/O when it had none).
  if (cool && outcome.kind === 'complete' && stats.questions > 0) await cool.clear(claim.questionSet);
  const report: RunReport = { claim, outcome, recorded, stats, durationMs: Date.now() - started, next };
  logReport(opts.logger, report, ref);
  opts.onOutcome?.(report);
  return report;
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
 * Records a complete or drop outcome with the last call's answers and spend and, with
 * `claimNext`, the next claim, in one transaction (`Store.finishJob`). When that transaction
 * fails, nothing of it was written, so the answers are stored on their own first (they were paid
 * for) and the job completed separately; an answer insert that fails then records a transient
 * fail, as when answers are stored per call.
 */
async function finishWithAnswers(
  opts: RunnerOptions,
  claim: Claim,
  outcome: EvalOutcome,
  answers: JobFinish['answers'],
  stats: EvalStats,
  withNext: boolean,
): Promise<{ outcome: EvalOutcome; recorded: RunReport['recorded']; next: Claim | null }> {
  const { store } = opts;
  try {
    const skip = withNext ? await skipSets(opts) : [];
    const claimNext = withNext
      ? {
          workerId: opts.workerId,
          leaseMs: opts.leaseMs,
          abandonLimit: opts.abandonLimit ?? DEFAULT_ABANDON_LIMIT,
          skipSets: skip,
          ...claimOptions(opts, skip),
        }
      : undefined;
    const counted = outcome.kind === 'drop' ? JOB_OUTCOMES.drop : JOB_OUTCOMES.complete;
    const f = opts.committer
      ? await opts.committer.finish(claim, { answers, claimNext, outcome: counted })
      : await store.finishJob(claim, { answers, claimNext, outcome: counted });
    stats.answersStored += f.answersStored;
    return { outcome, recorded: f.result, next: f.next };
  } catch (err) {
    opts.logger.warn(
      { set: claim.questionSet, itemId: claim.itemId, err: errCode(err) },
      'completion with answers failed: storing them on their own',
    );
  }
  if (answers) {
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
      return { outcome: failed, recorded: await recordOrLog(opts, claim, failed), next: null };
    }
  }
  return { outcome, recorded: await recordOrLog(opts, claim, outcome), next: null };
}

/**
 * `recordOutcome`, with a failure to record (disk full or locked) logged and reported as
 * `unrecorded`: the lease still bounds the job, and the idempotency key makes the re-run free
 * when its answers were stored.
 */
async function recordOrLog(opts: RunnerOptions, claim: Claim, o: EvalOutcome): Promise<RunReport['recorded']> {
  try {
    return await recordOutcome(opts, claim, o);
  } catch (err) {
    return unrecorded(opts, claim, err);
  }
}

function unrecorded(opts: RunnerOptions, claim: Claim, err: unknown): 'unrecorded' {
  opts.logger.error({ set: claim.questionSet, itemId: claim.itemId, err: errCode(err) }, 'outcome not recorded');
  return 'unrecorded';
}

/** Maps an evaluation outcome to its fenced store outcome. */
export async function recordOutcome(opts: RunnerOptions, claim: Claim, o: EvalOutcome): Promise<RunReport['recorded']> {
  const { store } = opts;
  switch (o.kind) {
    case 'complete':
      return store.completeJob(claim);
    case 'drop':
      return store.dropJob(claim, o.reason);
    case 'park':
      return store.parkJob(claim, o.reason);
    case 'refuse':
      return store.refuseJob(claim, {
        backoffMs: backoffMs(claim.attempts, opts.random),
        error: o.reason,
        refusalLimit: opts.refusalLimit ?? DEFAULT_REFUSAL_LIMIT,
      });
    case 'fail':
      // DESIGN §3.7: not_before = now + max(backoff(attempts), retry-after).
      return store.failJob(claim, {
        backoffMs: Math.max(backoffMs(claim.attempts, opts.random), o.retryAfterMs ?? 0),
        error: o.reason,
      });
    case 'defer':
      return store.deferJob(claim, {
        delayMs: o.delayMs,
        reason: o.reason,
        deferLimit: opts.deferLimit ?? DEFER_LIMIT,
        failBackoffMs: backoffMs(claim.attempts, opts.random),
      });
    case 'schema_rejected': {
      // DESIGN §3.8: released without an attempt; the set is not claimed for the cooling-off period.
      const holdMs = opts.setCooloffs ? await opts.setCooloffs.enter(claim.questionSet, o.reason) : SET_COOLOFF_BASE_MS;
      return store.releaseJob(claim, { holdMs, error: o.reason });
    }
    case 'release':
    case 'misconfigured':
      return store.releaseJob(claim);
    case 'lost':
      return 'not_recorded';
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
    const level =
      r.outcome.kind === 'park' || r.outcome.kind === 'misconfigured' || r.outcome.kind === 'schema_rejected'
        ? 'warn'
        : 'debug';
    logger[level](
      { ...base, outcome: r.outcome.kind, reason: r.outcome.reason, recorded: r.recorded, attempts: r.claim.attempts },
      'job outcome',
    );
  } else {
    logger.debug({ ...base, outcome: 'complete', reason: r.outcome.reason, recorded: r.recorded }, 'job outcome');
  }
}
