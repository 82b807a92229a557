import { createHash } from 'node:crypto';
import { z } from 'zod';
import { VerdictError } from '../errors.js';

/**
 * Typed questions and answers (DESIGN §4). Three kinds:
 * - `noul`: a probability in [0, 1] that a statement is true;
 * - `choice`: a distribution over 2 to 64 named options;
 * - `score`: a distribution over 2 to 11 ordered levels, lowest first.
 * The provider is asked only for probabilities; Verdict derives `choice`, `score` and
 * `confidence` (providers/answers.ts), so they can never disagree with the probabilities.
 */

export interface NoulQuestion {
  readonly kind: 'noul';
  readonly instructions: string;
  /** What "true" means. Both or neither of `trueDesc` / `falseDesc`. */
  readonly trueDesc?: string;
  readonly falseDesc?: string;
}

export interface ChoiceQuestion {
  readonly kind: 'choice';
  readonly instructions: string;
  /** Option name → non-blank description; 2 to 64 options. */
  readonly options: Readonly<Record<string, string>>;
}

export interface ScoreQuestion {
  readonly kind: 'score';
  readonly instructions: string;
  /** Ordered level names, lowest first; 2 to 11 levels. */
  readonly levels: readonly string[];
}

export type Question = NoulQuestion | ChoiceQuestion | ScoreQuestion;
export type QuestionKind = Question['kind'];

/** Choice options are bounded so one schema stays small enough for structured output. */
const MAX_CHOICE_OPTIONS = 64;
const MAX_SCORE_LEVELS = 11;

const nonBlank = z.string().refine((s) => s.trim().length > 0, 'must not be blank');

const noulSchema = z
  .object({
    kind: z.literal('noul'),
    instructions: nonBlank,
    trueDesc: nonBlank.optional(),
    falseDesc: nonBlank.optional(),
  })
  .strict()
  .refine((q) => (q.trueDesc === undefined) === (q.falseDesc === undefined), {
    message: 'trueDesc and falseDesc go together: give both or neither',
  });

const choiceSchema = z
  .object({
    kind: z.literal('choice'),
    instructions: nonBlank,
    options: z.record(nonBlank, nonBlank),
  })
  .strict()
  .refine(
    (q) => {
      const n = Object.keys(q.options).length;
      return n >= 2 && n <= MAX_CHOICE_OPTIONS;
    },
    { message: `options must have 2 to ${MAX_CHOICE_OPTIONS} names` },
  );

const scoreSchema = z
  .object({
    kind: z.literal('score'),
    instructions: nonBlank,
    levels: z.array(nonBlank).min(2).max(MAX_SCORE_LEVELS),
  })
  .strict();

/** zod schema of any question definition; used by the registry, config files and providers. */
const questionSchema = z.union([noulSchema, choiceSchema, scoreSchema]);

/** Thrown when a question definition is invalid. The message names the key and the rule. */
export class InvalidQuestion extends VerdictError {
  readonly code = 'invalid_question';
  constructor(key: string, detail: string) {
    super(`question "${key}" is invalid: ${detail}`);
  }
}

/**
 * Validates one question definition under its key. A key is non-blank and holds no `@`: stored
 * per-comment keys are `<key>@<commentId>`, split at the first `@` (DESIGN §7.1).
 * @throws InvalidQuestion naming the key and the first rule broken.
 */
export function validateQuestion(key: string, q: unknown): Question {
  if (typeof key !== 'string' || key.trim() === '') throw new InvalidQuestion(String(key), 'empty key');
  if (key.includes('@'))
    throw new InvalidQuestion(key, 'a key must not contain "@": per-comment keys are <key>@<commentId>');
  const r = questionSchema.safeParse(q);
  if (!r.success) {
    const issue = r.error.issues[0];
    const where = issue.path.length ? `${issue.path.join('.')}: ` : '';
    throw new InvalidQuestion(key, `${where}${issue.message}`);
  }
  return r.data as Question;
}

/** Builds a noul question. @throws InvalidQuestion */
export function noul(instructions: string, descs?: { trueDesc: string; falseDesc: string }): NoulQuestion {
  return validateQuestion('noul', { kind: 'noul', instructions, ...descs }) as NoulQuestion;
}

/** Builds a choice question; `options` maps option name → description. @throws InvalidQuestion */
export function choice(instructions: string, options: Record<string, string>): ChoiceQuestion {
  return validateQuestion('choice', { kind: 'choice', instructions, options }) as ChoiceQuestion;
}

/** Builds a score question; `levels` is ordered lowest first. @throws InvalidQuestion */
export function score(instructions: string, levels: string[]): ScoreQuestion {
  return validateQuestion('score', { kind: 'score', instructions, levels }) as ScoreQuestion;
}

// ---------------------------------------------------------------- answers

export interface NoulAnswer {
  readonly type: 'noul';
  /** Probability in [0, 1] that the statement is true. */
  readonly noul: number;
}
export interface ChoiceAnswer {
  readonly type: 'choice';
  /** The argmax option (ties: the first in sorted option order). */
  readonly choice: string;
  /** Option → probability, summing to 1. */
  readonly probabilities: Readonly<Record<string, number>>;
}
export interface ScoreAnswer {
  readonly type: 'score';
  /** Probability-weighted mean of the level indices: a float in [0, levels−1]. */
  readonly score: number;
  /** Canonical index "0".."n−1" → probability, summing to 1. */
  readonly probabilities: Readonly<Record<string, number>>;
  /** Index → level name. */
  readonly legend: Readonly<Record<string, string>>;
}
export type Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer;

/** Index of the largest value; ties go to the lowest index. */
export function argmax(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

/** Sorted option names of a choice question (code-unit order, stable across processes). */
export function choiceOptionNames(q: ChoiceQuestion): string[] {
  return Object.keys(q.options).sort();
}

/** The level a score picked: the argmax of its probabilities, ties to the lowest index; never round(score). */
export function pickedLevel(a: ScoreAnswer): string {
  const n = Object.keys(a.legend).length;
  const values = Array.from({ length: n }, (_, i) => a.probabilities[String(i)] ?? 0);
  return a.legend[String(argmax(values))];
}

// ---------------------------------------------------------------- fingerprint

/** What of the provider goes into every fingerprint (DESIGN §4). */
export interface FingerprintContext {
  /** Configured (pinned) model id. */
  readonly model: string;
  /** The provider's prompt-template version. */
  readonly promptVersion: string;
  /** Reasoning effort, or null where the provider has none. */
  readonly effort: string | null;
}

/**
 * Question fingerprint: lowercase hex sha256 of a fixed-order JSON object of the model, prompt
 * template version, effort and the question's whole definition (options by sorted key, levels in
 * order). Rewording a question, changing the template or pinning another model changes it, which
 * makes old answers not current (DESIGN §4). The member order is part of the contract: changing
 * it re-asks every item.
 */
export function questionFingerprint(q: Question, ctx: FingerprintContext): string {
  const context = fingerprintContextText(ctx);
  let known = fingerprints.get(q);
  const hit = known?.get(context);
  if (hit !== undefined) return hit;
  const fp = computeFingerprint(q, ctx);
  if (!known) fingerprints.set(q, (known = new Map()));
  known.set(context, fp);
  return fp;
}

/**
 * Fingerprints already worked out, per question object and context (model, template, effort). A
 * question is immutable (every field readonly; a resolved or reloaded set makes new objects), so
 * the object is its version: the runner hashes each question of a set once per process, not once
 * per job. Weak, so a reloaded registry's old questions are collected with their entries.
 */
const fingerprints = new WeakMap<Question, Map<string, string>>();

/**
 * Whether a context kept beside a cached value (`known`) still has `ctx`'s model, template and
 * effort, the three a fingerprint reads: a cache keyed by a context object or a questions object
 * works a value out anew when one of them changed.
 */
export function sameFingerprintContext<T extends FingerprintContext>(
  known: T | undefined,
  ctx: FingerprintContext,
): known is T {
  return (
    known !== undefined &&
    known.model === ctx.model &&
    known.promptVersion === ctx.promptVersion &&
    known.effort === ctx.effort
  );
}

/** `fingerprintContextText` kept per context object (a provider) while its three fields are unchanged. */
const contextTexts = new WeakMap<object, FingerprintContext & { text: string }>();

function computeFingerprint(q: Question, ctx: FingerprintContext): string {
  const options = q.kind === 'choice' ? choiceOptionNames(q).map((name) => [name, q.options[name]]) : null;
  const doc = [
    ['model', ctx.model],
    ['prompt_version', ctx.promptVersion],
    ['effort', ctx.effort],
    ['kind', q.kind],
    ['instructions', q.instructions],
    ['options', options],
    ['levels', q.kind === 'score' ? [...q.levels] : null],
    ['true_desc', q.kind === 'noul' ? (q.trueDesc ?? null) : null],
    ['false_desc', q.kind === 'noul' ? (q.falseDesc ?? null) : null],
  ];
  return createHash('sha256').update(JSON.stringify(doc)).digest('hex');
}

/**
 * The stored form of a fingerprint context (column `item_decisions.fingerprint_context`): JSON
 * `{"model","prompt_version","effort"}` in that fixed order. Stored with each answer so a reader
 * can recompute the answer's fingerprint under the context it was asked in, and so tell a
 * reworded question (`question_changed`) from another model or template (`model_changed`)
 * exactly, whatever provider names are involved. Also the key of a context among a question's
 * kept fingerprints (`questionFingerprint`). Worked out once per context object while its three
 * fields are unchanged: every job's fingerprint lookups and every answer row read it.
 */
export function fingerprintContextText(ctx: FingerprintContext): string {
  const known = contextTexts.get(ctx);
  if (sameFingerprintContext(known, ctx)) return known.text;
  const text = JSON.stringify({ model: ctx.model, prompt_version: ctx.promptVersion, effort: ctx.effort });
  contextTexts.set(ctx, { model: ctx.model, promptVersion: ctx.promptVersion, effort: ctx.effort, text });
  return text;
}

/** Parses `fingerprintContextText`'s output; null for a null, unreadable or foreign value (never throws). */
export function parseFingerprintContext(text: string | null | undefined): FingerprintContext | null {
  if (text == null) return null;
  try {
    const v = JSON.parse(text) as { model?: unknown; prompt_version?: unknown; effort?: unknown };
    if (typeof v.model !== 'string' || typeof v.prompt_version !== 'string') return null;
    if (v.effort !== null && typeof v.effort !== 'string') return null;
    return { model: v.model, promptVersion: v.prompt_version, effort: v.effort };
  } catch {
    return null;
  }
}
