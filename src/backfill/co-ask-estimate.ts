import type { Question } from '../decision/questions.js';
import type { QuestionSet } from '../decision/registry.js';
import { costOf, type Pricing } from '../providers/pricing.js';
import { estimatePromptTokens } from '../providers/prompt.js';
import { estimateTokens } from '../providers/provider.js';
import {
  emptyWork,
  estimateOutputTokens,
  type EstimatedCall,
  type EstimatedItemCalls,
  type WorkEstimate,
} from './estimate.js';
import { coAskCalls } from '../runner/evaluate.js';

/** Calls and tokens of several sets together, packed into calls as the worker packs them. */
export interface CoAskedEstimate {
  /** Items with at least one call, over every set. */
  all: WorkEstimate;
  unanswered: WorkEstimate;
}

/**
 * Sums the estimates of several sets the way the worker asks them (DESIGN §7.2): the calls of
 * one item whose state bytes are identical share one call, packed by the runner's own rule
 * (`coAskCalls`), so a state is sent, and a call counted, once. Each shared call's prompt and
 * output are estimated for its questions together. Feed it every set's `onItemCalls` (`add`),
 * then read `total`. Holds each item's calls until `total`: the state bytes of every estimated item.
 */
export class CoAskTally {
  private readonly byItem = new Map<string, Array<{ set: QuestionSet; c: EstimatedItemCalls }>>();

  /** The calls of one item for one set, as `estimateSet`'s `onItemCalls` gives them. */
  add(set: QuestionSet, c: EstimatedItemCalls): void {
    let list = this.byItem.get(c.itemId);
    if (!list) this.byItem.set(c.itemId, (list = []));
    list.push({ set, c });
  }

  /** The co-asked sums, priced at `pricing`'s live price. */
  total(pricing: Pricing): CoAskedEstimate {
    const all = emptyWork();
    const unanswered = emptyWork();
    for (const sets of this.byItem.values()) {
      countCoAsked(
        all,
        sets.map(({ set, c }) => ({ set, calls: c.calls })),
      );
      countCoAsked(
        unanswered,
        sets.map(({ set, c }) => ({ set, calls: c.owed })),
      );
    }
    all.costUsd = costOf(pricing, all);
    unanswered.costUsd = costOf(pricing, unanswered);
    return { all, unanswered };
  }
}

/** Adds one item's calls of several sets to `w`, co-asked by `coAskCalls`. */
function countCoAsked(w: WorkEstimate, sets: Array<{ set: QuestionSet; calls: EstimatedCall[] }>): void {
  const chunksOf = sets.map(({ set, calls }, claim) => ({
    claim,
    set,
    chunks: calls.map((c) => ({ state: { bytes: c.state }, questions: c.questions })),
  }));
  const calls = coAskCalls(chunksOf);
  if (calls.length === 0) return;
  w.items++;
  for (const call of calls) {
    const questions = new Map<string, Question>();
    for (const p of call.parts) for (const [k, q] of p.chunk.questions) questions.set(k, q);
    const sorted = new Map([...questions].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    w.calls++;
    w.questions += sorted.size;
    w.inputTokens += estimatePromptTokens(sorted, call.explain) + estimateTokens(call.state.bytes);
    w.outputTokens += estimateOutputTokens(sorted, call.explain);
  }
}
