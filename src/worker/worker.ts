import { errCode } from '../errors.js';
import { setMaxListeners } from 'node:events';
import { setImmediate as yieldLoop } from 'node:timers/promises';
import { systemClock, type WaitClock } from '../clock.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import type { BatchApi, Provider } from '../providers/provider.js';
import { releaseHeld, runOnce, type RunnerOptions, type RunReport } from '../runner/job-life.js';
import { Committer } from '../runner/committer.js';
import type { JobStore } from '../store/job-store.js';
import { SpendBacklog } from '../runner/spend-backlog.js';
import { SpendSpool } from '../runner/spend-spool.js';
import { SetCooloffs } from '../runner/set-cooloff.js';
import type { Claim } from '../store/store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { BatchStore } from '../store/batch-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { SpendStore } from '../store/spend-store.js';
import { VerdictError } from '../errors.js';
import { BatchPipeline, batchingActive, closeStrandedBatches } from './batches.js';
import { clearBatchUnavailable, endpointHost, isBatchUnavailable, markBatchUnavailable } from './batch-availability.js';

/** Default interval between polls of the batches in flight, ms (DESIGN §7.3: results within 24 h; most within an hour). */
const BATCH_POLL_MS = 60_000;

/** Worker settings (DESIGN §10). Durations in milliseconds. */
export interface WorkerOptions {
  store: TrackerStore & QueueStore & BatchStore & DecisionStore & MetaStore & SpendStore & JobStore;
  registry: Registry;
  provider: Provider;
  logger: Logger;
  workerId: string;
  /** Slots, each claiming one job at a time. @defaultValue 4 */
  concurrency: number;
  /** Idle wait when nothing is claimable. @defaultValue 5000 */
  tickMs: number;
  leaseMs: number;
  /** Jobs a slot runs per pass before it re-checks shutdown, cooling-off and reload. @defaultValue 20 */
  passLimit: number;
  abandonLimit: number;
  /** Drain every job claimable now, then return. */
  untilIdle?: boolean;
  /** Ask the item's sets whose states are byte-identical in one call (DESIGN §7.2; `RunnerOptions.coAsk`). @defaultValue true */
  coAsk?: boolean;
  /**
   * Provider batches for backfill-priority work (DESIGN §7.3; see `batchingActive`): when
   * active, the slots claim live work only, and the worker assembles batches, submits them and
   * stores their results (every tick; batches polled every `batchPollMs`). A one-shot drain
   * (`untilIdle`, DESIGN §7.4) cannot collect results that come hours later, so it asks directly
   * unless given `on`: then it assembles every due backfill job into batches before its slots run
   * and waits for the batches it submitted (polled every `batchPollMs`); `stop()` leaves them for
   * a later worker. `auto` skips an endpoint marked as having no batch API (batch-availability.ts).
   * @defaultValue 'off' (`verdict worker` passes its `--batch`, default auto)
   */
  batch?: 'auto' | 'on' | 'off';
  /** Interval between polls of the batches in flight, ms. @defaultValue 60 000 */
  batchPollMs?: number;
  /** The daily token cap (DESIGN §10.3): batch requests reserve against it too (`BatchPipelineOptions.dailyTokenCap`). @defaultValue none */
  dailyTokenCap?: number;
  acquirePermit?: RunnerOptions['acquirePermit'];
  /**
   * Asked before each claim: null to claim, or milliseconds to stop claiming for (the daily spend
   * cap is reached; see ProviderLimiter.claimDelay). With `untilIdle`, a delay ends the run.
   */
  claimGate?: () => Promise<number | null>;
  onOutcome?: (r: RunReport) => void;
  /** Called with each spend record the slots write (`RunnerOptions.onSpend`): the metrics' provider counters. */
  onSpend?: RunnerOptions['onSpend'];
  /**
   * Called when a slot's pass finds nothing claimable right after work was recorded (once per
   * stretch of work, not on every idle tick); `createVerdict`'s worker emits `idle` from it.
   */
  onIdle?: () => void;
  /** Called every time a slot finds nothing claimable, before it waits a tick (the WAL checkpoint, DESIGN §10.2). */
  onIdleTick?: () => void;
  /**
   * The worker's time: epoch ms for the cooling-off, the loop age /healthz reads and the walk and
   * batch intervals, and its idle waits. A test passes its `ManualClock` (the store's) and moves it.
   * @defaultValue systemClock (Date.now and real timers)
   */
  clock?: WaitClock;
  /**
   * The directory of the spend spool (DESIGN §10.5; `defaultSpoolDir`): `run` makes this worker's
   * file there, preallocated, takes what stopped workers left in it and writes that before the
   * first claim. Null keeps unwritten spend in memory only (lost at exit). @defaultValue null
   */
  spendSpoolDir?: string | null;
}

/**
 * Synchronous work a slot loop may do before it yields to the event loop, ms. DESIGN §10.1 asks for
 * a yield at least every 50 ms of synchronous work; half of it leaves room for the one job that
 * runs past the mark. Jobs whose answers are already stored, or a 0 ms fake provider, resolve
 * every await as a microtask, so without this a drain of 10,000 such jobs held the loop for 4.4 s
 * (no timer, signal, lease renewal or /healthz request ran). A yield costs one setImmediate.
 */
const YIELD_EVERY_MS = 25;

/** Cooling-off after a provider-wide error: 30 s doubling to 10 min (DESIGN §3). */
const COOLOFF_BASE_MS = 30_000;
const COOLOFF_CAP_MS = 600_000;

/** What a worker run did. */
export interface WorkerSummary {
  claimed: number;
  outcomes: Record<string, number>;
  calls: number;
  answersStored: number;
  inputTokens: number;
  outputTokens: number;
  /** Set when the run ended because the provider is misconfigured (`--until-idle`). */
  misconfigured: string | null;
  /** Set when claiming stopped because the daily spend cap is reached. */
  spendCapReached?: boolean;
  /** Sets whose answer schema the provider rejected in this run, with the reason (DESIGN §3.8). */
  schemaRejected?: Record<string, string>;
  /** Jobs sent to provider batches in this run (DESIGN §7.3). */
  batched?: number;
  /** Batch results stored in this run (their answers count in `answersStored`). */
  batchResults?: number;
  /** Set when the endpoint turned out to have no batch API in this run: its host (DESIGN §7.4). */
  batchUnavailableAt?: string;
}

/**
 * Thrown at start when the lease cannot cover one provider call's worst case. Limiter waits need
 * no share of it: the runner bounds each wait by half the lease and renews the lease once the
 * permits are granted, right before the send (DESIGN §3.6; runner/evaluate.ts `askChunk`).
 */
export class LeaseTooShort extends VerdictError {
  readonly code = 'lease_too_short';
  constructor(leaseMs: number, worstMs: number) {
    super(`--lease-ms ${leaseMs} is shorter than one provider call's worst case (${worstMs} ms); raise it`);
  }
}

/**
 * The worker: `concurrency` slots, each claiming and running jobs one after another, waiting for
 * the tick only when nothing is claimable. `stop()` stops claiming and aborts in-flight calls,
 * whose jobs are released without an attempt; `run()` resolves once every slot has recorded its
 * last outcome.
 */
export class Worker {
  private readonly abort = new AbortController();
  /** Spend of this worker's paid calls whose write failed, written by a later run or at stop; spooled once `run` opens the spool. */
  private spendBacklog: SpendBacklog;
  /** The slots' group committer (DESIGN §10.6): one per worker, on its store. */
  private readonly committer: Committer;
  private readonly idleWake = new AbortController();
  /** Aborted by `cancelPass` (reload), distinct from shutdown; replaced by a fresh one each time. */
  private pass = new AbortController();
  /** What runOnce gets: aborts on shutdown or on a cancelled pass. */
  private passSignal = AbortSignal.any([this.abort.signal, this.pass.signal]);
  /** Listeners an abort signal may have before Node warns: every in-flight call and permit wait listens (4 a slot). */
  private readonly maxListeners: number;
  /** Replaced on every `wake()`: aborting it ends the current idle waits early. */
  private nudge = new AbortController();
  private stopping = false;
  /** Work was recorded since the last `onIdle`. */
  private busySinceIdle = false;
  private cooloffUntil = 0;
  private cooloffMs = 0;
  private lastGateLog = 0;
  /** performance.now() when the slots last let the event loop run (shared: slots interleave as microtasks). */
  private lastYieldAt = performance.now();
  /** The setImmediate every slot due to yield waits on, while one is pending. */
  private yielding: Promise<void> | null = null;
  /** Epoch ms (the worker's clock) of the last loop turn of any slot; /healthz reads it. */
  lastLoopAt: number;
  /** The worker's time (`WorkerOptions.clock`). */
  readonly clock: WaitClock;
  /** The stranded-batches warning was logged in this run. */
  private strandedLogged = false;
  /** The batch pipeline and the provider and registry it was made for (`batches`). */
  private pipeline: { provider: Provider; registry: Registry; pipeline: BatchPipeline } | null = null;
  /**
   * Batching is off for the provider in force: its endpoint has no batch API (marked, or found in
   * this run). Reset by a reload, which may bring another endpoint.
   */
  private batchOff = false;
  /** Batches this run submitted (a drain with `batch: 'on'` waits for them). */
  private readonly submittedBatches = new Set<string>();
  /** The collection-change walk in progress in this process, if any (one at a time). */
  private advancing: Promise<void> | null = null;
  /** Epoch ms a slot last started a collection-change walk (see `slot`). */
  private lastAdvanceAt = 0;
  /** The provider error code that started the current cooling-off, if any. */
  providerProblem: string | null = null;
  readonly summary: WorkerSummary = {
    claimed: 0,
    outcomes: {},
    calls: 0,
    answersStored: 0,
    inputTokens: 0,
    outputTokens: 0,
    misconfigured: null,
  };
  /** Sets cooling off after a rejected schema; shared by the slots (DESIGN §3.8). */
  readonly setCooloffs: SetCooloffs;

  /** @throws LeaseTooShort when the lease cannot cover the provider's worst-case call. */
  constructor(private opts: WorkerOptions) {
    if (opts.leaseMs < opts.provider.worstCaseCallMs)
      throw new LeaseTooShort(opts.leaseMs, opts.provider.worstCaseCallMs);
    this.spendBacklog = new SpendBacklog(opts.logger);
    this.committer = new Committer(opts.store);
    // Every in-flight call (and permit wait) listens on the one abort signal; Node warns past 10.
    this.maxListeners = Math.max(10, opts.concurrency * 4);
    setMaxListeners(this.maxListeners, this.abort.signal, this.passSignal);
    this.setCooloffs = new SetCooloffs(opts.store, opts.logger);
    this.clock = opts.clock ?? systemClock;
    this.lastLoopAt = this.clock.now();
  }

  /**
   * Installs a new provider and registry (SIGHUP reload) for every job claimed from now on, and
   * ends any cooling-off (the new provider gets its own chance). Jobs in flight keep the old
   * provider until `cancelPass` aborts them.
   * @throws LeaseTooShort when the lease cannot cover the new provider's worst-case call.
   */
  swap(provider: Provider, registry: Registry): void {
    if (this.opts.leaseMs < provider.worstCaseCallMs)
      throw new LeaseTooShort(this.opts.leaseMs, provider.worstCaseCallMs);
    this.opts = { ...this.opts, provider, registry };
    this.cooloffUntil = 0;
    this.cooloffMs = 0;
    this.providerProblem = null;
    this.batchOff = false;
    this.setCooloffs.reset();
  }

  /**
   * Cancels the in-flight pass (DESIGN §10 reload): aborts every evaluation under way, so the old
   * provider gets no more item data; their jobs are released without an attempt (release reason
   * `reason`). Slots go on claiming at once with a fresh signal. Shutdown is `stop`, not this.
   */
  cancelPass(reason = 'reload'): void {
    const old = this.pass;
    this.pass = new AbortController();
    this.passSignal = AbortSignal.any([this.abort.signal, this.pass.signal]);
    setMaxListeners(this.maxListeners, this.passSignal);
    old.abort(Object.assign(new Error(reason), { code: reason }));
  }

  /** The registry and provider in force now (a reload swaps them); background passes read them each pass. */
  get runtime(): { registry: Registry; provider: Provider } {
    return { registry: this.opts.registry, provider: this.opts.provider };
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Stops claiming and aborts in-flight provider calls; their jobs are released without an attempt. */
  stop(reason = 'shutdown'): void {
    if (this.stopping) return;
    this.stopping = true;
    this.opts.logger.info({ reason }, 'worker stopping');
    this.abort.abort(Object.assign(new Error(reason), { code: 'shutdown' }));
    this.idleWake.abort();
  }

  /**
   * Ends the slots' idle waits now, so work owed in this process (a backfill chunk with `--drain`)
   * is claimed at once instead of at the next tick. Harmless when the slots are busy.
   */
  wake(): void {
    const n = this.nudge;
    this.nudge = new AbortController();
    n.abort();
  }

  /** Kept spend at the end of `run`: records in the spool (written by the next start) and in memory only (lost with the process). */
  get spendKept(): { spooled: number; memoryOnly: number } {
    return { spooled: this.spendBacklog.spooled, memoryOnly: this.spendBacklog.size - this.spendBacklog.spooled };
  }

  async run(): Promise<WorkerSummary> {
    this.openSpendSpool();
    try {
      return await this.runSlots();
    } finally {
      this.spendBacklog.close();
    }
  }

  /**
   * This worker's spend spool (DESIGN §10.5), made before anything is claimed, with what stopped
   * workers left in its directory taken into it; written at once when the database takes it. A
   * spool that cannot be made (full disk, read-only directory) leaves spend kept in memory, said
   * once at error level.
   */
  private openSpendSpool(): void {
    const dir = this.opts.spendSpoolDir;
    if (!dir) return;
    let spool: SpendSpool;
    try {
      spool = SpendSpool.open(dir);
    } catch (err) {
      this.opts.logger.error(
        { err: errCode(err), dir },
        'spend spool not made: spend that cannot be written is kept in memory only',
      );
      return;
    }
    this.spendBacklog = new SpendBacklog(this.opts.logger, spool);
    this.spendBacklog.adoptOrphans(dir);
  }

  private async runSlots(): Promise<WorkerSummary> {
    await this.spendBacklog.flush(this.opts.store);
    try {
      await this.setCooloffs.load();
    } catch (err) {
      // Only status's rows of earlier runs are at stake; they are deleted by the next success.
      this.opts.logger.warn({ err: errCode(err) }, 'set cooling-off rows not read');
    }
    await this.loadBatchAvailability();
    // A drain owes every pending collection change first, so "claimable now" includes its items.
    if (this.opts.untilIdle) await this.advanceCollections();
    // ... and sends every due backfill-priority job to a batch before the slots take live work.
    if (this.opts.untilIdle) await this.batchPass({ sweep: true, assemble: 'all' });
    const batching = this.opts.untilIdle ? Promise.resolve() : this.batchLoop();
    // Start the slots on a fresh turn of the loop, so the start-up's synchronous work and the
    // drain's first jobs do not add up to one long hold.
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.lastYieldAt = performance.now();
    const slots = Array.from({ length: this.opts.concurrency }, (_, i) => this.slot(i));
    await Promise.all(slots);
    await this.advancing;
    if (this.opts.untilIdle) await this.batchPass({ sweep: true, assemble: 'none' });
    if (this.opts.untilIdle && this.submittedBatches.size > 0) await this.awaitSubmittedBatches();
    await batching;
    await this.spendBacklog.flush(this.opts.store);
    const kept = this.spendKept;
    if (kept.spooled > 0)
      this.opts.logger.warn(
        { spooled: kept.spooled },
        'spend still not written at stop: spooled, the next worker to start writes it',
      );
    if (kept.memoryOnly > 0)
      this.opts.logger.error(
        { kept: kept.memoryOnly },
        'spend still not written at stop and not spooled: lost with this process',
      );
    return this.summary;
  }

  /**
   * The batch setting in force: a one-shot drain turns `auto` into `off` (DESIGN §7.4: it could
   * not collect its own results); `on` is kept.
   */
  private batchSetting(): 'auto' | 'on' | 'off' {
    const b = this.opts.batch ?? 'off';
    return this.opts.untilIdle && b === 'auto' ? 'off' : b;
  }

  /** Whether this worker sends backfill-priority work to provider batches now (`batchingActive` of the provider in force). */
  batching(): boolean {
    return !this.batchOff && batchingActive(this.runtime.provider, this.batchSetting());
  }

  /** With `auto`, an endpoint marked as having no batch API is not tried (batch-availability.ts). */
  private async loadBatchAvailability(): Promise<void> {
    const { provider } = this.runtime;
    if (this.batchSetting() !== 'auto' || !provider.batch) return;
    try {
      if (await isBatchUnavailable(this.opts.store, provider.name, provider.batch.endpoint)) {
        this.batchOff = true;
        this.opts.logger.info(
          { provider: provider.name, host: endpointHost(provider.batch.endpoint) },
          'batching unavailable at this endpoint: asking directly',
        );
      }
    } catch (err) {
      // Unread, the mark only costs one refused create, which marks it again.
      this.opts.logger.warn({ err: errCode(err) }, 'batch availability not read');
    }
  }

  /** The endpoint answered that it has no batch API: marked, said once, and every job asked directly from now on. */
  private async batchUnsupported(provider: Provider, status: number): Promise<void> {
    if (provider !== this.runtime.provider || !provider.batch) return;
    this.batchOff = true;
    const host = endpointHost(provider.batch.endpoint);
    this.summary.batchUnavailableAt = host;
    this.opts.logger.warn(
      { provider: provider.name, host, status },
      'batching unavailable at this endpoint: asking directly',
    );
    try {
      await markBatchUnavailable(this.opts.store, provider.name, provider.batch.endpoint, status);
    } catch (err) {
      this.opts.logger.warn({ err: errCode(err) }, 'batch availability not recorded');
    }
    this.wake();
  }

  /**
   * A drain with `batch: 'on'` waits for the batches it submitted (DESIGN §7.4), sweeping every
   * `batchPollMs` with a progress line, until each is done or the worker stops (those left are a
   * later worker's to collect).
   */
  private async awaitSubmittedBatches(): Promise<void> {
    const pollMs = this.opts.batchPollMs ?? BATCH_POLL_MS;
    while (!this.stopping) {
      const open = (await this.opts.store.listProviderBatches(['submitting', 'in_progress', 'ended'])).filter((b) =>
        this.submittedBatches.has(b.id),
      );
      if (open.length === 0) return;
      let jobs = 0;
      for (const b of open) jobs += (await this.opts.store.batchJobCounts(b.id)).batched;
      this.opts.logger.info(
        { batches: open.length, jobs, pollMs },
        'waiting for the provider batches this drain submitted (a stop leaves them for a later worker)',
      );
      await this.idle(pollMs);
      if (this.stopping) return;
      await this.batchPass({ sweep: true, assemble: 'none' });
    }
  }

  /**
   * The batch pipeline over the provider and registry in force (DESIGN §7.3), or null when the
   * provider has no batch API. It collects the provider's batches in flight even when this worker
   * does not batch (`--batch off` after a run that did); it assembles only when `batching()`.
   */
  batches(): BatchPipeline | null {
    const { provider, registry } = this.runtime;
    if (!provider.batch) return null;
    if (this.pipeline?.provider !== provider || this.pipeline.registry !== registry) {
      this.pipeline = {
        provider,
        registry,
        pipeline: new BatchPipeline({
          store: this.opts.store,
          registry,
          provider: provider as Provider & { batch: BatchApi },
          logger: this.opts.logger,
          workerId: `${this.opts.workerId}/batch`,
          leaseMs: this.opts.leaseMs,
          abandonLimit: this.opts.abandonLimit,
          skipSets: () => (this.setCooloffs.any ? this.setCooloffs.active(this.clock.now()) : []),
          ...(this.opts.dailyTokenCap !== undefined ? { dailyTokenCap: this.opts.dailyTokenCap } : {}),
          onUnsupported: (status) => this.batchUnsupported(provider, status),
          onSubmitted: async () => {
            if (this.batchSetting() === 'on')
              await clearBatchUnavailable(this.opts.store, provider.name, provider.batch!.endpoint).catch(
                () => undefined,
              );
          },
          onRecorded: (id) => this.submittedBatches.add(id),
        }),
      };
    }
    return this.pipeline.pipeline;
  }

  /**
   * One batch pass: with `sweep`, stores the results of batches that ended; then sends due
   * backfill-priority jobs to batches, a batch of up to BATCH_MAX_JOBS jobs at a time: `all` until
   * none is due, `once` one assembly. Not while the daily spend cap is reached. A store or provider
   * failure is logged; the jobs stay owed or batched and the next pass tries again.
   */
  async batchPass(o: { sweep: boolean; assemble: 'all' | 'once' | 'none' }): Promise<void> {
    const pipeline = this.batches();
    try {
      if (o.sweep) {
        // Batches this provider cannot collect (another provider's, or this one has no batch
        // API) are said once a run and given up past their expiry, their jobs re-owed: by the
        // pipeline's sweep, or without one by closeStrandedBatches.
        let stranded: Record<string, number>;
        if (pipeline) {
          const swept = await pipeline.sweep(this.abort.signal);
          this.summary.batchResults = (this.summary.batchResults ?? 0) + swept.results;
          this.summary.answersStored += swept.answersStored;
          if (swept.results > 0 || swept.reowed > 0) this.wake();
          stranded = swept.elsewhere;
        } else stranded = await closeStrandedBatches(this.opts.store, this.runtime.provider.name, false);
        if (Object.keys(stranded).length && !this.strandedLogged) {
          this.strandedLogged = true;
          this.opts.logger.warn(
            { batches: stranded },
            'provider batches in flight that this provider cannot collect: a worker with that provider collects them; past their expiry they are given up and their jobs re-owed',
          );
        }
      }
      if (!pipeline || !this.batching()) return;
      for (let n = 0; o.assemble !== 'none' && !this.stopping; n++) {
        if (o.assemble === 'once' && n > 0) break;
        if ((await this.opts.claimGate?.()) != null) break;
        const r = await pipeline.assemble(this.abort.signal);
        this.summary.batched = (this.summary.batched ?? 0) + r.jobs;
        if (r.jobs + r.settled === 0) break;
        await yieldLoop();
      }
    } catch (err) {
      this.opts.logger.error({ err: errCode(err) }, 'batch pass failed; trying again next pass');
    }
  }

  /** The long-running worker's batch loop: assembles every tick, sweeps every `batchPollMs`, until stop. */
  private async batchLoop(): Promise<void> {
    let lastSweep = 0;
    while (!this.stopping) {
      const sweep = this.clock.now() - lastSweep >= (this.opts.batchPollMs ?? BATCH_POLL_MS);
      if (sweep) lastSweep = this.clock.now();
      await this.batchPass({ sweep, assemble: 'once' });
      await this.idle(this.opts.tickMs);
    }
  }

  /**
   * Owes the pending collection changes (DESIGN §3.3) one chunk of 1,000 items per transaction,
   * until none is pending or the worker stops, yielding the event loop between chunks. One walk
   * per process at a time: a call while one runs returns that walk. A store error ends the walk
   * (logged); the continuation stays and the next pass resumes it, so nothing owed is lost.
   */
  advanceCollections(): Promise<void> {
    this.advancing ??= (async () => {
      try {
        let chunks = 0;
        let items = 0;
        while (!this.stopping) {
          const step = await this.opts.store.advanceCollectionOwes();
          if (step.collectionId === null) break;
          chunks++;
          items += step.items;
          if (step.pending === 0) break;
          await yieldLoop();
        }
        if (chunks > 0) this.opts.logger.info({ chunks, items }, 'collection changes owed');
      } catch (err) {
        this.opts.logger.error({ err: errCode(err) }, 'collection change walk failed; resuming next pass');
      } finally {
        this.advancing = null;
      }
    })();
    return this.advancing;
  }

  private runnerOptions(slot: number): RunnerOptions {
    return {
      store: this.opts.store,
      registry: this.opts.registry,
      provider: this.opts.provider,
      logger: this.opts.logger,
      workerId: `${this.opts.workerId}/${slot}`,
      leaseMs: this.opts.leaseMs,
      abandonLimit: this.opts.abandonLimit,
      acquirePermit: this.opts.acquirePermit,
      setCooloffs: this.setCooloffs,
      onOutcome: (r) => this.count(r),
      onSpend: this.opts.onSpend,
      claimNext: true,
      coAsk: this.opts.coAsk ?? true,
      liveOnly: this.batching(),
      spendBacklog: this.spendBacklog,
      committer: this.committer,
      clock: this.clock,
    };
  }

  private count(r: RunReport): void {
    const s = this.summary;
    s.claimed++;
    s.outcomes[r.outcome.kind] = (s.outcomes[r.outcome.kind] ?? 0) + 1;
    s.calls += r.stats.calls;
    s.answersStored += r.stats.answersStored;
    s.inputTokens += r.stats.inputTokens;
    s.outputTokens += r.stats.outputTokens;
    if (r.outcome.kind === 'misconfigured') this.enterCooloff(r.outcome.reason);
    else if (r.outcome.kind === 'schema_rejected') (s.schemaRejected ??= {})[r.claim.questionSet] = r.outcome.reason;
    else if (r.outcome.kind === 'complete' && r.stats.calls > 0) {
      this.cooloffMs = 0;
      this.providerProblem = null;
    }
    this.opts.onOutcome?.(r);
  }

  private enterCooloff(reason: string): void {
    if (this.opts.untilIdle) {
      this.summary.misconfigured = reason;
      this.stop('provider misconfigured');
    }
    // Several slots can report the same provider-wide error at once: one period, not one per slot
    // (DESIGN §3: 30 s doubling to 10 min, the error logged once per period).
    if (this.clock.now() < this.cooloffUntil) return;
    this.cooloffMs = Math.min(this.cooloffMs ? this.cooloffMs * 2 : COOLOFF_BASE_MS, COOLOFF_CAP_MS);
    this.cooloffUntil = this.clock.now() + this.cooloffMs;
    this.providerProblem = reason;
    this.opts.logger.error(
      { reason, cooloffMs: this.cooloffMs },
      'provider misconfigured: not claiming during the cooling-off period',
    );
  }

  private async slot(i: number): Promise<void> {
    // The slot's runner settings, made anew only when what they hold changed (a reload installs
    // new options, batching turns live-only on or off): not once per job.
    let made: { from: WorkerOptions; liveOnly: boolean; ro: RunnerOptions } | null = null;
    const ro = () => {
      const liveOnly = this.batching();
      if (made?.from !== this.opts || made.liveOnly !== liveOnly)
        made = { from: this.opts, liveOnly, ro: this.runnerOptions(i) };
      return made.ro;
    };
    // The job claimed in the transaction that completed the previous one (`Store.finishJob`):
    // run next, or given back (released, no attempt counted) wherever the slot stops claiming.
    let held: Claim | null = null;
    const giveBack = async () => {
      if (held) await releaseHeld(ro(), held);
      held = null;
    };
    try {
      while (!this.stopping) {
        this.lastLoopAt = this.clock.now();
        // Beside the claims, not before them: a big collection change never holds up live work.
        // Looked for once a tick per process, not on every pass of every slot (each look is a read).
        if (!this.opts.untilIdle && this.clock.now() - this.lastAdvanceAt >= this.opts.tickMs) {
          this.lastAdvanceAt = this.clock.now();
          void this.advanceCollections();
        }
        const wait = this.cooloffUntil - this.clock.now();
        if (wait > 0) {
          await giveBack();
          await this.idle(Math.min(wait, this.opts.tickMs));
          continue;
        }
        let ran = 0;
        let storeError = false;
        let gated = false;
        /** False once a claim found nothing: the queue had no claimable job at that moment. */
        let queueHadWork = true;
        // A provider-wide error mid-pass starts the cooling-off: stop claiming at once, not after the pass.
        while (!this.stopping && ran < this.opts.passLimit && this.cooloffUntil <= this.clock.now()) {
          let r: RunReport | null;
          try {
            const gate = (await this.opts.claimGate?.()) ?? null;
            if (gate !== null) {
              gated = true;
              this.summary.spendCapReached = true;
              this.logGate(gate);
              await giveBack();
              if (this.opts.untilIdle) return;
              await this.idle(Math.min(gate, this.opts.tickMs));
              break;
            }
            const claim = held;
            held = null;
            r = await runOnce(ro(), this.passSignal, claim);
            held = r?.next ?? null;
          } catch (err) {
            // An unreadable database: log, wait a tick, try again. Owed work stays owed.
            storeError = true;
            this.opts.logger.error({ slot: i, err: errCode(err) }, 'claim failed');
            break;
          }
          this.lastLoopAt = this.clock.now();
          if (!r) {
            queueHadWork = false;
            break;
          }
          ran++;
          this.busySinceIdle = true;
          await this.yieldIfDue();
        }
        if (gated) continue;
        if (!queueHadWork && !storeError && this.busySinceIdle) {
          this.busySinceIdle = false;
          this.opts.onIdle?.();
        }
        if (ran === 0 && !storeError && this.opts.untilIdle) return;
        if (ran === 0 && !storeError) this.opts.onIdleTick?.();
        if (ran === 0 || storeError) await this.idle(this.opts.tickMs);
      }
    } finally {
      await giveBack();
    }
  }

  /**
   * Lets timers, signals and I/O run (setImmediate) once YIELD_EVERY_MS of work has passed since the
   * last yield. The slots share one pending yield and one mark: each slot resuming with a fresh
   * mark of its own gave every slot its own 25 ms inside the same check phase (4 slots: 105 ms
   * between timer ticks, measured), so the slots wait on the same setImmediate and resume together.
   */
  private yieldIfDue(): Promise<void> | undefined {
    if (this.yielding) return this.yielding;
    if (performance.now() - this.lastYieldAt < YIELD_EVERY_MS) return undefined;
    this.yielding = new Promise<void>((resolve) =>
      setImmediate(() => {
        this.yielding = null;
        this.lastYieldAt = performance.now();
        resolve();
      }),
    );
    return this.yielding;
  }

  /** Logs the spend-cap pause at most once a minute across slots. */
  private logGate(ms: number): void {
    if (this.clock.now() - this.lastGateLog < 60_000) return;
    this.lastGateLog = this.clock.now();
    this.opts.logger.warn(
      { resumeInMs: Math.round(ms) },
      'daily spend cap reached: not claiming until the next window',
    );
  }

  /** Waits `ms`, or less when `stop()` or `wake()` is called. */
  private idle(ms: number): Promise<void> {
    return this.clock.wait(ms, AbortSignal.any([this.idleWake.signal, this.nudge.signal])).then(() => undefined);
  }
}
