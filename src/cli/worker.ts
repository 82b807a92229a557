import { hostname } from 'node:os';
import type { Command } from 'commander';
import type { Config } from '../config.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/store.js';
import { ProviderLimiter } from '../worker/limiter.js';
import { Worker, type WorkerSummary } from '../worker/worker.js';
import { buildRegistry, configFrom, EXIT_FAILURE, EXIT_OK, formatDuration, loggerFor, openStore } from './common.js';

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
}

/**
 * Runs a worker until stopped (or, with `untilIdle`, until nothing is claimable now).
 * Shutdown on SIGTERM/SIGINT (DESIGN §10): stop claiming, abort in-flight calls and release their
 * jobs without an attempt, finish bookkeeping, close the database, exit 0 within the grace
 * period; a second signal exits at once.
 */
export async function runWorker(p: RunWorkerParams): Promise<WorkerSummary> {
  const limiter = new ProviderLimiter({
    store: p.store,
    requestsPerMinute: p.cfg.requestsPerMinute,
    inputTokensPerMinute: p.cfg.inputTokensPerMinute,
    dailyTokenCap: p.cfg.dailyTokenCap,
  });
  const worker = new Worker({
    store: p.store,
    registry: p.registry,
    provider: p.provider,
    logger: p.logger,
    workerId: `${hostname()}:${process.pid}`,
    concurrency: p.cfg.concurrency,
    tickMs: p.cfg.tickMs,
    leaseMs: p.cfg.leaseMs,
    passLimit: p.cfg.passLimit,
    abandonLimit: p.cfg.abandonLimit,
    untilIdle: p.untilIdle,
    ...(limiter.active ? { acquirePermit: limiter.acquire, claimGate: limiter.claimDelay } : {}),
  });
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
  if (p.handleSignals) {
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }
  p.logger.info(
    {
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
  try {
    return await worker.run();
  } finally {
    if (p.handleSignals) {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
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
    .description('claim owed jobs and evaluate them until stopped')
    .option('--until-idle', 'drain every job claimable now, then exit 0')
    .action(async (opts: { untilIdle?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      const provider = createProvider(cfg, logger);
      if (!provider) {
        logger.info('provider is none: decisions are off, nothing to do');
        return;
      }
      const store = openStore(cfg, registry);
      try {
        await store.now(); // fail at start, not in the claim loop, when the database is unreachable or unmigratable
        const summary = await runWorker({ cfg, store, registry, provider, logger, untilIdle: !!opts.untilIdle, handleSignals: true });
        if (opts.untilIdle) {
          process.stdout.write(
            `drained: ${summary.claimed} jobs claimed, ${summary.calls} provider calls (${provider.name}), ${summary.answersStored} answers stored\n`,
          );
          if (summary.spendCapReached) process.stdout.write('stopped early: the daily token cap (--daily-token-cap) is reached until the next UTC day\n');
          await printLeftover(store, (s) => process.stdout.write(`${s}\n`));
        }
        if (summary.misconfigured) {
          process.stderr.write(`provider misconfigured (${summary.misconfigured}); run \`verdict doctor\`\n`);
          process.exitCode = EXIT_FAILURE;
        } else process.exitCode = EXIT_OK;
      } finally {
        await provider.close?.();
        await store.close();
      }
    });
}
