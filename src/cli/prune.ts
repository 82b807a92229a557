import type { Command } from 'commander';
import { ConfigError } from '../config.js';
import { pruneDashboardSessions } from '../access/sessions.js';
import { pruneDecisions, pruneThroughput } from '../maintenance/retention.js';
import { buildRegistry, configFrom, loggerFor, openStore } from './common.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';

/**
 * `verdict prune [--dry-run] [--json]`: retention on demand (DESIGN §2). Deletes superseded
 * answer rows older than `--retention-history-ms`, in small batches, keeping the latest row per
 * key and any row that is current. Currency is judged against the configured provider, so a
 * provider must be configured: without one nothing reads current and pruning would remove the
 * rows an S1 → S2 → S1 item needs. Ended dashboard sessions are deleted in the same pass.
 */
export function registerPruneCommand(program: Command): void {
  program
    .command('prune')
    .description(
      'delete superseded answer rows older than the history window (keeps the latest per key and any current row)',
    )
    .option('--dry-run', 'count what would be deleted, delete nothing')
    .option('--json', 'print JSON')
    .action(async (opts: { dryRun?: boolean; json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      if (cfg.provider === undefined || cfg.provider === 'none') {
        throw new ConfigError(
          'prune judges which answers are current against the configured provider: pass --provider (and --model) as the worker has them',
        );
      }
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      const store = openStore(cfg, registry, { mustExist: true });
      try {
        const r = await pruneDecisions(store, await openReader(store, registry, readsAgainst(cfg, logger), logger), {
          historyMs: cfg.retentionHistoryMs,
          dryRun: !!opts.dryRun,
          logger,
        });
        // Ended dashboard sessions (DESIGN §16.6) go with the same pass; a dry run leaves them.
        const sessionsDeleted = opts.dryRun ? 0 : await pruneDashboardSessions(store, logger);
        // So do the throughput chart's minutes past the history window (DESIGN §2 job_throughput).
        if (!opts.dryRun) await pruneThroughput(store, cfg.retentionHistoryMs, logger);
        if (opts.json)
          process.stdout.write(
            `${JSON.stringify({ ...r, sessionsDeleted, historyMs: cfg.retentionHistoryMs, dryRun: !!opts.dryRun }, null, 2)}\n`,
          );
        else
          process.stdout.write(
            `${r.examined} superseded rows older than ${cfg.retentionHistoryMs} ms examined: ${r.keptCurrent} kept (current), ${r.deleted} ${opts.dryRun ? 'would be deleted (dry run)' : 'deleted'} in ${r.batches} batches${opts.dryRun ? '' : `; ${sessionsDeleted} ended dashboard sessions deleted`}\n`,
          );
      } finally {
        await store.close();
      }
    });
}
