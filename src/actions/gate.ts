import { pickedLevel, type Answer } from '../decision/questions.js';
import type { EvalResult } from '../eval/eval-results.js';
import type { LabelledAnswer } from '../store/actions.js';
import { labelsOf } from './plan.js';
import type { KeyAction } from './config.js';

/**
 * The calibration gate (DESIGN §17): a key acts on its own only when its measured precision is at
 * least `minPrecision` over at least `minLabels` labelled items.
 *
 * Precision is over the items where the model's answer would put a label on the issue (a noul at
 * or above the threshold; a choice or score whose pick has a label): of those a person judged, the
 * share where the person's label is the model's. That is what a wrong automatic write costs a team
 * (coder/labeler's complaint: a label an engineer then removes), so `minLabels` counts those items.
 *
 * The labels: the workspace's human verdicts (DESIGN §8.1), the latest per item, each against the
 * model answer the person saw (an `agree` is right, a `disagree` wrong, a value compared); or, when
 * the verdicts are fewer than `minLabels`, the key's figures of the latest `verdict eval` on a gold
 * set (§8.3) if those reach it.
 */

/** Where a key stands against the gate. */
export interface GateStatus {
  set: string;
  key: string;
  /** The figures used: `verdicts`, `gold` (the latest recorded eval of a gold file), or `none`. */
  source: 'verdicts' | 'gold' | 'none';
  /** Labelled items where the model's answer puts a label on the issue. */
  labels: number;
  /** Of them, the share the person (or the gold set) agrees with; null with none. */
  precision: number | null;
  minPrecision: number;
  minLabels: number;
  passes: boolean;
  /** What it lacks, in words (`12 more labelled items`, `precision 0.84 < 0.9`); null when it passes. */
  lacks: string | null;
}

function parse(json: string | null): Answer | null {
  if (json === null) return null;
  try {
    return JSON.parse(json) as Answer;
  } catch {
    return null;
  }
}

/** Labelled items and correct ones, from a key's verdicts (see the file comment). */
function verdictFigures(
  action: KeyAction,
  threshold: number,
  rows: readonly LabelledAnswer[],
): { labels: number; correct: number } {
  let labels = 0;
  let correct = 0;
  for (const r of rows) {
    if (r.questionKey !== action.key || r.verdict === 'withdrawn') continue;
    const model = parse(r.answer);
    if (!model || model.type !== action.kind) continue;
    const predicted = labelsOf(action, model, model.type === 'noul' && model.noul >= threshold);
    if (predicted.length === 0) continue; // the model would write nothing here: not in the precision
    labels++;
    if (r.verdict === 'agree') correct++;
    else if (r.verdict === 'disagree') continue;
    else {
      const value = parse(r.value);
      if (!value || value.type !== model.type) continue;
      if (value.type === 'noul' && model.type === 'noul') correct += Number(value.noul >= threshold);
      else if (value.type === 'choice' && model.type === 'choice') correct += Number(value.choice === model.choice);
      else if (value.type === 'score' && model.type === 'score')
        correct += Number(pickedLevel(value) === pickedLevel(model));
    }
  }
  return { labels, correct };
}

/** A key's figures in the latest recorded eval of a gold file, or null (no eval, or of the verdicts). */
function goldFigures(
  action: KeyAction,
  result: EvalResult | undefined,
): { labels: number; precision: number | null } | null {
  if (!result || result.goldSource.startsWith('verdicts')) return null;
  const k = result.columns[0]?.keys.find((x) => x.key === action.key);
  if (!k) return null;
  if (action.kind === 'noul') return { labels: k.tp + k.fp, precision: k.precision };
  return { labels: k.answered, precision: k.accuracy };
}

/** The gate's verdict on a key (see the file comment). */
export function judgeGate(
  action: KeyAction,
  threshold: number,
  rows: readonly LabelledAnswer[],
  gold: EvalResult | undefined,
): GateStatus {
  const { minPrecision, minLabels } = action.gate;
  const v = verdictFigures(action, threshold, rows);
  const g = goldFigures(action, gold);
  let source: GateStatus['source'] = 'verdicts';
  let labels = v.labels;
  let precision = v.labels ? v.correct / v.labels : null;
  if (v.labels < minLabels && g && g.labels >= minLabels) {
    source = 'gold';
    labels = g.labels;
    precision = g.precision;
  } else if (v.labels === 0 && !g) source = 'none';
  const lacks: string[] = [];
  if (labels < minLabels) lacks.push(`${minLabels - labels} more labelled item${minLabels - labels === 1 ? '' : 's'}`);
  if (precision === null) lacks.push('a measured precision');
  else if (precision < minPrecision) lacks.push(`precision ${precision.toFixed(2)} < ${minPrecision}`);
  return {
    set: action.set,
    key: action.key,
    source,
    labels,
    precision,
    minPrecision,
    minLabels,
    passes: lacks.length === 0,
    lacks: lacks.length ? lacks.join(', ') : null,
  };
}
