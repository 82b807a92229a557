import { describe, expect, it } from 'vitest';
import type { Answer, ChoiceAnswer, ScoreAnswer } from '../../src/decision/questions.js';
import { binIndex, calibrate, scoreGold, type ScoredRow } from '../../src/eval/metrics.js';
import { InvalidInput } from '../../src/errors.js';

const DIGITS = 12;
const noulAnswer = (p: number): Answer => ({ type: 'noul', noul: p });
const noulRow = (key: string, p: number | null, label: boolean): ScoredRow => ({
  set: 'attention',
  key,
  kind: 'noul',
  label,
  answer: p === null ? null : noulAnswer(p),
  threshold: 0.7,
});

/*
 * The 10-row case: key attention/blocked, threshold 0.7 (ŷ = [p ≥ 0.7]).
 *
 *  row   p     y   ŷ   outcome  (p − y)²   bin = floor(10p)
 *   1   0.95   1   1   TP       0.0025     9
 *   2   0.85   1   1   TP       0.0225     8
 *   3   0.75   0   1   FP       0.5625     7
 *   4   0.70   1   1   TP       0.0900     7   (p = threshold counts as true)
 *   5   0.65   1   0   FN       0.1225     6
 *   6   0.45   0   0   TN       0.2025     4
 *   7   0.35   1   0   FN       0.4225     3
 *   8   0.25   0   0   TN       0.0625     2
 *   9   0.15   0   0   TN       0.0225     1
 *  10   0.05   0   0   TN       0.0025     0
 *
 * TP = 3, FP = 1, FN = 2, TN = 4.
 * accuracy  = (TP + TN) / 10 = 7/10 = 0.7
 * precision = TP / (TP + FP) = 3/4 = 0.75
 * recall    = TP / (TP + FN) = 3/5 = 0.6
 * F1        = 2·TP / (2·TP + FP + FN) = 6/9 = 0.666…  (= 2·0.75·0.6 / (0.75 + 0.6) = 0.9/1.35)
 * Brier     = Σ (p − y)² / 10 = (0.0025 + 0.0225 + 0.5625 + 0.09 + 0.1225 + 0.2025 + 0.4225
 *             + 0.0625 + 0.0225 + 0.0025) / 10 = 1.5125 / 10 = 0.15125
 * ECE bins: bin 7 holds rows 3 and 4: mean p = (0.75 + 0.70)/2 = 0.725, mean y = 1/2 = 0.5,
 *           gap 0.225, weight 2/10; bin 5 is empty; every other bin holds one row, gap |y − p|:
 *           bin 9: 0.05, 8: 0.15, 6: 0.35, 4: 0.45, 3: 0.65, 2: 0.25, 1: 0.15, 0: 0.05 (sum 2.1).
 * ECE       = (1/10)·2.1 + (2/10)·0.225 = 0.21 + 0.045 = 0.255
 */
const TEN: Array<[number, boolean]> = [
  [0.95, true],
  [0.85, true],
  [0.75, false],
  [0.7, true],
  [0.65, true],
  [0.45, false],
  [0.35, true],
  [0.25, false],
  [0.15, false],
  [0.05, false],
];

/*
 * needs_human_decision: labels (true, false), p (0.6, 0.2), plus one unanswered row.
 *   n = 3, answered = 2; ŷ = (0, 0): TP 0, FP 0, FN 1, TN 1; accuracy 1/2.
 *   precision: TP + FP = 0 → null. recall = 0/1 = 0. F1 = 0 / (0 + 0 + 1) = 0.
 *   Brier = ((0.6 − 1)² + 0.2²) / 2 = (0.16 + 0.04)/2 = 0.1.
 *   ECE = ½·|1 − 0.6| + ½·|0 − 0.2| = 0.2 + 0.1 = 0.3.
 * waiting_on_external: no positive label, none predicted: p (0.1, 0.3), labels false, false,
 *   plus one unanswered row. TN 2; accuracy 1; precision, recall and F1 all null (0/0).
 *   Brier = (0.01 + 0.09)/2 = 0.05. ECE = ½·0.1 + ½·0.3 = 0.2.
 * Set attention pooled (16 rows, 14 answered): correct 7 + 1 + 2 = 10 → accuracy 10/14;
 *   TP 3, FP 1, FN 3, TN 7 → precision 3/4, recall 3/6 = 0.5, F1 6/(6 + 1 + 3) = 0.6;
 *   Brier = (1.5125 + 0.2 + 0.1)/14 = 1.8125/14;
 *   bins: 0 {0.05|0}, 1 {0.15, 0.1 | 0, 0} gap 0.125, 2 {0.25, 0.2 | 0, 0} gap 0.225,
 *   3 {0.35, 0.3 | 1, 0} gap |0.5 − 0.325| = 0.175, 4 {0.45|0} 0.45, 5 empty,
 *   6 {0.65, 0.6 | 1, 1} gap 0.375, 7 {0.75, 0.7 | 0, 1} 0.225, 8 0.15, 9 0.05;
 *   ECE = (0.05 + 2·0.125 + 2·0.225 + 2·0.175 + 0.45 + 2·0.375 + 2·0.225 + 0.15 + 0.05)/14 = 2.95/14.
 */
const attentionRows: ScoredRow[] = [
  ...TEN.map(([p, y]) => noulRow('blocked', p, y)),
  noulRow('needs_human_decision', 0.6, true),
  noulRow('needs_human_decision', 0.2, false),
  noulRow('needs_human_decision', null, true),
  noulRow('waiting_on_external', 0.1, false),
  noulRow('waiting_on_external', 0.3, false),
  noulRow('waiting_on_external', null, false),
];

const choiceAnswer = (choice: string, probabilities: Record<string, number>): ChoiceAnswer => ({
  type: 'choice',
  choice,
  probabilities,
});
const levels = ['trivial', 'small', 'medium', 'large', 'epic'];
const scoreAnswer = (probs: number[]): ScoreAnswer => ({
  type: 'score',
  score: probs.reduce((s, p, i) => s + p * i, 0),
  probabilities: Object.fromEntries(probs.map((p, i) => [String(i), p])),
  legend: Object.fromEntries(levels.map((l, i) => [String(i), l])),
});

/*
 * triage/kind (choice over bug, chore, feature):
 *   c1 label bug, answer bug {bug .8, chore .1, feature .1}: correct; confidence 0.8;
 *      Brier term (0.8 − 1)² + 0.1² + 0.1² = 0.04 + 0.01 + 0.01 = 0.06
 *   c2 label feature, answer bug {bug .5, chore .2, feature .3}: wrong; confidence 0.5;
 *      Brier term 0.5² + 0.2² + (0.3 − 1)² = 0.25 + 0.04 + 0.49 = 0.78
 *   c3 unanswered.
 *   n 3, answered 2, accuracy 1/2; Brier (0.06 + 0.78)/2 = 0.42;
 *   top-label ECE: bin 8 {p 0.8, y 1} gap 0.2, bin 5 {p 0.5, y 0} gap 0.5 → ½·0.2 + ½·0.5 = 0.35.
 * effort/effort (score, 5 levels):
 *   s1 label 1, probs (.1, .6, .2, .1, 0): argmax 1, correct; confidence 0.6;
 *      Brier term 0.01 + 0.16 + 0.04 + 0.01 + 0 = 0.22
 *   s2 label 3, probs (0, .1, .4, .4, .1): argmax ties 2 and 3 → the lowest, 2: wrong (round(score
 *      = 2.5) would have said 3); confidence 0.4; Brier term 0 + 0.01 + 0.16 + 0.36 + 0.01 = 0.54
 *   accuracy 1/2; Brier (0.22 + 0.54)/2 = 0.38; ECE: bin 6 gap 0.4, bin 4 gap 0.4 → 0.4.
 */
const otherRows: ScoredRow[] = [
  {
    set: 'triage',
    key: 'kind',
    kind: 'choice',
    label: 'bug',
    answer: choiceAnswer('bug', { bug: 0.8, chore: 0.1, feature: 0.1 }),
    threshold: 0.5,
  },
  {
    set: 'triage',
    key: 'kind',
    kind: 'choice',
    label: 'feature',
    answer: choiceAnswer('bug', { bug: 0.5, chore: 0.2, feature: 0.3 }),
    threshold: 0.5,
  },
  { set: 'triage', key: 'kind', kind: 'choice', label: 'chore', answer: null, threshold: 0.5 },
  {
    set: 'effort',
    key: 'effort',
    kind: 'score',
    label: 1,
    answer: scoreAnswer([0.1, 0.6, 0.2, 0.1, 0]),
    threshold: 0.7,
  },
  {
    set: 'effort',
    key: 'effort',
    kind: 'score',
    label: 3,
    answer: scoreAnswer([0, 0.1, 0.4, 0.4, 0.1]),
    threshold: 0.7,
  },
];

describe('scoreGold: the hand-computed 10-row noul case', () => {
  const { byKey } = scoreGold(TEN.map(([p, y]) => noulRow('blocked', p, y)));
  const m = byKey[0];

  it('counts and decides at p >= threshold', () => {
    expect(byKey).toHaveLength(1);
    expect(m).toMatchObject({
      set: 'attention',
      key: 'blocked',
      kind: 'noul',
      threshold: 0.7,
      n: 10,
      answered: 10,
      correct: 7,
    });
    expect([m.tp, m.fp, m.fn, m.tn]).toEqual([3, 1, 2, 4]);
  });

  it('equals the hand-computed accuracy, precision, recall, F1, Brier score and ECE', () => {
    expect(m.accuracy).toBeCloseTo(0.7, DIGITS);
    expect(m.precision).toBeCloseTo(0.75, DIGITS);
    expect(m.recall).toBeCloseTo(0.6, DIGITS);
    expect(m.f1).toBeCloseTo(2 / 3, DIGITS);
    expect(m.brier).toBeCloseTo(0.15125, DIGITS);
    expect(m.ece).toBeCloseTo(0.255, DIGITS);
    expect(m.calibrationBasis).toBe('noul');
  });

  it('reports all ten bins, empty ones with null means', () => {
    expect(m.bins.map((b) => b.count)).toEqual([1, 1, 1, 1, 1, 0, 1, 2, 1, 1]);
    expect(m.bins[5]).toEqual({ lower: 0.5, upper: 0.6, count: 0, meanPredicted: null, fractionPositive: null });
    expect(m.bins[7].meanPredicted).toBeCloseTo(0.725, DIGITS);
    expect(m.bins[7].fractionPositive).toBe(0.5);
    expect(m.bins[3]).toMatchObject({ count: 1, meanPredicted: 0.35, fractionPositive: 1 });
  });
});

describe('scoreGold: keys without positives, unanswered rows, pooled sets', () => {
  const { byKey, bySet } = scoreGold([...attentionRows, ...otherRows]);
  const key = (set: string, k: string) => byKey.find((m) => m.set === set && m.key === k)!;

  it('sorts keys by (set, key) and sets by name', () => {
    expect(byKey.map((m) => `${m.set}/${m.key}`)).toEqual([
      'attention/blocked',
      'attention/needs_human_decision',
      'attention/waiting_on_external',
      'effort/effort',
      'triage/kind',
    ]);
    expect(bySet.map((m) => m.set)).toEqual(['attention', 'effort', 'triage']);
  });

  it('gives null precision when nothing was predicted true, and leaves unanswered rows out of every ratio', () => {
    const m = key('attention', 'needs_human_decision');
    expect(m).toMatchObject({
      n: 3,
      answered: 2,
      correct: 1,
      tp: 0,
      fp: 0,
      fn: 1,
      tn: 1,
      precision: null,
      recall: 0,
      f1: 0,
    });
    expect(m.accuracy).toBeCloseTo(0.5, DIGITS);
    expect(m.brier).toBeCloseTo(0.1, DIGITS);
    expect(m.ece).toBeCloseTo(0.3, DIGITS);
  });

  it('gives null precision, recall and F1 (never NaN) for a key with no positive label or prediction', () => {
    const m = key('attention', 'waiting_on_external');
    expect(m).toMatchObject({
      n: 3,
      answered: 2,
      correct: 2,
      tn: 2,
      precision: null,
      recall: null,
      f1: null,
      accuracy: 1,
    });
    expect(m.brier).toBeCloseTo(0.05, DIGITS);
    expect(m.ece).toBeCloseTo(0.2, DIGITS);
    expect(JSON.stringify(byKey)).not.toContain('NaN');
  });

  it('pools a set of nouls over all its rows', () => {
    const s = bySet.find((m) => m.set === 'attention')!;
    expect(s).toMatchObject({
      n: 16,
      answered: 14,
      correct: 10,
      tp: 3,
      fp: 1,
      fn: 3,
      tn: 7,
      kinds: ['noul'],
      calibrationBasis: 'noul',
    });
    expect(s.keys).toEqual(['blocked', 'needs_human_decision', 'waiting_on_external']);
    expect(s.accuracy).toBeCloseTo(10 / 14, DIGITS);
    expect(s.precision).toBeCloseTo(0.75, DIGITS);
    expect(s.recall).toBeCloseTo(0.5, DIGITS);
    expect(s.f1).toBeCloseTo(0.6, DIGITS);
    expect(s.brier).toBeCloseTo(1.8125 / 14, DIGITS);
    expect(s.ece).toBeCloseTo(2.95 / 14, DIGITS);
    expect(s.bins.map((b) => b.count)).toEqual([1, 2, 2, 2, 1, 0, 2, 2, 1, 1]);
  });

  it('scores a choice key by its argmax and calibrates it top-label', () => {
    const m = key('triage', 'kind');
    expect(m).toMatchObject({
      kind: 'choice',
      n: 3,
      answered: 2,
      correct: 1,
      tp: 0,
      fp: 0,
      fn: 0,
      tn: 0,
      precision: null,
      recall: null,
      f1: null,
    });
    expect(m.calibrationBasis).toBe('top_label');
    expect(m.accuracy).toBeCloseTo(0.5, DIGITS);
    expect(m.brier).toBeCloseTo(0.42, DIGITS);
    expect(m.ece).toBeCloseTo(0.35, DIGITS);
  });

  it('scores a score key by its argmax level (ties to the lowest), never round(score)', () => {
    const m = key('effort', 'effort');
    expect(m).toMatchObject({ kind: 'score', n: 2, answered: 2, correct: 1, calibrationBasis: 'top_label' });
    expect(m.brier).toBeCloseTo(0.38, DIGITS);
    expect(m.ece).toBeCloseTo(0.4, DIGITS);
    const s = bySet.find((x) => x.set === 'effort')!;
    expect([s.accuracy, s.brier, s.ece]).toEqual([m.accuracy, m.brier, m.ece]);
  });
});

describe('scoreGold: edge cases and refusals', () => {
  it('gives null figures for a key with no answer at all', () => {
    const [m] = scoreGold([noulRow('blocked', null, true)]).byKey;
    expect(m).toMatchObject({
      n: 1,
      answered: 0,
      accuracy: null,
      precision: null,
      recall: null,
      f1: null,
      brier: null,
      ece: null,
      calibrationBasis: null,
    });
    expect(m.bins).toHaveLength(10);
  });

  it('refuses a label or answer that does not fit the kind, and one key with two kinds or thresholds', () => {
    expect(() => scoreGold([{ ...noulRow('blocked', 0.5, true), label: 'yes' }])).toThrow(InvalidInput);
    expect(() => scoreGold([{ ...noulRow('blocked', 0.5, true), answer: choiceAnswer('a', { a: 1 }) }])).toThrow(
      /noul row has a choice answer/,
    );
    expect(() => scoreGold([{ ...otherRows[3], label: 5 }])).toThrow(/beyond the answer's 5 levels/);
    expect(() => scoreGold([{ ...otherRows[3], label: 1.5 }])).toThrow(/integer level index/);
    expect(() =>
      scoreGold([noulRow('blocked', 0.5, true), { ...noulRow('blocked', 0.5, true), threshold: 0.9 }]),
    ).toThrow(/thresholds/);
  });

  it('bins by floor(10p), with p = 1 in the last bin', () => {
    expect([0, 0.05, 0.1, 0.7, 0.99, 1].map(binIndex)).toEqual([0, 0, 1, 7, 9, 9]);
    const { bins, ece } = calibrate([
      { p: 1, y: 1 },
      { p: 0, y: 0 },
    ]);
    expect(bins[9].count).toBe(1);
    expect(bins[0].count).toBe(1);
    expect(ece).toBe(0);
    expect(calibrate([]).ece).toBeNull();
  });
});
