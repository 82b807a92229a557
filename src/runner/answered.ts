import { currentAnswer, stateToAsk } from '../decision/as-of.js';
import type { QuestionSet } from '../decision/registry.js';
import type { SetTarget } from '../decision/set-states.js';
import type { BuiltState } from '../decision/state.js';
import type { DecisionRow } from '../store/decision-store.js';
import type { AnswerKey } from '../store/store.js';
import type { Store } from '../store/whole-store.js';

/**
 * DESIGN §7 step 5 ("the keys that already have an answer at this state hash, fingerprint and
 * state version are done"), with §5.2's as_of rule (decision/as-of.ts): which keys of each
 * target are answered now, and the state to ask the others at. The runner and the estimates
 * (`backfill --dry-run`, `estimate`) both call it, so what they skip is what a read calls current.
 */

/** One target (the item, or one comment) with its keys answered now and the state the rest are asked at. */
export interface TargetWork {
  target: SetTarget;
  /** The state sent and stored for the keys not answered: `target.state`, dated today for a set with `maxAgeMs`. */
  askState: BuiltState;
  /** Question keys (the set's, without the comment suffix) with a current answer. */
  done: Set<string>;
}

/**
 * For each target, the keys with a current answer (DESIGN §7 step 5, §5.2).
 *
 * A set without `maxAgeMs`: one exact-key read per target (`answeredKeys`, a seek on the
 * idempotency index). A set with one: the store's now and one read of the item's rows of the set
 * (`listDecisions(itemId, set)`), judged by `currentAnswer`, since an answer's dated state hash
 * depends on its own as_of, which only its row says.
 * @param keys the set's question keys, sorted.
 * @param fingerprints key → question fingerprint under the provider configured now.
 */
export async function answeredNow(
  store: Pick<Store, 'answeredKeys' | 'listDecisions' | 'now'>,
  set: Pick<QuestionSet, 'name' | 'maxAgeMs'>,
  itemId: string,
  targets: readonly SetTarget[],
  keys: readonly string[],
  fingerprints: ReadonlyMap<string, string>,
): Promise<TargetWork[]> {
  const out: TargetWork[] = [];
  if (set.maxAgeMs === null) {
    for (const target of targets) {
      const hits = await store.answeredKeys(itemId, set.name, wantedKeys(target, keys, fingerprints));
      out.push(exactWork(target, keys, hits));
    }
    return out;
  }
  const nowMs = await store.now();
  const byKey = new Map<string, DecisionRow[]>();
  for (const r of await store.listDecisions(itemId, set.name)) {
    const list = byKey.get(r.questionKey);
    if (list) list.push(r);
    else byKey.set(r.questionKey, [r]);
  }
  for (const target of targets) {
    const done = new Set(
      keys.filter(
        (k) =>
          currentAnswer(byKey.get(k + target.keySuffix) ?? [], target.state, fingerprints.get(k)!, set, nowMs) !== null,
      ),
    );
    out.push({ target, askState: stateToAsk(target.state, set, nowMs), done });
  }
  return out;
}

/** The exact idempotency keys of one target (DESIGN §7 step 5): each key at the target's state hash and version and the key's fingerprint. */
function wantedKeys(
  target: SetTarget,
  keys: readonly string[],
  fingerprints: ReadonlyMap<string, string>,
): AnswerKey[] {
  return keys.map((k) => ({
    questionKey: k + target.keySuffix,
    stateHash: target.state.hash,
    questionHash: fingerprints.get(k)!,
    stateVersion: target.state.version,
  }));
}

/** A target of a set without `maxAgeMs`: its keys whose exact key is stored (`hits`, stored keys) are done. */
function exactWork(target: SetTarget, keys: readonly string[], hits: ReadonlySet<string>): TargetWork {
  return { target, askState: target.state, done: new Set(keys.filter((k) => hits.has(k + target.keySuffix))) };
}

/** One set's share of a group's idempotency read (`answeredNowOfSets`). */
export interface SetWanted {
  readonly set: Pick<QuestionSet, 'name' | 'maxAgeMs'>;
  readonly targets: readonly SetTarget[];
  /** The set's question keys, sorted. */
  readonly keys: readonly string[];
  /** Key → question fingerprint under the provider configured now. */
  readonly fingerprints: ReadonlyMap<string, string>;
}

/**
 * `answeredNow` for the sets of one co-asked group (DESIGN §7 step 5, §7.2): every set without
 * `maxAgeMs`, all its targets, in ONE read (`Store.answeredKeysOfSets`), so a group costs one
 * idempotency read however many sets it holds; a set with `maxAgeMs` reads its rows as
 * `answeredNow` does.
 * @returns one TargetWork list per entry, in the order given.
 */
export async function answeredNowOfSets(
  store: Pick<Store, 'answeredKeys' | 'answeredKeysOfSets' | 'listDecisions' | 'now'>,
  itemId: string,
  entries: readonly SetWanted[],
): Promise<TargetWork[][]> {
  const out: TargetWork[][] = entries.map(() => []);
  const exact = entries.flatMap((e, i) => (e.set.maxAgeMs === null ? [i] : []));
  if (exact.length) {
    const hits = await store.answeredKeysOfSets(
      itemId,
      exact.map((i) => {
        const e = entries[i]!;
        return { questionSet: e.set.name, keys: e.targets.flatMap((t) => wantedKeys(t, e.keys, e.fingerprints)) };
      }),
    );
    exact.forEach((i, k) => (out[i] = entries[i]!.targets.map((t) => exactWork(t, entries[i]!.keys, hits[k]!))));
  }
  for (const [i, e] of entries.entries())
    if (e.set.maxAgeMs !== null) out[i] = await answeredNow(store, e.set, itemId, e.targets, e.keys, e.fingerprints);
  return out;
}
