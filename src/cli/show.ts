import type { Command } from 'commander';
import { fieldsForDisplay, type DecisionView } from '../reads/reads.js';
import type { Answer } from '../decision/questions.js';
import { pickedLevel } from '../decision/questions.js';
import { buildRegistry, configFrom, EXIT_FAILURE, formatDuration, loggerFor, openStore, resolveWorkspace } from './common.js';
import { readerFor } from './reader.js';

/** One line of an answer: `p=0.82` for nouls, `choice (0.61)` / `medium 2.3 (0.40)` otherwise. */
export function formatAnswer(a: Answer, confidence: number | null): string {
  if (a.type === 'noul') return `p=${a.noul.toFixed(2)}`;
  if (a.type === 'choice') return `${a.choice} (${(confidence ?? 0).toFixed(2)})`;
  return `${pickedLevel(a)} score=${a.score.toFixed(2)} (${(confidence ?? 0).toFixed(2)})`;
}

function describe(d: DecisionView): string {
  const status = d.current ? 'current' : `stale: ${d.staleReason}${d.changedParts.length ? ` (${d.changedParts.join(', ')})` : ''}`;
  return `  ${d.questionSet}/${d.questionKey}  ${formatAnswer(d.answer, d.confidence)}  [${status}; ${d.surfacing}]  ${d.provider}:${d.model}`;
}

export function registerShowCommand(program: Command): void {
  program
    .command('show <ref>')
    .description('show one item and every stored decision about it, with whether each is current')
    .option('--workspace <slug>', 'workspace slug (default: the only one)')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { workspace?: string; json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      const registry = buildRegistry(cfg);
      const store = openStore(cfg, registry, { mustExist: true });
      try {
        const ws = await resolveWorkspace(store, opts.workspace);
        const item = await store.getItemByRef(ws.id, ref);
        if (!item) {
          process.stderr.write(`no item ${ref} in workspace ${ws.slug}\n`);
          process.exitCode = EXIT_FAILURE;
          return;
        }
        const decisions = await (await readerFor(cfg, store, registry, logger)).decisions(item.id);
        const jobs = await store.listJobs({ itemId: item.id });
        if (opts.json) {
          process.stdout.write(`${JSON.stringify({ item: { id: item.id, ref: item.ref, title: item.title, seq: item.seq, deleted: item.deletedAt !== null, fields: fieldsForDisplay(item.fields) }, decisions, jobs }, null, 2)}\n`);
          return;
        }
        const lines = [`${item.ref}  ${item.title}${item.deletedAt !== null ? '  (deleted)' : ''}`, `  id ${item.id}, seq ${item.seq}`];
        lines.push(decisions.length ? 'decisions:' : 'decisions: none yet');
        for (const d of decisions) lines.push(describe(d));
        const now = await store.now();
        for (const j of jobs) {
          const due = j.state === 'owed' ? (j.notBefore > now ? `, due in ${formatDuration(j.notBefore - now)}` : ', due now') : '';
          lines.push(`job ${j.questionSet}: ${j.state}${due}, attempts ${j.attempts}, refusals ${j.refusals}${j.lastError ? `, last error ${j.lastError}` : ''}`);
        }
        process.stdout.write(`${lines.join('\n')}\n`);
      } finally {
        await store.close();
      }
    });
}
