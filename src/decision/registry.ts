import type { Logger } from '../log.js';
import type { CollectionRow, ItemRow } from '../tracker-rows.js';
import type { Question } from './questions.js';
import { InvalidQuestion, validateQuestion } from './questions.js';
import { VerdictError } from '../errors.js';
import { MIN_MAX_AGE_MS } from './as-of.js';

/**
 * Question sets and the registry (DESIGN §6). The registry is pure: `setsFor(slug)` reads no
 * database, so every process that writes to the store enqueues alike.
 */

/** One declarative eligibility condition; a set's `eligible` accepts an item when all hold. */
export type EligibilityRule =
  | 'notSystem'
  | 'tracksWork'
  | 'notTerminal'
  | { readonly field: string; readonly equals: string | number | boolean | null }
  | { readonly field: string; readonly in: ReadonlyArray<string | number | boolean | null> };

/** Questions by key. */
export type QuestionMap = Readonly<Record<string, Question>>;

/**
 * The read-only slice of the Store a resolver may use (the conventions sets list a workspace's
 * conventions). Declared here, with the same signatures as the Store's methods, so decision/ does
 * not import store/; every Store is one.
 */
export interface ResolveStore {
  listCollections(workspaceId: string): Promise<CollectionRow[]>;
  /** Items in (created_at, id) order, after the cursor id when given. */
  listItems(q: {
    workspaceId?: string;
    collectionId?: string;
    includeDeleted?: boolean;
    afterId?: string;
    limit?: number;
  }): Promise<ItemRow[]>;
}

/** Context handed to `resolve`: the workspace, and read-only access the resolver needs. */
export interface ResolveContext {
  readonly workspaceId: string;
  /** Read-only store access; a resolver must not write. */
  readonly store: ResolveStore;
  /** For a resolver's own notices (ids and reasons only, never text). @defaultValue silent */
  readonly logger?: Logger;
}

/** A question set as registered (DESIGN §6). Durations are milliseconds. */
export interface QuestionSet {
  /** Registry key; stored with every answer. */
  readonly name: string;
  /** Collection slugs covered; empty covers every collection (eligibility then filters system ones). */
  readonly collections: readonly string[];
  /** Fixed questions; exactly one of `questions` and `resolve`. */
  readonly questions?: QuestionMap;
  /** Questions per workspace, at evaluation time; validated after resolving. */
  readonly resolve?: (ctx: ResolveContext) => Promise<QuestionMap>;
  readonly eligible: readonly EligibilityRule[];
  readonly withLinks: boolean;
  readonly noTrail: boolean;
  readonly perComment: boolean;
  /** At most this many questions per provider call. @defaultValue 8 */
  readonly maxPerCall: number;
  /**
   * A noul at or above this surfaces; 0 surfaces every noul. The default surfaces what the model
   * holds more likely than not; the production sets ask for more confidence (0.7), and a team's
   * set usually should too: give it.
   * @defaultValue 0.5 (`SET_DEFAULTS.threshold`)
   */
  readonly threshold: number;
  /**
   * A surfaced noul stops surfacing only below `threshold − hysteresis` (DESIGN §8.2), so an
   * answer wobbling around the threshold across edits does not flip the flag. In [0, threshold].
   * @defaultValue 0.05 (DESIGN §8.2), or the threshold when it is lower
   */
  readonly hysteresis: number;
  /** Keys asked and stored but never shown by a surfacing read. */
  readonly unsurfaced: readonly string[];
  /** Trailing wait after the latest write. @defaultValue 30 000 ms */
  readonly quietPeriodMs: number;
  /** Minimum interval between evaluations of one (item, set). @defaultValue 3 600 000 ms (0 for per-comment sets) */
  readonly reaskDebounceMs: number;
  /** `not_before` never exceeds `enqueued_at + maxDelayMs`. @defaultValue 7 200 000 ms */
  readonly maxDelayMs: number;
  /** Ask for a one-sentence rationale. */
  readonly explain: boolean;
  /**
   * Time-dependent questions (DESIGN §5.2): an answer older than this many milliseconds (from
   * its `evaluated_at`) reads `stale: expired`, and the worker's expiry sweep owes its job again,
   * even at an unchanged state. The set's states then carry `as_of` (the UTC date), so the re-ask
   * is keyed to a new state hash (decision/as-of.ts has the rule). At least `MIN_MAX_AGE_MS`
   * (one day: as_of has day precision). Null: answers never expire.
   * @defaultValue null
   */
  readonly maxAgeMs: number | null;
  /** Where the set was defined: `built-in`, or the config file's path. @defaultValue 'built-in' */
  readonly source: string;
}

/** What a caller gives to define a set; omitted settings take the defaults above. */
export type QuestionSetInput = Pick<QuestionSet, 'name'> & Partial<Omit<QuestionSet, 'name'>>;

export const SET_DEFAULTS = {
  maxPerCall: 8,
  quietPeriodMs: 30_000,
  reaskDebounceMs: 3_600_000,
  perCommentReaskDebounceMs: 0,
  maxDelayMs: 7_200_000,
  /** More likely than not; the production sets use 0.7 (src/decision/production-sets.ts). */
  threshold: 0.5,
  /** DESIGN §8.2's default margin. */
  hysteresis: 0.05,
} as const;

/** Thrown when a set cannot be registered. The message names the set and the rule. */
export class InvalidQuestionSet extends VerdictError {
  readonly code = 'invalid_question_set';
  constructor(name: string, detail: string) {
    super(`question set "${name}" is invalid: ${detail}`);
  }
}

/**
 * Fills defaults and validates a set definition.
 * @throws InvalidQuestionSet (empty name, neither or both of questions/resolve, bad settings)
 * @throws InvalidQuestion (an empty key or an invalid question)
 */
export function defineQuestionSet(input: QuestionSetInput): QuestionSet {
  const name = input.name;
  if (typeof name !== 'string' || name.trim() === '') throw new InvalidQuestionSet(String(name), 'empty name');
  if ((input.questions === undefined) === (input.resolve === undefined)) {
    throw new InvalidQuestionSet(name, 'give exactly one of `questions` and `resolve`');
  }
  const perComment = input.perComment ?? false;
  const set: QuestionSet = {
    name,
    collections: [...(input.collections ?? [])].sort(),
    questions: input.questions ? validateQuestions(input.questions) : undefined,
    resolve: input.resolve,
    eligible: input.eligible ?? [],
    withLinks: input.withLinks ?? false,
    noTrail: input.noTrail ?? false,
    perComment,
    maxPerCall: input.maxPerCall ?? SET_DEFAULTS.maxPerCall,
    threshold: input.threshold ?? SET_DEFAULTS.threshold,
    hysteresis: input.hysteresis ?? Math.min(SET_DEFAULTS.hysteresis, input.threshold ?? SET_DEFAULTS.threshold),
    unsurfaced: input.unsurfaced ?? [],
    quietPeriodMs: input.quietPeriodMs ?? SET_DEFAULTS.quietPeriodMs,
    reaskDebounceMs:
      input.reaskDebounceMs ?? (perComment ? SET_DEFAULTS.perCommentReaskDebounceMs : SET_DEFAULTS.reaskDebounceMs),
    maxDelayMs: input.maxDelayMs ?? SET_DEFAULTS.maxDelayMs,
    explain: input.explain ?? false,
    maxAgeMs: input.maxAgeMs ?? null,
    source: input.source ?? 'built-in',
  };
  if (!Number.isInteger(set.maxPerCall) || set.maxPerCall < 1)
    throw new InvalidQuestionSet(name, 'maxPerCall must be a positive integer');
  if (!(set.threshold >= 0 && set.threshold <= 1)) throw new InvalidQuestionSet(name, 'threshold must be in [0, 1]');
  if (!(set.hysteresis >= 0 && set.hysteresis <= set.threshold))
    throw new InvalidQuestionSet(name, `hysteresis must be in [0, threshold (${set.threshold})]`);
  for (const [k, v] of [
    ['quietPeriodMs', set.quietPeriodMs],
    ['reaskDebounceMs', set.reaskDebounceMs],
    ['maxDelayMs', set.maxDelayMs],
  ] as const) {
    if (!Number.isFinite(v) || v < 0)
      throw new InvalidQuestionSet(name, `${k} must be a non-negative number of milliseconds`);
  }
  if (set.maxAgeMs !== null && !(Number.isSafeInteger(set.maxAgeMs) && set.maxAgeMs >= MIN_MAX_AGE_MS)) {
    throw new InvalidQuestionSet(
      name,
      `maxAgeMs must be a whole number of milliseconds of at least ${MIN_MAX_AGE_MS} (1 day: as_of has day precision, DESIGN §5.2), got ${String(set.maxAgeMs)}`,
    );
  }
  if (set.questions) {
    const unknown = set.unsurfaced.filter((k) => !(k in set.questions!));
    if (unknown.length)
      throw new InvalidQuestionSet(name, `unsurfaced names keys the set does not ask: ${unknown.join(', ')}`);
  }
  return set;
}

/**
 * The questions a set asks in one workspace: its fixed questions, or `resolve`'s answer validated
 * by the registry's rules (DESIGN §4: resolved sets are validated at evaluation).
 * @throws whatever `resolve` throws (the runner fails the job as transient), or InvalidQuestion.
 */
export async function questionsOf(set: QuestionSet, ctx: ResolveContext): Promise<QuestionMap> {
  if (set.questions) return set.questions;
  return validateQuestions(await set.resolve!(ctx));
}

/**
 * Validates every question of a map (keys non-empty, no `@`: per-comment keys use it).
 * @throws InvalidQuestion
 */
export function validateQuestions(questions: Readonly<Record<string, unknown>>): QuestionMap {
  const out: Record<string, Question> = {};
  for (const key of Object.keys(questions).sort()) {
    if (key.includes('@'))
      throw new InvalidQuestion(key, 'a key must not contain "@": per-comment keys are <key>@<commentId>');
    out[key] = validateQuestion(key, questions[key]);
  }
  return out;
}

/**
 * The registry of question sets known to this process (`Verdict.registry`): each set by its unique
 * name, all of them sorted by name, or those asked of one collection's items (DESIGN §6).
 * Read-only once built; a host reads it, Verdict builds it from `sets` and the config file.
 * @throws InvalidQuestionSet from the constructor on a duplicate name.
 */
export class Registry {
  private readonly byName = new Map<string, QuestionSet>();
  private readonly sorted: QuestionSet[];

  /** @throws InvalidQuestionSet on a duplicate name. */
  constructor(sets: readonly QuestionSet[]) {
    for (const s of sets) {
      if (this.byName.has(s.name)) throw new InvalidQuestionSet(s.name, 'duplicate name');
      this.byName.set(s.name, s);
    }
    this.sorted = [...this.byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The set of that name, or undefined when unknown in this process. */
  get(name: string): QuestionSet | undefined {
    return this.byName.get(name);
  }

  /** Every set, sorted by name. */
  all(): readonly QuestionSet[] {
    return this.sorted;
  }

  /** Sets covering a collection slug, sorted by name. Pure: no database read. */
  setsFor(collectionSlug: string): QuestionSet[] {
    return this.sorted.filter((s) => s.collections.length === 0 || s.collections.includes(collectionSlug));
  }
}
