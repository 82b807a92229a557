import { InvalidInput } from '../errors.js';
import { argmax, type Answer, type QuestionKind } from '../decision/questions.js';

/**
 * Decision-quality metrics for `verdict eval` (DESIGN §8.3). Pure: rows in, figures out; no
 * I/O, no clock. Every ratio whose denominator is 0 is `null`, never NaN or a made-up 0 or 1, so
 * JSON output stays valid and "undefined" is not confused with "perfect" or "worst".
 *
 * Notation, per row i of a group: p_i is the model's probability, y_i ∈ {0, 1} the gold outcome,
 * ŷ_i ∈ {0, 1} the decision at the threshold t. Only answered rows (answer not null) enter any
 * figure except `n`; `answered / n` is the coverage.
 *
 * What p, y and ŷ are, per kind:
 * - noul: p = the answer's probability that the statement is true, y = the label (true = 1),
 *   ŷ = [p ≥ t], the surfacing rule of DESIGN §6 (hysteresis, §8.2, is a read-time rule over
 *   an item's history and does not apply to a single answer). The positive class is `true`.
 * - choice: the predicted option is the answer's `choice` (its argmax); correct = [choice = label].
 * - score: the predicted level is the argmax of the answer's level probabilities, ties to the
 *   lowest index (as `pickedLevel`, never round(score)); correct = [level index = label].
 *
 * Calibration of choice and score answers uses their probabilities: the Brier score is Brier's
 * multi-category form over all options or levels, and the reliability bins are "top-label"
 * (confidence = the probability the answer gave its predicted option, outcome = whether that
 * option is the label), as in Guo et al. 2017. Precision, recall and F1 are for nouls only.
 */

/** One gold row with the model's answer to it, ready to score. */
export interface ScoredRow {
  /** Question set name. */
  set: string;
  /** Question key within the set. */
  key: string;
  kind: QuestionKind;
  /** noul: boolean; choice: option name; score: integer level index (0 = lowest). See GoldRow. */
  label: boolean | string | number;
  /** The model's answer, or null when none is available (not stored, refused, over budget). */
  answer: Answer | null;
  /** The set's surfacing threshold in [0, 1]; a noul at p ≥ threshold is predicted true. */
  threshold: number;
}

/** Number of equal-width calibration bins over [0, 1] (DESIGN §8.3). Changing it changes every ECE. */
const CALIBRATION_BINS = 10;

/** One calibration bin: predictions with lower ≤ p < upper (the last bin also holds p = 1). */
export interface CalibrationBin {
  /** Lower edge, b/10. */
  lower: number;
  /** Upper edge, (b+1)/10. */
  upper: number;
  /** Answered rows whose p falls in the bin. */
  count: number;
  /** Mean p of the bin's rows (probability, [0, 1]); null for an empty bin. */
  meanPredicted: number | null;
  /** Mean y of the bin's rows: the observed fraction positive (noul) or correct (top-label); null when empty. */
  fractionPositive: number | null;
}

/**
 * What the calibration figures (`brier`, `ece`, `bins`) of a group are computed over:
 * `noul` = the group's noul rows, p = P(true), y = label; `top_label` = its choice/score rows,
 * p = the predicted option's probability, y = [prediction correct]; null = no answered row.
 */
export type CalibrationBasis = 'noul' | 'top_label' | null;

/** Figures shared by a key and a set. Every ratio is in [0, 1] or null (denominator 0). */
export interface GroupMetrics {
  /** Gold rows. */
  n: number;
  /** Rows with an answer; every figure below is over these. */
  answered: number;
  /** Answered rows whose decision matches the label. */
  correct: number;
  /** correct / answered; null when nothing was answered. */
  accuracy: number | null;
  /** Noul confusion counts at the threshold (positive class = true); 0 for a group without nouls. */
  tp: number;
  fp: number;
  fn: number;
  tn: number;
  /** tp / (tp + fp); null when no noul was predicted true. */
  precision: number | null;
  /** tp / (tp + fn); null when no noul is labelled true. */
  recall: number | null;
  /**
   * 2·tp / (2·tp + fp + fn): the harmonic mean of precision and recall where both are defined,
   * and 0 where only one is (e.g. positives exist but none was predicted). Null only when the
   * group has no positive label and no positive prediction (tp = fp = fn = 0).
   */
  f1: number | null;
  /**
   * Brier score (Brier 1950), mean squared error of the probabilities; 0 is perfect.
   * noul: (1/N) Σ (p_i − y_i)², range [0, 1].
   * top_label (choice/score): Brier's multi-category form (1/N) Σ_i Σ_o (p_io − [o = label_i])²
   * over all options or levels o, range [0, 2]. Null when `calibrationBasis` is null.
   */
  brier: number | null;
  /**
   * Expected calibration error over `CALIBRATION_BINS` equal-width bins (Naeini, Cooper &
   * Hauskrecht 2015; Guo, Pleiss, Sun & Weinberger 2017, eq. 3):
   * ECE = Σ_b (n_b / N) · |mean(y)_b − mean(p)_b| over the non-empty bins b, N = Σ n_b.
   * A probability in [0, 1]; null when `calibrationBasis` is null.
   */
  ece: number | null;
  /** The bins behind `ece`, all `CALIBRATION_BINS` of them in order (empty ones included). */
  bins: CalibrationBin[];
  calibrationBasis: CalibrationBasis;
}

/** Metrics of one (set, key). */
export interface KeyMetrics extends GroupMetrics {
  set: string;
  key: string;
  kind: QuestionKind;
  threshold: number;
}

/**
 * Metrics of one set, all its rows pooled (micro-averaged): `n`, `answered`, `correct` and
 * `accuracy` over every row of every kind; the confusion counts, precision, recall and F1 over
 * its nouls; `brier`, `ece` and `bins` over its nouls when it has any answered noul, otherwise
 * over its choice/score rows (top-label), so a set of one score key reads like that key.
 */
export interface SetMetrics extends GroupMetrics {
  set: string;
  /** Kinds present in the set's rows, sorted. */
  kinds: QuestionKind[];
  /** Keys of the set, sorted. */
  keys: string[];
}

/** The metrics of a scored gold set: keys sorted by (set, key), sets by name. */
export interface GoldScore {
  byKey: KeyMetrics[];
  bySet: SetMetrics[];
}

/** A row's probability, outcome and decision, after checking label and answer against the kind. */
interface Judged {
  kind: QuestionKind;
  correct: boolean;
  /** Noul: the decision ŷ and the label y. */
  predictedTrue?: boolean;
  labelTrue?: boolean;
  /** Calibration point: p and y as defined in the module comment. */
  p: number;
  y: 0 | 1;
  /** This row's Brier term. */
  brierTerm: number;
}

function where(r: ScoredRow): string {
  return `eval row for ${r.set}/${r.key}`;
}

/** @throws InvalidInput when the label or the answer does not fit the row's kind. */
function judge(r: ScoredRow): Judged | null {
  if (r.kind === 'noul') {
    if (typeof r.label !== 'boolean')
      throw new InvalidInput(`${where(r)}: a noul label is true or false; got a ${typeof r.label}`);
    if (!(r.threshold >= 0 && r.threshold <= 1))
      throw new InvalidInput(`${where(r)}: threshold must be in [0, 1]; got ${r.threshold}`);
    if (r.answer === null) return null;
    if (r.answer.type !== 'noul') throw new InvalidInput(`${where(r)}: a noul row has a ${r.answer.type} answer`);
    const p = r.answer.noul;
    const y = r.label ? 1 : 0;
    const predictedTrue = p >= r.threshold;
    return {
      kind: 'noul',
      correct: predictedTrue === r.label,
      predictedTrue,
      labelTrue: r.label,
      p,
      y,
      brierTerm: (p - y) ** 2,
    };
  }
  if (r.kind === 'choice') {
    if (typeof r.label !== 'string')
      throw new InvalidInput(`${where(r)}: a choice label is an option name; got a ${typeof r.label}`);
    if (r.answer === null) return null;
    if (r.answer.type !== 'choice') throw new InvalidInput(`${where(r)}: a choice row has a ${r.answer.type} answer`);
    const label = r.label;
    const probs = r.answer.probabilities;
    const correct = r.answer.choice === label;
    const options = new Set([...Object.keys(probs), label]);
    let brierTerm = 0;
    for (const o of options) brierTerm += ((probs[o] ?? 0) - (o === label ? 1 : 0)) ** 2;
    return { kind: 'choice', correct, p: probs[r.answer.choice] ?? 0, y: correct ? 1 : 0, brierTerm };
  }
  if (typeof r.label !== 'number' || !Number.isInteger(r.label) || r.label < 0) {
    throw new InvalidInput(`${where(r)}: a score label is an integer level index, 0 or more`);
  }
  if (r.answer === null) return null;
  if (r.answer.type !== 'score') throw new InvalidInput(`${where(r)}: a score row has a ${r.answer.type} answer`);
  const a = r.answer;
  const levels = Math.max(Object.keys(a.legend).length, Object.keys(a.probabilities).length);
  if (r.label >= levels)
    throw new InvalidInput(`${where(r)}: score label ${r.label} is beyond the answer's ${levels} levels`);
  const values = Array.from({ length: levels }, (_, i) => a.probabilities[String(i)] ?? 0);
  const picked = argmax(values);
  const correct = picked === r.label;
  let brierTerm = 0;
  for (let i = 0; i < levels; i++) brierTerm += (values[i] - (i === r.label ? 1 : 0)) ** 2;
  return { kind: 'score', correct, p: values[picked], y: correct ? 1 : 0, brierTerm };
}

/** Bin index of a probability: floor(10·p), with p = 1 (and any rounding above it) in the last bin. */
export function binIndex(p: number): number {
  return Math.min(CALIBRATION_BINS - 1, Math.max(0, Math.floor(p * CALIBRATION_BINS)));
}

/** The reliability bins and ECE of calibration points; see `GroupMetrics.ece`. */
export function calibrate(points: readonly { p: number; y: 0 | 1 }[]): { bins: CalibrationBin[]; ece: number | null } {
  const sumP = new Array<number>(CALIBRATION_BINS).fill(0);
  const sumY = new Array<number>(CALIBRATION_BINS).fill(0);
  const count = new Array<number>(CALIBRATION_BINS).fill(0);
  for (const { p, y } of points) {
    const b = binIndex(p);
    sumP[b] += p;
    sumY[b] += y;
    count[b] += 1;
  }
  const bins: CalibrationBin[] = count.map((c, b) => ({
    lower: b / CALIBRATION_BINS,
    upper: (b + 1) / CALIBRATION_BINS,
    count: c,
    meanPredicted: c === 0 ? null : sumP[b] / c,
    fractionPositive: c === 0 ? null : sumY[b] / c,
  }));
  const total = points.length;
  if (total === 0) return { bins, ece: null };
  let ece = 0;
  for (const bin of bins) {
    if (bin.count === 0) continue;
    ece += (bin.count / total) * Math.abs((bin.fractionPositive as number) - (bin.meanPredicted as number));
  }
  return { bins, ece };
}

function ratio(num: number, den: number): number | null {
  return den === 0 ? null : num / den;
}

function group(rows: readonly ScoredRow[], judged: readonly (Judged | null)[]): GroupMetrics {
  const answered = judged.filter((j): j is Judged => j !== null);
  const correct = answered.filter((j) => j.correct).length;
  let tp = 0;
  let fp = 0;
  let fn = 0;
  let tn = 0;
  for (const j of answered) {
    if (j.kind !== 'noul') continue;
    if (j.predictedTrue && j.labelTrue) tp++;
    else if (j.predictedTrue) fp++;
    else if (j.labelTrue) fn++;
    else tn++;
  }
  const nouls = answered.filter((j) => j.kind === 'noul');
  const others = answered.filter((j) => j.kind !== 'noul');
  const basis: CalibrationBasis = nouls.length > 0 ? 'noul' : others.length > 0 ? 'top_label' : null;
  const calib = basis === 'noul' ? nouls : others;
  const { bins, ece } = calibrate(calib);
  return {
    n: rows.length,
    answered: answered.length,
    correct,
    accuracy: ratio(correct, answered.length),
    tp,
    fp,
    fn,
    tn,
    precision: ratio(tp, tp + fp),
    recall: ratio(tp, tp + fn),
    f1: ratio(2 * tp, 2 * tp + fp + fn),
    brier: calib.length === 0 ? null : calib.reduce((s, j) => s + j.brierTerm, 0) / calib.length,
    ece,
    bins,
    calibrationBasis: basis,
  };
}

/**
 * Scores a gold set: metrics per (set, key) and per set (pooled; see `SetMetrics`).
 * @throws InvalidInput when a label or an answer does not fit its row's kind, or when rows of one
 *   (set, key) disagree on kind or threshold.
 */
export function scoreGold(rows: readonly ScoredRow[]): GoldScore {
  const judged = rows.map(judge);
  const byKeyRows = new Map<string, number[]>();
  const bySetRows = new Map<string, number[]>();
  rows.forEach((r, i) => {
    const k = JSON.stringify([r.set, r.key]);
    const first = byKeyRows.get(k)?.[0];
    if (first !== undefined) {
      const f = rows[first];
      if (f.kind !== r.kind) throw new InvalidInput(`${where(r)}: rows of one key have kinds ${f.kind} and ${r.kind}`);
      if (f.threshold !== r.threshold)
        throw new InvalidInput(`${where(r)}: rows of one key have thresholds ${f.threshold} and ${r.threshold}`);
    }
    byKeyRows.set(k, [...(byKeyRows.get(k) ?? []), i]);
    bySetRows.set(r.set, [...(bySetRows.get(r.set) ?? []), i]);
  });
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const byKey: KeyMetrics[] = [...byKeyRows.values()]
    .map((idx) => {
      const r0 = rows[idx[0]];
      return {
        set: r0.set,
        key: r0.key,
        kind: r0.kind,
        threshold: r0.threshold,
        ...group(
          idx.map((i) => rows[i]),
          idx.map((i) => judged[i]),
        ),
      };
    })
    .sort((a, b) => cmp(a.set, b.set) || cmp(a.key, b.key));
  const bySet: SetMetrics[] = [...bySetRows.entries()]
    .map(([set, idx]) => ({
      set,
      kinds: [...new Set(idx.map((i) => rows[i].kind))].sort(cmp),
      keys: [...new Set(idx.map((i) => rows[i].key))].sort(cmp),
      ...group(
        idx.map((i) => rows[i]),
        idx.map((i) => judged[i]),
      ),
    }))
    .sort((a, b) => cmp(a.set, b.set));
  return { byKey, bySet };
}
