import { recordEvalResults, type KeyReport, type SetReport, type SpendFigures } from './eval-results.js';
import { argmax, questionFingerprint, type Answer, type Question } from '../decision/questions.js';
import { questionsOf, type QuestionMap, type QuestionSet, type Registry } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import type { BuiltState } from '../decision/state.js';
import { appliesNow } from '../decision/eligibility.js';
import { errCode, VerdictError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { ProviderMisconfigured, ProviderRefusal, AnswerDefect } from '../providers/errors.js';
import { batchCostOf, costOf, formatUsd, pricingFor, type Pricing } from '../providers/pricing.js';
import type { Provider, Usage } from '../providers/provider.js';
import type { DecisionReader, DecisionView } from '../reads/reads.js';
import { splitCommentKey } from '../reads/reads.js';
import { callEstimate, classify, LivenessLost } from '../runner/evaluate.js';
import { stateToAsk } from '../decision/as-of.js';
import { InvalidInput } from '../errors.js';
import { estimateOutputTokens, estimateSet, estimateTarget, sumWork, type WorkEstimate } from '../backfill/estimate.js';
import { CoAskTally } from '../backfill/co-ask-estimate.js';
import type { HumanVerdictRow } from '../store/verdicts.js';
import type { ItemForEvaluation } from '../store/store.js';
import type { ItemRow } from '../store/tracker-reads.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { QueueStore } from '../store/queue-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { Store } from '../store/whole-store.js';
import type { GoldRow } from './gold-set.js';
import { calibrate, scoreGold, type GoldScore, type GroupMetrics, type ScoredRow, type SetMetrics } from './metrics.js';

/**
 * `verdict eval` (DESIGN §8.3): a gold set's rows resolved in one workspace, a prediction for
 * each, and the metrics of `./metrics.ts`, with the calls, tokens and cost it took.
 *
 * Where a prediction comes from, per column:
 * - `stored`: the answer that is current now, as the reader (src/reads/reads.ts) judges it, under
 *   the fingerprint context the reader was built with. No call. A row with no current answer is
 *   unanswered, with the reader's reason (`state_changed`, `model_changed`, ...) or ours
 *   (`not_asked`, `pending`, `parked`, `not_applicable`).
 * - asked: the item's state for the set is built as the worker builds it (`setTargets`), only the
 *   gold keys are asked, split by the set's `maxPerCall` in sorted key order as the runner splits
 *   them, with the liveness check as the last statement before every send (DESIGN §1 principle 8).
 *
 * Always the MODEL's answer is scored: a person's override (DESIGN §8.1) is a label, never a
 * prediction, so a stored row is scored by the read's `modelAnswer`, never its `answer`.
 *
 * Asked answers are NOT stored in `item_decisions`: an evaluation must not change what readers
 * see (a second model's answers would even be current for nobody). Their spend IS recorded in
 * `decision_spend`, outcome `eval` (or `eval_failed` for a call that was sent and failed), under the
 * set's name, so `verdict status` and the daily cap's billed tokens count them: cost is never hidden.
 */

/** The spend outcome of an eval call that answered (decision_spend.outcome). */
const SPEND_EVAL = 'eval';
/** The spend outcome of an eval call that was sent and failed (refused, unavailable, a defective reply). */
const SPEND_EVAL_FAILED = 'eval_failed';
/** True for the spend outcomes eval calls are recorded under: `status` counts them apart from the worker's. */
export function isEvalSpendOutcome(outcome: string): boolean {
  return outcome === SPEND_EVAL || outcome === SPEND_EVAL_FAILED;
}

/** Why a gold row could not be placed at all (it is listed and counted, never scored). */
export type UnresolvedReason =
  /** No item with that ref in the workspace. */
  | 'unknown_ref'
  /** No question set of that name in this process. */
  | 'unknown_set'
  /** The set does not ask that key in the workspace (for per-comment sets: not `<key>@<commentId>`). */
  | 'unknown_key'
  /** The label does not fit the question: not true/false for a noul, not an option, not a level index. */
  | 'label_mismatch'
  /** The set's questions could not be read in the workspace (a failing `resolve`). */
  | 'questions_unreadable';

export interface UnresolvedRow {
  ref: string;
  set: string;
  key: string;
  /** The gold file's line, or the verdict's position for `--from-verdicts`. */
  line: number;
  reason: UnresolvedReason;
  /** A short explanation for people (names, never item text). */
  detail: string;
}

/**
 * Why a resolved row has no prediction (it counts in `n`, not in `answered`):
 * - `item_deleted`: the ref names a deleted item;
 * - `not_applicable`: the set does not apply to the item now (terminal, another collection, a deleted collection);
 * - `comment_gone`: a per-comment row whose comment is deleted;
 * - `state_unreadable`: the item's state cannot be built;
 * - stored only: `not_asked` (no answer, no job), `pending` (its job is owed), `parked`, or a
 *   reader's stale reason (`state_changed`, `question_changed`, `model_changed`, ...);
 * - asked only: `max_cost` (not asked: the next call would pass the cost limit), `aborted`,
 *   `item_gone` (deleted before the send), `questions_changed`, `over_budget` (the call's input
 *   exceeds the provider's input budget), or the failed call's outcome (`refused`, `unavailable`,
 *   `defect`, `misconfigured`).
 */
export type UnansweredReason = string;

/** Calls, tokens and cost of a column, a key or a set. A call that asked several keys counts once for each key it asked. */
export type { SpendFigures, KeyReport, SetReport } from './eval-results.js';

/** One column of the report: the predictions of one source and their figures. */
export interface EvalColumn {
  /** `stored` (answers in the database, no calls) or `asked` (a provider asked now). */
  mode: 'stored' | 'asked';
  /** Stored: the provider and model the reader judged currency against; asked: the provider asked. */
  provider: string;
  model: string;
  /** Why the cost is 0 or unknown, when it is (the fake provider costs nothing). */
  pricingNote: string | null;
  byKey: KeyReport[];
  bySet: SetReport[];
  /**
   * Every resolved row pooled (micro-averaged) as one group, with the column's calls, tokens and
   * cost: the figures of `SetMetrics` over the whole gold set, and the bins the reliability diagram draws.
   */
  overall: GroupMetrics & SpendFigures;
  /** Resolved rows without a prediction, by reason, and each of them. */
  unanswered: {
    count: number;
    byReason: Record<string, number>;
    rows: Array<{ ref: string; set: string; key: string; reason: UnansweredReason }>;
  };
  /** Asked only: what was estimated before the first call. */
  estimate: WorkEstimate | null;
  /** Asked only: the run stopped before a call that would have passed `maxCostUsd`. */
  stoppedAtMaxCost: boolean;
  /** Stored only: the provider:model of the answers scored, with how many rows each. */
  answeredBy: Record<string, number>;
}

/** A row both columns answered with different decisions. */
export interface DecisionDifference {
  ref: string;
  set: string;
  /** The gold row's key (the stored key for per-comment rows). */
  key: string;
  label: boolean | string | number;
  /** The decision, as a short text: `true (p=0.812)`, `bug (p=0.61)`, `2 medium (p=0.40)`. */
  a: string;
  b: string;
  /** Which column matches the label: `a`, `b` or null (neither). */
  correct: 'a' | 'b' | null;
}

/** What re-asking every live item the gold set's sets apply to would cost with model B. */
export interface ReaskEstimate {
  provider: string;
  model: string;
  pricingNote: string | null;
  /** Every workspace: a model switch re-asks them all. Each set counted as if asked alone. */
  sets: Array<{ set: string; eligibleItems: number } & WorkEstimate>;
  /**
   * Every set together, counted as a worker asks them: an item's sets reading byte-identical state
   * share one call (DESIGN §7.2, the runner's own packing rule through `CoAskTally`), at the live price.
   */
  total: WorkEstimate;
  /**
   * The total's price through Message Batches (DESIGN §7.3: a re-ask is owed at backfill
   * priority, which a worker batches with `--batch auto` or `on`), US dollars; null when B's
   * provider has no batch API or its model no price.
   */
  batchCostUsd: number | null;
}

export interface EvalReport {
  workspace: string;
  gold: {
    /** The gold file's path, or `verdicts in <workspace>`. */
    source: string;
    rows: number;
    resolved: number;
    unresolved: UnresolvedRow[];
    unresolvedByReason: Record<string, number>;
    /** `--from-verdicts`: labels given at a state other than the one the set reads now (the item moved since). */
    labelsAtOlderState: number | null;
  };
  a: EvalColumn;
  /** `compare`: the second column. */
  b: EvalColumn | null;
  /** `compare`: the rows both answered with different decisions, in gold order. */
  differences: DecisionDifference[] | null;
  /** `compare`: rows only one of the columns answered. */
  answeredByOneOnly: number | null;
  reask: ReaskEstimate | null;
  /** Always false: asked answers are never stored in item_decisions (their spend is). */
  answersStored: false;
}

/** Thrown before any call when the estimated cost is not confirmed (DESIGN §1 principle 10). */
export class EvalCostNotConfirmed extends VerdictError {
  readonly code = 'eval_cost_not_confirmed';
  constructor(
    message: string,
    readonly estimate: WorkEstimate,
  ) {
    super(message);
  }
}

/** How one column gets its predictions. */
export type ColumnSource =
  | { kind: 'stored'; reader: DecisionReader; judgedAgainst: { name: string; model: string } | null }
  | { kind: 'asked'; provider: Provider };

export interface RunEvalOptions {
  store: TrackerStore &
    QueueStore &
    DecisionStore &
    MetaStore &
    Pick<Store, 'answeredKeys' | 'checkLiveness' | 'loadItemForEvaluation' | 'recordSpend'>;
  registry: Registry;
  workspace: { id: string; slug: string };
  gold: { rows: GoldRow[]; source: string; labelsAtOlderState?: number | null };
  a: ColumnSource;
  b?: ColumnSource;
  /**
   * The most the asked calls may cost together, US dollars. A priced model needs it, at or above
   * the estimate, or nothing is asked (`EvalCostNotConfirmed`); during the run, the call that
   * would pass it (spent so far + its own estimate) is not sent, and neither is any after it.
   */
  maxCostUsd?: number;
  /** A model with no known price is asked only with this (the CLI's `--yes`): its cost cannot be estimated. */
  confirmUnpriced?: boolean;
  /** With `b`: estimate re-asking every live item the gold sets' sets apply to with B's model. @defaultValue true */
  reaskEstimate?: boolean;
  signal?: AbortSignal;
  logger?: Logger;
}

/** A gold row placed in the workspace. */
interface Resolved {
  gold: GoldRow;
  item: ItemRow;
  set: QuestionSet;
  /** The set's question key. */
  key: string;
  /** The stored key: `key`, or `key@commentId` for per-comment sets. */
  storedKey: string;
  commentId: string | null;
  question: Question;
  /** The state the set reads now, or the reason there is none (then it cannot be asked). */
  target: { state: BuiltState } | { reason: UnansweredReason };
}

/** One prediction source's results per resolved row (same order). */
interface ColumnRun {
  answers: Array<{ answer: Answer; by: string } | { reason: UnansweredReason }>;
  perRow: Usage[];
  calls: Array<Set<string>>; // per row: ids of the calls that asked it
  estimate: WorkEstimate | null;
  stoppedAtMaxCost: boolean;
}

const ZERO_USAGE: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };

/**
 * Resolves the gold rows, gets each column's predictions and scores them (see the module comment).
 * @throws EvalCostNotConfirmed before any call when the estimated cost is not confirmed.
 * @throws ProviderMisconfigured when a provider says it is misconfigured (401, unknown model):
 *   every further call would fail alike; calls already made keep their recorded spend.
 * @throws what the store throws.
 */
export async function runEval(o: RunEvalOptions): Promise<EvalReport> {
  const logger = o.logger ?? silentLogger;
  const { resolved, unresolved, unresolvedByReason } = await resolveGold(
    o.store,
    o.registry,
    o.workspace.id,
    o.gold.rows,
    logger,
  );

  if (o.maxCostUsd !== undefined && !(Number.isFinite(o.maxCostUsd) && o.maxCostUsd >= 0)) {
    throw new InvalidInput('maxCostUsd must be a finite number of US dollars, 0 or more');
  }
  const asked = [o.a, o.b].filter((c): c is Extract<ColumnSource, { kind: 'asked' }> => c?.kind === 'asked');
  // A set with maxAge is asked at its state dated today, as the worker asks it (DESIGN §5.2).
  const nowMs = asked.length > 0 ? await o.store.now() : 0;
  const plans = asked.map((c) => planCalls(resolved, c.provider, nowMs));
  guardCost(plans, asked, o);

  const budget = { spentUsd: 0, limitUsd: o.maxCostUsd, stopped: false };
  const runColumn = async (c: ColumnSource): Promise<ColumnRun> =>
    c.kind === 'stored'
      ? storedColumn(o.store, c.reader, resolved)
      : askColumn(o.store, c.provider, resolved, plans[asked.indexOf(c)], budget, o.signal, logger);
  const a = await runColumn(o.a);
  const b = o.b ? await runColumn(o.b) : null;

  const colA = column(o.a, resolved, a);
  const colB = o.b && b ? column(o.b, resolved, b) : null;
  let differences: DecisionDifference[] | null = null;
  let oneOnly: number | null = null;
  if (b) {
    differences = [];
    oneOnly = 0;
    for (let i = 0; i < resolved.length; i++) {
      const x = a.answers[i];
      const y = b.answers[i];
      const hasX = 'answer' in x;
      const hasY = 'answer' in y;
      if (hasX !== hasY) oneOnly++;
      if (!hasX || !hasY) continue;
      const r = resolved[i];
      const dx = decisionOf(x.answer, r.set.threshold);
      const dy = decisionOf(y.answer, r.set.threshold);
      if (dx.value === dy.value) continue;
      const label = r.gold.label;
      differences.push({
        ref: r.gold.ref,
        set: r.set.name,
        key: r.storedKey,
        label,
        a: dx.text,
        b: dy.text,
        correct: dx.value === label ? 'a' : dy.value === label ? 'b' : null,
      });
    }
  }
  let reask: ReaskEstimate | null = null;
  if (o.b?.kind === 'asked' && o.reaskEstimate !== false) reask = await reaskEstimate(o.store, resolved, o.b.provider);
  const report: EvalReport = {
    workspace: o.workspace.slug,
    gold: {
      source: o.gold.source,
      rows: o.gold.rows.length,
      resolved: resolved.length,
      unresolved,
      unresolvedByReason,
      labelsAtOlderState: o.gold.labelsAtOlderState ?? null,
    },
    a: colA,
    b: colB,
    differences,
    answeredByOneOnly: oneOnly,
    reask,
    answersStored: false,
  };
  // The dashboard's quality page reads the latest figures per set (eval/eval-results.ts). A failed
  // write costs the page its latest figures, never the report the caller waits for.
  try {
    await recordEvalResults(o.store, o.workspace.id, report);
  } catch (err) {
    logger.warn({ workspace: o.workspace.slug, err: errCode(err) }, 'eval: result not recorded');
  }
  return report;
}

// ------------------------------------------------------------------ resolving

/** Places each gold row: the item, the set, the question, the label's fit, and the state the set reads now. */
async function resolveGold(
  store: Pick<TrackerReads, 'getItemByRef' | 'listCollections' | 'listItems'> & Pick<Store, 'loadItemForEvaluation'>,
  registry: Registry,
  workspaceId: string,
  rows: readonly GoldRow[],
  logger: Logger,
): Promise<{ resolved: Resolved[]; unresolved: UnresolvedRow[]; unresolvedByReason: Record<string, number> }> {
  const resolved: Resolved[] = [];
  const unresolved: UnresolvedRow[] = [];
  const questions = new Map<string, QuestionMap | null>();
  const items = new Map<string, ItemRow | null>();
  const loadedItems = new Map<string, ItemForEvaluation | null>();
  const miss = (g: GoldRow, reason: UnresolvedReason, detail: string) =>
    unresolved.push({ ref: g.ref, set: g.set, key: g.key, line: g.line, reason, detail });

  for (const g of rows) {
    const set = registry.get(g.set);
    if (!set) {
      miss(
        g,
        'unknown_set',
        `no question set "${g.set}" (known: ${registry
          .all()
          .map((s) => s.name)
          .join(', ')})`,
      );
      continue;
    }
    if (!items.has(g.ref)) items.set(g.ref, await store.getItemByRef(workspaceId, g.ref));
    const item = items.get(g.ref)!;
    if (!item) {
      miss(g, 'unknown_ref', `no item "${g.ref}" in the workspace`);
      continue;
    }
    if (!questions.has(set.name)) {
      try {
        questions.set(set.name, await questionsOf(set, { workspaceId, store, logger }));
      } catch (err) {
        logger.warn({ set: set.name, err: errCode(err) }, 'eval: questions could not be read');
        questions.set(set.name, null);
      }
    }
    const qs = questions.get(set.name)!;
    if (!qs) {
      miss(g, 'questions_unreadable', `the questions of set "${set.name}" could not be read`);
      continue;
    }
    let key = g.key;
    let commentId: string | null = null;
    if (set.perComment) {
      const split = splitCommentKey(g.key);
      if (!split) {
        miss(g, 'unknown_key', `set "${set.name}" asks per comment: a key is <key>@<commentId>`);
        continue;
      }
      key = split.key;
      commentId = split.commentId;
    }
    const q = Object.prototype.hasOwnProperty.call(qs, key) ? qs[key] : undefined;
    if (!q) {
      miss(g, 'unknown_key', `set "${set.name}" asks no key "${key}" in this workspace`);
      continue;
    }
    const misfit = labelMisfit(q, g.label);
    if (misfit) {
      miss(g, 'label_mismatch', misfit);
      continue;
    }
    if (!loadedItems.has(item.id)) loadedItems.set(item.id, await store.loadItemForEvaluation(item.id));
    resolved.push({
      gold: g,
      item,
      set,
      key,
      storedKey: g.key,
      commentId,
      question: q,
      target: targetOf(set, loadedItems.get(item.id)!, commentId),
    });
  }
  const unresolvedByReason: Record<string, number> = {};
  for (const u of unresolved) unresolvedByReason[u.reason] = (unresolvedByReason[u.reason] ?? 0) + 1;
  return { resolved, unresolved, unresolvedByReason };
}

/** Why a label does not fit its question, or null when it does. */
function labelMisfit(q: Question, label: GoldRow['label']): string | null {
  if (q.kind === 'noul') return typeof label === 'boolean' ? null : 'a noul label is true or false';
  if (q.kind === 'choice') {
    if (typeof label !== 'string') return 'a choice label is an option name';
    return Object.prototype.hasOwnProperty.call(q.options, label)
      ? null
      : `"${label}" is not an option (${Object.keys(q.options).sort().join(', ')})`;
  }
  if (typeof label !== 'number' || !Number.isInteger(label)) return 'a score label is an integer level index';
  return label >= 0 && label < q.levels.length ? null : `level index ${label} is outside 0..${q.levels.length - 1}`;
}

/** The state a set reads for the row now, as the runner builds it, or why there is none. */
function targetOf(set: QuestionSet, loaded: ItemForEvaluation | null, commentId: string | null): Resolved['target'] {
  if (!loaded || loaded.item.deletedAt !== null) return { reason: 'item_deleted' };
  if (loaded.collection.deletedAt !== null || loaded.workspace.deletedAt !== null) return { reason: 'not_applicable' };
  let applies: boolean;
  try {
    applies = appliesNow(set, loaded.item, loaded.collection);
  } catch {
    return { reason: 'state_unreadable' };
  }
  if (!applies) return { reason: 'not_applicable' };
  try {
    // A gold row may name any live comment, not only the newest 10 the worker asks about.
    const targets = setTargets(set, loaded, { allComments: true });
    const t = targets.find((x) => x.commentId === commentId);
    return t ? { state: t.state } : { reason: commentId === null ? 'state_unreadable' : 'comment_gone' };
  } catch {
    return { reason: 'state_unreadable' };
  }
}

// ------------------------------------------------------------------ stored answers

async function storedColumn(
  store: Pick<QueueStore, 'getJob'>,
  reader: DecisionReader,
  resolved: readonly Resolved[],
): Promise<ColumnRun> {
  const views = new Map<string, DecisionView[]>();
  const answers: ColumnRun['answers'] = [];
  for (const r of resolved) {
    if (!views.has(r.item.id)) views.set(r.item.id, await reader.decisions(r.item.id));
    const v = views.get(r.item.id)!.find((d) => d.questionSet === r.set.name && d.questionKey === r.storedKey);
    // The model's own answer, never a person's override (DESIGN §8.1): `answer` may be the person's.
    const own = v ? v.modelAnswer : null;
    if (v && own && v.current) {
      answers.push({ answer: own, by: `${v.provider}:${v.model}` });
      continue;
    }
    if (v && own && v.staleReason) {
      answers.push({ reason: v.staleReason });
      continue;
    }
    if ('reason' in r.target) {
      answers.push({ reason: r.target.reason });
      continue;
    }
    const job = await store.getJob(r.item.id, r.set.name);
    answers.push({ reason: job?.state === 'parked' ? 'parked' : job ? 'pending' : 'not_asked' });
  }
  return {
    answers,
    perRow: resolved.map(() => ZERO_USAGE),
    calls: resolved.map(() => new Set()),
    estimate: null,
    stoppedAtMaxCost: false,
  };
}

// ------------------------------------------------------------------ asking

/** One call: rows (indexes into the resolved list) of one (item, set, state), at most `maxPerCall` keys. */
interface PlannedCall {
  rows: number[];
  set: QuestionSet;
  item: ItemRow;
  state: BuiltState;
  questions: Map<string, Question>;
  estimate: { inputTokens: number; outputTokens: number; costUsd: number | null };
  /** The call's price with its whole output ceiling (`max_tokens`): what the in-run max-cost check counts. */
  worstCostUsd: number | null;
}

interface CallPlan {
  calls: PlannedCall[];
  /** Rows that cannot be asked, with why. */
  skipped: Map<number, UnansweredReason>;
  estimate: WorkEstimate;
  pricing: Pricing;
}

/** Groups the askable rows by (item, set, state) and splits each group as the runner does: sorted keys, `maxPerCall`. */
function planCalls(resolved: readonly Resolved[], provider: Provider, nowMs: number): CallPlan {
  const pricing = pricingFor(provider.name, provider.model);
  const skipped = new Map<number, UnansweredReason>();
  const groups = new Map<string, number[]>();
  resolved.forEach((r, i) => {
    if ('reason' in r.target) {
      skipped.set(i, r.target.reason);
      return;
    }
    const id = JSON.stringify([r.item.id, r.set.name, r.commentId]);
    groups.set(id, [...(groups.get(id) ?? []), i]);
  });
  const calls: PlannedCall[] = [];
  const items = new Set<string>();
  for (const idx of groups.values()) {
    const first = resolved[idx[0]];
    const state = stateToAsk((first.target as { state: BuiltState }).state, first.set, nowMs);
    const sorted = [...idx].sort((x, y) =>
      resolved[x].key < resolved[y].key ? -1 : resolved[x].key > resolved[y].key ? 1 : 0,
    );
    for (let i = 0; i < sorted.length; i += first.set.maxPerCall) {
      const part = sorted.slice(i, i + first.set.maxPerCall);
      const questions = new Map(part.map((j) => [resolved[j].key, resolved[j].question] as const));
      const { inputTokens, maxOutputTokens } = callEstimate(questions, state.bytes, first.set.explain);
      const outputTokens = estimateOutputTokens(questions, first.set.explain);
      calls.push({
        rows: part,
        set: first.set,
        item: first.item,
        state,
        questions,
        estimate: { inputTokens, outputTokens, costUsd: costOf(pricing, { inputTokens, outputTokens }) },
        worstCostUsd: costOf(pricing, { inputTokens, outputTokens: maxOutputTokens }),
      });
      items.add(first.item.id);
    }
  }
  const estimate: WorkEstimate = {
    items: items.size,
    calls: calls.length,
    questions: calls.reduce((s, c) => s + c.questions.size, 0),
    inputTokens: calls.reduce((s, c) => s + c.estimate.inputTokens, 0),
    outputTokens: calls.reduce((s, c) => s + c.estimate.outputTokens, 0),
    costUsd: 0,
  };
  estimate.costUsd = costOf(pricing, estimate);
  return { calls, skipped, estimate, pricing };
}

/** Refuses, before any call, what is not confirmed: a priced model beyond `maxCostUsd`, an unpriced one without `confirmUnpriced`. */
function guardCost(plans: readonly CallPlan[], asked: ReadonlyArray<{ provider: Provider }>, o: RunEvalOptions): void {
  const total = sumWork(plans.map((p) => p.estimate));
  if (total.calls === 0) return;
  const to = asked.map((c) => `${c.provider.name}:${c.provider.model}`).join(' and ');
  const line = `${total.calls} calls to ${to}, ~${total.inputTokens.toLocaleString('en-US')} input / ~${total.outputTokens.toLocaleString('en-US')} output tokens`;
  const unpriced = plans
    .map((p, i) => (p.pricing.kind === 'unknown' ? `${asked[i].provider.name}:${asked[i].provider.model}` : null))
    .filter((x): x is string => x !== null);
  if (unpriced.length && !o.confirmUnpriced) {
    throw new EvalCostNotConfirmed(
      `eval would send ${line}; ${unpriced.join(', ')} has no price in Verdict's price table, so the cost cannot be estimated or bounded; rerun with --yes to ask anyway`,
      total,
    );
  }
  const priced = plans.some((p) => p.pricing.kind === 'priced');
  if (!priced) return;
  const est = total.costUsd ?? plans.reduce((s, p) => s + (p.estimate.costUsd ?? 0), 0);
  if (o.maxCostUsd === undefined) {
    throw new EvalCostNotConfirmed(
      `eval would send ${line}, estimated ${formatUsd(est)}; rerun with --max-cost USD at or above the estimate to ask`,
      total,
    );
  }
  if (est > o.maxCostUsd) {
    throw new EvalCostNotConfirmed(
      `eval would send ${line}, estimated ${formatUsd(est)}, above --max-cost ${formatUsd(o.maxCostUsd)}; nothing was asked`,
      total,
    );
  }
}

/** Asks every planned call in order, within the shared budget; records each sent call's spend. */
async function askColumn(
  store: Pick<TrackerReads, 'listCollections' | 'listItems'> & Pick<Store, 'checkLiveness' | 'recordSpend'>,
  provider: Provider,
  resolved: readonly Resolved[],
  plan: CallPlan,
  budget: { spentUsd: number; limitUsd?: number; stopped: boolean },
  signal: AbortSignal | undefined,
  logger: Logger,
): Promise<ColumnRun> {
  const answers: ColumnRun['answers'] = resolved.map((_, i) => ({ reason: plan.skipped.get(i) ?? 'not_asked' }));
  const perRow: Usage[] = resolved.map(() => ({ ...ZERO_USAGE }));
  const calls: Array<Set<string>> = resolved.map(() => new Set());
  const abort = signal ?? new AbortController().signal;
  let stoppedAtMaxCost = false;
  for (const [n, call] of plan.calls.entries()) {
    const unasked = (reason: string) => call.rows.forEach((i) => (answers[i] = { reason }));
    if (abort.aborted) {
      unasked('aborted');
      continue;
    }
    // The bound counts the call's whole output ceiling, so an answer longer than the typical one
    // cannot carry the spend past max-cost (input is the estimate: the provider's count may differ).
    if (
      budget.stopped ||
      (budget.limitUsd !== undefined && budget.spentUsd + (call.worstCostUsd ?? 0) > budget.limitUsd)
    ) {
      budget.stopped = true;
      stoppedAtMaxCost = true;
      unasked('max_cost');
      continue;
    }
    const fingerprints = new Map([...call.questions].map(([k, q]) => [k, questionFingerprint(q, provider)]));
    // The last statement before every send (DESIGN §1 principle 8): a deleted item or workspace is
    // never sent, and a resolved set's reworded or retired question is not asked in its old words.
    const liveness = async () => {
      const l = await store.checkLiveness(call.item.id);
      if (l !== 'live') throw new LivenessLost(l);
      if (call.set.resolve) {
        const now = await questionsOf(call.set, { workspaceId: call.item.workspaceId, store, logger });
        for (const [key, fp] of fingerprints) {
          const cur = now[key];
          if (!cur || questionFingerprint(cur, provider) !== fp) throw new LivenessLost('questions_changed');
        }
      }
    };
    let result;
    try {
      await liveness();
      result = await provider.ask(call.state.bytes, call.questions, {
        signal: abort,
        beforeSend: liveness,
        explain: call.set.explain,
      });
    } catch (err) {
      if (err instanceof LivenessLost) {
        unasked(err.liveness);
        continue;
      }
      if (err instanceof ProviderRefusal && err.code === 'input_over_budget') {
        unasked('over_budget'); // refused before any request: nothing was sent or billed
        continue;
      }
      const usage = err instanceof AnswerDefect && err.usage ? err.usage : ZERO_USAGE;
      await recordEvalSpend(store, call.set.name, provider, SPEND_EVAL_FAILED, usage, logger);
      budget.spentUsd += costOf(plan.pricing, usage) ?? 0;
      const callId = `${n}`;
      call.rows.forEach((i, j) => {
        addUsage(perRow[i], shareOf(usage, call.rows.length, j));
        calls[i].add(callId);
      });
      if (err instanceof ProviderMisconfigured) throw err;
      const outcome = classify(err, abort, provider.retryAfterCapMs);
      unasked(
        abort.aborted
          ? 'aborted'
          : err instanceof AnswerDefect
            ? 'defect'
            : outcome.kind === 'refuse'
              ? 'refused'
              : outcome.kind === 'misconfigured'
                ? 'misconfigured'
                : 'unavailable',
      );
      continue;
    }
    await recordEvalSpend(store, call.set.name, provider, SPEND_EVAL, result.usage, logger);
    budget.spentUsd += costOf(plan.pricing, result.usage) ?? 0;
    call.rows.forEach((i, j) => {
      const a = result.answers.get(resolved[i].key);
      answers[i] = a ? { answer: a.answer, by: `${provider.name}:${result.responseModel}` } : { reason: 'defect' };
      addUsage(perRow[i], shareOf(result.usage, call.rows.length, j));
      calls[i].add(`${n}`);
    });
  }
  return { answers, perRow, calls, estimate: plan.estimate, stoppedAtMaxCost };
}

/** Records one eval call's spend; a store failure is logged, never thrown (the answers are in hand). */
async function recordEvalSpend(
  store: Pick<Store, 'recordSpend'>,
  questionSet: string,
  provider: Provider,
  outcome: string,
  usage: Usage,
  logger: Logger,
): Promise<void> {
  try {
    await store.recordSpend({ questionSet, provider: provider.name, model: provider.model, outcome, calls: 1, usage });
  } catch (err) {
    logger.warn({ set: questionSet, err: errCode(err) }, 'eval: spend record failed');
  }
}

/** Row j's share of a call's usage over n rows: split evenly, the remainder to the first rows (as the runner splits it). */
function shareOf(u: Usage, n: number, j: number): Usage {
  const share = (total: number) => Math.floor(total / n) + (j < total % n ? 1 : 0);
  return {
    inputTokens: share(u.inputTokens),
    outputTokens: share(u.outputTokens),
    cacheReadTokens: share(u.cacheReadTokens),
    cacheWriteTokens: share(u.cacheWriteTokens),
  };
}

function addUsage(to: Usage, u: Usage): void {
  to.inputTokens += u.inputTokens;
  to.outputTokens += u.outputTokens;
  to.cacheReadTokens += u.cacheReadTokens;
  to.cacheWriteTokens += u.cacheWriteTokens;
}

// ------------------------------------------------------------------ scoring and the report

function column(source: ColumnSource, resolved: readonly Resolved[], run: ColumnRun): EvalColumn {
  const scored: ScoredRow[] = resolved.map((r, i) => {
    const a = run.answers[i];
    return {
      set: r.set.name,
      key: r.key,
      kind: r.question.kind,
      label: r.gold.label,
      answer: 'answer' in a ? a.answer : null,
      threshold: r.set.threshold,
    };
  });
  const score: GoldScore = scoreGold(scored);
  // The whole gold set as one group; keys stay apart per set, so two sets' same-named keys never clash.
  const pooled = scoreGold(scored.map((r) => ({ ...r, set: '*', key: `${r.set}/${r.key}` }))).bySet[0];
  const name = source.kind === 'asked' ? source.provider.name : (source.judgedAgainst?.name ?? 'unconfigured');
  const model = source.kind === 'asked' ? source.provider.model : (source.judgedAgainst?.model ?? '');
  const pricing: Pricing =
    source.kind === 'asked' ? pricingFor(name, model) : { kind: 'free', reason: 'stored answers: no call was made' };
  const figures = (rows: number[]): SpendFigures => {
    const u = { ...ZERO_USAGE };
    const ids = new Set<string>();
    for (const i of rows) {
      addUsage(u, run.perRow[i]);
      for (const c of run.calls[i]) ids.add(`${resolved[i].set.name}\u0000${c}`);
    }
    return { calls: ids.size, ...u, costUsd: costOf(pricing, u) };
  };
  const rowsOf = (pred: (r: Resolved) => boolean) => resolved.flatMap((r, i) => (pred(r) ? [i] : []));
  // Per key, a call counts once for each key it asked; per set and in total, once.
  const byKey = score.byKey.map((k) => ({ ...k, ...figures(rowsOf((r) => r.set.name === k.set && r.key === k.key)) }));
  const bySet = score.bySet.map((s) => ({ ...s, ...figures(rowsOf((r) => r.set.name === s.set)) }));
  const all = figures(resolved.map((_, i) => i));
  const calls = new Set(resolved.flatMap((_, i) => [...run.calls[i]]));
  const byReason: Record<string, number> = {};
  const unansweredRows: EvalColumn['unanswered']['rows'] = [];
  const answeredBy: Record<string, number> = {};
  resolved.forEach((r, i) => {
    const a = run.answers[i];
    if ('answer' in a) {
      answeredBy[a.by] = (answeredBy[a.by] ?? 0) + 1;
      return;
    }
    byReason[a.reason] = (byReason[a.reason] ?? 0) + 1;
    unansweredRows.push({ ref: r.gold.ref, set: r.set.name, key: r.storedKey, reason: a.reason });
  });
  return {
    mode: source.kind,
    provider: name,
    model,
    pricingNote: pricing.kind === 'priced' ? null : pricing.reason,
    byKey,
    bySet,
    overall: { ...groupOf(pooled, resolved.length), ...all, calls: calls.size },
    unanswered: { count: unansweredRows.length, byReason, rows: unansweredRows },
    estimate: run.estimate,
    stoppedAtMaxCost: run.stoppedAtMaxCost,
    answeredBy: source.kind === 'stored' ? answeredBy : {},
  };
}

/** The GroupMetrics part of a pooled SetMetrics (or an empty group when nothing was resolved). */
function groupOf(s: SetMetrics | undefined, n: number): GroupMetrics {
  if (!s) {
    const { bins } = calibrate([]);
    return {
      n,
      answered: 0,
      correct: 0,
      accuracy: null,
      tp: 0,
      fp: 0,
      fn: 0,
      tn: 0,
      precision: null,
      recall: null,
      f1: null,
      brier: null,
      ece: null,
      bins,
      calibrationBasis: null,
    };
  }
  const { set: _set, keys: _keys, kinds: _kinds, ...g } = s;
  return g;
}

/** An answer's decision (what is compared between columns and with the label) and a short text. */
function decisionOf(a: Answer, threshold: number): { value: boolean | string | number; text: string } {
  if (a.type === 'noul') {
    const v = a.noul >= threshold;
    return { value: v, text: `${v} (p=${a.noul.toFixed(3)})` };
  }
  if (a.type === 'choice')
    return { value: a.choice, text: `${a.choice} (p=${(a.probabilities[a.choice] ?? 0).toFixed(2)})` };
  const n = Object.keys(a.legend).length;
  const values = Array.from({ length: n }, (_, i) => a.probabilities[String(i)] ?? 0);
  const level = argmax(values);
  return { value: level, text: `${level} ${a.legend[String(level)]} (p=${values[level].toFixed(2)})` };
}

/** The price of re-asking, with B's model, every live item of every workspace that each gold set's set applies to. */
async function reaskEstimate(
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
  resolved: readonly Resolved[],
  provider: Provider,
): Promise<ReaskEstimate> {
  const target = estimateTarget(provider.name, provider.model, {
    model: provider.model,
    promptVersion: provider.promptVersion,
    effort: provider.effort,
  });
  const sets = [...new Map(resolved.map((r) => [r.set.name, r.set])).values()].sort((x, y) =>
    x.name < y.name ? -1 : 1,
  );
  const out: ReaskEstimate['sets'] = [];
  const tally = new CoAskTally();
  for (const s of sets) {
    const e = await estimateSet(store, s, target, { onItemCalls: (c) => tally.add(s, c) });
    out.push({ set: s.name, eligibleItems: e.eligibleItems, ...e.all });
  }
  const total = tally.total(target.pricing).all;
  return {
    provider: target.provider,
    model: target.fingerprint.model,
    pricingNote: target.pricing.kind === 'priced' ? null : target.pricing.reason,
    sets: out,
    total,
    batchCostUsd: provider.batch && target.pricing.kind === 'priced' ? batchCostOf(target.pricing, total) : null,
  };
}

// ------------------------------------------------------------------ labels from human verdicts

/**
 * The label a verdict's value gives: noul → `noul ≥ threshold` (the set's: what the value surfaces
 * as); choice → its option; score → its picked level index. Null when unreadable.
 */
export function labelOfValue(value: string, threshold: number): boolean | string | number | null {
  let a: Answer;
  try {
    a = JSON.parse(value) as Answer;
  } catch {
    return null;
  }
  if (a?.type === 'noul' && typeof a.noul === 'number') return a.noul >= threshold;
  if (a?.type === 'choice' && typeof a.choice === 'string') return a.choice;
  if (a?.type === 'score' && a.probabilities && a.legend) {
    const n = Object.keys(a.legend).length;
    return argmax(Array.from({ length: n }, (_, i) => a.probabilities[String(i)] ?? 0));
  }
  return null;
}

/**
 * A gold set from the human verdicts of a workspace (DESIGN §8.1, §8.3): the latest verdict per
 * (item, set, key), skipping `withdrawn` ones and those without a value; `line` is the position in
 * that list (1-based). Also counts the labels given at a state other than the one the set reads now.
 */
export async function goldFromVerdicts(
  store: Pick<HumanVerdictStore, 'listVerdicts'> & Pick<Store, 'loadItemForEvaluation'>,
  registry: Registry,
  workspaceId: string,
): Promise<{ rows: GoldRow[]; labelsAtOlderState: number }> {
  const latest = new Map<string, HumanVerdictRow>();
  for (const v of await store.listVerdicts({ workspaceId }))
    latest.set(JSON.stringify([v.itemId, v.questionSet, v.questionKey]), v); // oldest first: the last wins
  const rows: GoldRow[] = [];
  let older = 0;
  const loaded = new Map<string, ItemForEvaluation | null>();
  for (const v of latest.values()) {
    if (v.verdict === 'withdrawn' || v.value === null) continue;
    const set = registry.get(v.questionSet);
    const label = labelOfValue(v.value, set?.threshold ?? 0.5);
    if (label === null) continue;
    if (!loaded.has(v.itemId)) loaded.set(v.itemId, await store.loadItemForEvaluation(v.itemId));
    const l = loaded.get(v.itemId)!;
    if (!l) continue;
    if (set) {
      const split = set.perComment ? splitCommentKey(v.questionKey) : null;
      const t = targetOf(set, l, split?.commentId ?? null);
      if ('state' in t && t.state.hash !== v.stateHash) older++;
    }
    rows.push({ ref: l.item.ref, set: v.questionSet, key: v.questionKey, label, line: rows.length + 1 });
  }
  return { rows, labelsAtOlderState: older };
}

// ------------------------------------------------------------------ the library's door

/** What `verdict.eval(...)` takes (src/compose/verdict.ts). */
export interface EvalOptions {
  /** Workspace slug. */
  workspace: string;
  /** The labelled rows (`parseGoldSet` / `readGoldSet`), or `'verdicts'`: the workspace's human verdicts. */
  gold: readonly GoldRow[] | 'verdicts';
  /** Score the stored answers that are current now (no calls) instead of asking the provider. @defaultValue false */
  stored?: boolean;
  /** A second model: a model id of the same provider, or a Provider object; asked on the same rows, side by side. */
  compare?: string | Provider;
  /** See `RunEvalOptions.maxCostUsd`. */
  maxCostUsd?: number;
  /** See `RunEvalOptions.confirmUnpriced`. */
  confirmUnpriced?: boolean;
  /** With `compare`: estimate re-asking every live item with the second model. @defaultValue true */
  reaskEstimate?: boolean;
  signal?: AbortSignal;
}

/** Raised by `verdict.eval` for an option it cannot use (an unknown workspace, nothing to ask with). */
export class EvalUnavailable extends VerdictError {
  readonly code = 'eval_unavailable';
}

/**
 * `verdict.eval(opts)`: resolves the workspace and the gold rows, then `runEval` with the stored
 * answers (judged by `reader`) or the provider as column A, and `compare` as column B.
 * @param makeProvider builds a provider of the same kind with another model (for a string `compare`).
 * @throws EvalUnavailable for an unknown workspace, no provider to ask, or no verdicts to use.
 * @throws what `runEval` throws (EvalCostNotConfirmed, ProviderMisconfigured, store errors).
 */
export async function evalWorkspace(
  deps: {
    store: TrackerStore &
      QueueStore &
      DecisionStore &
      MetaStore &
      HumanVerdictStore &
      Pick<Store, 'answeredKeys' | 'checkLiveness' | 'loadItemForEvaluation' | 'recordSpend'>;
    registry: Registry;
    provider: Provider | null;
    reader: () => Promise<DecisionReader>;
    makeProvider: (model: string) => Provider | null;
    logger?: Logger;
  },
  opts: EvalOptions,
): Promise<EvalReport> {
  const ws = await deps.store.getWorkspaceBySlug(opts.workspace);
  if (!ws || ws.deletedAt !== null) throw new EvalUnavailable(`no workspace "${opts.workspace}"`);
  const gold =
    opts.gold === 'verdicts'
      ? { ...(await goldFromVerdicts(deps.store, deps.registry, ws.id)), source: `verdicts in ${ws.slug}` }
      : { rows: [...opts.gold], source: 'gold rows' };
  if (gold.rows.length === 0)
    throw new EvalUnavailable(
      opts.gold === 'verdicts' ? `workspace ${ws.slug} has no human verdicts with a value yet` : 'no gold rows',
    );
  let a: ColumnSource;
  if (opts.stored) {
    a = {
      kind: 'stored',
      reader: await deps.reader(),
      judgedAgainst: deps.provider ? { name: deps.provider.name, model: deps.provider.model } : null,
    };
  } else {
    if (!deps.provider)
      throw new EvalUnavailable(
        'provider is none: there is no model to ask (pass stored: true to score stored answers)',
      );
    a = { kind: 'asked', provider: deps.provider };
  }
  let b: ColumnSource | undefined;
  let made: Provider | null = null;
  if (opts.compare !== undefined) {
    const p = typeof opts.compare === 'string' ? (made = deps.makeProvider(opts.compare)) : opts.compare;
    if (!p) throw new EvalUnavailable('compare: no provider of the configured kind to ask the second model with');
    b = { kind: 'asked', provider: p };
  }
  try {
    return await runEval({
      store: deps.store,
      registry: deps.registry,
      workspace: ws,
      gold,
      a,
      b,
      maxCostUsd: opts.maxCostUsd,
      confirmUnpriced: opts.confirmUnpriced,
      reaskEstimate: opts.reaskEstimate,
      signal: opts.signal,
      logger: deps.logger,
    });
  } finally {
    await made?.close?.();
  }
}
