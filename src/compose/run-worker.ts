import { errCode } from '../runner/error-code.js';
import { hostname } from 'node:os';
import type { Config } from '../config.js';
import { pinnedProviderValue, PINNED_PROVIDER_META_KEY } from '../decision/pinned-provider.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import type { Provider } from '../providers/provider.js';
import type { RunReport } from '../runner/job-life.js';
import type { Store } from '../store/whole-store.js';
import type { SpendRecord } from '../store/store.js';
import { startBackgroundPasses, sweepUntilDone } from '../maintenance/background.js';
import { startHeartbeat } from '../worker/heartbeat.js';
import { ProviderLimiter } from '../worker/limiter.js';
import { startWalUpkeep } from '../maintenance/wal-upkeep.js';
import { EventDeliverer, eventDeliverySettings } from '../worker/event-delivery.js';
import type { Registry as MetricsRegistry } from 'prom-client';
import {
  defaultStallAfterMs,
  judgeHealth,
  serveMetrics,
  WorkerMetrics,
  type Health,
  type MetricsServer,
} from '../worker/metrics.js';
import { Worker, type WorkerSummary } from '../worker/worker.js';
import { Actions } from '../actions/actions.js';
import { ActionsWorker, type ActionsDrainReport } from '../actions/actions-worker.js';
import type { ActionsConfig } from '../actions/config.js';
import { openReader } from './reader.js';

/** Heartbeats are written every tick, but never more often than this (ms): each one is a write transaction. */
const HEARTBEAT_MIN_MS = 2_000;

/**
 * The drift and expiry sweeps run a pass every tick, but never more often than this (ms), the
 * default tick (DESIGN §8 "Drift sweep"): each pass reads the workspaces, their collections and
 * the sweep markers, and the sweeps owe at most `driftSweepPerMinute` a minute, so a pass every
 * 50 ms owes no sooner than one every 5 s; a shorter tick is for the slots' idle claims.
 */
const SWEEP_MIN_MS = 5_000;

/** The worker settings of the config (DESIGN §10, §12); durations in milliseconds. */
export type WorkerSettings = Pick<
  Config,
  | 'concurrency'
  | 'tickMs'
  | 'leaseMs'
  | 'passLimit'
  | 'abandonLimit'
  | 'metricsPort'
  | 'metricsHost'
  | 'requestsPerMinute'
  | 'inputTokensPerMinute'
  | 'dailyTokenCap'
  | 'driftSweepPerMinute'
  | 'pruneIntervalMs'
  | 'retentionHistoryMs'
  | 'walCheckpointMs'
> &
  /**
   * Outbound decision events (DESIGN §16.2): receiver URLs and the signing secret (required with
   * URLs). A worker given URLs makes them the database's enabled targets at start (every other
   * target is disabled, so workers that deliver events should share one list) and delivers to them;
   * a worker without URLs changes no target and delivers nothing, so it never switches off the
   * targets of a worker that has them. @defaultValue none
   */
  Partial<Pick<Config, 'eventUrls' | 'eventSecret'>> &
  /** Co-asking (DESIGN §7.2) and Message Batches (§7.3). @defaultValue `on` and `auto` */
  Partial<Pick<Config, 'coAsk' | 'batch'>> &
  /**
   * Actions in GitHub (DESIGN §17): this worker's cap on every set's mode, and the token and API
   * URL label writes use (without a token proposals are made, nothing is written).
   * @defaultValue `propose`, no token, https://api.github.com
   */
  Partial<Pick<Config, 'actions' | 'githubToken' | 'githubApiUrl'>> &
  /** The spend spool's directory (DESIGN §10.5); `createVerdict`'s worker takes it, else the database's default (`defaultSpoolDir`). */
  Partial<Pick<Config, 'spendSpoolDir'>>;

/** A running worker's metrics and health, for a server of the host's to expose. */
export interface WorkerMonitor {
  registry: MetricsRegistry;
  /** The /healthz judgement now: in-memory only, answers at once. */
  health: () => Health;
}

/** What `runWorker` needs. */
export interface RunWorkerParams {
  cfg: WorkerSettings;
  store: Store;
  registry: Registry;
  provider: Provider;
  logger: Logger;
  untilIdle: boolean;
  /** Worker id in heartbeats and claims. @defaultValue `<hostname>:<pid>` */
  workerId?: string;
  /**
   * The database as the start line names it: a SQLite path, or `postgres://host:port/db` (never a
   * password; see store/database-errors.ts databaseLabel). @defaultValue omitted from the line
   */
  database?: string;
  /**
   * Called with the worker once it is set up, before it claims (the CLI installs its signal
   * handlers here; `backfill --drain` wakes and stops it; the library handle keeps it), and its
   * actions beside the slots (null when no key acts or `--actions off`), which a SIGHUP reloads.
   */
  onStarted?: (worker: Worker, actions: ActionsWorker | null) => void;
  /**
   * Called once at start with the worker's metrics registry and health judge (the same ones
   * `/metrics` and `/healthz` serve), for a host that serves them itself (`verdict serve
   * --worker`). Given, the metrics exist even without `metricsPort`.
   */
  onMetrics?: (m: WorkerMonitor) => void;
  /** Called once per recorded outcome, after the metrics count it. */
  onOutcome?: (r: RunReport) => void;
  /** Called when a slot finds nothing claimable after doing work (see WorkerOptions.onIdle). */
  onIdle?: () => void;
  /** The config file's actions section (DESIGN §17); none acts without it. */
  actionsConfig?: ActionsConfig;
  /**
   * The spend spool's directory (DESIGN §10.5; `defaultSpoolDir` gives the usual one for a
   * database). Null or omitted keeps spend that cannot be written in memory only. @defaultValue null
   */
  spendSpoolDir?: string | null;
}

/** What a run did: the slots' summary, and for a drain with acting keys what the actions did. */
export type RunSummary = WorkerSummary & { actions?: ActionsDrainReport };

/**
 * Runs a worker until `worker.stop()` (or, with `untilIdle`, until nothing is claimable now), with
 * the wiring of DESIGN §10: the provider limiter and daily spend cap, metrics and /healthz (when
 * `metricsPort` is set), heartbeats, the pinned provider in `verdict_meta`, and (long-running
 * only) the drift sweep and retention passes. Signals are the caller's (the CLI's) business.
 * @throws LeaseTooShort when the lease cannot cover the provider's worst-case call.
 * @throws the store's error when the heartbeat or the pinned provider cannot be written at start.
 */
export async function runWorker(p: RunWorkerParams): Promise<RunSummary> {
  const events = eventDeliverySettings(p.cfg.eventUrls, p.cfg.eventSecret);
  const metrics =
    p.cfg.metricsPort === undefined && !p.onMetrics ? null : new WorkerMetrics({ store: p.store, logger: p.logger });
  const workerId = p.workerId ?? `${hostname()}:${process.pid}`;
  const limiter = new ProviderLimiter({
    store: p.store,
    requestsPerMinute: p.cfg.requestsPerMinute,
    inputTokensPerMinute: p.cfg.inputTokensPerMinute,
    dailyTokenCap: p.cfg.dailyTokenCap,
    // DESIGN §9.3: the server's rate-limit headers slow the slots before a 429. Read from the
    // provider in force at each call (a SIGHUP reload swaps it); only a provider that reads them.
    ...(p.provider.rateLimitState ? { rateLimitState: () => worker.runtime.provider.rateLimitState?.() ?? null } : {}),
  });
  // Started just before the slots run (below), so a failed start-up leaves no timer behind.
  let walUpkeep: ReturnType<typeof startWalUpkeep> | null = null;
  // Jobs released because this worker stopped, and of them those whose provider call was cut off.
  let releasedAtStop = 0;
  let abortedCalls = 0;
  const deliverer = events
    ? new EventDeliverer({
        store: p.store,
        logger: p.logger,
        owner: `${workerId}/events`,
        secret: events.secret,
        pollMs: p.cfg.tickMs,
        onDelivery: (ok) => metrics?.countEventDelivery(ok),
      })
    : null;
  const worker: Worker = new Worker({
    store: p.store,
    registry: p.registry,
    provider: p.provider,
    logger: p.logger,
    workerId,
    concurrency: p.cfg.concurrency,
    tickMs: p.cfg.tickMs,
    leaseMs: p.cfg.leaseMs,
    passLimit: p.cfg.passLimit,
    abandonLimit: p.cfg.abandonLimit,
    untilIdle: p.untilIdle,
    coAsk: p.cfg.coAsk !== 'off',
    batch: p.cfg.batch ?? 'auto',
    ...(p.cfg.dailyTokenCap !== undefined ? { dailyTokenCap: p.cfg.dailyTokenCap } : {}),
    onOutcome: (r) => {
      metrics?.observe(r);
      if (worker.signal.aborted && r.outcome.kind === 'release') {
        releasedAtStop++;
        if (r.stats.calls > 0) abortedCalls++;
      }
      // Answers stored may have queued events and moved labels: deliver and plan now rather than at the next tick.
      if (r.stats.answersStored > 0) {
        deliverer?.wake();
        acting?.wake();
      }
      p.onOutcome?.(r);
    },
    ...(metrics ? { onSpend: (r: SpendRecord) => metrics.countSpend(r) } : {}),
    onIdle: p.onIdle,
    onIdleTick: () => walUpkeep?.idle(),
    spendSpoolDir: p.spendSpoolDir ?? null,
    ...(limiter.active ? { acquirePermit: limiter.acquire, claimGate: limiter.claimDelay } : {}),
  });
  const acting = p.actionsConfig
    ? await ActionsWorker.create({
        store: p.store,
        actions: new Actions({
          store: p.store,
          registry: p.registry,
          config: p.actionsConfig,
          reader: () => openReader(p.store, worker.runtime.registry, worker.runtime.provider, p.logger),
          logger: p.logger,
        }),
        config: p.actionsConfig,
        cap: p.cfg.actions ?? 'propose',
        logger: p.logger,
        workerId,
        tickMs: p.cfg.tickMs,
        token: p.cfg.githubToken,
        baseUrl: p.cfg.githubApiUrl,
      })
    : null;
  const stallAfterMs = defaultStallAfterMs(p.cfg.tickMs, p.provider.worstCaseCallMs);
  const health = () => judgeHealth(worker, stallAfterMs, worker.clock.now(), p.store.storageProblem());
  let server: MetricsServer | null = null;
  if (metrics) {
    metrics.setHealth(health);
    p.onMetrics?.({ registry: metrics.registry, health });
    if (p.cfg.metricsPort !== undefined) {
      server = await serveMetrics({
        metrics,
        health,
        port: p.cfg.metricsPort,
        host: p.cfg.metricsHost,
        logger: p.logger,
      });
      p.logger.info(
        { port: server.port, host: server.host, stallAfterMs },
        'metrics listening on /metrics and /healthz',
      );
    }
  }
  const heartbeat = await startHeartbeat({
    store: p.store,
    source: worker,
    info: {
      workerId,
      provider: p.provider.name,
      model: p.provider.model,
      concurrency: p.cfg.concurrency,
      dailyTokenCap: p.cfg.dailyTokenCap ?? null,
    },
    everyMs: Math.max(p.cfg.tickMs, HEARTBEAT_MIN_MS),
    logger: p.logger,
  });
  try {
    await p.store.setMeta(PINNED_PROVIDER_META_KEY, pinnedProviderValue(p.provider));
    if (events) {
      const t = await p.store.syncEventTargets(events.urls);
      p.logger.info({ targets: t.enabled, disabled: t.disabled }, 'event targets set');
    }
    p.onStarted?.(worker, acting);
  } catch (err) {
    await heartbeat.stop();
    await server?.close();
    throw err;
  }
  p.logger.info(
    {
      pid: process.pid,
      ...(p.database === undefined ? {} : { database: p.database }),
      provider: p.provider.name,
      model: p.provider.model,
      concurrency: p.cfg.concurrency,
      coAsk: p.cfg.coAsk ?? 'on',
      batch: p.cfg.batch ?? 'auto',
      batching: worker.batching(),
      tickMs: p.cfg.tickMs,
      leaseMs: p.cfg.leaseMs,
      untilIdle: p.untilIdle,
      requestsPerMinute: p.cfg.requestsPerMinute ?? null,
      inputTokensPerMinute: p.cfg.inputTokensPerMinute ?? null,
      dailyTokenCap: p.cfg.dailyTokenCap ?? null,
    },
    'worker started',
  );
  // The drift sweep and retention run beside the slots in a long-running worker, not in a drain.
  const background = p.untilIdle
    ? Promise.resolve()
    : startBackgroundPasses({
        store: p.store,
        runtime: () => worker.runtime, // after a SIGHUP reload, the next pass uses the new sets and model
        logger: p.logger,
        signal: worker.signal,
        driftSweepPerMinute: p.cfg.driftSweepPerMinute,
        sweepIntervalMs: Math.max(p.cfg.tickMs, SWEEP_MIN_MS),
        pruneIntervalMs: p.cfg.pruneIntervalMs,
        retentionHistoryMs: p.cfg.retentionHistoryMs,
      });
  const upkeepStop = new AbortController();
  walUpkeep = startWalUpkeep({
    store: p.store,
    logger: p.logger,
    everyMs: p.cfg.walCheckpointMs,
    signal: upkeepStop.signal,
  });
  // Events: a long-running worker delivers beside the slots until it stops; a drain delivers once
  // its jobs are done (EventDeliverer.flush: every event due now is tried, a failed one waits for
  // its backoff and the next run), so undelivered events never hold a drain open.
  const delivering = deliverer && !p.untilIdle ? deliverer.run(worker.signal) : Promise.resolve();
  const actingRun = acting && !p.untilIdle ? acting.run(worker.signal) : Promise.resolve();
  let summary: RunSummary | null = null;
  try {
    if (p.untilIdle) {
      // A drain runs the sweeps to their end first (DESIGN §7.4), so what drifted or expired
      // is owed and asked in this run, not left for a long-running worker's passes.
      try {
        await sweepUntilDone({
          store: p.store,
          registry: p.registry,
          provider: p.provider,
          logger: p.logger,
          signal: worker.signal,
          driftSweepPerMinute: p.cfg.driftSweepPerMinute,
        });
      } catch (err) {
        p.logger.error({ err: errCode(err) }, 'sweeps before the drain failed; the drain goes on');
      }
    }
    summary = await worker.run();
    if (acting && p.untilIdle) {
      const a = await acting.drain(worker.signal);
      summary = { ...summary, actions: a };
      p.logger.info(
        { planned: a.planned, queued: a.queued, delivered: a.delivered, failed: a.failed },
        'actions planned and delivered until idle',
      );
    }
    if (deliverer && p.untilIdle) {
      const done = await deliverer.flush(worker.signal);
      const left = await p.store.eventDeliveryStats().catch(() => null);
      p.logger.info(
        { ...done, pending: left?.pending ?? null, nextAttemptAt: left?.nextAttemptAt ?? null },
        'events delivered until idle',
      );
    }
    return summary;
  } finally {
    upkeepStop.abort();
    await walUpkeep.stop();
    await heartbeat.stop();
    await server?.close();
    if (!p.untilIdle) worker.stop('worker finished'); // a no-op after stop(); stops the passes if run() threw
    await background;
    await delivering;
    await actingRun;
    if (summary) {
      // The last line of a worker's log: what it did, what its stop cut short (DESIGN §10), and the
      // spend it could not write: spooled for the next start, or lost with the process (§10.5).
      const spend = worker.spendKept;
      p.logger.info(
        {
          claimed: summary.claimed,
          outcomes: summary.outcomes,
          calls: summary.calls,
          answersStored: summary.answersStored,
          inputTokens: summary.inputTokens,
          outputTokens: summary.outputTokens,
          releasedAtStop,
          abortedCalls,
          spendSpooled: spend.spooled,
          spendLost: spend.memoryOnly,
        },
        'worker stopped',
      );
    }
  }
}
