import { randomBytes } from 'node:crypto';
import type { Question } from '../decision/questions.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import {
  AnswerDefect,
  BatchNotFound,
  BatchUnsupported,
  ProviderMisconfigured,
  ProviderRefusal,
  SchemaRejected,
} from '../providers/errors.js';
import { pricingFor } from '../providers/pricing.js';
import type {
  AskResult,
  BatchApi,
  BatchInfo,
  BatchRequest,
  BatchResult,
  Provider,
  Usage,
} from '../providers/provider.js';
import { backoffMs } from '../runner/backoff.js';
import { errCode } from '../errors.js';
import {
  answerRows,
  callEstimate,
  callQuestions,
  planGroup,
  splitUsage,
  type PlannedCall,
} from '../runner/evaluate.js';
import type { EvalOutcome } from '../runner/outcome.js';
import { DEFAULT_REFUSAL_LIMIT, recordOutcome, type RunnerOptions } from '../runner/job-life.js';
import type { Claim, SpendRecord } from '../store/store.js';
import type {
  BatchJobOutcome,
  BatchPlan,
  BatchRequestRow,
  BatchResultWrite,
  NewBatchRequest,
  ProviderBatchRow,
} from '../store/batch-store.js';
import type { BatchStore } from '../store/batch-store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { SpendStore } from '../store/spend-store.js';
import type { Store } from '../store/whole-store.js';

/**
 * Message Batches on the job queue (DESIGN §7.3): jobs at backfill priority (backfill, reask,
 * drift, collection changes) are asked through the provider's batch API at half price instead of
 * one call at a time. `assemble` claims them, plans them exactly as a call would (co-asking
 * included: `planGroup`), checks liveness, records the batch with its jobs moved to `batched`
 * *before* submitting it, then submits. `sweep` polls the batches in flight and stores each
 * result: a result for an item deleted since is discarded; one for a job re-owed by a write since
 * is stored for the state it was asked about and leaves the job owed. A batch that expires, is
 * canceled, or returns no result for a request re-owes those jobs without counting an attempt.
 *
 * Restart safety: the batch row is written before the submit, so a process that dies between the
 * submit and recording the provider's id leaves a `submitting` row, which the next sweep matches
 * against the provider's list (created since, same request count) instead of submitting again; a
 * row the provider never saw is closed and its jobs re-owed once `SUBMIT_LOST_AFTER_MS` has passed.
 * A sweep that dies while storing results stores the rest next time: each result is stored with
 * its request row's deletion, in one transaction.
 */

/** Jobs one assembly claims at most. A batch of them stays far inside the API's 100 000 requests. @defaultValue 10 000 */
const BATCH_MAX_JOBS = 10_000;

/**
 * How long a `submitting` row waits for the provider's list to show its batch before the sweep
 * decides the submit never arrived and re-owes its jobs, ms. A batch appears in the list as soon
 * as its create returns; 10 minutes covers a create that timed out on our side while the server
 * still worked on it (the SDK's per-attempt timeout is 60 s, four attempts at most).
 */
export const SUBMIT_LOST_AFTER_MS = 10 * 60_000;

/**
 * Slack when matching a `submitting` row against the provider's list, ms: the provider's clock
 * (its `created_at`) and the database's may differ by this much.
 */
const CLOCK_SLACK_MS = 5 * 60_000;

/**
 * A batch still not ended this long after its expiry is given up (closed, jobs re-owed), ms. The
 * API ends every batch by its expiry (24 h); this only guards against a provider that never does.
 */
export const BATCH_GIVE_UP_AFTER_EXPIRY_MS = 6 * 3_600_000;

/** How long a batch request's daily-cap reservation holds, ms: the API's 24 h plus an hour for the sweep to store its result. */
const BATCH_RESERVATION_TTL_MS = 25 * 3_600_000;

/** How long the jobs of a batch the provider refused as a whole wait before they are claimable again, ms. */
const BATCH_REFUSED_HOLD_MS = 5 * 60_000;

/** The spend outcome of a batch result that was billed (priced at the batch discount, `pricing.ts` batchCostOf). */
export const SPEND_BATCH = 'batch';

/**
 * Whether a worker sends backfill-priority work through batches (DESIGN §7.3): `off` never;
 * `auto` when the provider has a batch API and is paid (a free provider saves nothing, and its
 * answers would only arrive later); `on` whenever the provider has a batch API (tests and the
 * cost benchmark, with the fake provider's).
 */
export function batchingActive(
  provider: Provider,
  setting: 'auto' | 'on' | 'off',
): provider is Provider & { batch: BatchApi } {
  if (setting === 'off' || !provider.batch) return false;
  return setting === 'on' || pricingFor(provider.name, provider.model).kind === 'priced';
}

/** What a batch pipeline needs. Durations in milliseconds. */
export interface BatchPipelineOptions {
  store: TrackerStore &
    BatchStore &
    DecisionStore &
    SpendStore &
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
  provider: Provider & { batch: BatchApi };
  logger: Logger;
  workerId: string;
  /** Lease on the jobs while a batch is assembled (they are `batched`, with no lease, once it is recorded). */
  leaseMs: number;
  abandonLimit: number;
  /** @defaultValue 5 */
  refusalLimit?: number;
  /** Jobs claimed per assembly. @defaultValue BATCH_MAX_JOBS */
  maxJobs?: number;
  /** Sets passed over (cooling off after a rejected schema). */
  skipSets?: () => readonly string[];
  /**
   * The daily token cap (DESIGN §10.3), tokens per UTC day across every process: each request
   * reserves its estimate (input + output ceiling) before the batch is recorded, held until its
   * result or the batch's end; an item whose requests do not fit ends the assembly (its jobs and
   * the rest stay owed). @defaultValue none
   */
  dailyTokenCap?: number;
  random?: () => number;
  /**
   * Called when the endpoint turns out to have no batch API (BatchUnsupported, DESIGN §7.4), with
   * the HTTP status seen, after the batch's jobs went back to owed; the pipeline then submits
   * nothing more. The worker marks the endpoint and asks directly.
   */
  onUnsupported?: (status: number) => Promise<void>;
  /** Called after a batch was created at the provider (the worker clears an availability mark). */
  onSubmitted?: () => Promise<void>;
  /** Called with a batch's id once it is recorded (its jobs `batched`), before its submit. */
  onRecorded?: (id: string) => void;
}

/** What one `assemble` did. */
export interface AssembleReport {
  batches: number;
  requests: number;
  jobs: number;
  /** Jobs that ended without a request (answered already, gone, not applicable...). */
  settled: number;
}

/** What one `sweep` did. */
export interface SweepReport {
  /** Batches whose results were stored, or that were closed (expired, canceled, never submitted). */
  finished: number;
  /** Results stored (each one request). */
  results: number;
  answersStored: number;
  /** Jobs re-owed by a batch that ended without their result. */
  reowed: number;
  /** Batches still in flight after the sweep. */
  inFlight: number;
  /** Of those, the ones of another provider, which this one cannot collect, by provider name. */
  elsewhere: Record<string, number>;
}

/** Assembles, submits and collects provider batches (see the file comment). */
export class BatchPipeline {
  /** Batches this process is submitting right now: the sweep leaves their `submitting` rows alone. */
  readonly #submitting = new Set<string>();
  /** The endpoint has no batch API (BatchUnsupported seen): nothing more is submitted. */
  #unsupported = false;

  constructor(private readonly opts: BatchPipelineOptions) {}

  private runner(): RunnerOptions {
    const o = this.opts;
    return {
      store: o.store,
      registry: o.registry,
      provider: o.provider,
      logger: o.logger,
      workerId: o.workerId,
      leaseMs: o.leaseMs,
      abandonLimit: o.abandonLimit,
      random: o.random,
    };
  }

  /** True once the endpoint answered that it has no batch API (see `onUnsupported`). */
  get unsupported(): boolean {
    return this.#unsupported;
  }

  /**
   * Claims the due backfill-priority jobs (up to `maxJobs`), plans them, and submits them as one
   * batch or more (each within the API's request and size limits). Jobs that need no request are
   * recorded as a call would record them. Never throws for a provider or job fault; a store
   * failure propagates (the caller logs it and tries again later; claimed jobs are bounded by
   * their lease).
   */
  async assemble(signal: AbortSignal): Promise<AssembleReport> {
    const o = this.opts;
    const report: AssembleReport = { batches: 0, requests: 0, jobs: 0, settled: 0 };
    if (this.#unsupported) return report;
    const claims = await o.store.claimBatchJobs(o.workerId, {
      leaseMs: o.leaseMs,
      limit: o.maxJobs ?? BATCH_MAX_JOBS,
      abandonLimit: o.abandonLimit,
      skipSets: o.skipSets?.() ?? [],
    });
    if (claims.length === 0) return report;
    const byItem = new Map<string, Claim[]>();
    for (const c of claims) byItem.set(c.itemId, [...(byItem.get(c.itemId) ?? []), c]);
    const api = o.provider.batch;
    let pending: Pending = newPending();
    const flush = async () => {
      if (pending.requests.length === 0) return;
      if (signal.aborted || this.#unsupported) {
        // Stopping, or no batch API here: nothing is recorded or sent; the claims go back at once.
        for (const c of pending.claims)
          await this.record(c, { kind: 'release', reason: signal.aborted ? 'shutdown' : 'batching unavailable' });
        pending = newPending();
        return;
      }
      const sent = await this.submit(pending, signal);
      if (sent) {
        report.batches++;
        report.requests += pending.requests.length;
        report.jobs += pending.claims.length;
      }
      pending = newPending();
    };
    let capReached = false;
    for (const group of byItem.values()) {
      if (signal.aborted || capReached || this.#unsupported) {
        if (capReached || this.#unsupported) {
          for (const c of group)
            await this.record(c, { kind: 'release', reason: capReached ? 'daily token cap' : 'batching unavailable' });
          continue;
        }
        for (const c of group) await this.record(c, { kind: 'release', reason: 'shutdown' });
        continue;
      }
      const item = await this.planItem(group);
      report.settled += item.settled;
      if (item.requests.length === 0) continue;
      if (o.dailyTokenCap !== undefined && !(await this.reserve(item.requests))) {
        // The daily cap is reached: this item and the rest wait for tomorrow's room, owed.
        capReached = true;
        for (const c of item.claims) await this.record(c, { kind: 'release', reason: 'daily token cap' });
        continue;
      }
      const bytes = item.requests.reduce((n, r) => n + r.bytes, 0);
      if (
        pending.requests.length > 0 &&
        (pending.requests.length + item.requests.length > api.maxRequests || pending.bytes + bytes > api.maxBytes)
      )
        await flush();
      pending.requests.push(...item.requests);
      pending.claims.push(...item.claims);
      pending.bytes += bytes;
    }
    await flush();
    return report;
  }

  /**
   * Plans one item's claims (DESIGN §7 steps 1–5, co-asked by `planGroup`) and checks liveness now,
   * at assembly: a claim that ended, or is no longer live, is recorded at once; the rest become
   * requests (custom ids are given at submit).
   */
  private async planItem(
    group: Claim[],
  ): Promise<{ requests: Array<PendingRequest>; claims: Claim[]; settled: number }> {
    const o = this.opts;
    const plan = await planGroup(group, o);
    let settled = 0;
    for (const [i, outcome] of plan.ended) {
      await this.record(group[i], outcome);
      settled++;
    }
    if (plan.calls.length === 0 || !plan.loaded) return { requests: [], claims: [], settled };
    const dead = new Set<number>();
    for (const i of plan.sets.keys()) {
      let live;
      try {
        live = await o.store.checkLiveness(group[i].itemId, group[i]);
      } catch (err) {
        live = `check failed: ${errCode(err)}`;
      }
      if (live === 'live') continue;
      dead.add(i);
      const outcome: EvalOutcome =
        live === 'item_gone'
          ? { kind: 'drop', reason: 'item gone before batching' }
          : live === 'lost'
            ? { kind: 'release', reason: 'claim lost before batching' }
            : live === 'workspace_gone'
              ? { kind: 'release', reason: 'workspace deleted' }
              : live === 'superseded'
                ? { kind: 'release', reason: 'superseded: a write landed before batching' }
                : { kind: 'fail', reason: live };
      await this.record(group[i], outcome);
      settled++;
    }
    const requests: PendingRequest[] = [];
    const refused = new Set<number>();
    for (const call of plan.calls) {
      const parts = call.parts.filter((p) => !dead.has(p.claim) && !refused.has(p.claim));
      if (parts.length === 0) continue;
      const live: PlannedCall = { ...call, parts };
      const questions = callQuestions(live);
      const request: BatchRequest = { customId: 'x', state: call.state.bytes, questions, explain: call.explain };
      let bytes: number;
      try {
        bytes = o.provider.batch.requestBytes(request);
      } catch (err) {
        // What `ask` refuses before any request (over the input budget, an invalid question)
        // parks or refuses the jobs, as a call would.
        const outcome: EvalOutcome =
          err instanceof ProviderRefusal && err.code === 'input_over_budget'
            ? { kind: 'park', reason: err.message }
            : { kind: 'refuse', reason: errCode(err) };
        for (const p of parts) {
          if (refused.has(p.claim)) continue;
          refused.add(p.claim);
          await this.record(group[p.claim], outcome);
          settled++;
        }
        continue;
      }
      requests.push({
        call: live,
        questions,
        bytes,
        plan: toPlan(live, plan.loaded.item.seq, plan.ref ?? '', group, questions),
      });
    }
    const kept = requests.filter((r) => r.call.parts.every((p) => !refused.has(p.claim)));
    const claims = group.filter((_, i) => plan.sets.has(i) && !dead.has(i) && !refused.has(i));
    return {
      requests: kept.map((r) => ({ ...r, itemId: group[0].itemId, workspaceId: group[0].workspaceId })),
      claims,
      settled,
    };
  }

  /**
   * Reserves each request's estimate against the daily cap (all or none for one item's requests),
   * storing the reservation ids in their plans. @returns false when they do not all fit.
   */
  private async reserve(requests: PendingRequest[]): Promise<boolean> {
    const o = this.opts;
    const taken: string[] = [];
    for (const r of requests) {
      const got = await o.store.reserveSpend({
        tokens: r.plan.estimate.inputTokens + r.plan.estimate.maxOutputTokens,
        capTokens: o.dailyTokenCap!,
        holder: o.workerId,
        ttlMs: BATCH_RESERVATION_TTL_MS,
      });
      if (!got.granted) {
        for (const id of taken) await o.store.settleSpendReservation(id, null).catch(() => undefined);
        for (const q of requests) q.plan.reservationId = null;
        return false;
      }
      taken.push(got.id);
      r.plan.reservationId = got.id;
    }
    return true;
  }

  /** Records the batch (jobs → `batched`), then submits it. @returns whether it was recorded. */
  private async submit(p: Pending, signal: AbortSignal): Promise<boolean> {
    const o = this.opts;
    const id = newBatchId();
    const rows: NewBatchRequest[] = p.requests.map((r, n) => ({
      customId: `${id}-${n}`,
      workspaceId: r.workspaceId!,
      itemId: r.itemId!,
      plan: r.plan,
    }));
    try {
      await o.store.recordBatch({ id, provider: o.provider.name, model: o.provider.model }, rows, p.claims);
    } catch (err) {
      // A lost claim (or a failed write): nothing was recorded; give every claim back.
      o.logger.warn({ batch: id, jobs: p.claims.length, err: errCode(err) }, 'batch not recorded; jobs released');
      for (const r of p.requests)
        if (r.plan.reservationId)
          await o.store.settleSpendReservation(r.plan.reservationId, null).catch(() => undefined);
      for (const c of p.claims) await this.record(c, { kind: 'release', reason: 'batch not recorded' });
      return false;
    }
    this.#submitting.add(id);
    o.onRecorded?.(id);
    try {
      const info = await o.provider.batch.submit(
        p.requests.map((r, n) => ({
          customId: rows[n].customId,
          state: r.call.state.bytes,
          questions: r.questions,
          explain: r.call.explain,
        })),
        { signal },
      );
      await o.store.updateProviderBatch(id, {
        providerBatchId: info.id,
        status: 'in_progress',
        submittedAt: await o.store.now(),
        expiresAt: info.expiresAt,
      });
      o.logger.info(
        { batch: id, providerBatch: info.id, requests: rows.length, jobs: p.claims.length },
        'batch submitted',
      );
      await o.onSubmitted?.();
    } catch (err) {
      if (err instanceof BatchUnsupported) {
        // Nothing was created: the jobs are owed again at once, their attempt not counted, and
        // asked directly (DESIGN §7.4).
        await o.store.closeBatch(id, 'not_submitted', 'batching unavailable: asking directly');
        await this.#markUnsupported(err);
        return false;
      }
      if (
        err instanceof ProviderRefusal ||
        err instanceof ProviderMisconfigured ||
        err instanceof SchemaRejected ||
        err instanceof TypeError
      ) {
        // Refused as a whole before it was created: nothing was submitted. The jobs wait
        // BATCH_REFUSED_HOLD_MS, so a provider that refuses every batch is not asked every tick.
        const n = await o.store.closeBatch(
          id,
          'not_submitted',
          `batch refused: ${errCode(err)}`,
          BATCH_REFUSED_HOLD_MS,
        );
        o.logger.warn({ batch: id, jobs: n, err: errCode(err) }, 'batch refused; jobs re-owed');
      } else {
        // It may exist (a timeout after sending): the sweep looks for it in the provider's list.
        o.logger.warn({ batch: id, err: errCode(err) }, 'batch submit did not confirm; the sweep will look for it');
      }
    } finally {
      this.#submitting.delete(id);
    }
    return true;
  }

  async #markUnsupported(err: BatchUnsupported): Promise<void> {
    const first = !this.#unsupported;
    this.#unsupported = true;
    if (first) await this.opts.onUnsupported?.(err.status);
  }

  /**
   * Polls every batch in flight once and stores the results of those that ended; recovers
   * `submitting` rows (see the file comment). Never throws for a provider fault (logged; the
   * next sweep tries again); a store failure propagates.
   */
  async sweep(signal: AbortSignal): Promise<SweepReport> {
    const o = this.opts;
    const report: SweepReport = { finished: 0, results: 0, answersStored: 0, reowed: 0, inFlight: 0, elsewhere: {} };
    const rows = await o.store.listProviderBatches(['submitting', 'in_progress', 'ended']);
    // Provider ids already recorded, so a `submitting` row never adopts another row's batch: read
    // only when such a row exists (the table keeps a row per batch ever sent).
    const known = rows.some((r) => r.status === 'submitting')
      ? new Set(
          (await o.store.listProviderBatches()).map((b) => b.providerBatchId).filter((x): x is string => x !== null),
        )
      : new Set<string>();
    for (const row of rows) {
      if (signal.aborted) break;
      if (row.provider !== o.provider.name) {
        // Another provider's batch: a worker configured for it collects it; one never collected
        // is given up after its expiry (`closeStrandedBatches`).
        if (await closeIfStranded(o.store, row, await o.store.now())) report.finished++;
        else {
          report.inFlight++;
          report.elsewhere[row.provider] = (report.elsewhere[row.provider] ?? 0) + 1;
        }
        continue;
      }
      try {
        const done = await this.sweepOne(row, known, signal, report);
        if (done) report.finished++;
        else report.inFlight++;
      } catch (err) {
        if (signal.aborted) break;
        report.inFlight++;
        o.logger.warn({ batch: row.id, err: errCode(err) }, 'batch sweep failed; trying again later');
      }
    }
    return report;
  }

  private async sweepOne(
    row: ProviderBatchRow,
    known: Set<string>,
    signal: AbortSignal,
    report: SweepReport,
  ): Promise<boolean> {
    const o = this.opts;
    const api = o.provider.batch;
    const now = await o.store.now();
    if (row.status === 'submitting') {
      if (this.#submitting.has(row.id)) return false;
      let listed: BatchInfo[];
      try {
        listed = await api.list({ signal, since: row.createdAt - CLOCK_SLACK_MS });
      } catch (err) {
        if (!(err instanceof BatchUnsupported)) throw err;
        // No batch API here, so no batch was ever created: its jobs are owed again at once.
        report.reowed += await o.store.closeBatch(row.id, 'not_submitted', 'batching unavailable: asking directly');
        await this.#markUnsupported(err);
        return true;
      }
      const match = listed.find(
        (b) => !known.has(b.id) && totalOf(b) === row.requestCount && b.createdAt >= row.createdAt - CLOCK_SLACK_MS,
      );
      if (match) {
        known.add(match.id);
        await o.store.updateProviderBatch(row.id, {
          providerBatchId: match.id,
          status: 'in_progress',
          submittedAt: match.createdAt,
          expiresAt: match.expiresAt,
        });
        o.logger.info({ batch: row.id, providerBatch: match.id }, 'batch found again after an unconfirmed submit');
        return this.sweepOne(
          { ...row, providerBatchId: match.id, status: 'in_progress', expiresAt: match.expiresAt },
          known,
          signal,
          report,
        );
      }
      if (now - row.createdAt < SUBMIT_LOST_AFTER_MS) return false;
      report.reowed += await o.store.closeBatch(row.id, 'not_submitted', 'batch never reached the provider');
      return true;
    }
    let info: BatchInfo;
    try {
      info = await api.retrieve(row.providerBatchId!, { signal });
    } catch (err) {
      if (!(err instanceof BatchNotFound)) throw err;
      report.reowed += await o.store.closeBatch(row.id, 'lost', 'batch not found at the provider');
      return true;
    }
    await o.store.updateProviderBatch(row.id, { polledAt: now });
    if (info.status !== 'ended' && (await o.store.batchJobCounts(row.id)).named === 0) {
      // Every job left the batch (`jobs retry`, `jobs drop`): nobody waits for its results, so it
      // is canceled at the provider, which bills only the requests it already answered (DESIGN §7.5).
      if (info.status === 'in_progress') {
        try {
          await api.cancel(row.providerBatchId!, { signal });
        } catch (err) {
          if (!(err instanceof BatchNotFound)) throw err;
        }
      }
      await o.store.closeBatch(row.id, 'canceled', 'every job left the batch');
      o.logger.info({ batch: row.id, providerBatch: row.providerBatchId }, 'batch canceled: every job left it');
      return true;
    }
    if (info.status !== 'ended') {
      if (row.expiresAt !== null && now > row.expiresAt + BATCH_GIVE_UP_AFTER_EXPIRY_MS) {
        await api.cancel(row.providerBatchId!, { signal }).catch(() => undefined);
        report.reowed += await o.store.closeBatch(row.id, 'expired', 'batch did not end by its expiry');
        return true;
      }
      return false;
    }
    if (row.status !== 'ended') await o.store.updateProviderBatch(row.id, { status: 'ended', endedAt: now });
    await this.storeResults(row, signal, report);
    const outcome =
      info.counts.expired > 0 && info.counts.succeeded === 0
        ? 'expired'
        : info.counts.canceled > 0 && info.counts.succeeded === 0
          ? 'canceled'
          : 'results';
    report.reowed += await o.store.closeBatch(
      row.id,
      outcome,
      outcome === 'results' ? 'batch ended without a result for this job' : `batch ${outcome}`,
    );
    return true;
  }

  /** Stores every result of an ended batch whose request is still recorded. */
  private async storeResults(row: ProviderBatchRow, signal: AbortSignal, report: SweepReport): Promise<void> {
    const o = this.opts;
    const requests = new Map((await o.store.listBatchRequests(row.id)).map((r) => [r.customId, r]));
    if (requests.size === 0) return;
    const lookup = (customId: string) => {
      const r = requests.get(customId);
      return r ? { questions: questionsOfPlan(r.plan), explain: r.plan.explain } : null;
    };
    for await (const result of o.provider.batch.results(row.providerBatchId!, lookup, { signal })) {
      const request = requests.get(result.customId);
      if (!request) continue; // another batch's id, or stored already
      const write = this.resultWrite(row, request, result);
      report.answersStored += await o.store.storeBatchResult(row.id, request.customId, write);
      report.results++;
      requests.delete(result.customId);
    }
  }

  /** What one result does: answers (unless the item is gone), spend, and each job's outcome. */
  private resultWrite(row: ProviderBatchRow, request: BatchRequestRow, result: BatchResult): BatchResultWrite {
    const o = this.opts;
    const plan = request.plan;
    const base = { itemId: request.itemId, reservationId: plan.reservationId ?? null };
    const jobs = (outcome: BatchJobOutcome['outcome'], error?: string): BatchJobOutcome[] =>
      plan.parts.map((p) => ({
        itemId: request.itemId,
        questionSet: p.questionSet,
        outcome,
        ...(error !== undefined ? { error } : {}),
        ...(outcome === 'fail' || outcome === 'refuse'
          ? { backoffMs: backoffMs(1, o.random), refusalLimit: o.refusalLimit ?? DEFAULT_REFUSAL_LIMIT }
          : {}),
      }));
    const spendOf = (outcome: string, usage: Usage): SpendRecord[] =>
      splitUsage(
        usage,
        plan.parts.map((p) => p.storedKeys.length),
      ).map((u, i) => ({
        questionSet: plan.parts[i].questionSet,
        provider: row.provider,
        model: row.model,
        outcome,
        calls: i === 0 ? 1 : 0,
        usage: u,
      }));
    switch (result.type) {
      case 'canceled':
      case 'expired':
        return { ...base, answers: [], spend: [], jobs: jobs('release', `batch request ${result.type}`) };
      case 'errored': {
        const err = result.error;
        const spend = err instanceof AnswerDefect && err.usage ? spendOf('defect', err.usage) : [];
        if (
          err instanceof ProviderRefusal ||
          err instanceof AnswerDefect ||
          err instanceof SchemaRejected ||
          err instanceof ProviderMisconfigured
        ) {
          return { ...base, answers: [], spend, jobs: jobs('refuse', `batch: ${errCode(err)}`) };
        }
        return { ...base, answers: [], spend, jobs: jobs('fail', `batch: ${errCode(err)}`) };
      }
      case 'succeeded': {
        const spend = spendOf(SPEND_BATCH, result.result.usage);
        let answers;
        try {
          answers = answersOf(plan, request, result.result, o.provider);
        } catch (err) {
          // A result missing a key it was asked (a provider that broke its own contract): billed,
          // refused like a defective reply, never allowed to stop the rest of the batch.
          return {
            ...base,
            answers: [],
            spend: spendOf('defect', result.result.usage),
            jobs: jobs('refuse', `batch: result unreadable (${errCode(err)})`),
          };
        }
        // The store checks liveness in the transaction that stores them (DESIGN §7.3): an item
        // deleted since keeps none of them and its jobs drop.
        return { ...base, answers, spend, jobs: jobs('complete') };
      }
    }
  }

  /** Records a job's outcome as the runner would (fenced by its claim). */
  private async record(claim: Claim, outcome: EvalOutcome): Promise<void> {
    try {
      await recordOutcome(this.runner(), claim, outcome);
    } catch (err) {
      this.opts.logger.error(
        { set: claim.questionSet, itemId: claim.itemId, err: errCode(err) },
        'outcome not recorded',
      );
    }
  }
}

/**
 * Closes a batch no worker can collect once it is past its expiry by BATCH_GIVE_UP_AFTER_EXPIRY_MS
 * (a `submitting` row: 24 h after its creation): its jobs re-owed. @returns whether it was closed.
 */
async function closeIfStranded(
  store: Pick<BatchStore, 'closeBatch'>,
  row: ProviderBatchRow,
  now: number,
): Promise<boolean> {
  const expires = row.expiresAt ?? row.createdAt + 24 * 3_600_000;
  if (now <= expires + BATCH_GIVE_UP_AFTER_EXPIRY_MS) return false;
  await store.closeBatch(row.id, 'lost', `batch of ${row.provider} not collected by its expiry`);
  return true;
}

/**
 * For a worker whose provider has no batch API, or one of another name (`--provider` changed,
 * DESIGN §7.3): the open batches it cannot collect, each given up (jobs re-owed) once past its
 * expiry. @returns the batches still open, by provider, for the worker to say so.
 */
export async function closeStrandedBatches(
  store: Pick<TrackerStore, 'now'> & Pick<BatchStore, 'closeBatch' | 'listProviderBatches'>,
  providerName: string,
  canCollect: boolean,
): Promise<Record<string, number>> {
  const now = await store.now();
  const open: Record<string, number> = {};
  for (const row of await store.listProviderBatches(['submitting', 'in_progress', 'ended'])) {
    if (canCollect && row.provider === providerName) continue;
    if (!(await closeIfStranded(store, row, now))) open[row.provider] = (open[row.provider] ?? 0) + 1;
  }
  return open;
}

interface PendingRequest {
  call: PlannedCall;
  questions: ReadonlyMap<string, Question>;
  bytes: number;
  plan: BatchPlan;
  itemId?: string;
  workspaceId?: string;
}

interface Pending {
  requests: PendingRequest[];
  claims: Claim[];
  bytes: number;
}

function newPending(): Pending {
  return { requests: [], claims: [], bytes: 0 };
}

/** `vb` + 12 base-36 characters: short enough that `<id>-<n>` is a legal custom id (≤ 64). */
function newBatchId(): string {
  return `vb${BigInt(`0x${randomBytes(8).toString('hex')}`)
    .toString(36)
    .padStart(12, '0')
    .slice(0, 12)}`;
}

function totalOf(b: BatchInfo): number {
  const c = b.counts;
  return c.processing + c.succeeded + c.errored + c.canceled + c.expired;
}

/** The plan of one request, as stored with it. */
function toPlan(
  call: PlannedCall,
  itemSeq: number,
  ref: string,
  group: readonly Claim[],
  questions: ReadonlyMap<string, Question>,
): BatchPlan {
  return {
    stateHash: call.state.hash,
    stateVersion: call.state.version,
    stateParts: call.state.parts,
    stateTruncated: call.state.truncated,
    explain: call.explain,
    itemSeq,
    ref,
    estimate: callEstimate(questions, call.state.bytes, call.explain),
    parts: call.parts.map((p) => ({
      questionSet: p.set.name,
      generation: group[p.claim].generation,
      storedKeys: [...p.chunk.storedKeys],
      fingerprints: Object.fromEntries([...p.chunk.storedKeys.values()].map((k) => [k, p.chunk.fingerprints.get(k)!])),
      questions: Object.fromEntries(p.chunk.questions),
      threshold: p.set.threshold,
      hysteresis: p.set.hysteresis,
      unsurfaced: [...p.chunk.storedKeys].filter(([, key]) => p.set.unsurfaced.includes(key)).map(([stored]) => stored),
    })),
  };
}

/** The questions of a stored plan, keyed as they were asked. */
function questionsOfPlan(plan: BatchPlan): Map<string, Question> {
  const out = new Map<string, Question>();
  for (const p of plan.parts) for (const [k, q] of Object.entries(p.questions)) out.set(k, q);
  return new Map([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The answer rows of a succeeded result, per part, for the state the request asked about (`answerRows`). */
function answersOf(
  plan: BatchPlan,
  request: BatchRequestRow,
  result: AskResult,
  provider: Provider,
): BatchResultWrite['answers'] {
  const rows = answerRows({
    workspaceId: request.workspaceId,
    itemId: request.itemId,
    itemSeq: plan.itemSeq,
    state: { hash: plan.stateHash, version: plan.stateVersion, parts: plan.stateParts, truncated: plan.stateTruncated },
    parts: plan.parts.map((p) => ({
      questionSet: p.questionSet,
      storedKeys: p.storedKeys,
      fingerprints: p.fingerprints,
      explain: plan.explain,
    })),
    result,
    provider,
  });
  return plan.parts.map((p, i) => ({
    decisions: rows[i],
    surfacing: { ref: plan.ref, threshold: p.threshold, hysteresis: p.hysteresis, unsurfaced: p.unsurfaced },
  }));
}
