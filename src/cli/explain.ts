import type { Command } from 'commander';
import { explainItem, type ExplainReport } from '../compose/explain.js';
import { InvalidInput } from '../errors.js';
import { buildRegistry, configFrom, loggerFor, openStore, resolveItem, UsageError } from './common.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';
import { formatAnswer } from './show.js';

/**
 * `verdict explain REF [--set NAME]`: what Verdict would ask about the item now, per set, exactly
 * (src/compose/explain.ts). It prints item and question text on this explicit request only; nothing
 * of it is logged.
 */
export function registerExplainCommand(program: Command): void {
  program
    .command('explain <ref>')
    .description(
      'show, per set, the exact prompt Verdict would send for the item now, its state hash, and the stored answers with their rationale',
    )
    .option('--workspace <slug>', 'workspace slug (default: the only one)')
    .option('--set <name>', 'only this question set')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { workspace?: string; set?: string; json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      const store = openStore(cfg, registry, { access: 'read' });
      try {
        const { ws, item } = await resolveItem(store, opts.workspace, ref);
        if (opts.set !== undefined && !registry.get(opts.set))
          throw new UsageError(`no question set ${opts.set}; \`verdict sets\` lists them`);
        const report = await explainItem(
          store,
          registry,
          await openReader(store, registry, readsAgainst(cfg, logger), logger),
          item.id,
          opts.set,
        );
        if (!report) throw new UsageError(`no item ${ref} in workspace ${ws.slug}`);
        if (opts.set !== undefined && report.sets.length === 0)
          throw new InvalidInput(`set ${opts.set} does not read this item's collection`, { param: 'set' });
        process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatExplain(report));
      } finally {
        await store.close();
      }
    });
}

/** The report as text: per set and target, the state hash, the prompt between rules, the stored answers. */
function formatExplain(r: ExplainReport): string {
  const out: string[] = [`${r.ref}  (item ${r.itemId})`];
  if (r.sets.length === 0) out.push('no question set reads this item\u2019s collection');
  for (const s of r.sets) {
    out.push('', `== set ${s.questionSet}${s.applies ? '' : `: not asked now (${s.reason})`}`);
    for (const t of s.targets) {
      out.push(
        `-- ${t.commentId === null ? 'the item' : `comment ${t.commentId}`}: state ${t.stateHash}${t.questionKeys.length > s.maxPerCall ? ` (sent in calls of at most ${s.maxPerCall} questions)` : ''}`,
      );
      out.push('---- system prompt', t.system, '---- user message', t.user, '---- stored answers');
      if (t.stored.length === 0) out.push('  none yet');
      for (const a of t.stored) {
        const matches = a.matchesState ? 'asked about this state' : `asked about state ${a.stateHash.slice(0, 12)}`;
        out.push(
          `  ${a.questionKey}  ${formatAnswer(a.answer, a.confidence)}  [${matches}; ${a.current ? 'current' : `stale: ${a.staleReason}`}]  ${a.provider}:${a.model}`,
        );
        if (a.rationale !== null) out.push(`    why: ${a.rationale}`);
      }
    }
  }
  return `${out.join('\n')}\n`;
}
