import {
  fingerprintContextText,
  questionFingerprint,
  sameFingerprintContext,
  type FingerprintContext,
  type Question,
} from '../decision/questions.js';
import type { SpendBacklog } from './spend-backlog.js';
import type { QuestionSet, Registry } from '../decision/registry.js';
import { questionsOf } from '../decision/registry.js';
import { setTargets, type ItemStates, type SetTarget } from '../decision/set-states.js';
import { answeredNowOfSets, type SetWanted, type TargetWork } from './answered.js';
import type { BuiltState } from '../decision/state.js';
import {
  AnswerDefect,
  ProviderError,
  ProviderMisconfigured,
  ProviderRefusal,
  ProviderUnavailable,
  SchemaRejected,
} from '../providers/errors.js';
import { DEFAULT_RETRY_POLICY } from '../providers/retry.js';
import { estimatePromptTokens, maxTokensFor } from '../providers/prompt.js';
import { estimateTokens, type AskResult, type Provider, type Usage } from '../providers/provider.js';
import type { SurfacingContext } from '../store/events.js';
import type { Claim, ItemForEvaluation, JobFinish, Liveness, NewDecision, SpendRecord } from '../store/store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { SpendStore } from '../store/spend-store.js';
import type { Store } from '../store/whole-store.js';
import type { Logger } from '../log.js';
import { appliesNow } from '../decision/eligibility.js';
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS } from './backoff.js';
import { emptyStats, type EvalOutcome, type EvalStats } from './outcome.js';
import { ownCode, VerdictError } from '../errors.js';
import { errCode } from './error-code.js';

/** Everything one evaluation needs. */
export interface EvaluateDeps {
  store: Pick<TrackerStore, 'listCollections' | 'listItems' | 'now'> &
    Pick<DecisionStore, 'listDecisions'> &
    Pick<SpendStore, 'settleSpendReservation'> &
    Pick<
      Store,
      | 'answeredKeys'
      | 'answeredKeysOfSets'
      | 'checkClaim'
      | 'checkClaims'
      | 'checkLiveness'
      | 'insertDecisions'
      | 'loadItemForEvaluation'
      | 'recordSpend'
      | 'renewLease'
    >;
  registry: Registry;
  provider: Provider;
  logger: Logger;
  /** Lease renewed before each call, milliseconds. */
  leaseMs: number;
  /** Cancels the in-flight call (shutdown, reload). */
  signal: AbortSignal;
  /**
   * Takes the rate-limiter and spend-cap permits for one call (see `PermitRequest`): a grant, with
   * the daily-cap reservation to settle after the call, or a delay after which to try again (the
   * job defers without counting an attempt).
   */
  acquirePermit?: (req: PermitRequest) => Promise<Permit>;
  /** Test-only seam: runs immediately before the final liveness check of each call (DESIGN §7b). */
  beforeAsk?: (ctx: { claim: Claim; keys: string[] }) => Promise<void> | void;
  /**
   * Hand the last call's answers and spend back (`Evaluation.finish`) instead of storing them, so
   * the runner stores them in the completion's transaction (`Store.finishJob`). Only the last
   * call of a job that then completes is handed back; every earlier call's answers are stored at
   * once, as DESIGN §7 step 6 asks.
   */
  finishInCompletion?: boolean;
  /** Where the spend of a call goes when its write fails, to be written later (`SpendBacklog`); without it the failure is only logged. */
  spendBacklog?: SpendBacklog;
  /** Called once with each spend record this evaluation writes, as it is written, even when the write fails (the call happened). */
  onSpend?: (r: SpendRecord) => void;
}

/** What `evaluate` returns: the outcome to record, the stats, the item's ref, and answers to store with the completion. */
export interface Evaluation {
  outcome: EvalOutcome;
  stats: EvalStats;
  ref?: string;
  /** With `finishInCompletion` and a `complete` outcome after a call: the last call's answers and spend, not yet stored. */
  finish?: JobFinish['answers'];
}

/** What one call asks the limiter for (DESIGN §10, §3.6, §10.3). Tokens and milliseconds. */
export interface PermitRequest {
  /** Estimated input tokens of the call (system prompt, answer schema and state), as the input budget counts them. */
  inputTokens: number;
  /** The call's output ceiling (`max_tokens`). */
  maxOutputTokens: number;
  /**
   * Longest wait for the permits, ms. The runner bounds it by the lease it renewed just before
   * asking (`permitWaitBudgetMs`), so no wait of ours outlasts a lease (DESIGN §3.6).
   */
  maxWaitMs: number;
  /** How long a daily-cap reservation holds if its holder dies before settling it, ms: the lease. */
  reservationTtlMs: number;
  /** The claimant (`claimed_by`), recorded with a reservation. */
  holder: string;
  /** The job's signal: a wait ends when it aborts. */
  signal?: AbortSignal;
}

/**
 * The limiter's answer: go ahead (with the id of the daily-cap reservation the runner settles to
 * the call's real usage, or null when no daily cap is set), or defer the job by `delayMs`.
 */
export type Permit = { granted: true; reservationId: string | null } | { granted: false; delayMs: number };

/**
 * Longest permit wait under a lease of `leaseMs`, ms: half the lease. Before the wait at least
 * half the lease is left (it is renewed when less is, DESIGN §7.6), and it is renewed again
 * right after (§3.6); the rest is headroom for those statements (which may wait on a lock) and
 * for event-loop delays, so a live process never loses its lease to its own limiter, and no claim
 * ever counts that as an abandon.
 */
export function permitWaitBudgetMs(leaseMs: number): number {
  return Math.floor(leaseMs / 2);
}

/**
 * What one call is expected to cost before it is sent, tokens: input as the providers' input
 * budget estimates it (system prompt + answer schema + state, `estimateTokens`), and the output
 * ceiling the call sends as `max_tokens`. The daily cap reserves both (DESIGN §10.3).
 */
export function callEstimate(
  questions: ReadonlyMap<string, Question>,
  state: string,
  explain: boolean,
): { inputTokens: number; maxOutputTokens: number } {
  return {
    inputTokens: estimatePromptTokens(questions, explain) + estimateTokens(state),
    maxOutputTokens: maxTokensFor(questions, explain),
  };
}

/** Thrown by `beforeSend` when the item or workspace went away; never retried by a provider. */
export class LivenessLost extends VerdictError {
  readonly code = 'liveness_lost';
  constructor(readonly liveness: Exclude<Liveness, 'live'> | 'questions_changed') {
    super(`liveness lost: ${liveness}`);
  }
}

/** One call's worth of one set's work: the state bytes, the questions, and the row template. */
export interface Chunk {
  state: BuiltState;
  questions: Map<string, Question>;
  /** Stored key → the set's question key (differs for per-comment keys). */
  storedKeys: Map<string, string>;
  fingerprints: ReadonlyMap<string, string>;
}

/** One claim's share of a call: its set and the chunk of its keys. */
export interface CallPart {
  /** Index of the claim in the group. */
  readonly claim: number;
  readonly set: QuestionSet;
  readonly chunk: Chunk;
}

/**
 * One provider call: a state and the chunks of one or more sets asked about it (co-asking, DESIGN
 * §7.2). Every part's state bytes are the call's; question keys are distinct across parts.
 */
export interface PlannedCall {
  readonly state: BuiltState;
  readonly explain: boolean;
  readonly parts: CallPart[];
}

/** The claims of one item, with an outcome for each claim that ended before any call, and the calls for the rest. */
export interface GroupPlan {
  /** The item, when it loaded and is live. */
  readonly loaded: ItemForEvaluation | null;
  readonly ref?: string;
  /** Claim index → outcome reached without a call (gone, not applicable, nothing or already answered). */
  readonly ended: Map<number, EvalOutcome>;
  /** Claim index → its set, for every claim still to be asked. */
  readonly sets: Map<number, QuestionSet>;
  readonly calls: PlannedCall[];
}

/**
 * Makes a group's planned calls (DESIGN §7 step 6, §7.2): for each call, the liveness read and
 * lease check before it, the permits, the call, its answers and spend stored (the last call of a
 * job handed back with `finishInCompletion`). Each job gets its own outcome; a call that fails
 * gives its outcome to every job in it, and a job's later calls are not made once one of its
 * calls failed. Never throws for a provider or database fault: every failure maps to an outcome,
 * so owed work is never lost. Answers are inserted per call (per set, all-or-nothing), so answers
 * already paid for survive a later failure.
 * @param plan what `planGroup` made of `claims`.
 * @returns one Evaluation per claim, in the order given; a claim the plan ended keeps that outcome.
 */
export async function askGroup(claims: readonly Claim[], plan: GroupPlan, deps: EvaluateDeps): Promise<Evaluation[]> {
  const stats = claims.map(() => emptyStats());
  const outcomes = new Map(plan.ended);
  const lastCall = new Map<number, number>();
  plan.calls.forEach((call, i) => call.parts.forEach((p) => lastCall.set(p.claim, i)));
  const held = new Map<number, JobFinish['answers']>();
  for (const [i, call] of plan.calls.entries()) {
    const parts = call.parts.filter((p) => !outcomes.has(p.claim));
    if (parts.length === 0) continue;
    const holdFor = new Set(
      deps.finishInCompletion === true ? parts.filter((p) => lastCall.get(p.claim) === i).map((p) => p.claim) : [],
    );
    const after = { holdFor, held, failed: outcomes };
    const outcome = await askCall({ ...call, parts }, claims, plan.loaded!, deps, stats, after);
    if (outcome?.kind === 'schema_rejected' && parts.length > 1) {
      // The joint schema was refused: which set's part is at fault is unknown, so each part is
      // asked on its own and only a set whose own schema is refused cools off (DESIGN §3.8).
      for (const p of parts) {
        const alone = await askCall({ ...call, parts: [p] }, claims, plan.loaded!, deps, stats, after);
        if (alone) outcomes.set(p.claim, alone);
      }
      continue;
    }
    if (outcome) for (const p of parts) outcomes.set(p.claim, outcome);
  }
  return claims.map((_, i) => {
    const outcome = outcomes.get(i) ?? { kind: 'complete', reason: 'answered' };
    const finish = held.get(i);
    return {
      outcome,
      stats: stats[i],
      ...(plan.ref !== undefined ? { ref: plan.ref } : {}),
      ...(finish && outcome.kind === 'complete' ? { finish } : {}),
    };
  });
}

/**
 * Loads the item once and plans every claim of the group (DESIGN §7 steps 1–5): an outcome for
 * each claim that needs no call, and the calls for the rest, co-asked where states are
 * byte-identical (`coAskCalls`). The batch assembler plans with it too, so a batched request asks
 * what a call would.
 */
export async function planGroup(
  claims: readonly Claim[],
  deps: Pick<EvaluateDeps, 'store' | 'registry' | 'provider' | 'logger'>,
): Promise<GroupPlan> {
  const ended = new Map<number, EvalOutcome>();
  const all = (outcome: EvalOutcome, ref?: string): GroupPlan => {
    claims.forEach((_, i) => ended.set(i, outcome));
    return { loaded: null, ...(ref !== undefined ? { ref } : {}), ended, sets: new Map(), calls: [] };
  };
  let loaded: ItemForEvaluation | null;
  // Links are read only when a set of the group shows them (DESIGN §5: WithLinks item states).
  const links = claims.some((c) => deps.registry.get(c.questionSet)?.withLinks === true);
  try {
    loaded = await deps.store.loadItemForEvaluation(claims[0].itemId, { links });
  } catch (err) {
    return all({ kind: 'fail', reason: `item read failed: ${errCode(err)}` });
  }
  if (!loaded || loaded.item.deletedAt !== null || loaded.collection.deletedAt !== null)
    return all({ kind: 'drop', reason: 'item or collection gone' });
  if (loaded.workspace.deletedAt !== null) return all({ kind: 'release', reason: 'workspace deleted' });
  const ref = loaded.item.ref;
  const sets = new Map<number, QuestionSet>();
  let wanted: Array<SetWanted & { claim: number; set: QuestionSet; questions: Readonly<Record<string, Question>> }> =
    [];
  // The sets of the group that read the item alike share one built state (hashed once).
  const built: ItemStates = new Map();
  for (const [i, claim] of claims.entries()) {
    const r = await prepareClaim(claim, loaded, deps, built);
    if ('outcome' in r) ended.set(i, r.outcome);
    else wanted.push({ claim: i, ...r });
  }
  // One idempotency read for the whole group (DESIGN §7 step 5, §7.2), not one per set.
  let works: TargetWork[][] = [];
  try {
    works = await answeredNowOfSets(deps.store, claims[0].itemId, wanted);
  } catch (err) {
    for (const w of wanted) ended.set(w.claim, { kind: 'fail', reason: `idempotency read failed: ${errCode(err)}` });
    wanted = [];
  }
  const chunksOf: Array<{ claim: number; set: QuestionSet; chunks: Chunk[] }> = [];
  for (const [k, w] of wanted.entries()) {
    const chunks = chunksOfWork(w.set, w.questions, w.keys, works[k]!, w.fingerprints);
    if (chunks.length === 0) ended.set(w.claim, { kind: 'complete', reason: 'already_answered' });
    else {
      sets.set(w.claim, w.set);
      chunksOf.push({ claim: w.claim, set: w.set, chunks });
    }
  }
  return { loaded, ref, ended, sets, calls: coAskCalls(chunksOf) };
}

/**
 * One claim's set judged and made ready for the group's idempotency read: an outcome without a
 * call, or its questions, sorted keys, fingerprints and targets (DESIGN §7 steps 3–5).
 */
async function prepareClaim(
  claim: Claim,
  loaded: ItemForEvaluation,
  deps: Pick<EvaluateDeps, 'store' | 'registry' | 'provider' | 'logger'>,
  built: ItemStates,
): Promise<
  { outcome: EvalOutcome } | (SetWanted & { set: QuestionSet; questions: Readonly<Record<string, Question>> })
> {
  const set = deps.registry.get(claim.questionSet);
  if (!set)
    return { outcome: { kind: 'park', reason: `question set "${claim.questionSet}" is unknown in this process` } };
  let applies: boolean;
  try {
    applies = appliesNow(set, loaded.item, loaded.collection);
  } catch (err) {
    // A row the rules cannot read (fields or collection schema): park it, visibly, rather than
    // let the error escape the runner and leave the job to the abandon limit.
    return { outcome: { kind: 'park', reason: `eligibility cannot be judged: ${errCode(err)}` } };
  }
  if (!applies) return { outcome: { kind: 'drop', reason: 'set no longer applies' } };
  let questions: Readonly<Record<string, Question>>;
  try {
    // A set with fixed questions is read as it is (no copy, no await); a resolved set is asked.
    questions =
      set.questions ??
      (await questionsOf(set, { workspaceId: claim.workspaceId, store: deps.store, logger: deps.logger }));
  } catch (err) {
    return { outcome: { kind: 'fail', reason: `resolve failed: ${errCode(err)}` } };
  }
  const { keys, fingerprints } = keyedFingerprints(questions, deps.provider);
  if (keys.length === 0) return { outcome: { kind: 'complete', reason: 'nothing_to_ask' } };
  let targets: SetTarget[];
  try {
    // DESIGN §7b: a per-comment set asks about the newest 10 live comments, oldest first.
    targets = setTargets(set, loaded, { built });
  } catch (err) {
    // Write doors validate fields, so this is a row the builder cannot read: park it, visibly.
    // RangeError: fields nested too deep for the parser's stack; it will fail the same way every time.
    if (err instanceof SyntaxError || err instanceof TypeError || err instanceof RangeError) {
      return { outcome: { kind: 'park', reason: `state cannot be built: ${err.name}` } };
    }
    return { outcome: { kind: 'fail', reason: `state build failed: ${errCode(err)}` } };
  }
  return { set, questions, keys, fingerprints, targets };
}

/**
 * A set's question keys, sorted, and each key's fingerprint under the provider's context
 * (`questionFingerprint`): worked out once per questions object and context, not per job. A map
 * of questions is never changed once made (a resolved or reloaded set makes new objects), so the
 * object is its version; a context whose model, template or effort changed is worked out anew.
 */
function keyedFingerprints(
  questions: Readonly<Record<string, Question>>,
  ctx: FingerprintContext,
): { keys: readonly string[]; fingerprints: ReadonlyMap<string, string> } {
  const known = keyedByQuestions.get(questions);
  if (sameFingerprintContext(known, ctx)) return known;
  const keys = Object.keys(questions).sort();
  const fingerprints = new Map(keys.map((k) => [k, questionFingerprint(questions[k]!, ctx)]));
  const made = { model: ctx.model, promptVersion: ctx.promptVersion, effort: ctx.effort, keys, fingerprints };
  keyedByQuestions.set(questions, made);
  return made;
}
const keyedByQuestions = new WeakMap<
  object,
  FingerprintContext & { keys: readonly string[]; fingerprints: ReadonlyMap<string, string> }
>();

/**
 * The chunks of one set (DESIGN §7 step 5, §5.2): per target, the keys not answered now, asked at
 * the target's state to ask (dated today for a set with `maxAgeMs`), split into calls of at most
 * `maxPerCall` questions.
 */
function chunksOfWork(
  set: QuestionSet,
  questions: Readonly<Record<string, Question>>,
  keys: readonly string[],
  works: readonly TargetWork[],
  fingerprints: ReadonlyMap<string, string>,
): Chunk[] {
  const chunks: Chunk[] = [];
  for (const { target: t, askState, done } of works) {
    const remaining = keys.filter((k) => !done.has(k));
    for (let i = 0; i < remaining.length; i += set.maxPerCall) {
      const part = remaining.slice(i, i + set.maxPerCall);
      chunks.push({
        state: askState,
        questions: new Map(part.map((k) => [k, questions[k]])),
        storedKeys: new Map(part.map((k) => [k + t.keySuffix, k])),
        fingerprints,
      });
    }
  }
  return chunks;
}

/**
 * Packs chunks into calls (DESIGN §7.2): a chunk joins an earlier call when the call's state
 * bytes are identical, its sets agree on `explain`, no question key is in both (a key names one
 * question in the prompt), the call holds no other chunk of the same claim, and the keys together
 * stay within every joined set's `maxPerCall`. Otherwise it starts a call. Claims are taken in
 * the group's order, chunks in plan order, so the plan is deterministic.
 */
export function coAskCalls(
  chunksOf: ReadonlyArray<{ claim: number; set: QuestionSet; chunks: readonly Chunk[] }>,
): PlannedCall[];
/**
 * The same packing for anything shaped like a chunk (its state bytes and questions): the estimate
 * (src/runner/estimate.ts) counts calls with it, so it counts them as the runner makes them.
 */
export function coAskCalls<C extends CoAskChunk>(
  chunksOf: ReadonlyArray<{ claim: number; set: QuestionSet; chunks: readonly C[] }>,
): CoAskedCall<C>[];
export function coAskCalls<C extends CoAskChunk>(
  chunksOf: ReadonlyArray<{ claim: number; set: QuestionSet; chunks: readonly C[] }>,
): CoAskedCall<C>[] {
  const calls: CoAskedCall<C>[] = [];
  for (const { claim, set, chunks } of chunksOf) {
    for (const chunk of chunks) {
      const fits = (c: CoAskedCall<C>) => {
        if (c.state.bytes !== chunk.state.bytes || c.explain !== set.explain) return false;
        if (c.parts.some((p) => p.claim === claim || [...chunk.questions.keys()].some((k) => p.chunk.questions.has(k))))
          return false;
        const keys = c.parts.reduce((n, p) => n + p.chunk.questions.size, 0) + chunk.questions.size;
        return keys <= Math.min(set.maxPerCall, ...c.parts.map((p) => p.set.maxPerCall));
      };
      const call = calls.find(fits);
      if (call) call.parts.push({ claim, set, chunk });
      else calls.push({ state: chunk.state, explain: set.explain, parts: [{ claim, set, chunk }] });
    }
  }
  return calls;
}

/** What `coAskCalls` reads of a chunk: its state bytes and its questions. */
export interface CoAskChunk {
  readonly state: { readonly bytes: string };
  readonly questions: ReadonlyMap<string, Question>;
}

/** A call `coAskCalls` packed: the first chunk's state, the sets' `explain`, and each claim's chunk. */
export interface CoAskedCall<C extends CoAskChunk> {
  readonly state: C['state'];
  readonly explain: boolean;
  readonly parts: Array<{ readonly claim: number; readonly set: QuestionSet; readonly chunk: C }>;
}

/**
 * The questions of a call: every part's, keys distinct (`coAskCalls`), sorted as the prompt orders
 * them. A call of one part asks its chunk's map itself, not a copy (a chunk is never changed once
 * planned).
 */
export function callQuestions(call: Pick<PlannedCall, 'parts'>): ReadonlyMap<string, Question> {
  if (call.parts.length === 1) return call.parts[0]!.chunk.questions;
  const out = new Map<string, Question>();
  for (const p of call.parts) for (const [k, q] of p.chunk.questions) out.set(k, q);
  return out;
}

/** Renews every part's lease (fenced by its claim token). Returns an outcome to stop, or null when all hold. */
async function renew(claims: readonly Claim[], deps: EvaluateDeps): Promise<EvalOutcome | null> {
  for (const claim of claims) {
    try {
      if (!(await deps.store.renewLease(claim, deps.leaseMs)))
        return { kind: 'release', reason: 'lease lost before a call' };
    } catch (err) {
      return { kind: 'fail', reason: `lease renewal failed: ${errCode(err)}` };
    }
  }
  return null;
}

/**
 * Whether a lease with `leaseLeftMs` left is renewed before a call or a permit wait (DESIGN
 * §7.6): only when less than half of `leaseMs` is left. A claim sets a whole lease, so the first
 * call of a fresh claim writes nothing before it; the wait bound (`permitWaitBudgetMs`, half the
 * lease) and the call then start with at least half a lease.
 */
function leaseNeedsRenewal(leaseLeftMs: number, leaseMs: number): boolean {
  return leaseLeftMs < leaseMs / 2;
}

/**
 * Before a permit wait: each part's claim read once (`Store.checkClaim`), and its lease renewed
 * only when less than half is left (DESIGN §7.6), so the wait, bounded by half the lease, never
 * outlasts it. A claim found lost, or its item or workspace gone, stops here: no permit is taken
 * for a call that would not be sent.
 */
async function holdForWait(claims: readonly Claim[], deps: EvaluateDeps): Promise<EvalOutcome | null> {
  for (const claim of claims) {
    let leaseLeftMs: number;
    try {
      const r = await deps.store.checkClaim(claim);
      if (r.liveness !== 'live') return classify(new LivenessLost(r.liveness), deps.signal);
      leaseLeftMs = r.leaseLeftMs;
    } catch (err) {
      return { kind: 'fail', reason: `liveness read failed: ${errCode(err)}` };
    }
    if (leaseNeedsRenewal(leaseLeftMs, deps.leaseMs)) {
      const lost = await renew([claim], deps);
      if (lost) return lost;
    }
  }
  return null;
}

/**
 * Takes permits, renews the leases where needed, checks liveness last, asks, settles spend and
 * inserts (DESIGN §7 step 6, §3.6, §7.6). Returns an outcome (for every part's job) to stop, or
 * null to go on.
 *
 * Lease order (DESIGN §3.6, §7.6): with a limiter, each claim is read before the permit wait
 * and its lease renewed only when less than half is left; the wait is bounded by half the lease
 * (`permitWaitBudgetMs`), and the leases are renewed once the permits are granted, since that
 * wait can be long. Then one read per claim before the send (`sendCall`), which renews a lease
 * only when less than half is left.
 */
async function askCall(
  call: PlannedCall,
  claims: readonly Claim[],
  loaded: ItemForEvaluation,
  deps: EvaluateDeps,
  stats: EvalStats[],
  after: AfterCall,
): Promise<EvalOutcome | null> {
  const partClaims = call.parts.map((p) => claims[p.claim]);
  const questions = callQuestions(call);
  let reservationId: string | null = null;
  if (deps.acquirePermit) {
    const stop = await holdForWait(partClaims, deps);
    if (stop) return stop;
    let permit: Permit;
    try {
      permit = await deps.acquirePermit({
        ...callEstimate(questions, call.state.bytes, call.explain),
        maxWaitMs: permitWaitBudgetMs(deps.leaseMs),
        reservationTtlMs: deps.leaseMs,
        holder: partClaims[0].claimedBy,
        signal: deps.signal,
      });
    } catch (err) {
      // The spend read or the reservation failed (a locked or unreachable database): no call is
      // made, and the job backs off like any transient failure instead of waiting out its lease.
      return { kind: 'fail', reason: `permit failed: ${errCode(err)}` };
    }
    if (!permit.granted) {
      // A wait cut short by shutdown or reload releases the job; a wait the limiter refused defers it.
      if (deps.signal.aborted) return { kind: 'release', reason: abortCode(deps.signal) };
      return { kind: 'defer', delayMs: permit.delayMs, reason: 'rate limiter or spend cap' };
    }
    reservationId = permit.reservationId;
  }
  const spend = new CallSpend(deps, call.parts, reservationId);
  try {
    return await sendCall(call, questions, partClaims, loaded, deps, stats, spend, after);
  } finally {
    // Every path that did not settle the reservation (no call sent, or a call lost to liveness)
    // releases it now, so a reservation outlives its call only when this process dies.
    await spend.release();
  }
}

/** The permitted part of `askCall`: the renewal after a permit wait, liveness, the call, spend and answers. */
async function sendCall(
  call: PlannedCall,
  questions: ReadonlyMap<string, Question>,
  partClaims: readonly Claim[],
  loaded: ItemForEvaluation,
  deps: EvaluateDeps,
  stats: EvalStats[],
  spend: CallSpend,
  after: AfterCall,
): Promise<EvalOutcome | null> {
  const { store, provider } = deps;
  if (deps.signal.aborted) return { kind: 'release', reason: abortCode(deps.signal) };
  if (deps.acquirePermit) {
    // After the permits: the wait may have taken up to half the lease, so the call starts with a whole one.
    const lost = await renew(partClaims, deps);
    if (lost) return lost;
  }
  const lead = stats[call.parts[0].claim];
  // Each claim's generation is part of liveness: any write that owed one of these jobs since its
  // claim (an edit, a deleted comment or link) may have changed what the state holds, so the
  // state built for this evaluation is not sent; the newer generation rebuilds it. A resolved
  // set's questions are re-read too, so a deleted or edited convention's text is not sent.
  // Before the first attempt the same read also says how much lease is left (`renewShort`): a
  // lease with less than half left is renewed and liveness read again, so liveness stays the last
  // statement before the send.
  // Every part's claim is read in one statement (`checkClaims`): a co-asked call costs one read,
  // and a part whose item, workspace or claim is gone stops the whole call.
  const liveness = async (renewShort: boolean) => {
    const checks = await store.checkClaims(partClaims);
    for (const [i, p] of call.parts.entries()) {
      const claim = partClaims[i];
      let l: Liveness = checks[i].liveness;
      if (renewShort && l === 'live' && leaseNeedsRenewal(checks[i].leaseLeftMs, deps.leaseMs)) {
        l = (await store.renewLease(claim, deps.leaseMs)) ? await store.checkLiveness(claim.itemId, claim) : 'lost';
      }
      if (l !== 'live') throw new LivenessLost(l);
      if (p.set.resolve) {
        const now = await questionsOf(p.set, { workspaceId: claim.workspaceId, store, logger: deps.logger });
        for (const [key, q] of p.chunk.questions) {
          const cur = now[key];
          if (!cur || questionFingerprint(cur, provider) !== questionFingerprint(q, provider))
            throw new LivenessLost('questions_changed');
        }
      }
    }
  };
  // The provider calls `beforeSend` before every attempt; the first attempt follows the read just
  // made with nothing read or written in between, so only the retries read again.
  let attempts = 0;
  const beforeSend = () => (attempts++ === 0 ? undefined : liveness(false));
  let result;
  try {
    if (deps.beforeAsk) await deps.beforeAsk({ claim: partClaims[0], keys: [...questions.keys()] });
    await liveness(true); // the last statement before the send (principle 8)
    lead.calls++;
    for (const p of call.parts) stats[p.claim].questions += p.chunk.questions.size;
    result = await provider.ask(call.state.bytes, questions, {
      signal: deps.signal,
      beforeSend,
      explain: call.explain,
    });
  } catch (err) {
    const outcome = classify(err, deps.signal, provider.retryAfterCapMs);
    if (err instanceof ProviderRefusal && err.code === 'input_over_budget') {
      // Refused before any request (DESIGN §9): no call was made, so none is counted or billed.
      lead.calls--;
      for (const p of call.parts) stats[p.claim].questions -= p.chunk.questions.size;
      return outcome;
    }
    if (lead.calls > 0 && !(err instanceof LivenessLost)) {
      // A defective reply was still billed: its usage counts as spend (outcome `defect`).
      const usage = err instanceof AnswerDefect && err.usage ? err.usage : zeroUsage();
      addUsage(call, stats, usage);
      // A call cut off by our own stop (SIGTERM, reload) is spend of its own kind, `aborted`:
      // neither a provider failure nor a billed answer (DESIGN §10 shutdown).
      await spend.settle(
        err instanceof AnswerDefect
          ? 'defect'
          : deps.signal.aborted && outcome.kind === 'release'
            ? SPEND_ABORTED
            : outcome.kind,
        usage,
      );
    }
    return outcome;
  }
  addUsage(call, stats, result.usage);
  const shares = partUsages(call, result.usage);
  const partRows = answerRows({
    workspaceId: partClaims[0].workspaceId,
    itemId: partClaims[0].itemId,
    itemSeq: loaded.item.seq,
    state: call.state,
    parts: call.parts.map((p) => ({
      questionSet: p.set.name,
      storedKeys: [...p.chunk.storedKeys],
      fingerprints: p.chunk.fingerprints,
      explain: p.set.explain,
    })),
    result,
    provider,
  });
  const inserts: Array<{ rows: NewDecision[]; surfacing: SurfacingContext; part: number }> = [];
  for (const [pi, p] of call.parts.entries()) {
    stats[p.claim].truncated ||= p.chunk.state.truncated;
    const rows = partRows[pi];
    // What the store needs to queue the answers' surfacing events with them (DESIGN §16.2).
    const unsurfaced: string[] = [];
    for (const [storedKey, key] of p.chunk.storedKeys) if (p.set.unsurfaced.includes(key)) unsurfaced.push(storedKey);
    const surfacing: SurfacingContext = {
      ref: loaded.item.ref,
      threshold: p.set.threshold,
      hysteresis: p.set.hysteresis,
      unsurfaced,
    };
    if (after.holdFor.has(p.claim))
      after.held.set(p.claim, { decisions: rows, ...spend.handOver(pi, 'ok', shares[pi]), surfacing });
    else inserts.push({ rows, surfacing, part: pi });
  }
  await spend.settle('ok', result.usage);
  for (const { rows, surfacing, part } of inserts) {
    const claim = call.parts[part].claim;
    try {
      stats[claim].answersStored += await store.insertDecisions(rows, surfacing);
    } catch (err) {
      // Only this part's job fails: the others' answers are stored (or held) and stand.
      after.failed.set(claim, { kind: 'fail', reason: `answer insert failed: ${errCode(err)}` });
    }
  }
  return null;
}

/** What a call does with its answers: the claims whose answers are held for their completion, where to hold them, and the per-claim outcomes of parts whose insert failed. */
interface AfterCall {
  readonly holdFor: ReadonlySet<number>;
  readonly held: Map<number, JobFinish['answers']>;
  readonly failed: Map<number, EvalOutcome>;
}

/** One part of an answered call, as `answerRows` needs it. */
export interface AnsweredPart {
  readonly questionSet: string;
  /** [stored key, question key] pairs, in the call's order. */
  readonly storedKeys: ReadonlyArray<readonly [string, string]>;
  readonly fingerprints: ReadonlyMap<string, string> | Readonly<Record<string, string>>;
  readonly explain: boolean;
}

/**
 * The answer rows of one answered call (a call, or a batch result), per part, for the state it
 * asked about. Each row's share of the call's usage is even over every key of the call, the
 * remainder to the first keys, so a set's share is in proportion to its keys (DESIGN §7.2) and
 * the rows add up to the call's usage.
 */
export function answerRows(o: {
  workspaceId: string;
  itemId: string;
  itemSeq: number;
  state: Pick<BuiltState, 'hash' | 'version' | 'parts' | 'truncated'>;
  parts: readonly AnsweredPart[];
  result: AskResult;
  provider: FingerprintContext & { readonly name: string };
}): NewDecision[][] {
  const n = o.parts.reduce((s, p) => s + p.storedKeys.length, 0);
  const share = (total: number, i: number) => Math.floor(total / n) + (i < total % n ? 1 : 0);
  const fingerprintOf = (p: AnsweredPart, key: string) =>
    (p.fingerprints instanceof Map ? p.fingerprints.get(key) : (p.fingerprints as Record<string, string>)[key])!;
  // The same for every row of the call: serialised once, not per row.
  const stateParts = JSON.stringify(o.state.parts);
  const fingerprintContext = fingerprintContextText(o.provider);
  let offset = 0;
  return o.parts.map((p) => {
    const rows = p.storedKeys.map(([storedKey, key], j): NewDecision => {
      const a = o.result.answers.get(key);
      if (!a) throw new AnswerDefect(`answer "${key}" missing from the reply`);
      const i = offset + j;
      return {
        workspaceId: o.workspaceId,
        itemId: o.itemId,
        questionSet: p.questionSet,
        questionKey: storedKey,
        kind: a.answer.type,
        answer: JSON.stringify(a.answer),
        confidence: a.confidence,
        provider: o.provider.name,
        model: o.result.responseModel,
        stateHash: o.state.hash,
        questionHash: fingerprintOf(p, key),
        stateVersion: o.state.version,
        stateParts,
        inputTokens: share(o.result.usage.inputTokens, i),
        outputTokens: share(o.result.usage.outputTokens, i),
        itemSeq: o.itemSeq,
        stateTruncated: o.state.truncated,
        rationale: p.explain ? (o.result.rationales?.get(key) ?? null) : null,
        fingerprintContext,
      };
    });
    offset += rows.length;
    return rows;
  });
}

function zeroUsage(): Usage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
}

/**
 * A call's usage split over its parts in proportion to their keys (DESIGN §7.2): the split of
 * the answer rows (even per key, the remainder to the first keys), summed per part, so the parts'
 * shares add up to the call's usage exactly.
 */
function partUsages(call: { readonly parts: readonly CallPart[] }, usage: Usage): Usage[] {
  return splitUsage(
    usage,
    call.parts.map((p) => p.chunk.questions.size),
  );
}

/**
 * Usage split over shares of `counts` keys each (DESIGN §7.2): even per key, the remainder to
 * the first keys, summed per share, so the shares add up to `usage` exactly.
 */
export function splitUsage(usage: Usage, counts: readonly number[]): Usage[] {
  const n = counts.reduce((s, c) => s + c, 0);
  const sum = (total: number, from: number, count: number) => {
    let s = 0;
    for (let i = from; i < from + count; i++) s += Math.floor(total / n) + (i < total % n ? 1 : 0);
    return s;
  };
  let from = 0;
  return counts.map((count) => {
    const u: Usage = {
      inputTokens: sum(usage.inputTokens, from, count),
      outputTokens: sum(usage.outputTokens, from, count),
      cacheReadTokens: sum(usage.cacheReadTokens, from, count),
      cacheWriteTokens: sum(usage.cacheWriteTokens, from, count),
    };
    from += count;
    return u;
  });
}

/** Adds each part's share of a call's usage to its claim's stats. */
function addUsage(call: PlannedCall, stats: EvalStats[], usage: Usage): void {
  for (const [i, u] of partUsages(call, usage).entries()) {
    const s = stats[call.parts[i].claim];
    s.inputTokens += u.inputTokens;
    s.outputTokens += u.outputTokens;
    s.cacheReadTokens += u.cacheReadTokens;
    s.cacheWriteTokens += u.cacheWriteTokens;
  }
}

/** Default deferral for a 429 that named no reset time, in milliseconds. */
const RATE_LIMIT_DEFAULT_DEFER_MS = 60_000;

/**
 * How long a provider-driven deferral waits, ms: the provider's reset time, held between the
 * backoff's base and cap (30 s to 1 h, DESIGN §3). The provider already waited out short resets
 * inside the attempt (p-retry honours Retry-After up to its cap), so a `retry-after: 0` after that
 * must not bring the job straight back (measured: 765 requests in 300 s for 6 jobs, cycling hot
 * until the 21st defer counted); and one reply must not hide a job for years (`retry-after:
 * 99999999`, or an HTTP-date in 9999, deferred jobs by 3 years and 8,000 years).
 */
function providerDeferMs(resetMs: number): number {
  return Math.min(Math.max(resetMs, BACKOFF_BASE_MS), BACKOFF_CAP_MS);
}

/**
 * Maps an error from a call to an outcome (DESIGN §3, §3.7, §3.8).
 *
 * A ProviderUnavailable defers (no attempt counted) only for a 429 or a Retry-After above the
 * provider's own retry cap: those say "not now", not "broken". A 5xx or 529 with a short
 * Retry-After (or none) is a transient fail, so the attempt counts and the job backs off by
 * max(backoff(attempts), retry-after); deferring it would refund every attempt and bring the job
 * back within seconds for as long as an outage lasts. A rejected answer schema is the set's fault:
 * `schema_rejected` cools off that set only.
 * @param retryAfterCapMs the provider's longest Retry-After honoured by waiting (ms); defaults to
 *   the shared retry policy's (30 000).
 */
export function classify(
  err: unknown,
  signal: AbortSignal,
  retryAfterCapMs: number = DEFAULT_RETRY_POLICY.retryAfterCapMs,
): EvalOutcome {
  if (err instanceof LivenessLost) {
    switch (err.liveness) {
      case 'workspace_gone':
        return { kind: 'release', reason: 'workspace deleted' };
      case 'item_gone':
        return { kind: 'drop', reason: 'item gone before send' };
      case 'lost':
        // The fenced release finds another claim token and changes nothing (it reports `lost`).
        return { kind: 'release', reason: 'claim lost before send' };
      case 'superseded':
        // The fenced release sees the moved generation: it only clears the claim and recomputes
        // not_before, and the newer generation runs with a fresh state.
        return { kind: 'release', reason: 'superseded: a write landed before send' };
      case 'questions_changed':
        return { kind: 'release', reason: 'questions changed before send' };
    }
  }
  if (signal.aborted) return { kind: 'release', reason: abortCode(signal) };
  if (err instanceof ProviderRefusal) {
    return err.code === 'input_over_budget'
      ? { kind: 'park', reason: err.message }
      : { kind: 'refuse', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  }
  if (err instanceof ProviderUnavailable) {
    const reason = `${err.code}${err.status ? ` ${err.status}` : ''}`;
    const after = err.retryAfterMs;
    if (err.rateLimited)
      return { kind: 'defer', delayMs: providerDeferMs(after ?? RATE_LIMIT_DEFAULT_DEFER_MS), reason };
    if (after !== undefined && after > retryAfterCapMs)
      return { kind: 'defer', delayMs: providerDeferMs(after), reason };
    return after !== undefined ? { kind: 'fail', reason, retryAfterMs: after } : { kind: 'fail', reason };
  }
  if (err instanceof SchemaRejected)
    return { kind: 'schema_rejected', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  if (err instanceof ProviderMisconfigured)
    return { kind: 'misconfigured', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  if (err instanceof ProviderError) return { kind: 'refuse', reason: err.code }; // AnswerDefect
  return { kind: 'fail', reason: `unexpected: ${errCode(err)}` };
}

/** The spend outcome of a call aborted by this process's own stop or reload (decision_spend.outcome). */
export const SPEND_ABORTED = 'aborted';

/**
 * The spend of one call: recorded as it was billed, one record per part (set) with its share in
 * proportion to its keys (DESIGN §7.2), the first settling the call's daily-cap reservation in
 * the same transaction when it holds one (DESIGN §10.3), or releasing the reservation when no
 * call was billed. A store failure is logged, never thrown: the answers matter more, and an
 * unsettled reservation expires with the lease.
 */
class CallSpend {
  private open: boolean;
  /** Parts whose spend record was handed over to be stored with their job's completion. */
  private readonly handed = new Set<number>();
  constructor(
    private readonly deps: EvaluateDeps,
    private readonly parts: readonly CallPart[],
    private readonly reservationId: string | null,
  ) {
    this.open = reservationId !== null;
  }

  /** Part `i`'s spend: its set, its share of the usage; the call itself is counted once, on the first part. */
  private record(i: number, outcome: string, usage: Usage): SpendRecord {
    const { provider } = this.deps;
    return {
      questionSet: this.parts[i].set.name,
      provider: provider.name,
      model: provider.model,
      outcome,
      calls: i === 0 ? 1 : 0,
      usage,
    };
  }

  /**
   * Part `i`'s spend record (with `usage`, its share) and the open reservation, for the caller to
   * store (`Store.finishJob`); `settle` then leaves that part out.
   */
  handOver(i: number, outcome: string, usage: Usage): { spend: SpendRecord; reservationId: string | null } {
    const reservationId = this.open ? this.reservationId : null;
    this.open = false;
    this.handed.add(i);
    return { spend: this.record(i, outcome, usage), reservationId };
  }

  /** Records the call's spend (`usage`, the whole call's) for every part not handed over, the first settling the reservation. */
  async settle(outcome: string, usage: Usage): Promise<void> {
    const { store } = this.deps;
    const shares = partUsages({ parts: this.parts }, usage);
    for (const [i, share] of shares.entries()) {
      if (this.handed.has(i)) continue;
      this.handed.add(i);
      const record = this.record(i, outcome, share);
      this.deps.onSpend?.(record);
      try {
        if (this.open) {
          this.open = false;
          await store.settleSpendReservation(this.reservationId!, record);
        } else await store.recordSpend(record);
      } catch (err) {
        if (this.deps.spendBacklog) this.deps.spendBacklog.keep(record, err);
        else this.deps.logger.warn({ set: record.questionSet, err: errCode(err) }, 'spend record failed');
      }
    }
  }

  async release(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    try {
      await this.deps.store.settleSpendReservation(this.reservationId!, null);
    } catch (err) {
      this.deps.logger.warn({ set: this.parts[0].set.name, err: errCode(err) }, 'spend reservation release failed');
    }
  }
}

/**
 * The release reason of an aborted evaluation: the abort reason's `code` when it is a short
 * lower-case identifier (the worker aborts with `shutdown` or `reload`), else `aborted`. Never the
 * reason's message, which a library caller may have filled with anything.
 */
function abortCode(signal: AbortSignal): string {
  const code = ownCode(signal.reason);
  return code !== undefined && /^[a-z_]{1,32}$/.test(code) ? code : 'aborted';
}
