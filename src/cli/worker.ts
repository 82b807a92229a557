import { hostname } from 'node:os';
import type { Command } from 'commander';
import type { Config } from '../config.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/store.js';
import type { RunReport } from '../runner/run-once.js';
import { pinnedProviderValue, PINNED_PROVIDER_META_KEY } from '../decision/pinned-provider.js';
import { startHeartbeat } from '../worker/heartbeat.js';
import { defaultStallAfterMs, judgeHealth, serveMetrics, WorkerMetrics, type MetricsServer } from '../worker/metrics.js';
import { startBackgroundPasses } from '../worker/background.js';
import { ProviderLimiter } from '../worker/limiter.js';
import { startWalUpkeep } from '../worker/wal-upkeep.js';
import { Worker, type WorkerSummary } from '../worker/worker.js';
import { configFrom, EXIT_FAILURE, EXIT_OK, formatDuration, loggerFor, openStore } from './common.js';
import { buildRuntime, reloadWorker, type Runtime } from './reload.js';

/** Heartbeats are written every tick, but never more often than this (ms): each one is a write transaction. */
export const HEARTBEAT_MIN_MS = 2_000;

/** What `runWorker` needs; the demo passes its own store and provider. */
export interface RunWorkerParams {
  cfg: Config;
  store: Store;
  registry: Registry;
  provider: Provider;
  logger: Logger;
  untilIdle: boolean;
  /** Install SIGTERM/SIGINT handlers (the CLI does; tests of the library do not). */
  handleSignals: boolean;
  /**
   * Called on SIGHUP (with `handleSignals`) to reload the config into the running worker; without
   * it SIGHUP is left to its default.
   */
  reload?: (worker: Worker) => void;
  /** Called with the worker before it runs (`backfill --drain` wakes and stops it). */
  onStarted?: (worker: Worker) => void;
  /** Called once per recorded outcome, after the metrics count it. */
  onOutcome?: (r: RunReport) => void;
}

/**
 * Runs a worker until stopped (or, with `untilIdle`, until nothing is claimable now).
 * Shutdown on SIGTERM/SIGINT (DESIGN §10): stop claiming, abort in-flight calls and release their
 * jobs without an attempt, finish bookkeeping, close the database, exit 0 within the grace
 * period; a second signal exits at once.
 */
export async function runWorker(p: RunWorkerParams): Promise<WorkerSummary> {
  const metrics = p.cfg.metricsPort === undefined ? null : new WorkerMetrics({ store: p.store, logger: p.logger });
  const store = metrics ? metrics.countingSpend(p.store) : p.store;
  const workerId = `${hostname()}:${process.pid}`;
  const limiter = new ProviderLimiter({
    store: p.store,
    requestsPerMinute: p.cfg.requestsPerMinute,
    inputTokensPerMinute: p.cfg.inputTokensPerMinute,
    dailyTokenCap: p.cfg.dailyTokenCap,
  });
  // Started just before the slots run (below), so a failed start-up leaves no timer behind.
  let walUpkeep: ReturnType<typeof startWalUpkeep> | null = null;
  const worker: Worker = new Worker({
    store,
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
    onOutcome: (r) => {
      metrics?.observe(r);
      p.onOutcome?.(r);
    },
    onIdle: () => walUpkeep?.idle(),
    ...(limiter.active ? { acquirePermit: limiter.acquire, claimGate: limiter.claimDelay } : {}),
  });
  const stallAfterMs = defaultStallAfterMs(p.cfg.tickMs, p.provider.worstCaseCallMs);
  const health = () => judgeHealth(worker, stallAfterMs, Date.now(), p.store.storageProblem());
  let server: MetricsServer | null = null;
  if (metrics) {
    metrics.setHealth(health);
    server = await serveMetrics({ metrics, health, port: p.cfg.metricsPort!, host: p.cfg.metricsHost, logger: p.logger });
    p.logger.info({ port: server.port, host: server.host, stallAfterMs }, 'metrics listening on /metrics and /healthz');
  }
  const heartbeat = await startHeartbeat({
    store: p.store,
    source: worker,
    info: { workerId, provider: p.provider.name, model: p.provider.model, concurrency: p.cfg.concurrency },
    everyMs: Math.max(p.cfg.tickMs, HEARTBEAT_MIN_MS),
    logger: p.logger,
  });
  await p.store.setMeta(PINNED_PROVIDER_META_KEY, pinnedProviderValue(p.provider));
  p.onStarted?.(worker);
  const onSignal = (sig: NodeJS.Signals) => {
    if (worker.signal.aborted) {
      p.logger.warn({ signal: sig }, 'second signal: exiting at once');
      process.exit(EXIT_FAILURE);
    }
    p.logger.info({ signal: sig, graceMs: p.cfg.graceMs }, 'shutting down');
    worker.stop(sig);
    setTimeout(() => {
      p.logger.error({ graceMs: p.cfg.graceMs }, 'grace period over: exiting with work unrecorded (leases bound it)');
      process.exit(EXIT_FAILURE);
    }, p.cfg.graceMs).unref();
  };
  const onHup = () => {
    if (worker.signal.aborted) return; // shutting down: nothing to reload into
    p.logger.info({ signal: 'SIGHUP' }, 'reloading the config');
    try {
      p.reload?.(worker);
    } catch (err) {
      // Never crash the worker on a reload: the old config stays in force.
      p.logger.error({ err: (err as { code?: string }).code ?? (err as Error).name }, 'reload failed; keeping the old config');
    }
  };
  if (p.handleSignals) {
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    if (p.reload) process.on('SIGHUP', onHup);
  }
  p.logger.info(
    {
      pid: process.pid,
      provider: p.provider.name,
      model: p.provider.model,
      concurrency: p.cfg.concurrency,
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
        sweepIntervalMs: p.cfg.tickMs,
        pruneIntervalMs: p.cfg.pruneIntervalMs,
        retentionHistoryMs: p.cfg.retentionHistoryMs,
      });
  const upkeepStop = new AbortController();
  walUpkeep = startWalUpkeep({ store: p.store, logger: p.logger, everyMs: p.cfg.walCheckpointMs, signal: upkeepStop.signal });
  try {
    return await worker.run();
  } finally {
    upkeepStop.abort();
    await walUpkeep.stop();
    await heartbeat.stop();
    await server?.close();
    if (!p.untilIdle) worker.stop('worker finished'); // a no-op after a signal; stops the passes if run() threw
    await background;
    if (p.handleSignals) {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      process.off('SIGHUP', onHup);
    }
  }
}

/** Prints what is left after `--until-idle`: jobs waiting (backoff, debounce), parked, and the next due time. */
export async function printLeftover(store: Store, out: (s: string) => void): Promise<void> {
  const q = await store.queueStats();
  const now = await store.now();
  const next = q.nextDueAt === null ? 'none' : `in ${formatDuration(q.nextDueAt - now)}`;
  out(`left: ${q.owedDue} due, ${q.owedWaiting} waiting (backoff or debounce), ${q.parked} parked; next due ${next}`);
}

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description('claim owed jobs and evaluate them until stopped; SIGHUP re-reads the config (flags, environment, --env-vars-file)')
    .option('--until-idle', 'drain every job claimable now, then exit 0')
    .action(async (opts: { untilIdle?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      // With no provider configured this throws a ConfigError naming the choices: exit 2.
      let current: Runtime = buildRuntime(cfg, logger);
      const provider = current.provider;
      if (!provider) {
        logger.info('provider is none: decisions are off, nothing to do');
        return;
      }
      const store = openStore(cfg, current.registry);
      const reload = (worker: Worker) => {
        current = reloadWorker({ worker, store, current, read: () => configFrom(cmd), logger }).runtime;
      };
      try {
        await store.now(); // fail at start, not in the claim loop, when the database is unreachable or unmigratable
        const summary = await runWorker({ cfg, store, registry: current.registry, provider, logger, untilIdle: !!opts.untilIdle, handleSignals: true, reload });
        if (opts.untilIdle) {
          process.stdout.write(
            `drained: ${summary.claimed} jobs claimed, ${summary.calls} provider calls (${current.provider?.name ?? 'none'}), ${summary.answersStored} answers stored\n`,
          );
          if (summary.spendCapReached) process.stdout.write('stopped early: the daily token cap (--daily-token-cap) is reached until the next UTC day\n');
          await printLeftover(store, (s) => process.stdout.write(`${s}\n`));
        }
        if (summary.misconfigured) {
          process.stderr.write(`provider misconfigured (${summary.misconfigured}); run \`verdict doctor\`\n`);
          process.exitCode = EXIT_FAILURE;
        } else process.exitCode = EXIT_OK;
      } finally {
        await current.provider?.close?.();
        if (current.provider !== provider) await provider.close?.();
        await store.close();
      }
    });
}
