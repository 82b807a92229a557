import type { Command } from 'commander';
import { Actions, type KeyActionStatus, type PlanEntry } from '../actions/actions.js';
import { loadActionsConfig, type ActionsConfig } from '../actions/config.js';
import type { GateStatus } from '../actions/gate.js';
import { createVerdict } from '../compose/verdict.js';
import type { Config } from '../config.js';
import type { Registry } from '../decision/registry.js';
import { githubWorkspaceMetaKey } from '../integrations/github/mapping.js';
import type { Logger } from '../log.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { ActionStore } from '../store/actions.js';
import type { QueueStore } from '../store/queue-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { Store } from '../store/whole-store.js';
import { configFrom, EXIT_OK, loggerFor, UsageError } from './common.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';

/**
 * `verdict actions plan|apply` (DESIGN §17; the logic is src/actions/ through `verdict.actions`):
 * the dry run of what would be written to GitHub now, item by item, with each key's gate; and the
 * run that plans and writes what is approved (a person's decisions, and with `--actions apply` the
 * changes of keys past the gate).
 */

/** `triage/blocked  gate passes (precision 0.97 over 34 labels, verdicts)` or `… gate not met: 12 more labelled items`. */
export function formatGate(g: GateStatus): string {
  const figures =
    g.precision === null
      ? `${g.labels} labels`
      : `precision ${g.precision.toFixed(2)} over ${g.labels} label${g.labels === 1 ? '' : 's'}, ${g.source}`;
  return g.passes
    ? `gate passes (${figures})`
    : `gate not met (${figures}; needs ≥ ${g.minPrecision} over ≥ ${g.minLabels}): lacks ${g.lacks}`;
}

/** The plan as text: the gate per key, then one line per item and key. */
function formatPlan(entries: PlanEntry[], gates: GateStatus[]): string {
  const lines = gates.map((g) => `${g.set}/${g.key}: ${formatGate(g)}`);
  if (entries.length === 0) lines.push('nothing to write or propose');
  for (const e of entries) {
    const parts: string[] = [];
    if (e.write)
      parts.push(
        `write (${e.write.source})${e.write.add.length ? ` +${e.write.add.join(' +')}` : ''}${e.write.remove.length ? ` -${e.write.remove.join(' -')}` : ''}`,
      );
    if (e.proposal)
      parts.push(
        `propose ${e.proposal.labels.length ? e.proposal.labels.join(', ') : 'no label'} (${e.proposal.reason === 'gate' ? 'under the gate' : e.proposal.reason === 'mode' ? 'actions on propose' : 'a person holds this key'})`,
      );
    lines.push(`  ${e.ref.padEnd(8)} ${`${e.set}/${e.key}`.padEnd(28)} ${parts.join('; ')}`);
  }
  const writes = entries.filter((e) => e.write).length;
  const proposals = entries.filter((e) => e.proposal).length;
  lines.push(`${writes} write${writes === 1 ? '' : 's'} and ${proposals} proposal${proposals === 1 ? '' : 's'}`);
  return lines.join('\n');
}

/** The status lines of actions per GitHub workspace (`verdict status`); [] when no key acts. */
export async function actionStatusLines(
  cfg: Config,
  store: TrackerStore &
    ActionStore &
    QueueStore &
    DecisionStore &
    MetaStore &
    HumanVerdictStore &
    Pick<Store, 'loadItemForEvaluation'>,
  registry: Registry,
  logger: Logger,
): Promise<{ lines: string[]; json: Array<{ workspace: string; keys: KeyActionStatus[] }> }> {
  const config: ActionsConfig = loadActionsConfig(cfg.configFile, registry);
  if (config.keys.length === 0) return { lines: [], json: [] };
  const reader = await openReader(store, registry, readsAgainst(cfg, logger), logger);
  const actions = new Actions({ store, registry, config, reader: async () => reader, logger });
  const lines: string[] = [];
  const json = [];
  for (const row of await store.listMeta('github:workspace:')) {
    const ws = await store.getWorkspace(row.key.slice(githubWorkspaceMetaKey('').length));
    if (!ws) continue;
    const keys = await actions.status(ws.id, cfg.actions);
    json.push({ workspace: ws.slug, keys });
    for (const k of keys) {
      lines.push(
        `actions ${ws.slug} ${k.set}/${k.key} (${k.mode}): ${k.applied} applied, ${k.proposed} proposed, ${k.pending} pending, ${k.failed} failed; ${formatGate(k.gate)}`,
      );
    }
  }
  return { lines, json };
}

/** The gate of every key that acts, in one workspace (`verdict eval` prints them); [] when none acts. */
export async function actionGates(
  cfg: Config,
  store: TrackerStore &
    ActionStore &
    QueueStore &
    DecisionStore &
    MetaStore &
    HumanVerdictStore &
    Pick<Store, 'loadItemForEvaluation'>,
  registry: Registry,
  workspaceId: string,
  logger: Logger,
): Promise<GateStatus[]> {
  const config = loadActionsConfig(cfg.configFile, registry);
  if (config.keys.length === 0) return [];
  const reader = await openReader(store, registry, readsAgainst(cfg, logger), logger);
  return [
    ...(await new Actions({ store, registry, config, reader: async () => reader, logger }).gates(workspaceId)).values(),
  ];
}

export function registerActionsCommand(program: Command): void {
  const actions = program
    .command('actions')
    .description('labels in GitHub behind a calibration gate: plan (dry run) and apply');
  actions
    .command('plan')
    .description('list what would be written to GitHub now, item by item, with the gate of each key; writes nothing')
    .option('--workspace <slug>', 'workspace slug (default: github)', 'github')
    .option('--json', 'print JSON')
    .action(async (opts: { workspace: string; json?: boolean }, cmd: Command) => {
      await withVerdict(cmd, async (v) => {
        const entries = await v.actions.plan({ workspace: opts.workspace, mode: 'apply' });
        if (entries === null) throw new UsageError(`no workspace "${opts.workspace}"`);
        const gates = (await v.actions.gates({ workspace: opts.workspace }))!;
        process.stdout.write(
          opts.json ? `${JSON.stringify({ gates, entries }, null, 2)}\n` : `${formatPlan(entries, gates)}\n`,
        );
      });
    });
  actions
    .command('apply')
    .description(
      "plan, then write what is approved to GitHub: people's decisions, and with --actions apply the changes of keys past the gate",
    )
    .option('--yes', 'write to GitHub (without it, nothing is written)')
    .option('--json', 'print JSON')
    .action(async (opts: { yes?: boolean; json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      if (!opts.yes)
        throw new UsageError(
          'actions apply writes labels to GitHub: pass --yes (see `verdict actions plan` for what it would write)',
        );
      if (!cfg.githubToken)
        throw new UsageError(
          'actions apply needs a GitHub token with Issues write in VERDICT_GITHUB_TOKEN (or GITHUB_TOKEN)',
        );
      await withVerdict(cmd, async (v) => {
        const ctrl = new AbortController();
        const stop = () => ctrl.abort();
        process.once('SIGINT', stop);
        try {
          const r = await v.actions.apply({
            token: cfg.githubToken,
            baseUrl: cfg.githubApiUrl,
            mode: cfg.actions,
            signal: ctrl.signal,
          });
          const gh = r.github;
          process.stdout.write(
            opts.json
              ? `${JSON.stringify(r, null, 2)}\n`
              : `actions (${cfg.actions}): ${r.planned} items planned, ${r.queued} writes queued, ${r.delivered} delivered, ${r.failed} failed or waiting` +
                  (gh
                    ? `; GitHub: ${gh.labelsAdded} labels added, ${gh.labelsRemoved} removed, ${gh.comments} comments, ${gh.skipped} skipped (closed or gone), ${gh.rateLimited} rate limits waited\n`
                    : '\n'),
          );
          process.exitCode = r.failed > 0 ? 1 : EXIT_OK;
        } finally {
          process.off('SIGINT', stop);
        }
      });
    });
}

/** A Verdict over the configured database and config file, reads judged as `verdict show` judges them. */
async function withVerdict(
  cmd: Command,
  fn: (v: Awaited<ReturnType<typeof createVerdict>>) => Promise<void>,
): Promise<void> {
  const cfg = configFrom(cmd);
  const logger = loggerFor(cfg);
  const provider =
    cfg.provider === 'fake' || cfg.provider === 'anthropic' || cfg.provider === 'openai' ? cfg.provider : 'pinned';
  const v = await createVerdict({
    database: cfg.databaseUrl,
    configFile: cfg.configFile,
    provider,
    logger,
    access: 'existing',
    actions: cfg.actions,
    env: process.env,
  });
  try {
    if (v.actions.config.keys.length === 0)
      throw new UsageError(
        'no question key acts: add an actions section to the config file (VERDICT_CONFIG; see the guide, "Actions in GitHub")',
      );
    await fn(v);
  } finally {
    await v.close();
  }
}
