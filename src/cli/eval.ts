import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { Config } from '../config.js';
import type { ReaderContext } from '../reads/reads.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import { formatUsd } from '../providers/pricing.js';
import type { Provider } from '../providers/provider.js';
import { formatWork } from '../backfill/estimate.js';
import { readGoldSet, type GoldRow } from '../eval/gold-set.js';
import { reliabilityDiagramSvg } from '../eval/reliability-diagram.js';
import {
  EvalCostNotConfirmed,
  goldFromVerdicts,
  runEval,
  type ColumnSource,
  type EvalColumn,
  type EvalReport,
  type SpendFigures,
} from '../eval/run-eval.js';
import type { GroupMetrics } from '../eval/metrics.js';
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
import { openReader, readContext } from '../compose/reader.js';
import { readsAgainst } from './reader.js';
import { actionGates, formatGate } from './actions.js';

/**
 * `verdict eval [--gold FILE | --from-verdicts] [--stored] [--compare MODEL] [--max-cost USD]
 * [--yes] [--svg FILE] [--json] [--workspace SLUG]` (DESIGN §8.3; the logic is
 * src/eval/run-eval.ts). Scores a gold set against the stored answers (`--stored`, no calls) or
 * the configured provider asked now, and with `--compare MODEL` against a second model of the
 * same provider, side by side. Asked answers are never stored (an eval changes no read); their
 * spend is recorded (outcome `eval`) and shows in `verdict status`.
 *
 * Cost guard, before any call: a priced model needs `--max-cost USD` at or above the estimate,
 * else nothing is asked and the estimate is in the message (exit 2); a model with no known price
 * needs `--yes`; the fake provider costs nothing. During the run, the call that would pass
 * `--max-cost` is not sent. Exit 0 when every planned call ran, 1 when the run stopped early (the
 * cost limit or Ctrl-C), 2 for a usage error; a bad gold-set line exits 1, as a bad import file does.
 */

interface EvalFlags {
  gold?: string;
  fromVerdicts?: boolean;
  stored?: boolean;
  compare?: string;
  maxCost?: string;
  yes?: boolean;
  svg: string;
  json?: boolean;
  workspace?: string;
}

/** Differing decisions listed one by one in the text output; `--json` has them all. */
const DIFFERENCES_SHOWN = 30;

/** Where the reliability diagram goes without `--svg`. */
const DEFAULT_SVG = './eval-reliability.svg';

export function registerEvalCommand(program: Command): void {
  program
    .command('eval')
    .description(
      'measure decision quality on a labelled gold set: accuracy, precision, recall, F1, Brier, ECE, cost; a reliability diagram as SVG',
    )
    .option(
      '--gold <file>',
      'gold set: JSONL, one {"ref","set","key","label"} per line (label: true/false, an option, or a level index)',
    )
    .option('--from-verdicts', "use the workspace's human verdicts as the labels (the latest per item and key)")
    .option('--stored', 'score the answers already stored and current (no calls); with --compare, model B is asked')
    .option(
      '--compare <model>',
      'also ask the same gold rows with this model of the same provider; print both side by side',
    )
    .option(
      '--max-cost <usd>',
      'the most the calls may cost, US dollars; a priced model needs it at or above the estimate',
    )
    .option('--yes', 'ask a model with no known price (its cost cannot be estimated)')
    .option('--svg <file>', 'where to write the reliability diagram', DEFAULT_SVG)
    .option('--workspace <slug>', 'workspace slug (default: the only one)')
    .option('--json', 'print one JSON document')
    .action(async (o: EvalFlags, cmd: Command) => {
      process.exitCode = await evalCommand(o, cmd);
    });
}

export function parseMaxCost(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  // Decimal only: Number() would also read 0x10 as 16.
  const v = /^\s*(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/.test(text) ? Number(text) : NaN;
  if (!(Number.isFinite(v) && v >= 0))
    throw new UsageError(`--max-cost: got "${text}"; expected US dollars, a number of 0 or more (e.g. 0.50)`);
  return v;
}

/** A provider of the configured kind with another model: `--compare`. */
function compareProvider(cfg: Config, kind: string, model: string, logger: Logger): Provider {
  if (kind !== 'anthropic' && kind !== 'openai' && kind !== 'fake')
    throw new UsageError(`--compare: no provider to ask model ${model} with; set --provider`);
  const p = createProvider({ ...cfg, provider: kind, model }, logger);
  if (!p) throw new UsageError('--compare: provider is none');
  return p;
}

async function evalCommand(o: EvalFlags, cmd: Command): Promise<number> {
  if (!o.gold === !o.fromVerdicts) throw new UsageError('give one of --gold FILE and --from-verdicts');
  const maxCostUsd = parseMaxCost(o.maxCost);
  const cfg = configFrom(cmd);
  const logger = loggerFor(cfg);
  const registry = buildRegistry(cfg);
  if (cfg.provider === 'none')
    throw new UsageError('provider is none: decisions are off, there is nothing to evaluate');
  // Read the gold file before opening anything: a bad line fails fast, naming the line.
  const fileRows: GoldRow[] | null = o.gold ? await readGoldSet(o.gold) : null;
  // Even a --stored run writes: its figures become the set's latest eval result (eval/eval-results.ts).
  const store = openStore(cfg, registry, { access: 'existing' });
  const providers: Provider[] = [];
  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (stop.signal.aborted) process.exit(EXIT_FAILURE);
    logger.info({ signal: sig }, 'eval stopping: no more calls are sent');
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const ws = await resolveWorkspace(store, o.workspace);
    const gold = fileRows
      ? { rows: fileRows, source: o.gold! }
      : { ...(await goldFromVerdicts(store, registry, ws.id)), source: `verdicts in ${ws.slug}` };
    if (gold.rows.length === 0)
      throw new UsageError(`--from-verdicts: workspace ${ws.slug} has no human verdicts with a value yet`);
    let a: ColumnSource;
    let ctx: ReaderContext | null = null;
    if (o.stored) {
      ctx = await readContext(readsAgainst(cfg, logger), store);
      a = {
        kind: 'stored',
        reader: await openReader(store, registry, readsAgainst(cfg, logger), logger),
        judgedAgainst: ctx,
      };
    } else {
      const p = createProvider(cfg, logger);
      if (!p) throw new UsageError('provider is none: decisions are off');
      providers.push(p);
      a = { kind: 'asked', provider: p };
    }
    let b: ColumnSource | undefined;
    if (o.compare !== undefined) {
      const kind = cfg.provider ?? (a.kind === 'asked' ? a.provider.name : ctx?.name) ?? 'unconfigured';
      const p = compareProvider(cfg, kind, o.compare, logger);
      providers.push(p);
      b = { kind: 'asked', provider: p };
    }
    let report: EvalReport;
    try {
      report = await runEval({
        store,
        registry,
        workspace: ws,
        gold,
        a,
        b,
        maxCostUsd,
        confirmUnpriced: o.yes,
        signal: stop.signal,
        logger,
      });
    } catch (err) {
      if (err instanceof EvalCostNotConfirmed) throw new UsageError(err.message);
      throw err;
    }
    const svgPath = resolve(o.svg);
    const series = [{ name: seriesName('A', report.a), bins: report.a.overall.bins }];
    if (report.b) series.push({ name: seriesName('B', report.b), bins: report.b.overall.bins });
    const svg = await reliabilityDiagramSvg(series, { title: `Reliability, every gold row pooled: ${gold.source}` });
    writeFileSync(svgPath, svg);
    // The calibration gate of each key that acts in GitHub (DESIGN §17), after this run's figures were recorded.
    const gates = await actionGates(cfg, store, registry, ws.id, logger);
    if (o.json)
      process.stdout.write(
        `${JSON.stringify({ ...report, svg: svgPath, ...(gates.length ? { gates } : {}) }, null, 2)}\n`,
      );
    else
      process.stdout.write(
        `${[formatEvalReport(report, o.svg, cfg.batch), ...gates.map((g) => `actions gate ${g.set}/${g.key}: ${formatGate(g)}`)].join('\n')}\n`,
      );
    const early = report.a.stoppedAtMaxCost || report.b?.stoppedAtMaxCost || stop.signal.aborted;
    return early ? EXIT_FAILURE : EXIT_OK;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    for (const p of providers) await p.close?.();
    await store.close();
  }
}

function seriesName(label: 'A' | 'B', c: EvalColumn): string {
  // The model alone: the legend clips long labels, and the provider is the same in both columns.
  return `${label}${c.mode === 'stored' ? ' stored' : ''}: ${c.model || c.provider}`;
}

// ------------------------------------------------------------------ text

const r3 = (x: number | null) => (x === null ? '-' : x.toFixed(3));
const n = (x: number) => x.toLocaleString('en-US');
const tokens = (s: SpendFigures) => `${n(s.inputTokens)}/${n(s.outputTokens)}`;
const cost = (s: SpendFigures) => formatUsd(s.costUsd);

function describeColumn(label: string, c: EvalColumn): string {
  const what =
    c.mode === 'stored'
      ? `stored answers current under ${c.provider}:${c.model || '(no model pinned)'}; no calls`
      : `asked ${c.provider}:${c.model} now${c.estimate ? ` (estimated before asking: ${n(c.estimate.calls)} calls, ~${n(c.estimate.inputTokens)} input / ~${n(c.estimate.outputTokens)} output tokens, ${formatUsd(c.estimate.costUsd)})` : ''}`;
  const note = c.mode === 'asked' && c.pricingNote ? `; ${c.pricingNote}` : '';
  return `${label}: ${what}${note}${c.stoppedAtMaxCost ? '; STOPPED at --max-cost: the rows not asked count as unanswered (max_cost)' : ''}`;
}

/** One metric row per group, for one column. */
const HEAD = `${'n'.padStart(5)} ${'answered'.padStart(8)} ${'accuracy'.padStart(8)} ${'precision'.padStart(9)} ${'recall'.padStart(6)} ${'F1'.padStart(6)} ${'Brier'.padStart(6)} ${'ECE'.padStart(6)} ${'calls'.padStart(5)} ${'tokens in/out'.padStart(15)} ${'cost'.padStart(9)}`;
function metricCells(m: GroupMetrics & SpendFigures): string {
  return `${n(m.n).padStart(5)} ${n(m.answered).padStart(8)} ${r3(m.accuracy).padStart(8)} ${r3(m.precision).padStart(9)} ${r3(m.recall).padStart(6)} ${r3(m.f1).padStart(6)} ${r3(m.brier).padStart(6)} ${r3(m.ece).padStart(6)} ${n(m.calls).padStart(5)} ${tokens(m).padStart(15)} ${cost(m).padStart(9)}`;
}

function groupsOf(c: EvalColumn): Array<{ label: string; m: GroupMetrics & SpendFigures }> {
  return [
    ...c.byKey.map((k) => ({ label: `${k.set}/${k.key}`, m: k })),
    ...c.bySet.map((s) => ({ label: `${s.set} (set)`, m: s })),
    { label: 'all rows', m: c.overall },
  ];
}

function unansweredLines(label: string, c: EvalColumn): string[] {
  if (c.unanswered.count === 0) return [`${label}unanswered: none`];
  const reasons = Object.entries(c.unanswered.byReason)
    .sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1))
    .map(([r, k]) => `${k} ${r}`)
    .join(', ');
  const lines = [`${label}unanswered: ${c.unanswered.count} (${reasons})`];
  for (const u of c.unanswered.rows.slice(0, 20))
    lines.push(`  ${u.ref.padEnd(14)} ${`${u.set}/${u.key}`.padEnd(36)} ${u.reason}`);
  if (c.unanswered.rows.length > 20)
    lines.push(`  … and ${c.unanswered.rows.length - 20} more (--json lists them all)`);
  return lines;
}

/** The report as text for people. */
export function formatEvalReport(r: EvalReport, svg: string, batch: Config['batch'] = 'auto'): string {
  const g = r.gold;
  const unresolved = Object.entries(g.unresolvedByReason)
    .map(([k, c]) => `${c} ${k}`)
    .join(', ');
  const lines = [
    `eval of ${n(g.rows)} gold rows from ${g.source} in workspace ${r.workspace}: ${n(g.resolved)} resolved${g.unresolved.length ? `, ${n(g.unresolved.length)} not (${unresolved})` : ''}`,
  ];
  for (const u of g.unresolved.slice(0, 20))
    lines.push(`  line ${String(u.line).padStart(4)}: ${u.ref} ${u.set}/${u.key}: ${u.reason}: ${u.detail}`);
  if (g.unresolved.length > 20) lines.push(`  … and ${g.unresolved.length - 20} more (--json lists them all)`);
  if (g.labelsAtOlderState)
    lines.push(`  ${g.labelsAtOlderState} labels were given at an older state of their item (it changed since)`);
  lines.push(describeColumn('A', r.a));
  if (r.b) lines.push(describeColumn('B', r.b));
  const width = Math.max(10, ...groupsOf(r.a).map((x) => x.label.length)) + 2;
  if (!r.b) {
    lines.push(`  ${''.padEnd(width)}${HEAD}`);
    for (const x of groupsOf(r.a)) lines.push(`  ${x.label.padEnd(width)}${metricCells(x.m)}`);
    lines.push(...unansweredLines('', r.a));
  } else {
    const bGroups = new Map(groupsOf(r.b).map((x) => [x.label, x.m]));
    lines.push(`  ${''.padEnd(width)}   ${HEAD}`);
    for (const x of groupsOf(r.a)) {
      lines.push(`  ${x.label.padEnd(width)}A  ${metricCells(x.m)}`);
      const mb = bGroups.get(x.label);
      if (mb) lines.push(`  ${''.padEnd(width)}B  ${metricCells(mb)}`);
    }
    lines.push(...unansweredLines('A ', r.a), ...unansweredLines('B ', r.b));
    const d = r.differences ?? [];
    lines.push(
      `decisions that differ: ${d.length} of the rows both answered${r.answeredByOneOnly ? ` (${r.answeredByOneOnly} answered by one column only)` : ''}`,
    );
    if (d.length) {
      lines.push(
        `  ${'ref'.padEnd(14)} ${'set/key'.padEnd(36)} ${'label'.padEnd(8)} ${'A'.padEnd(22)} ${'B'.padEnd(22)} right`,
      );
      for (const x of d.slice(0, DIFFERENCES_SHOWN)) {
        lines.push(
          `  ${x.ref.padEnd(14)} ${`${x.set}/${x.key}`.padEnd(36)} ${String(x.label).padEnd(8)} ${x.a.padEnd(22)} ${x.b.padEnd(22)} ${x.correct ?? 'neither'}`,
        );
      }
    }
    if (d.length > DIFFERENCES_SHOWN)
      lines.push(`  … and ${d.length - DIFFERENCES_SHOWN} more (--json lists them all)`);
    if (r.reask) {
      const q = r.reask;
      lines.push(
        `price of re-asking every live item with ${q.provider}:${q.model} (every workspace; estimates, not a bill${q.pricingNote ? `; ${q.pricingNote}` : ''}):`,
      );
      for (const s of q.sets) lines.push(`  ${formatWork(s.set, s)}`);
      lines.push(
        `  ${formatWork(q.sets.length > 1 ? 'total, with sets reading the same state asked in one call as the worker asks them' : 'total', q.total)}`,
      );
      // A re-ask is owed at backfill priority, which a worker with this setting batches (DESIGN §7.3).
      if (q.batchCostUsd !== null && batch !== 'off')
        lines.push(
          `  with --batch ${batch} (this worker's setting) a worker sends the re-ask as Message Batches at the batch price: ${formatUsd(q.batchCostUsd)}, results within 24 h`,
        );
    }
  }
  const spent = [r.a, r.b].filter((c): c is EvalColumn => c !== null && c.mode === 'asked');
  if (spent.length) {
    lines.push(
      `asked answers are not stored (no read changes); their spend is recorded in decision_spend as outcome "eval": ${spent.map((c) => `${c.provider}:${c.model} ${n(c.overall.calls)} calls, ${tokens(c.overall)} tokens, ${cost(c.overall)}`).join('; ')}`,
    );
  }
  lines.push(`reliability diagram: wrote ${svg}`);
  return lines.join('\n');
}
