import { AnswerDefect } from './errors.js';
import { argmax, choiceOptionNames, type Answer, type Question } from '../decision/questions.js';

/**
 * Deriving typed answers from a provider's raw reply (DESIGN §4, §9). It lives with the providers
 * because a reply that does not fit is an `AnswerDefect`, a provider error; the question and answer
 * types themselves are in decision/questions.ts.
 */

/** Probabilities summing to 1 ± this are normalised; anything else is an AnswerDefect (DESIGN §9). */
const PROBABILITY_SUM_TOLERANCE = 0.02;

function checkUnit(key: string, name: string, p: unknown): number {
  if (typeof p !== 'number' || !Number.isFinite(p) || p < 0 || p > 1) {
    throw new AnswerDefect(`answer "${key}": ${name} is not a probability in [0, 1]`);
  }
  return p;
}

function normalise(key: string, names: readonly string[], raw: unknown): Record<string, number> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new AnswerDefect(`answer "${key}": probabilities missing`);
  }
  const rec = raw as Record<string, unknown>;
  let sum = 0;
  const out: Record<string, number> = {};
  for (const n of names) {
    if (!(n in rec)) throw new AnswerDefect(`answer "${key}": probability for "${n}" missing`);
    out[n] = checkUnit(key, `probability for "${n}"`, rec[n]);
    sum += out[n];
  }
  if (Math.abs(sum - 1) > PROBABILITY_SUM_TOLERANCE) {
    throw new AnswerDefect(
      `answer "${key}": probabilities sum to ${sum.toFixed(4)}, not 1 ± ${PROBABILITY_SUM_TOLERANCE}`,
    );
  }
  for (const n of names) out[n] = out[n] / sum;
  return out;
}

/**
 * Derives a typed answer from a provider's raw probabilities, checking kind, presence and ranges.
 * Extra members are ignored. Probabilities within 1 ± 0.02 are normalised to sum to 1.
 * @returns the answer and its confidence (null for a noul: DESIGN §4 says absent, never 0).
 * @throws AnswerDefect naming the key and the rule broken (never the answer's content).
 */
export function deriveAnswer(key: string, q: Question, raw: unknown): { answer: Answer; confidence: number | null } {
  if (raw === null || typeof raw !== 'object') throw new AnswerDefect(`answer "${key}" missing or not an object`);
  const r = raw as Record<string, unknown>;
  switch (q.kind) {
    case 'noul': {
      if (!('probability' in r)) throw new AnswerDefect(`answer "${key}": wrong kind, expected a probability`);
      return { answer: { type: 'noul', noul: checkUnit(key, 'probability', r.probability) }, confidence: null };
    }
    case 'choice': {
      if (!('probabilities' in r)) throw new AnswerDefect(`answer "${key}": wrong kind, expected probabilities`);
      const names = choiceOptionNames(q);
      const probabilities = normalise(key, names, r.probabilities);
      const values = names.map((n) => probabilities[n]);
      const best = argmax(values);
      return { answer: { type: 'choice', choice: names[best], probabilities }, confidence: values[best] };
    }
    case 'score': {
      if (!('probabilities' in r)) throw new AnswerDefect(`answer "${key}": wrong kind, expected probabilities`);
      const names = q.levels.map((_, i) => String(i));
      const probabilities = normalise(key, names, r.probabilities);
      const values = names.map((n) => probabilities[n]);
      const mean = values.reduce((acc, p, i) => acc + p * i, 0);
      const legend: Record<string, string> = {};
      q.levels.forEach((l, i) => (legend[String(i)] = l));
      return { answer: { type: 'score', score: mean, probabilities, legend }, confidence: Math.max(...values) };
    }
  }
}

/**
 * Builds every answer of one call from the questions asked (DESIGN §4): extra keys are ignored, a
 * missing or wrong-kind answer fails the whole call.
 * @throws AnswerDefect
 */
export function deriveAnswers(
  questions: ReadonlyMap<string, Question>,
  raw: Record<string, unknown>,
): Map<string, { answer: Answer; confidence: number | null }> {
  const out = new Map<string, { answer: Answer; confidence: number | null }>();
  for (const [key, q] of questions) {
    if (!Object.prototype.hasOwnProperty.call(raw, key)) throw new AnswerDefect(`answer "${key}" missing`);
    out.set(key, deriveAnswer(key, q, raw[key]));
  }
  return out;
}
