import type { QuestionSet } from '../decision/registry.js';
import { VerdictError } from '../errors.js';
import { costOf } from '../providers/pricing.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/whole-store.js';
import { eligibleItems } from './eligible-items.js';
import {
  estimateSet,
  type EstimatedCall,
  type EstimateTarget,
  type SetEstimate,
  type WorkEstimate,
} from './estimate.js';

/**
 * `estimate --exact` and `backfill --dry-run --exact` (DESIGN §11): the
 * heuristic estimate of src/backfill/estimate.ts (1 token per 3 UTF-16 code units) corrected by the
 * provider's own count of the same calls.
 *
 * - Every eligible item's calls are counted when there are at most `EXACT_SAMPLE_ITEMS` (50);
 *   above that, 50 items spread evenly over the set (`sampleIndices`): deterministic, so two runs
 *   over the same items count the same calls. The count endpoint is free but rate-limited, so
 *   counts go one at a time and a large set costs 50 items' worth of requests, not one per item.
 * - A sampled item's calls are its calls when every key is asked (the estimate's `all` part):
 *   each item has them, while the unanswered part may be empty after a drain.
 * - The correction is a ratio estimator: ratio = exact ÷ heuristic over the sampled calls, and
 *   each part's input tokens are its heuristic total × ratio (rounded). With every item counted,
 *   the corrected `all` input is the exact count itself. Output tokens stay the heuristic's (the
 *   count endpoint counts input only); costs are recomputed from the corrected tokens.
 * - Counting records no spend (the endpoint is free) and asks no question; item and question text
 *   go to the provider exactly as `ask` would send them, and are never logged.
 */

/** Items counted in full; above it, this many items are sampled. Raising it costs one count request per call of each added item. */
export const EXACT_SAMPLE_ITEMS = 50;

/**
 * The eligible-item positions (0-based, in scan order) whose calls are counted: all of them when
 * `total` ≤ `size`, else the middle position (rounded down) of each of `size` equal slices,
 * ⌊(2k + 1) · total ÷ (2 · size)⌋ for k = 0 … size − 1: strictly increasing (consecutive picks are
 * ⌊total ÷ size⌋ or more apart), the first and last slices included, the same on every run.
 * @throws TypeError for a `total` or `size` that is not an integer ≥ 0 (size ≥ 1).
 */
export function sampleIndices(total: number, size = EXACT_SAMPLE_ITEMS): number[] {
  if (!Number.isInteger(total) || total < 0) throw new TypeError(`total must be an integer ≥ 0, got ${String(total)}`);
  if (!Number.isInteger(size) || size < 1)
    throw new TypeError(`sample size must be an integer ≥ 1, got ${String(size)}`);
  if (total <= size) return Array.from({ length: total }, (_, i) => i);
  return Array.from({ length: size }, (_, k) => Math.floor(((2 * k + 1) * total) / (2 * size)));
}

/** What the exact count of the sample found. Tokens are input tokens. */
export interface ExactSample {
  /** The provider that counted (`anthropic`: POST /v1/messages/count_tokens; `fake`: its own count). */
  counter: string;
  /** `every item` when all were counted, `evenly spread` for a sample (`sampleIndices`). */
  method: 'every item' | 'evenly spread';
  /** Items whose calls were counted. */
  sampledItems: number;
  /** Items the estimate covers (eligible items with at least one call). */
  ofItems: number;
  /** Calls counted (one count request each). */
  calls: number;
  /** The provider's count over the sampled calls, tokens. */
  exactInputTokens: number;
  /** The heuristic's estimate of the same calls, tokens. */
  heuristicInputTokens: number;
  /** exact ÷ heuristic: the factor applied to the heuristic's input tokens; null for an empty sample. */
  ratio: number | null;
  /**
   * How far the heuristic was off on the sample, percent of the exact count:
   * (heuristic − exact) ÷ exact × 100; positive when the heuristic counted more. Null when the
   * sample is empty or counted 0.
   */
  heuristicErrorPct: number | null;
}

/** A set's estimate whose input tokens are corrected by an exact count (`all`, `unanswered`), with what they came from. */
export interface ExactSetEstimate extends SetEstimate {
  sample: ExactSample;
  /** The heuristic estimate before the correction. */
  heuristic: { all: WorkEstimate; unanswered: WorkEstimate };
}

/** The provider cannot count tokens exactly (it has no `countTokens`): exit 2 in the CLI. */
export class ExactCountUnavailable extends VerdictError {
  readonly code = 'exact_count_unavailable';
  constructor(readonly provider: string) {
    super(
      `--exact: provider ${provider} cannot count tokens exactly (anthropic and fake can); without --exact the estimate uses the heuristic, 1 token per 3 UTF-16 code units`,
    );
  }
}

/** Options of `exactEstimateSet`. */
export interface ExactEstimateOptions {
  /** One workspace; all when omitted. */
  workspaceId?: string;
  /** Only items after this id (a backfill cursor). */
  afterId?: string | null;
  /** Items counted in full, and the sample size above it. @defaultValue EXACT_SAMPLE_ITEMS (50) */
  sampleItems?: number;
  /** Cancels the counting. */
  signal?: AbortSignal;
}

/** The heuristic input of `w` × `ratio`, with its cost recomputed; `w` unchanged for a null ratio. */
function corrected(w: WorkEstimate, ratio: number | null, target: EstimateTarget): WorkEstimate {
  if (ratio === null) return { ...w };
  const out = { ...w, inputTokens: Math.round(w.inputTokens * ratio) };
  out.costUsd = costOf(target.pricing, out);
  return out;
}

/**
 * Estimates `set` as `estimateSet` does, then counts the sampled items' calls with
 * `counter.countTokens`, one after another, and corrects the input tokens by the ratio.
 * @throws ExactCountUnavailable when `counter` has no `countTokens`, before any store read.
 * @throws TypeError when `target` is not `counter`'s provider and model (the count would price another model).
 * @throws what the store or `countTokens` throws (ProviderUnavailable once the retries are spent,
 *   ProviderMisconfigured for a bad key, ...): no partial estimate is returned.
 */
export async function exactEstimateSet(
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
  counter: Provider,
  opts: ExactEstimateOptions = {},
): Promise<ExactSetEstimate> {
  const count = counter.countTokens?.bind(counter);
  if (!count) throw new ExactCountUnavailable(counter.name);
  if (target.provider !== counter.name || target.fingerprint.model !== counter.model) {
    throw new TypeError(
      `the estimate target ${target.provider}:${target.fingerprint.model} is not the counting provider ${counter.name}:${counter.model}`,
    );
  }
  const scope = { workspaceId: opts.workspaceId, afterId: opts.afterId };
  // The sample's positions need the count of eligible items first (the same scan a backfill
  // makes to know its total); the estimate's own pass then keeps only the picked items' calls.
  let eligible = 0;
  for await (const _ of eligibleItems(store, set, scope)) eligible++;
  const size = opts.sampleItems ?? EXACT_SAMPLE_ITEMS;
  const picked = new Set(sampleIndices(eligible, size));
  const sampled: EstimatedCall[][] = [];
  const heuristic = await estimateSet(store, set, target, {
    ...scope,
    onItemCalls: (c) => {
      if (picked.has(c.index)) sampled.push(c.calls);
    },
  });

  const signal = opts.signal ?? new AbortController().signal;
  let exact = 0;
  let guess = 0;
  let calls = 0;
  for (const item of sampled) {
    for (const call of item) {
      exact += await count(call.state, call.questions, { signal, explain: call.explain });
      guess += call.inputTokens;
      calls++;
    }
  }
  const ratio = guess > 0 ? exact / guess : null;
  return {
    ...heuristic,
    all: corrected(heuristic.all, ratio, target),
    unanswered: corrected(heuristic.unanswered, ratio, target),
    heuristic: { all: heuristic.all, unanswered: heuristic.unanswered },
    sample: {
      counter: counter.name,
      method: eligible <= size ? 'every item' : 'evenly spread',
      sampledItems: sampled.length,
      ofItems: heuristic.all.items,
      calls,
      exactInputTokens: exact,
      heuristicInputTokens: guess,
      ratio,
      heuristicErrorPct: calls > 0 && exact > 0 ? ((guess - exact) / exact) * 100 : null,
    },
  };
}

/** True for an estimate corrected by an exact count. */
export function isExactEstimate(e: SetEstimate): e is ExactSetEstimate {
  return (e as Partial<ExactSetEstimate>).sample !== undefined;
}

/**
 * The sample as one line for humans, e.g. `exact input count by anthropic: a sample of 50 of
 * 1,200 items (evenly spread), 50 calls: 41,200 tokens; the heuristic said ~49,440, 20.0 % over;
 * input tokens below are the heuristic's × 0.833`.
 */
export function formatSample(s: ExactSample): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const head = `exact input count by ${s.counter}`;
  if (s.calls === 0) return `${head}: no calls to count`;
  const which =
    s.method === 'every item'
      ? `every item (${n(s.sampledItems)} of ${n(s.ofItems)})`
      : `a sample of ${n(s.sampledItems)} of ${n(s.ofItems)} items (evenly spread)`;
  const off =
    s.heuristicErrorPct === null
      ? 'the heuristic cannot be compared with a count of 0'
      : `the heuristic said ~${n(s.heuristicInputTokens)}, ${Math.abs(s.heuristicErrorPct).toFixed(1)} % ${s.heuristicErrorPct >= 0 ? 'over' : 'under'}`;
  return `${head}: ${which}, ${n(s.calls)} calls: ${n(s.exactInputTokens)} tokens; ${off}; input tokens below are the heuristic's × ${s.ratio!.toFixed(3)}`;
}
