import { errCode } from '../runner/error-code.js';
import type { Command } from 'commander';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { QueueStore } from '../store/queue-store.js';
import type { Store } from '../store/whole-store.js';
import {
  runWorker as runLibraryWorker,
  type RunSummary,
  type RunWorkerParams as LibraryRunWorkerParams,
} from '../compose/run-worker.js';
import type { Worker, WorkerSummary } from '../worker/worker.js';
import { databaseLabel } from '../store/database-errors.js';
import { defaultSpoolDir } from '../runner/spend-spool.js';
import { liveWorkers } from '../worker/heartbeat.js';
import { configFrom, EXIT_FAILURE, EXIT_OK, formatDuration, loggerFor, openStore } from './common.js';
import { drainProgress } from './progress.js';
import { buildRuntime, reloadActions, reloadWorker, type Runtime } from './reload.js';
import type { ActionsWorker } from '../actions/actions-worker.js';
import { loadActionsConfig } from '../actions/config.js';

/** What `runWorker` needs; the demo passes its own store and provider. */
export interface RunWorkerParams extends Omit<LibraryRunWorkerParams, 'cfg' | 'onStarted'> {
  cfg: Config;
  /** Install SIGTERM/SIGINT handlers (the CLI does; tests of the library do not). */
  handleSignals: boolean;
  /**
   * Called on SIGHUP (with `handleSignals`) to reload the config into the running worker; without
   * it SIGHUP is left to its default.
   */
  reload?: (worker: Worker, actions: ActionsWorker | null) => void;
  /** Called with the worker before it runs (`backfill --drain` wakes and stops it). */
  onStarted?: (worker: Worker, actions: ActionsWorker | null) => void;
}

/** What a command's shutdown signals are wired to (`shutdownSignals`). */
export interface ShutdownSignals {
  /** The worker the first signal stops; a signal that came before it started stops it at once. */
  attach(worker: Worker, actions?: ActionsWorker | null): void;
  /** Removes the handlers (after the store is closed, the last thing the command does). */
  dispose(): void;
}

/**
 * SIGTERM/SIGINT handling for a whole command (DESIGN §10), installed before anything is opened
 * and removed after the database is closed, so every signal in the command's life is seen: the
 * first stops the worker (or, before it started, stops it as it starts) and arms the grace period
 * (`graceMs`; at its end the process exits 1, leases bound the unrecorded work); a second signal,
 * whenever it comes, logs "second signal" and exits 1 at once. SIGHUP calls `reload` while a
 * worker runs and is not stopping.
 */
function shutdownSignals(
  logger: Logger,
  graceMs: number,
  reload?: (worker: Worker, actions: ActionsWorker | null) => void,
): ShutdownSignals {
  let worker: Worker | null = null;
  let acting: ActionsWorker | null = null;
  let stopping: NodeJS.Signals | null = null;
  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal: sig, first: stopping }, 'second signal: exiting at once');
      process.exit(EXIT_FAILURE);
    }
    stopping = sig;
    logger.info({ signal: sig, graceMs, started: worker !== null }, 'shutting down');
    worker?.stop(sig);
    setTimeout(() => {
      logger.error({ graceMs }, 'grace period over: exiting with work unrecorded (leases bound it)');
      process.exit(EXIT_FAILURE);
    }, graceMs).unref();
  };
  const onHup = () => {
    if (!worker || stopping) return; // not running, or shutting down: nothing to reload into
    logger.info({ signal: 'SIGHUP' }, 'reloading the config');
    try {
      reload?.(worker, acting);
    } catch (err) {
      // Never crash the worker on a reload: the old config stays in force.
      logger.error({ err: errCode(err) }, 'reload failed; keeping the old config');
    }
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  if (reload) process.on('SIGHUP', onHup);
  return {
    attach(w, a) {
      worker = w;
      acting = a ?? null;
      if (stopping) w.stop(stopping);
    },
    dispose() {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      process.off('SIGHUP', onHup);
    },
  };
}

/**
 * Runs a worker (compose/run-worker.ts) with the CLI's signal handling (`shutdownSignals`).
 * Shutdown on SIGTERM/SIGINT (DESIGN §10): stop claiming, abort in-flight calls and release their
 * jobs without an attempt, finish bookkeeping, close the database, exit 0 within the grace
 * period; a second signal exits 1 at once. SIGHUP calls `reload`. With `handleSignals` the
 * handlers live as long as this call; a command that opens and closes more than the worker passes
 * `handleSignals: false` and its own `shutdownSignals` through `onStarted`.
 */
export async function runWorker(p: RunWorkerParams): Promise<WorkerSummary> {
  const signals = p.handleSignals ? shutdownSignals(p.logger, p.cfg.graceMs, p.reload) : null;
  try {
    return await runLibraryWorker({
      ...p,
      spendSpoolDir: p.cfg.spendSpoolDir ?? defaultSpoolDir(p.cfg.databaseUrl),
      onStarted: (w, a) => {
        signals?.attach(w, a);
        p.onStarted?.(w, a);
      },
    });
  } finally {
    signals?.dispose();
  }
}

/** Jobs claimable at this moment (due plus in flight): the progress bar's starting total. */
async function claimableNow(store: Pick<QueueStore, 'queueStats'>): Promise<number> {
  const q = await store.queueStats();
  return q.owedDue + q.inFlight;
}

/**
 * Prints what is left after `--until-idle`: jobs due, waiting (backoff, debounce), parked, batched,
 * held under other workers' leases (this drain has given back its own: a lease still live is
 * another process's, alive or dead) with when the last lease ends, and the next due time.
 */
export async function printLeftover(
  store: Pick<Store, 'listMeta' | 'now' | 'queueStats'>,
  out: (s: string) => void,
): Promise<void> {
  const q = await store.queueStats();
  const now = await store.now();
  const next = q.nextDueAt === null ? 'none' : `in ${formatDuration(q.nextDueAt - now)}`;
  const batched =
    q.batched > 0
      ? `, ${q.batched} batched (in provider batches; a running worker stores their results within 24 h)`
      : '';
  let held = '';
  if (q.inFlight > 0) {
    const alive = (await liveWorkers(store)).length;
    const ends =
      q.leasesEndAt === null ? '' : `; the last lease ends in ${formatDuration(Math.max(0, q.leasesEndAt - now))}`;
    held = `, ${q.inFlight} held under other workers' leases (${alive === 0 ? "no worker is alive: a dead worker's, claimable once the lease ends" : `${alive} live worker${alive === 1 ? '' : 's'}`}${ends})`;
  }
  out(
    `left: ${q.owedDue} due, ${q.owedWaiting} waiting (backoff or debounce), ${q.parked} parked${held}${batched}; next due ${next}`,
  );
}

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description(
      'claim owed jobs and evaluate them until stopped; SIGHUP re-reads the config (flags, environment, --env-vars-file)',
    )
    .option('--until-idle', 'drain every job claimable now, then exit 0')
    .option(
      '--create',
      'create the database (and its folders) when it does not exist; without it a worker refuses a missing database',
    )
    .action(async (opts: { untilIdle?: boolean; create?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      // With no provider configured this throws a ConfigError naming the choices: exit 2.
      let current: Runtime = buildRuntime(cfg, logger);
      const provider = current.provider;
      if (!provider) {
        logger.info('provider is none: decisions are off, nothing to do');
        return;
      }
      // A mistyped path must not start a worker on a fresh empty database that nothing ever fills.
      const store = openStore(cfg, current.registry, { access: opts.create ? 'create' : 'existing' });
      const reload = (worker: Worker, actions: ActionsWorker | null) => {
        const r = reloadWorker({ worker, store, current, read: () => configFrom(cmd), logger });
        current = r.runtime;
        if (r.result.status === 'applied') reloadActions({ actions, runtime: current, logger });
      };
      // From before the database is first reached until it is closed: a signal while it connects,
      // migrates or closes is handled like one mid-drain.
      const signals = shutdownSignals(logger, cfg.graceMs, reload);
      try {
        await store.now(); // fail at start, not in the claim loop, when the database is unreachable or unmigratable
        // A drain on a terminal draws a progress bar on stdout; its summary below is printed last.
        const progress = opts.untilIdle ? drainProgress(await claimableNow(store), logger) : null;
        let summary: WorkerSummary;
        try {
          summary = await runWorker({
            cfg,
            store,
            registry: current.registry,
            provider,
            logger,
            untilIdle: !!opts.untilIdle,
            handleSignals: false,
            onStarted: signals.attach,
            onOutcome: progress?.tick,
            database: databaseLabel(cfg.databaseUrl),
            // A SIGHUP reload re-reads it (reloadActions); this worker writes no GitHub item, so the
            // labels left out of items' fields are the rule of whichever process takes webhooks.
            actionsConfig: loadActionsConfig(cfg.configFile, current.registry),
          });
        } finally {
          progress?.stop();
        }
        if (opts.untilIdle) {
          process.stdout.write(
            `drained: ${summary.claimed} jobs claimed, ${summary.calls} provider calls (${current.provider?.name ?? 'none'}), ${summary.batchResults ?? 0} batch results, ${summary.answersStored} answers stored\n`,
          );
          if (summary.batchUnavailableAt)
            process.stdout.write(`batching unavailable at ${summary.batchUnavailableAt}: asked directly\n`);
          const a = (summary as RunSummary).actions;
          if (a) {
            const gh = a.github;
            process.stdout.write(
              `actions: ${a.planned} items planned, ${a.queued} label writes queued, ${a.delivered} delivered, ${a.failed} failed or waiting${gh ? ` (GitHub: ${gh.labelsAdded} labels added, ${gh.labelsRemoved} removed, ${gh.comments} comments, ${gh.skipped} skipped as closed or gone, ${gh.rateLimited} rate limits waited)` : ' (no GitHub token: nothing written)'}\n`,
            );
          }
          if (summary.spendCapReached)
            process.stdout.write(
              'stopped early: the daily token cap (--daily-token-cap) is reached until the next UTC day\n',
            );
          await printLeftover(store, (s) => process.stdout.write(`${s}\n`));
        }
        const rejected = Object.entries(summary.schemaRejected ?? {});
        for (const [set, reason] of rejected) {
          process.stderr.write(
            `set ${set}: the provider rejected its answer schema (${reason}); its jobs are held while it cools off, other sets ran\n`,
          );
        }
        if (summary.misconfigured) {
          process.stderr.write(`provider misconfigured (${summary.misconfigured}); run \`verdict doctor\`\n`);
          process.exitCode = EXIT_FAILURE;
        } else process.exitCode = rejected.length ? EXIT_FAILURE : EXIT_OK;
      } finally {
        await current.provider?.close?.();
        if (current.provider !== provider) await provider.close?.();
        await store.close();
        signals.dispose();
      }
    });
}
