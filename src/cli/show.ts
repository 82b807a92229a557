import type { Command } from 'commander';
import { stringify as losslessStringify } from 'lossless-json';
import { describeClips, type StateClips } from '../decision/state.js';
import { fieldsForDisplay, type DecisionView } from '../reads/reads.js';
import type { Answer } from '../decision/questions.js';
import { pickedLevel } from '../decision/questions.js';
import { buildRegistry, configFrom, formatDuration, loggerFor, openStore, resolveItem } from './common.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';

/** One line of an answer: `p=0.82` for nouls, `choice (0.61)` / `medium 2.3 (0.40)` otherwise. */
export function formatAnswer(a: Answer, confidence: number | null): string {
  if (a.type === 'noul') return `p=${a.noul.toFixed(2)}`;
  if (a.type === 'choice') return `${a.choice} (${(confidence ?? 0).toFixed(2)})`;
  return `${pickedLevel(a)} score=${a.score.toFixed(2)} (${(confidence ?? 0).toFixed(2)})`;
}

/** How a surfacing class reads after the status, or '' when the status already says it. */
const SURFACING_WORDS: Record<DecisionView['surfacing'], string> = {
  surfaced: 'surfaced',
  below_threshold: 'below threshold',
  // A non-current noul that does not surface: the status already says it is stale.
  stale: '',
  not_surfaced: '',
};

/**
 * One decision line: `attention/waiting  p=0.82  [current, surfaced]  fake:m`, or
 * `[stale: question_changed]` (the surfacing class is added only where it says something the
 * status does not: a stale answer still surfaced while its re-ask is owed).
 */
function describeDecision(d: DecisionView): string {
  const status = d.current
    ? 'current'
    : `stale: ${d.staleReason}${d.changedParts.length ? ` (${d.changedParts.join(', ')})` : ''}`;
  const surfacing = SURFACING_WORDS[d.surfacing];
  const flips = d.flips >= 3 ? `, flapping: ${d.flips} flips in 30 days` : '';
  const v = d.verdict;
  if (d.source === 'human' && v) {
    // A person's value decides (DESIGN §8.1); the model's answer is shown beside it.
    const when = new Date(v.createdAt).toISOString().slice(0, 10);
    const stale = v.staleReason
      ? `; override_stale${v.changedParts.length ? ` (${v.changedParts.join(', ')})` : ''}: look again`
      : '';
    const model = d.proposed
      ? `model proposes ${formatAnswer(d.proposed, d.confidence)}`
      : `model ${formatAnswer(d.modelAnswer, d.confidence)} ${status}`;
    return `  ${d.questionSet}/${d.questionKey}  ${formatAnswer(d.answer, 1)}  [human: ${v.verdict} by ${v.author}, ${when}${surfacing ? `, ${surfacing}` : ''}${stale}]  ${model}  ${d.provider}:${d.model}`;
  }
  const tail = surfacing === '' ? '' : d.current ? `, ${surfacing}` : `; ${surfacing} until its re-ask`;
  const label = v && v.verdict !== 'withdrawn' ? `  (${v.verdict} by ${v.author})` : '';
  return `  ${d.questionSet}/${d.questionKey}  ${formatAnswer(d.answer, d.confidence)}  [${status}${tail}${flips}]  ${d.provider}:${d.model}${label}`;
}

/**
 * The decisions heading and the sets that will not ask the item, with why:
 * `decisions: none: no set applies (attention, effort: item is terminal (status: closed))`
 * rather than "none yet" for an item that will never be asked.
 */
function decisionsHeading(
  count: number,
  applicability: ReadonlyArray<{ questionSet: string; applies: boolean; reason: string | null }>,
  enabled: boolean,
): string[] {
  if (!enabled) return ['decisions: none (decisions are off: provider none)'];
  const notApplying = new Map<string, string[]>();
  for (const a of applicability)
    if (!a.applies) notApplying.set(a.reason ?? '', [...(notApplying.get(a.reason ?? '') ?? []), a.questionSet]);
  const why = [...notApplying].map(([reason, sets]) => `${sets.join(', ')}: ${reason}`);
  const anyApplies = applicability.some((a) => a.applies);
  if (count > 0) return ['decisions:', ...why.map((w) => `  not asked now: ${w}`)];
  if (applicability.length === 0) return ['decisions: none (no question set reads this collection)'];
  if (!anyApplies) return [`decisions: none: no set applies (${why.join('; ')})`];
  return ['decisions: none yet', ...why.map((w) => `  not asked: ${w}`)];
}

/**
 * One line per distinct way the item's states are clipped now (DESIGN §5.1), naming the sets
 * that read it so: `state clipped for attention, effort: 3 older comments omitted (the trail
 * holds the newest 10); body cut to 16,000 code points`. [] when no state is clipped.
 */
function clipNotes(clips: ReadonlyArray<{ questionSet: string; clips: StateClips }>): string[] {
  const bySet = new Map<string, string[]>();
  for (const c of clips) {
    const note = describeClips(c.clips);
    bySet.set(note, [...(bySet.get(note) ?? []), c.questionSet]);
  }
  return [...bySet].map(([note, sets]) => `state clipped for ${sets.join(', ')}: ${note}`);
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
      const store = openStore(cfg, registry, { access: 'read' });
      try {
        const { item } = await resolveItem(store, opts.workspace, ref);
        const reader = await openReader(store, registry, readsAgainst(cfg, logger), logger);
        const decisions = await reader.decisions(item.id);
        const clips = await reader.stateClips(item.id);
        const applicability = await reader.setApplicability(item.id);
        const jobs = await store.listJobs({ itemId: item.id });
        if (opts.json) {
          // lossless-json's stringify: the fields keep their number literals (DESIGN §3.2).
          const doc = {
            item: {
              id: item.id,
              ref: item.ref,
              title: item.title,
              seq: item.seq,
              deleted: item.deletedAt !== null,
              fields: fieldsForDisplay(item.fields),
            },
            decisions,
            sets: applicability,
            stateClips: clips.map((c) => ({ questionSet: c.questionSet, ...c.clips, note: describeClips(c.clips) })),
            jobs,
          };
          process.stdout.write(`${losslessStringify(doc, undefined, 2)}\n`);
          return;
        }
        const lines = [
          `${item.ref}  ${item.title}${item.deletedAt !== null ? '  (deleted)' : ''}`,
          `  id ${item.id}, seq ${item.seq}`,
        ];
        const [heading, ...notAsked] = decisionsHeading(decisions.length, applicability, reader.enabled);
        lines.push(heading);
        for (const d of decisions) lines.push(describeDecision(d));
        lines.push(...notAsked);
        lines.push(...clipNotes(clips));
        const now = await store.now();
        for (const j of jobs) {
          const due =
            j.state === 'owed'
              ? j.notBefore > now
                ? `, due in ${formatDuration(j.notBefore - now)}`
                : ', due now'
              : '';
          lines.push(
            `job ${j.questionSet}: ${j.state}${due}, attempts ${j.attempts}, refusals ${j.refusals}${j.lastError ? `, last error ${j.lastError}` : ''}`,
          );
        }
        process.stdout.write(`${lines.join('\n')}\n`);
      } finally {
        await store.close();
      }
    });
}
