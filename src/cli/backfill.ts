import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import { Backfill, loadBackfillCursor, type BackfillProgress, type BackfillReport } from '../backfill/backfill.js';
import type { SetEstimate } from '../backfill/estimate.js';
import { formatUsd } from '../providers/pricing.js';
import type { Worker, WorkerSummary } from '../worker/worker.js';
import {
  buildRegistry,
  configFrom,
  EXIT_FAILURE,
  EXIT_OK,
  loggerFor,
  openStore,
  resolveWorkspace,
  UsageError,
} from './common.js';
import {
  batchedBackfillCost,
  EXACT_OPTION_HELP,
  estimateSets,
  estimateTargetFor,
  exactCounterFor,
  formatEstimates,
} from './estimate.js';
import { runWorker } from './worker.js';
import { VerdictError } from '../errors.js';
import { liveWorkers } from '../worker/heartbeat.js';

/**
 * `verdict backfill --set NAME [--workspace SLUG]` (DESIGN §11; the logic is src/backfill/backfill.ts).
 * Owes the set for every eligible item in chunks at backfill priority, waits for each chunk to
 * drain, and resumes from its stored cursor when rerun.
 *
 * - `--dry-run` prints the items, calls, estimated tokens and cost of what is left, and owes nothing;
 *   with `--exact` the input tokens are corrected by the provider's own count of a sample (as
 *   `verdict estimate --exact`). `--exact` without `--dry-run` is a usage error.
 * - `--drain` runs a runner (a worker, with the configured concurrency) in this process instead
 *   of waiting for a separate one.
 * - With a provider that costs money (any but `fake`), it prints the estimate and owes nothing
 *   without `--yes`: owed jobs are spent by whichever worker runs them.
 * - Ctrl-C (SIGINT) or SIGTERM stops it: owing stops, a `--drain` runner releases its in-flight
 *   jobs, everything owed stays owed, and the cursor says where to resume. A second signal exits at
 *   once. Exit code 0 when finished, 1 when stopped before the end.
 * - Progress: a bar on stderr when stderr is a terminal; otherwise one log line per chunk.
 */

interface BackfillFlags {
  set: string;
  workspace?: string;
  dryRun?: boolean;
  drain?: boolean;
  yes?: boolean;
  restart?: boolean;
  json?: boolean;
  exact?: boolean;
}

/** The chunk size: `--backfill-chunk`, else the per-pass limit (DESIGN §11: 20 by default). */
function backfillChunkSize(cfg: Config): number {
  return cfg.backfillChunk ?? cfg.passLimit;
}

function progressBar(setName: string): { update: (p: BackfillProgress) => void; stop: () => void } {
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: `backfill ${setName} [{bar}] {value}/{total} items drained | chunk {chunk} | {status}`,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    update(p) {
      const status =
        p.phase === 'draining' && p.current
          ? `draining: ${p.current.claimable} claimable, ${p.current.inFlight} in flight, ${p.current.parked} parked, ${p.current.waiting} waiting`
          : p.phase;
      if (!started) {
        bar.start(p.total, p.drained, { chunk: p.chunk, status });
        started = true;
      } else bar.update(p.drained, { chunk: p.chunk, status });
      bar.setTotal(p.total);
    },
    stop() {
      if (started) bar.stop();
    },
  };
}

const plural = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/** The run's summary as text. */
function formatBackfillReport(r: BackfillReport): string {
  const resumed = r.resumedAfter
    ? `resumed after ${r.resumedAfter.owedItems} items owed by an earlier run (its last chunk of ${r.resumedAfter.pending} waited for first); `
    : '';
  const end = r.finished
    ? 'finished: every eligible item is owed and drained'
    : 'stopped before the end: owed jobs stay owed; rerun the same command to resume from the cursor';
  return [
    `backfill ${r.set}: ${resumed}${r.owedThisRun} items owed in ${plural(r.chunksOwed, 'chunk')} this run (${r.insertedThisRun} new jobs; the rest already had one), ${r.total} eligible in all`,
    `  drained ${plural(r.chunksDrained, 'chunk')}; counted as they drained: ${r.parked} parked, ${r.waiting} waiting (backoff, debounce or deferral)`,
    `  ${end}`,
  ].join('\n');
}

/** `backfill` without `--drain` found no live worker heartbeat: exit 1, nothing owed. */
class NoWorkerRunning extends VerdictError {
  readonly code = 'no_worker_running';
}

export function registerBackfillCommand(program: Command): void {
  program
    .command('backfill')
    .description(
      'owe a question set for every eligible item, in chunks that drain before the next (resumable; Ctrl-C stops it without losing work)',
    )
    .requiredOption('--set <name>', 'the question set to backfill')
    .option('--workspace <slug>', 'one workspace (default: every workspace)')
    .option('--dry-run', 'print the items, calls, estimated tokens and cost of what is left; owe nothing')
    .option('--drain', 'run a runner in this process instead of waiting for a separate worker')
    .option('--yes', 'with a provider that costs money: go ahead after the printed estimate')
    .option('--restart', 'forget the stored cursor and start from the first item')
    .option('--exact', `with --dry-run: ${EXACT_OPTION_HELP}`)
    .option('--json', 'print the estimate or the report as JSON')
    .action(async (o: BackfillFlags, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      const set = registry.get(o.set);
      if (!set)
        throw new UsageError(
          `--set: no question set "${o.set}" (known: ${registry
            .all()
            .map((s) => s.name)
            .join(', ')})`,
        );
      if (o.exact && !o.dryRun)
        throw new UsageError('--exact corrects the estimate of --dry-run: add --dry-run (nothing was owed)');
      const exact = o.exact ? exactCounterFor(cfg, logger) : undefined;
      const target = exact?.target ?? estimateTargetFor(cfg, logger);
      const store = openStore(cfg, registry, { access: 'existing' });
      try {
        const workspaceId = o.workspace ? (await resolveWorkspace(store, o.workspace)).id : undefined;
        const cursor = o.restart ? null : await loadBackfillCursor(store, set.name, workspaceId);
        const out = (s: string) => process.stdout.write(`${s}\n`);
        const needsYes = target.pricing.kind !== 'free' && !o.yes;
        let estimates: SetEstimate[] | null = null;
        if (o.dryRun || needsYes) {
          estimates = await estimateSets(store, registry, target, {
            setName: set.name,
            workspaceId,
            afterId: cursor?.afterId ?? null,
            exact,
          });
          if (o.json)
            out(
              JSON.stringify(
                {
                  provider: target.provider,
                  model: target.fingerprint.model,
                  pricing: target.pricing,
                  cursor,
                  estimate: estimates[0],
                },
                null,
                2,
              ),
            );
          else {
            if (cursor)
              out(
                `a stored cursor: ${cursor.owedItems} items already owed in ${cursor.chunks} chunks; the estimate covers the items after it`,
              );
            out(formatEstimates(target, estimates));
            // A drain asks directly unless given --batch on (DESIGN §7.4).
            const batched = o.drain
              ? cfg.batch === 'on'
                ? batchedBackfillCost(cfg, logger, target, estimates[0])
                : null
              : batchedBackfillCost(cfg, logger, target, estimates[0]);
            if (batched !== null)
              out(
                `  with --batch ${cfg.batch} (this worker's setting) a worker sends it as Message Batches at the batch price: ${formatUsd(batched)}, results within 24 h`,
              );
          }
          if (o.dryRun) return;
          throw new UsageError(
            `backfill with ${target.provider}:${target.fingerprint.model} sends item text to a model that ${target.pricing.kind === 'priced' ? 'costs money' : 'may cost money (no price known)'}: read the estimate above, then rerun with --yes`,
          );
        }
        if (!o.drain && (await liveWorkers(store)).length === 0) {
          // Owing chunks that nothing drains would wait forever; say so at once, owing nothing.
          const q = await store.queueStats();
          throw new NoWorkerRunning(
            `no worker is running (no live heartbeat; \`verdict status\` lists workers), so nothing would drain the backfill; nothing was owed (${q.owedDue + q.owedWaiting + q.inFlight} jobs owed already wait); start \`verdict worker\` and rerun, or rerun with --drain to run one in this process`,
          );
        }
        await runBackfill({ cfg, logger, store: store, registry, setName: set.name, workspaceId, o, out });
      } finally {
        await store.close();
        await exact?.counter.close?.();
      }
    });
}

async function runBackfill(p: {
  cfg: Config;
  logger: Logger;
  store: ReturnType<typeof openStore>;
  registry: ReturnType<typeof buildRegistry>;
  setName: string;
  workspaceId: string | undefined;
  o: BackfillFlags;
  out: (s: string) => void;
}): Promise<void> {
  const { cfg, logger, store, registry, o } = p;
  const stop = new AbortController();
  let worker: Worker | null = null;
  const tty = process.stderr.isTTY && !o.json;
  const bar = tty ? progressBar(p.setName) : null;
  // On a terminal the bar shows progress; info lines (chunk lines, the runner's spend lines) would
  // tear it, so only warnings and errors are logged there. The spend table still has every call.
  const log = tty ? logger.child({}, { level: 'warn' }) : logger;
  const backfill = new Backfill({
    store,
    set: registry.get(p.setName)!,
    workspaceId: p.workspaceId,
    chunkSize: backfillChunkSize(cfg),
    tickMs: cfg.tickMs,
    logger: log,
    signal: stop.signal,
    restart: o.restart,
    onProgress: bar ? (pr) => bar.update(pr) : undefined,
    onChunkOwed: () => worker?.wake(),
  });
  const onSignal = (sig: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      logger.warn({ signal: sig }, 'second signal: exiting at once (owed jobs stay owed; leases bound any in flight)');
      process.exit(EXIT_FAILURE);
    }
    logger.info({ signal: sig }, 'backfill stopping: no more chunks are owed');
    stop.abort();
    worker?.stop(sig);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let provider = null;
  let workerRun: Promise<WorkerSummary> | null = null;
  try {
    if (o.drain) {
      provider = createProvider(cfg, logger);
      if (!provider) throw new UsageError('provider is none: decisions are off, there is nothing to drain');
      let started!: () => void;
      const ready = new Promise<void>((r) => (started = r));
      workerRun = runWorker({
        // A one-shot drain asks directly unless given --batch on (DESIGN §7.4): its batches'
        // results could come after it has stopped.
        cfg: { ...cfg, batch: cfg.batch === 'on' ? 'on' : 'off' },
        store,
        registry,
        provider,
        logger: log,
        untilIdle: false,
        handleSignals: false,
        onStarted: (w) => {
          worker = w;
          started();
        },
        onOutcome: (r) => {
          if (r.claim.questionSet === p.setName) backfill.notify();
        },
      });
      await Promise.race([ready, workerRun]);
    }
    const report = await backfill.run();
    bar?.stop();
    if (worker) (worker as Worker).stop(report.finished ? 'backfill finished' : 'backfill stopped');
    const summary = workerRun ? await workerRun : null;
    if (o.json) p.out(JSON.stringify({ ...report, runner: summary }, null, 2));
    else {
      p.out(formatBackfillReport(report));
      if (summary)
        p.out(
          `  runner in this process: ${summary.claimed} jobs run, ${summary.calls} provider calls (${provider!.name}), ${summary.batchResults ?? 0} batch results, ${summary.answersStored} answers stored`,
        );
    }
    process.exitCode = report.finished ? EXIT_OK : EXIT_FAILURE;
  } finally {
    bar?.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (worker && !stop.signal.aborted) (worker as Worker).stop('backfill ended');
    if (workerRun) await workerRun.catch(() => undefined);
    await provider?.close?.();
  }
}
