import { questionFingerprint, type FingerprintContext, type Question } from '../decision/questions.js';
import { questionsOf, type QuestionSet } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import { answeredNow } from '../runner/answered.js';
import { ANTHROPIC_PROMPT_VERSION } from '../providers/anthropic.js';
import { FakeProvider } from '../providers/fake.js';
import { OPENAI_PROMPT_VERSION } from '../providers/openai-compatible.js';
import { costOf, formatUsd, pricingFor, type Pricing } from '../providers/pricing.js';
import { estimatePromptTokens, probabilityNames, questionAliases } from '../providers/prompt.js';
import { estimateTokens } from '../providers/provider.js';
import type { Store } from '../store/whole-store.js';
import { eligibleItems } from './eligible-items.js';

/**
 * What asking a set would cost, before anyone does it (DESIGN §1 principle 10, §8 `reask`, §9
 * "Model changes", §11 `--dry-run`). Built from the real items: each eligible item's state is built
 * by the real state builder, split into calls exactly as the runner splits them (sorted keys,
 * `maxPerCall`, the newest 10 comments for per-comment sets), and each call's input is estimated
 * the way the providers check their input budget (`checkInputBudget`): system prompt + answer
 * schema + state bytes, through `estimateTokens`. Output is estimated from the JSON an answer of
 * each question's shape takes. Both are estimates, never the bill: the spend table has the bill.
 */

/** The provider and model an estimate is for: its fingerprint context and its price. */
export interface EstimateTarget {
  provider: string;
  fingerprint: FingerprintContext;
  pricing: Pricing;
}

/**
 * The target for a provider name and model, with the same fingerprint context the provider would
 * have (its prompt-template version and effort), so "already answered" is judged as the runner
 * would judge it. The Anthropic effort is the provider's default (`low`).
 */
export function estimateTarget(provider: string, model: string, fingerprint?: FingerprintContext): EstimateTarget {
  const fp: FingerprintContext =
    fingerprint ??
    (provider === 'anthropic'
      ? { model, promptVersion: ANTHROPIC_PROMPT_VERSION, effort: 'low' }
      : provider === 'openai'
        ? { model, promptVersion: OPENAI_PROMPT_VERSION, effort: null }
        : { model, promptVersion: new FakeProvider({ model }).promptVersion, effort: null });
  return { provider, fingerprint: fp, pricing: pricingFor(provider, model) };
}

/** Calls and tokens of some work. Tokens are estimates. */
export interface WorkEstimate {
  /** Items with at least one call. */
  items: number;
  calls: number;
  questions: number;
  inputTokens: number;
  outputTokens: number;
  /** US dollars; 0 for free providers; null when the model has no price. */
  costUsd: number | null;
}

/** The estimate for one set. */
export interface SetEstimate {
  set: string;
  provider: string;
  model: string;
  /** Why the cost is 0 or unknown, when it is. */
  pricingNote: string | null;
  /** Items the set applies to now (scanned after the cursor, when one was given). */
  eligibleItems: number;
  /** Asking every key of every eligible item: a reworded question or a new model re-asks all of this. */
  all: WorkEstimate;
  /** Only keys without an answer at this state, question and model: what a backfill or reask would send now. */
  unanswered: WorkEstimate;
  /** States clipped by the builder's bounds (DESIGN §5). */
  truncatedStates: number;
}

/** Sample probability text, as long as a model's usual answer ("0.125"). */
const SAMPLE_P = 0.125;
/** Sample rationale: one short sentence (DESIGN §6 `explain`), about 120 characters. */
const SAMPLE_RATIONALE = 'x'.repeat(120);

/**
 * Output tokens of one call: the JSON of an answer of each question's shape (`{"q1":
 * {"probability": 0.125}}`, one probability per option or level), through `estimateTokens`.
 * Thinking is disabled on every path (DESIGN §9), so nothing is added for it.
 */
export function estimateOutputTokens(questions: ReadonlyMap<string, Question>, explain: boolean): number {
  const reply: Record<string, unknown> = {};
  // The reply names each question by its alias, as the prompt does (DESIGN §9.2), not by its key.
  for (const [alias, key] of questionAliases(questions)) {
    const q = questions.get(key)!;
    const names = probabilityNames(q);
    const member: Record<string, unknown> = explain ? { rationale: SAMPLE_RATIONALE } : {};
    if (names === null) member.probability = SAMPLE_P;
    else member.probabilities = Object.fromEntries(names.map((n) => [n, SAMPLE_P]));
    reply[alias] = member;
  }
  return estimateTokens(JSON.stringify(reply));
}

/** One call an estimate priced: what `ask` would get, and the heuristic's input tokens for it. */
export interface EstimatedCall {
  /** The state bytes the call sends, exactly as hashed. */
  state: string;
  /** The call's questions (one chunk of `maxPerCall` keys, sorted). */
  questions: ReadonlyMap<string, Question>;
  /** The set's `explain`. */
  explain: boolean;
  /** The heuristic's input tokens of the call: system prompt + schema + state, through `estimateTokens`. */
  inputTokens: number;
}

/** The calls of one item when every key is asked (the `all` part), for `estimateSet`'s `onItemCalls`. */
export interface EstimatedItemCalls {
  /** 0-based position of the item among the eligible items, in scan order (item id). */
  index: number;
  itemId: string;
  calls: EstimatedCall[];
  /** The calls of the `unanswered` part: only the keys without a current answer. */
  owed: EstimatedCall[];
}

/** Zero calls and tokens, at $0. */
export function emptyWork(): WorkEstimate {
  return { items: 0, calls: 0, questions: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 };
}

/**
 * Estimates asking `set` about every item it applies to now (one workspace or all; after the
 * backfill cursor `afterId` when given), for `target`. `onItemCalls`, when given, gets each item's
 * calls of the `all` part as they are priced (src/backfill/exact-estimate.ts samples them).
 * @throws what the store throws; a failing `resolve` propagates (the estimate cannot be made).
 */
export async function estimateSet(
  store: Pick<
    Store,
    | 'answeredKeys'
    | 'getWorkspace'
    | 'listCollections'
    | 'listDecisions'
    | 'listItems'
    | 'listWorkspaces'
    | 'loadItemForEvaluation'
    | 'now'
  >,
  set: QuestionSet,
  target: EstimateTarget,
  opts: { workspaceId?: string; afterId?: string | null; onItemCalls?: (c: EstimatedItemCalls) => void } = {},
): Promise<SetEstimate> {
  const all = emptyWork();
  const unanswered = emptyWork();
  let eligible = 0;
  let truncated = 0;
  const resolved = new Map<string, Record<string, Question>>();
  const perCall = new Map<string, { prompt: number; output: number }>();
  const callCost = (questions: Map<string, Question>) => {
    const id = [...questions.keys()].join('\u0000');
    let c = perCall.get(id);
    if (!c) {
      c = {
        prompt: estimatePromptTokens(questions, set.explain),
        output: estimateOutputTokens(questions, set.explain),
      };
      perCall.set(id, c);
    }
    return c;
  };

  for await (const { item } of eligibleItems(store, set, opts)) {
    eligible++;
    let questions = set.questions ? { ...set.questions } : resolved.get(item.workspaceId);
    if (!questions) {
      questions = { ...(await questionsOf(set, { workspaceId: item.workspaceId, store })) };
      resolved.set(item.workspaceId, questions);
    }
    const keys = Object.keys(questions).sort();
    if (keys.length === 0) continue;
    const loaded = await store.loadItemForEvaluation(item.id);
    if (!loaded) continue;
    const targets = setTargets(set, loaded);
    const fps = new Map(keys.map((k) => [k, questionFingerprint(questions![k], target.fingerprint)]));
    let itemAll = false;
    let itemOwed = false;
    const itemCalls: EstimatedCall[] | undefined = opts.onItemCalls ? [] : undefined;
    const itemOwedCalls: EstimatedCall[] | undefined = opts.onItemCalls ? [] : undefined;
    // The runner's own rule for what is answered (DESIGN §7 step 5, §5.2 as_of), so the estimate
    // counts exactly the keys a drain would ask.
    for (const { target: t, askState, done } of await answeredNow(store, set, item.id, targets, keys, fps)) {
      if (t.state.truncated) truncated++;
      const stateTokens = estimateTokens(askState.bytes);
      const add = (w: WorkEstimate, part: string[], calls?: EstimatedCall[]) => {
        for (let i = 0; i < part.length; i += set.maxPerCall) {
          const chunk = new Map(part.slice(i, i + set.maxPerCall).map((k) => [k, questions![k]] as const));
          const c = callCost(chunk);
          w.calls++;
          w.questions += chunk.size;
          w.inputTokens += c.prompt + stateTokens;
          w.outputTokens += c.output;
          calls?.push({
            state: askState.bytes,
            questions: chunk,
            explain: set.explain,
            inputTokens: c.prompt + stateTokens,
          });
        }
      };
      add(all, keys, itemCalls);
      itemAll = true;
      const remaining = keys.filter((k) => !done.has(k));
      if (remaining.length) {
        add(unanswered, remaining, itemOwedCalls);
        itemOwed = true;
      }
    }
    if (itemAll) all.items++;
    if (itemOwed) unanswered.items++;
    if (itemCalls?.length)
      opts.onItemCalls!({ index: eligible - 1, itemId: item.id, calls: itemCalls, owed: itemOwedCalls! });
  }
  all.costUsd = costOf(target.pricing, all);
  unanswered.costUsd = costOf(target.pricing, unanswered);
  return {
    set: set.name,
    provider: target.provider,
    model: target.fingerprint.model,
    pricingNote: target.pricing.kind === 'priced' ? null : target.pricing.reason,
    eligibleItems: eligible,
    all,
    unanswered,
    truncatedStates: truncated,
  };
}

/**
 * One line per estimate part, for humans: `label: 80 items, 80 calls, ~22,415 input / ~1,920 output tokens, $0.0032`.
 * @param noun what `items` counts (`items` for one set, `jobs` for (item, set) pairs over several sets).
 */
export function formatWork(label: string, w: WorkEstimate, noun = 'items'): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const cost = w.costUsd === null ? 'cost unknown' : formatUsd(w.costUsd);
  return `${label}: ${n(w.items)} ${noun}, ${n(w.calls)} calls, ~${n(w.inputTokens)} input / ~${n(w.outputTokens)} output tokens, ${cost}`;
}

/** The sum of several estimates; the cost is null when any part's is (a model with no price). */
export function sumWork(parts: readonly WorkEstimate[]): WorkEstimate {
  const t: WorkEstimate = { items: 0, calls: 0, questions: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 };
  for (const p of parts) {
    t.items += p.items;
    t.calls += p.calls;
    t.questions += p.questions;
    t.inputTokens += p.inputTokens;
    t.outputTokens += p.outputTokens;
    t.costUsd = t.costUsd === null || p.costUsd === null ? null : t.costUsd + p.costUsd;
  }
  return t;
}
