import { pickedLevel, type Answer } from '../decision/questions.js';
import { noulProbability, type SurfacingContext } from './events.js';

/**
 * People in the loop (DESIGN §8.1, §8.2): the rows of human verdicts and surfacing changes,
 * and the rules written once for the store's write paths and the reads: which verdict is in force,
 * and whether a key surfaces (hysteresis, overrides).
 *
 * A verdict is appended, never updated: the latest row of an (item, set, key) is the one in force.
 * One with a value overrides the model for reads and surfacing until a person records another
 * (`withdrawn` hands the key back to the model). The model keeps answering; its answers are kept
 * and shown beside the override as `proposed` when they disagree (src/reads/reads.ts).
 */

/** What a person said about an answer. */
export type VerdictKind = 'agree' | 'disagree' | 'value' | 'withdrawn';

export const VERDICT_KINDS: readonly VerdictKind[] = ['agree', 'disagree', 'value', 'withdrawn'];

/** One row of `human_verdicts`. Times are epoch ms. */
export interface HumanVerdictRow {
  id: number;
  workspaceId: string;
  itemId: string;
  questionSet: string;
  /** The stored key (`<key>@<commentId>` for per-comment sets). */
  questionKey: string;
  verdict: VerdictKind;
  /**
   * The answer the verdict stands for, as JSON like `item_decisions.answer` (`{"type":"noul","noul":1}`).
   * Null for `withdrawn`, and for `disagree` on a choice or score (the person said "wrong" without
   * saying what is right: a label for evaluation, not an override).
   */
  value: string | null;
  /** The state the person judged (hash, version, parts JSON part → hash). */
  stateHash: string;
  stateVersion: number;
  stateParts: string;
  /** The model answer row the person saw, or null. */
  decisionId: number | null;
  /** Who: a user name, or `token:<id>` for an HTTP API token. */
  author: string;
  note: string | null;
  createdAt: number;
}

/** What the store's `insertVerdict` takes: a row without id and time (the store's clock). */
export type NewVerdict = Omit<HumanVerdictRow, 'id' | 'createdAt'>;

/** What `insertVerdict` needs to judge the key's surfacing; null for a key that never surfaces (not a noul, or listed as unsurfaced). */
export type VerdictSurfacing = SurfacingContext | null;

/** What moved a surfacing change. */
export type SurfacingCause = 'model' | 'human';

/** One row of `surfacing_changes`: an (item, set, key) started (`surfaced`) or stopped surfacing. */
export interface SurfacingChangeRow {
  id: number;
  workspaceId: string;
  itemId: string;
  questionSet: string;
  questionKey: string;
  surfaced: boolean;
  /** The key had a side before this move (an earlier answer or change); false for a key's first answer. */
  flip: boolean;
  /** The probability in force after the change (the model's, or the person's value). */
  probability: number;
  cause: SurfacingCause;
  stateHash: string;
  changedAt: number;
}

/** DESIGN §8.2: `flags --flapping` lists keys with at least this many flips... */
export const FLAPPING_MIN_FLIPS = 3;
/** ...within this window (30 days, ms). */
export const FLAPPING_WINDOW_MS = 30 * 86_400_000;

/** The value a verdict row puts in force: its answer when it is an override, else null (withdrawn, label-only disagree). */
export function overrideValue(v: Pick<HumanVerdictRow, 'verdict' | 'value'> | null | undefined): string | null {
  if (!v || v.verdict === 'withdrawn') return null;
  return v.value;
}

/**
 * The one surfacing rule with memory (DESIGN §8, §8.2): a noul surfaces at `p ≥ threshold`, and
 * one that surfaced at its previous state keeps surfacing down to `threshold − hysteresis`.
 * @param wasSurfaced whether the key surfaced at its previous state (the latest surfacing change).
 */
export function surfacesWithHysteresis(
  p: number,
  wasSurfaced: boolean,
  threshold: number,
  hysteresis: number,
): boolean {
  return p >= threshold || (wasSurfaced && p >= threshold - hysteresis);
}

/**
 * Whether a key surfaces now and with what probability, for the store's write paths (an answer
 * stored, a verdict recorded): a person's value in force decides alone (a noul value surfaces at
 * `≥ threshold`, no hysteresis: it is deliberate); otherwise the model's latest noul with the
 * hysteresis against `wasSurfaced`. A key with neither a value nor a readable noul does not surface.
 * @param override the JSON value in force (`overrideValue`), or null.
 * @param modelAnswer the model's latest answer JSON for the key, or null.
 */
export function surfacingNow(o: {
  wasSurfaced: boolean;
  override: string | null;
  modelAnswer: string | null;
  threshold: number;
  hysteresis: number;
}): { surfaced: boolean; probability: number; cause: SurfacingCause } {
  if (o.override !== null) {
    const p = noulProbability(o.override) ?? 0;
    return { surfaced: p >= o.threshold, probability: p, cause: 'human' };
  }
  const p = o.modelAnswer === null ? null : noulProbability(o.modelAnswer);
  if (p === null) return { surfaced: false, probability: 0, cause: 'model' };
  return {
    surfaced: surfacesWithHysteresis(p, o.wasSurfaced, o.threshold, o.hysteresis),
    probability: p,
    cause: 'model',
  };
}

/**
 * Whether two answers of one question say the same thing, as a reader acts on them: nouls on the
 * same side of the threshold, the same choice, the same score level (the picked level: the argmax,
 * as `show` and `eval` read it, never the rounded mean).
 */
export function answersAgree(a: Answer, b: Answer, threshold: number): boolean {
  if (a.type === 'noul' && b.type === 'noul') return a.noul >= threshold === b.noul >= threshold;
  if (a.type === 'choice' && b.type === 'choice') return a.choice === b.choice;
  if (a.type === 'score' && b.type === 'score') return pickedLevel(a) === pickedLevel(b);
  return false;
}

/** People's verdicts and the surfacing changes they and answers make (DESIGN §8.1, §8.2; statements in sql/surfacing.ts). */
export interface HumanVerdictStore {
  /**
   * Appends a person's verdict. With `surfacing` (the key is a noul that may surface), a verdict
   * that changes what is in force moves the key's surfacing (change row and events) in the same
   * transaction. Validation (the key exists, the value fits the question) is the caller's
   * (src/compose/verdicts.ts). @returns the stored row.
   */
  insertVerdict(v: NewVerdict, surfacing: VerdictSurfacing): Promise<HumanVerdictRow>;
  /** Verdicts of a workspace (one set, one item when given), oldest first; never pruned. */
  listVerdicts(q: { workspaceId: string; questionSet?: string; itemId?: string }): Promise<HumanVerdictRow[]>;
  /** Surfacing changes of an item (every set) or of a (workspace, set), oldest first, since `sinceMs` (epoch ms) when given. */
  listSurfacingChanges(
    q: { itemId: string; sinceMs?: number } | { workspaceId: string; questionSet: string; sinceMs?: number },
  ): Promise<SurfacingChangeRow[]>;
}
