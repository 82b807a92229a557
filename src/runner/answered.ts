import { currentAnswer, stateToAsk } from '../decision/as-of.js';
import type { QuestionSet } from '../decision/registry.js';
import type { SetTarget } from '../decision/set-states.js';
import type { BuiltState } from '../decision/state.js';
import type { DecisionRow } from '../store/decision-store.js';
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
      const wanted = keys.map((k) => ({
        questionKey: k + target.keySuffix,
        stateHash: target.state.hash,
        questionHash: fingerprints.get(k)!,
        stateVersion: target.state.version,
      }));
      const hits = await store.answeredKeys(itemId, set.name, wanted);
      out.push({ target, askState: target.state, done: new Set(keys.filter((k) => hits.has(k + target.keySuffix))) });
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
