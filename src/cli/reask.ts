import type { Command } from 'commander';
import { ConfigError } from '../config.js';
import { DRIFT_OWE, planDrift, surveyDrift, writeDriftMarker, type DriftSurvey } from '../maintenance/drift-plan.js';
import { surveyExpiry, type ExpirySurvey } from '../maintenance/expiry-plan.js';
import { questionsOf } from '../decision/registry.js';
import { buildRegistry, configFrom, EXIT_USAGE, loggerFor, openStore, resolveWorkspace } from './common.js';
import { readContext } from '../compose/reader.js';
import { readsAgainst } from './reader.js';

/** Items owed per store call (one write transaction) by `reask`; the store's own IN-list chunk is 500 too. */
const REASK_OWE_CHUNK = 500;

/**
 * `verdict reask --set NAME [--workspace SLUG] [--dry-run] [--yes] [--json]`: the drift sweep on
 * demand (DESIGN §8). It finds the open items whose answers of the set went stale without an
 * item write (a reworded question, an edited, added or switched-off convention, another model),
 * prints how many and the estimated provider calls first, then owes them at backfill priority.
 * Estimated calls = Σ over drifted items (per comment, for per-comment sets) of
 * ceil(drifted keys / maxPerCall); with every key drifted that is items × ceil(keys / maxPerCall).
 * With a paid provider it owes nothing without `--yes` (DESIGN §1 principle 10).
 */
export function registerReaskCommand(program: Command): void {
  program
    .command('reask')
    .description(
      're-owe the items whose answers of a set went stale without an item write (question, convention or model drift); prints the count and estimated calls first',
    )
    .requiredOption('--set <name>', 'question set')
    .option('--workspace <slug>', 'one workspace (default: every live workspace)')
    .option('--dry-run', 'print the count and estimated calls, owe nothing')
    .option('--yes', 'with a paid provider: owe them after the printed estimate')
    .option('--json', 'print JSON')
    .action(
      async (
        opts: { set: string; workspace?: string; dryRun?: boolean; yes?: boolean; json?: boolean },
        cmd: Command,
      ) => {
        const cfg = configFrom(cmd);
        const logger = loggerFor(cfg);
        const registry = buildRegistry(cfg);
        const set = registry.get(opts.set);
        if (!set) {
          process.stderr.write(
            `unknown set "${opts.set}"; known: ${registry
              .all()
              .map((s) => s.name)
              .join(', ')}\n`,
          );
          process.exitCode = EXIT_USAGE;
          return;
        }
        if (cfg.provider === 'none')
          throw new ConfigError('reask: the provider is none (decisions off); nothing would answer');
        const store = openStore(cfg, registry, { mustExist: true });
        // What counts as drifted is judged against the configured provider, or else the one the
        // worker last pinned (the same rule as every read).
        const ctx = await readContext(readsAgainst(cfg, logger), store);
        if (!ctx || ctx.model === '') {
          await store.close();
          throw new ConfigError(
            'reask: no provider configured and no worker has run on this database yet; pass --provider (and --model) as the worker has them',
          );
        }
        const provider = ctx;
        try {
          const workspaces = opts.workspace
            ? [await resolveWorkspace(store, opts.workspace)]
            : (await store.listWorkspaces()).filter((w) => w.deletedAt === null);
          const surveys: Array<{
            slug: string;
            survey: DriftSurvey;
            expired: ExpirySurvey | null;
            expiredToOwe: ExpirySurvey['toOwe'];
          }> = [];
          const nowMs = await store.now();
          for (const ws of workspaces) {
            const plan = await planDrift(store, set, ws.id, provider, logger);
            const survey = await surveyDrift(store, plan);
            // A set with maxAge: answers older than it are stale too (DESIGN §5.2), owed as drift is.
            const maxAgeMs = set.maxAgeMs;
            const expired =
              maxAgeMs === null
                ? null
                : await surveyExpiry(
                    store,
                    {
                      set: { ...set, maxAgeMs },
                      workspaceId: ws.id,
                      keys: Object.keys(await questionsOf(set, { workspaceId: ws.id, store, logger })).sort(),
                    },
                    nowMs,
                  );
            const drifted = new Set(survey.toOwe.map((c) => c.itemId));
            surveys.push({
              slug: ws.slug,
              survey,
              expired,
              expiredToOwe: (expired?.toOwe ?? []).filter((c) => !drifted.has(c.itemId)),
            });
          }
          const total = {
            items: surveys.reduce((n, s) => n + s.survey.toOwe.length + s.expiredToOwe.length, 0),
            calls: surveys.reduce((n, s) => n + s.survey.calls + s.expiredToOwe.reduce((m, c) => m + c.calls, 0), 0),
            alreadyOwed: surveys.reduce((n, s) => n + s.survey.alreadyOwed, 0),
            parked: surveys.reduce((n, s) => n + s.survey.parked, 0),
          };
          const paid = provider.name !== 'fake';
          const willOwe = !opts.dryRun && (!paid || !!opts.yes);
          let owed = 0;
          if (willOwe) {
            for (const { survey, expiredToOwe } of surveys) {
              const ids = [...survey.toOwe.map((c) => c.itemId), ...expiredToOwe.map((c) => c.itemId)];
              for (let i = 0; i < ids.length; i += REASK_OWE_CHUNK) {
                owed += await store.oweJobs(
                  ids.slice(i, i + REASK_OWE_CHUNK).map((itemId) => ({ itemId, questionSet: set.name })),
                  DRIFT_OWE,
                );
              }
              // The whole workspace was walked at this signature: the worker's sweep has nothing left to find.
              await writeDriftMarker(store, set.name, survey.plan.workspaceId, {
                swept: survey.plan.signature,
                target: null,
                cursor: null,
              });
            }
          }
          if (opts.json) {
            process.stdout.write(
              `${JSON.stringify(
                {
                  set: set.name,
                  provider: provider.name,
                  model: provider.model,
                  dryRun: !!opts.dryRun,
                  workspaces: surveys.map(({ slug, survey: s, expired, expiredToOwe }) => ({
                    workspace: slug,
                    scanned: s.scanned,
                    items: s.toOwe.length,
                    calls: s.calls,
                    alreadyOwed: s.alreadyOwed,
                    parked: s.parked,
                    keys: s.plan.fingerprints.size,
                    ...(expired ? { expired: expiredToOwe.length, expiredAlreadyOwed: expired.alreadyOwed } : {}),
                  })),
                  total,
                  owed,
                },
                null,
                2,
              )}\n`,
            );
          } else {
            const out: string[] = [];
            for (const { slug, survey: s, expired, expiredToOwe } of surveys) {
              out.push(
                `${set.name} in ${slug}: ${s.scanned} items scanned, ${s.plan.fingerprints.size} keys asked now; ${s.toOwe.length} items drifted to re-ask, estimated ${s.calls} calls (maxPerCall ${set.maxPerCall}); ${s.alreadyOwed} already owed, ${s.parked} parked (left parked)`,
              );
              if (expired)
                out.push(
                  `  ${expiredToOwe.length} items expired (answers older than maxAge) to re-ask besides; ${expired.alreadyOwed} already owed, ${expired.parked} parked`,
                );
            }
            out.push(
              `total: ${total.items} items, estimated ${total.calls} provider calls to ${provider.name}:${provider.model}`,
            );
            if (opts.dryRun) out.push('dry run: nothing owed');
            else if (!willOwe)
              out.push(
                `nothing owed: ${provider.name} is a paid provider; run again with --yes to owe these ${total.items} items`,
              );
            else out.push(`owed ${owed} jobs at backfill priority; a worker will ask them`);
            process.stdout.write(`${out.join('\n')}\n`);
          }
          if (!opts.dryRun && !willOwe) process.exitCode = EXIT_USAGE;
        } finally {
          await store.close();
        }
      },
    );
}
