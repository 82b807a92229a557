import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { recordVerdict } from '../compose/record-verdict.js';
import type { DecisionView } from '../reads/reads.js';
import { overrideValue, type HumanVerdictRow, type VerdictKind } from '../store/verdicts.js';
import { buildRegistry, configFrom, loggerFor, openStore, resolveWorkspace, UsageError } from './common.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';
import { formatAnswer } from './show.js';

/**
 * `verdict review REF KEY agree|disagree|withdraw|VALUE` records a person's verdict (DESIGN
 * §8.1; compose/record-verdict.ts), and `verdict reviews` lists the verdicts in force, with the
 * ones made at an older state first (`override_stale`: the item changed since; a person should
 * look again).
 */

/** Who records a verdict when `--author` is not given: VERDICT_AUTHOR, else the login name. */
function defaultAuthor(): string {
  const env = process.env.VERDICT_AUTHOR?.trim();
  if (env) return env;
  try {
    return userInfo().username;
  } catch {
    return '';
  }
}

const WORDS: Record<string, VerdictKind> = {
  agree: 'agree',
  disagree: 'disagree',
  withdraw: 'withdrawn',
  withdrawn: 'withdrawn',
};

/** `attention/blocked  p=1.00 (person: ana, 2026-12-01)  override_stale (body)  model proposes p=0.91`. */
function describeInForce(d: DecisionView): string {
  const v = d.verdict!;
  const when = new Date(v.createdAt).toISOString().slice(0, 10);
  const stale = v.staleReason
    ? `  override_stale${v.changedParts.length ? ` (${v.changedParts.join(', ')})` : ''}`
    : '';
  const proposed = d.proposed ? `  model proposes ${formatAnswer(d.proposed, d.confidence)}` : '';
  return `${d.questionSet}/${d.questionKey}  ${formatAnswer(d.answer, 1)} (${v.verdict} by ${v.author}, ${when})${stale}${proposed}`;
}

export function registerReviewCommands(program: Command): void {
  program
    .command('review <ref> <key> <verdict>')
    .description(
      "record a person's verdict on an item's answer: agree, disagree, withdraw, or a value that overrides the model",
    )
    .addHelpText(
      'after',
      `
VERDICT is agree, disagree or withdraw, or a value of the question's kind: true/false or a
probability for a noul, an option for a choice, a level (name or index) for a score. A value
(and agree, and disagree on a noul) overrides the model for show and flags until withdrawn; the
model's later answers that disagree are shown as proposed. KEY is the set's question key
(blocked), or key@commentId for a per-comment set; --set picks the set when several ask it.
Use --value to give a value that reads like a verdict word (a choice option named "agree").`,
    )
    .option('--set <name>', 'question set (needed when several sets ask KEY)')
    .option('--value', 'read VERDICT as a value even if it is agree, disagree or withdraw')
    .option('--note <text>', 'why, in your words (stored, never logged)')
    .option('--author <name>', 'who (default: $VERDICT_AUTHOR, else your login name)')
    .option('--workspace <slug>', 'workspace slug (default: the only one)')
    .option('--json', 'print JSON')
    .action(
      async (
        ref: string,
        key: string,
        said: string,
        opts: { set?: string; value?: boolean; note?: string; author?: string; workspace?: string; json?: boolean },
        cmd: Command,
      ) => {
        const cfg = configFrom(cmd);
        const registry = buildRegistry(cfg);
        const word = opts.value ? undefined : WORDS[said.trim().toLowerCase()];
        const store = openStore(cfg, registry, { access: 'existing' });
        try {
          const ws = await resolveWorkspace(store, opts.workspace);
          const reader = await openReader(store, registry, readsAgainst(cfg, loggerFor(cfg)), loggerFor(cfg));
          const author = opts.author ?? defaultAuthor();
          if (author.trim() === '')
            throw new UsageError('--author: no author known (set VERDICT_AUTHOR or pass --author NAME)');
          const recorded = await recordVerdict(store, reader, {
            workspace: ws.slug,
            ref,
            key,
            set: opts.set,
            verdict: word ?? 'value',
            value: word ? undefined : said,
            author,
            note: opts.note,
          });
          if (opts.json) {
            process.stdout.write(
              `${JSON.stringify({ workspace: ws.slug, ref, ...recorded, row: { ...recorded.row, value: recorded.value } }, null, 2)}\n`,
            );
            return;
          }
          const r = recorded.row;
          const what = recorded.value
            ? formatAnswer(recorded.value, 1)
            : r.verdict === 'withdrawn'
              ? 'withdrawn: the model decides again'
              : 'disagree (no value: a label, the model still decides)';
          process.stdout.write(
            `${ref} ${r.questionSet}/${r.questionKey}: ${r.verdict} recorded by ${r.author} (verdict ${r.id}); ${recorded.inForce ? `in force: ${what}` : what}\n`,
          );
        } finally {
          await store.close();
        }
      },
    );

  program
    .command('reviews')
    .description("list people's verdicts in force, the ones made at an older state (override_stale) first")
    .option('--set <name>', 'only this question set')
    .option('--stale', 'only verdicts made at an older state: the items a person should look at again')
    .option('--workspace <slug>', 'workspace slug (default: the only one)')
    .option('--json', 'print JSON')
    .action(async (opts: { set?: string; stale?: boolean; workspace?: string; json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const registry = buildRegistry(cfg);
      if (opts.set !== undefined && !registry.get(opts.set)) {
        throw new UsageError(
          `--set: no question set "${opts.set}"; known: ${registry
            .all()
            .map((s) => s.name)
            .join(', ')}`,
        );
      }
      const store = openStore(cfg, registry, { access: 'read' });
      try {
        const ws = await resolveWorkspace(store, opts.workspace);
        const reader = await openReader(store, registry, readsAgainst(cfg, loggerFor(cfg)), loggerFor(cfg));
        const latest = new Map<string, HumanVerdictRow>();
        for (const v of await store.listVerdicts({ workspaceId: ws.id, questionSet: opts.set }))
          latest.set(`${v.itemId}\u0000${v.questionSet}\u0000${v.questionKey}`, v);
        const items = [
          ...new Set([...latest.values()].filter((v) => overrideValue(v) !== null).map((v) => v.itemId)),
        ].sort();
        const rows: Array<{ ref: string; view: DecisionView }> = [];
        for (const itemId of items) {
          const item = await store.getItem(itemId);
          for (const d of await reader.decisions(itemId)) {
            if (d.source !== 'human' || (opts.set !== undefined && d.questionSet !== opts.set)) continue;
            if (opts.stale && d.verdict?.staleReason !== 'override_stale') continue;
            rows.push({ ref: item?.ref ?? itemId, view: d });
          }
        }
        rows.sort(
          (a, b) =>
            Number(b.view.verdict?.staleReason !== null) - Number(a.view.verdict?.staleReason !== null) ||
            (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0),
        );
        if (opts.json) {
          process.stdout.write(
            `${JSON.stringify({ workspace: ws.slug, overrides: rows.map((r) => ({ ref: r.ref, ...r.view })) }, null, 2)}\n`,
          );
          return;
        }
        const stale = rows.filter((r) => r.view.verdict?.staleReason).length;
        const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
        const lines = [
          opts.stale
            ? `${plural(rows.length, 'verdict', 'verdicts')} in force in ${ws.slug} made at an older state (override_stale)${rows.length ? ': look again' : ''}`
            : `${plural(rows.length, 'verdict', 'verdicts')} in force in ${ws.slug}${stale ? `; ${stale} made at an older state (override_stale): look again` : ''}`,
        ];
        for (const r of rows) lines.push(`  ${r.ref.padEnd(12)} ${describeInForce(r.view)}`);
        process.stdout.write(`${lines.join('\n')}\n`);
      } finally {
        await store.close();
      }
    });
}
