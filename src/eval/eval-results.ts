import type { MetaStore } from '../store/meta-store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { KeyMetrics, SetMetrics } from './metrics.js';

/** Calls, tokens and cost of a key's or set's rows (`runEval` reports them). Tokens; US dollars. */
export interface SpendFigures {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** US dollars; 0 for the fake provider (it calls no model) and for stored answers; null when the model has no price. */
  costUsd: number | null;
}

export type KeyReport = KeyMetrics & SpendFigures;
export type SetReport = SetMetrics & SpendFigures;

/** What `recordEvalResults` reads of an eval report (run-eval.ts `EvalReport` has it all). */
export interface EvalReportFigures {
  gold: { source: string; rows: number };
  a: EvalColumnFigures;
  b: EvalColumnFigures | null;
}
interface EvalColumnFigures {
  mode: 'stored' | 'asked';
  provider: string;
  model: string;
  bySet: SetReport[];
  byKey: KeyReport[];
  stoppedAtMaxCost: boolean;
}

/**
 * The latest `eval` results, kept per (workspace, set) in `verdict_meta` (key
 * `eval:<workspaceId>:<set>`), so the dashboard's quality page and `VerdictReader.quality` can show
 * them without asking anything again (DESIGN §8.3). Each run of `runEval` (the CLI's `verdict
 * eval` and `Verdict.eval`) replaces the entry of every set it scored. Figures, counts, the
 * calibration bins, model ids and the gold source's name only: never item text, labels or answers.
 */

/** Meta key prefix of the latest eval results. */
const EVAL_RESULT_META_PREFIX = 'eval:';

/** One column's figures for one set. */
export interface EvalResultColumn {
  mode: 'stored' | 'asked';
  provider: string;
  model: string;
  /** The set pooled: n, accuracy, precision, recall, F1, Brier, ECE and the 10 calibration bins; calls, tokens and cost. */
  set: SetReport;
  /** The set's keys, sorted. */
  keys: KeyReport[];
  /** Asked only: the run stopped before a call that would have passed its cost limit, so some rows went unasked. */
  stoppedAtMaxCost: boolean;
}

/** The latest eval of one set in one workspace. `at` is when it was recorded (epoch ms, the store's clock). */
export interface EvalResult {
  set: string;
  at: number;
  /** The gold file's path, or `verdicts in <workspace>`. */
  goldSource: string;
  goldRows: number;
  /** One column, or two for `compare` (the second model). */
  columns: EvalResultColumn[];
}

/** Records the report's figures for every set it scored (replacing that set's previous entry). */
export async function recordEvalResults(
  store: Pick<TrackerStore, 'now'> & Pick<MetaStore, 'setMeta'>,
  workspaceId: string,
  report: EvalReportFigures,
): Promise<void> {
  const at = await store.now();
  const columns = [report.a, ...(report.b ? [report.b] : [])];
  const sets = new Set(columns.flatMap((c) => c.bySet.map((s) => s.set)));
  for (const set of sets) {
    const result: EvalResult = {
      set,
      at,
      goldSource: report.gold.source,
      goldRows: report.gold.rows,
      columns: columns.flatMap((c) => {
        const s = c.bySet.find((x) => x.set === set);
        return s
          ? [
              {
                mode: c.mode,
                provider: c.provider,
                model: c.model,
                set: s,
                keys: c.byKey.filter((k) => k.set === set),
                stoppedAtMaxCost: c.stoppedAtMaxCost,
              },
            ]
          : [];
      }),
    };
    await store.setMeta(`${EVAL_RESULT_META_PREFIX}${workspaceId}:${set}`, JSON.stringify(result));
  }
}

/** The latest eval result of each set in the workspace, by set name; an unreadable entry is left out. */
export async function latestEvalResults(
  store: Pick<MetaStore, 'listMeta'>,
  workspaceId: string,
): Promise<EvalResult[]> {
  const out: EvalResult[] = [];
  for (const row of await store.listMeta(`${EVAL_RESULT_META_PREFIX}${workspaceId}:`)) {
    try {
      const r = JSON.parse(row.value) as EvalResult;
      if (typeof r.set === 'string' && Array.isArray(r.columns)) out.push(r);
    } catch {
      /* not a result */
    }
  }
  return out.sort((a, b) => (a.set < b.set ? -1 : a.set > b.set ? 1 : 0));
}
