import { withAsOf, type BuiltState } from './state.js';

/**
 * Time-dependent questions (DESIGN §5.2): the one rule, used by the runner's "already answered"
 * skip (runner/answered.ts), by every read (reads.ts `judgeRows`), by the expiry sweep
 * (maintenance/expiry-plan.ts) and by the estimates. Pure: the caller passes the store's "now".
 *
 * A set that declares `maxAgeMs` asks about a state that carries `as_of`, the UTC date
 * (`YYYY-MM-DD`, day precision) of the reading, as its last member. The answer's `state_parts`
 * stores that date itself under `as_of` (every other part is a hash), so a reader can rebuild the
 * exact state an answer was keyed to.
 *
 * **Which as_of.** Not "today" when judging: that would make every answer stop being current at
 * midnight and every owe on another day re-ask an unchanged state. Instead, per stored key:
 * - a stored answer is current when its state hash equals the current state (everything but
 *   `as_of`) *dated with the answer's own as_of*, its fingerprint and state version match, and it
 *   is not expired. So an answer keeps reading current across days, and the runner skips it, for
 *   as long as the item is unchanged and the answer is younger than `maxAge`;
 * - a key with no such answer is asked at the current state dated **today** (`stateToAsk`).
 *
 * **Age.** Measured from the answer's `evaluated_at` (when it was stored, on the store's clock),
 * not from its as_of date: as_of is only day-precise, and an answer asked at 23:59 is not a day
 * old a minute later. An answer is expired when `now − evaluated_at > maxAgeMs`.
 *
 * **Why the re-ask is a new state hash.** An answer's as_of is the date its state was built,
 * which is never after its `evaluated_at`. `maxAgeMs` is at least one day (`MIN_MAX_AGE_MS`), so
 * once it has expired, today's date is after its as_of: the re-ask is keyed to a new state hash,
 * and the expired row stays for audit beside the new one.
 *
 * **Undated answers.** An answer stored before its set declared `maxAgeMs` has no as_of; it is
 * compared at the undated state, so adding `maxAge` to a set re-asks nothing until its answers
 * expire. A set without `maxAgeMs` compares exact hashes only (DESIGN §8), so removing `maxAge`
 * leaves dated answers reading `state_changed (as_of)` until a write or a backfill re-asks them.
 */

/** One day, ms. */
export const DAY_MS = 86_400_000;

/**
 * The shortest `maxAgeMs` a set may declare: one day (ms). as_of has day precision (DESIGN
 * §5.2): two answers of one state less than a day apart could carry the same as_of, hence the
 * same state hash, and the idempotency key (DESIGN §2) would make the re-ask a no-op.
 * @alias the rule's own name for DAY_MS
 */
export const MIN_MAX_AGE_MS = DAY_MS;

/** The name of the state member, and of its entry in `state_parts`. */
const AS_OF_PART = 'as_of';

/** The as_of of an instant: its UTC date, `YYYY-MM-DD`. */
export function asOfDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Whether an answer stored at `evaluatedAtMs` is older than `maxAgeMs` at `nowMs` (all ms). */
export function isExpired(evaluatedAtMs: number, maxAgeMs: number, nowMs: number): boolean {
  return nowMs - evaluatedAtMs > maxAgeMs;
}

/** A stored answer's `state_parts` (JSON text) parsed; {} when unreadable. */
function parseStateParts(text: string): Record<string, string> {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** The as_of a stored answer was keyed to (its `state_parts.as_of`), or null for an undated answer. */
function storedAsOf(parts: Readonly<Record<string, string>>): string | null {
  const v = parts[AS_OF_PART];
  return typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v) ? v : null;
}

/** What the rule reads of a stored answer (a `DecisionRow` fits). */
export interface DatedAnswer {
  readonly stateHash: string;
  readonly questionHash: string;
  readonly stateVersion: number;
  /** JSON text: part name → hash, and `as_of` → the date itself. */
  readonly stateParts: string;
  /** Epoch ms, the store's clock. */
  readonly evaluatedAt: number;
}

/** What the rule reads of a set. */
export type AgedSet = { readonly maxAgeMs: number | null };

/**
 * Whether one stored answer is current for the item's state now (DESIGN §8, §5.2): `base` is
 * the current state without as_of (as `setTargets` builds it), `fingerprint` the key's question
 * fingerprint now, `nowMs` the store's now. For a set without `maxAgeMs` this is the exact match
 * of DESIGN §8 (state hash, fingerprint, state version); for a set with one, the state is dated
 * with the answer's own as_of and the answer must not be expired.
 */
export function answerIsCurrent(
  row: DatedAnswer,
  base: BuiltState,
  fingerprint: string,
  set: AgedSet,
  nowMs: number,
): boolean {
  if (row.questionHash !== fingerprint || row.stateVersion !== base.version) return false;
  if (set.maxAgeMs === null) return row.stateHash === base.hash;
  if (isExpired(row.evaluatedAt, set.maxAgeMs, nowMs)) return false;
  const asOf = storedAsOf(parseStateParts(row.stateParts));
  return row.stateHash === (asOf === null ? base.hash : withAsOf(base, asOf).hash);
}

/**
 * The newest of one stored key's answers (oldest first) that is current now, or null (see
 * `answerIsCurrent`). Dated states are built once per distinct as_of.
 */
export function currentAnswer<R extends DatedAnswer>(
  rows: readonly R[],
  base: BuiltState,
  fingerprint: string,
  set: AgedSet,
  nowMs: number,
): R | null {
  for (let i = rows.length - 1; i >= 0; i--) {
    if (answerIsCurrent(rows[i], base, fingerprint, set, nowMs)) return rows[i];
  }
  return null;
}

/** The state a key that is not current is asked at: `base` dated today for a set with `maxAgeMs`, else `base`. */
export function stateToAsk(base: BuiltState, set: AgedSet, nowMs: number): BuiltState {
  return set.maxAgeMs === null ? base : withAsOf(base, asOfDate(nowMs));
}

/**
 * Whether a stored answer that is not current is so only because of its age (DESIGN §5.2
 * `expired`): the set has `maxAgeMs`, the answer is older than it, and it was asked about the
 * current state (its parts other than as_of equal the current ones; an undated answer counts).
 */
export function onlyExpired(row: DatedAnswer, base: BuiltState, set: AgedSet, nowMs: number): boolean {
  if (set.maxAgeMs === null || !isExpired(row.evaluatedAt, set.maxAgeMs, nowMs)) return false;
  return movedParts(parseStateParts(row.stateParts), base.parts, set).length === 0;
}

/**
 * The parts that moved between a stored answer's parts and the current ones, sorted (DESIGN §5,
 * §8). When both sides are dated (a set with `maxAgeMs` and a dated answer), as_of is not a
 * change of the item and is left out; when only one side carries it (a set that gained or lost
 * `maxAge`), `as_of` is listed, since the state's shape moved.
 */
export function movedParts(
  before: Readonly<Record<string, string>>,
  current: Readonly<Record<string, string>>,
  set: AgedSet,
): string[] {
  const dated = set.maxAgeMs !== null;
  const hasAsOf = storedAsOf(before) !== null;
  const names = new Set([...Object.keys(before), ...Object.keys(current)]);
  const out = [...names].filter((n) => (n === AS_OF_PART ? dated !== hasAsOf : before[n] !== current[n]));
  return out.sort();
}
