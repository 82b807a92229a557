import { fingerprintContextText, questionFingerprint, type Question } from '../decision/questions.js';
import type { QuestionSet, Registry } from '../decision/registry.js';
import { questionsOf } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import { answeredNow } from './answered.js';
import type { BuiltState } from '../decision/state.js';
import { AnswerDefect, ProviderError, ProviderMisconfigured, ProviderRefusal, ProviderUnavailable, SchemaRejected } from '../providers/errors.js';
import { DEFAULT_RETRY_POLICY } from '../providers/retry.js';
import { maxTokensFor } from '../providers/prompt.js';
import { estimatePromptTokens } from './estimate.js';
import { estimateTokens, type Provider, type Usage } from '../providers/provider.js';
import type { Claim, ItemForEvaluation, JobFinish, Liveness, NewDecision, SpendRecord, Store, SurfacingContext } from '../store/store.js';
import type { Logger } from '../log.js';
import { appliesNow } from '../decision/eligibility.js';
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS } from './backoff.js';
import { emptyStats, type EvalOutcome, type EvalStats } from './outcome.js';
import { VerdictError } from '../errors.js';

/** Everything one evaluation needs. */
export interface EvaluateDeps {
  store: Store;
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
}

/** What `evaluate` returns: the outcome to record, the stats, the item's ref, and answers to store with the completion. */
export interface Evaluation {
  outcome: EvalOutcome;
  stats: EvalStats;
  ref?: string;
  /** With `finishInCompletion` and a `complete` outcome after a call: the last call's answers and spend, not yet stored. */
  finish?: JobFinish['answers'];
}

/** What one call asks the limiter for (DESIGN §10, §16.5, §16.8). Tokens and milliseconds. */
export interface PermitRequest {
  /** Estimated input tokens of the call (system prompt, answer schema and state), as the input budget counts them. */
  inputTokens: number;
  /** The call's output ceiling (`max_tokens`). */
  maxOutputTokens: number;
  /**
   * Longest wait for the permits, ms. The runner bounds it by the lease it renewed just before
   * asking (`permitWaitBudgetMs`), so no wait of ours outlasts a lease (DESIGN §16.5).
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
 * Longest permit wait under a lease of `leaseMs`, ms: half the lease. The lease is renewed right
 * before the wait and again right after it (DESIGN §16.5); the other half is headroom for those
 * renewals (store writes that may wait on a lock) and for event-loop delays, so a live process
 * never loses its lease to its own limiter, and no claim ever counts that as an abandon.
 */
export function permitWaitBudgetMs(leaseMs: number): number {
  return Math.floor(leaseMs / 2);
}

/**
 * What one call is expected to cost before it is sent, tokens: input as the providers' input
 * budget estimates it (system prompt + answer schema + state, `estimateTokens`), and the output
 * ceiling the call sends as `max_tokens`. The daily cap reserves both (DESIGN §16.8).
 */
export function callEstimate(questions: ReadonlyMap<string, Question>, state: string, explain: boolean): { inputTokens: number; maxOutputTokens: number } {
  return { inputTokens: estimatePromptTokens(questions, explain) + estimateTokens(state), maxOutputTokens: maxTokensFor(questions, explain) };
}

/** Thrown by `beforeSend` when the item or workspace went away; never retried by a provider. */
export class LivenessLost extends VerdictError {
  readonly code = 'liveness_lost';
  constructor(readonly liveness: Exclude<Liveness, 'live'> | 'questions_changed') {
    super(`liveness lost: ${liveness}`);
  }
}

/** Where the last call puts its answers and spend when they are stored with the completion. */
interface Held {
  answers?: JobFinish['answers'];
}

/** One call's worth of work: the state bytes, the questions, and the row template. */
interface Chunk {
  state: BuiltState;
  questions: Map<string, Question>;
  /** Stored key → the set's question key (differs for per-comment keys). */
  storedKeys: Map<string, string>;
  fingerprints: Map<string, string>;
}

/**
 * Evaluates one claimed job (DESIGN §7) and says what outcome to record. Never throws for a
 * provider or database fault: every failure maps to an outcome, so owed work is never lost.
 * Answers are inserted per call, all-or-nothing, so answers already paid for survive a later
 * failure in the same job.
 */
export async function evaluate(claim: Claim, deps: EvaluateDeps): Promise<Evaluation> {
  const stats = emptyStats();
  const set = deps.registry.get(claim.questionSet);
  if (!set) return { outcome: { kind: 'park', reason: `question set "${claim.questionSet}" is unknown in this process` }, stats };

  let loaded: ItemForEvaluation | null;
  try {
    loaded = await deps.store.loadItemForEvaluation(claim.itemId);
  } catch (err) {
    return { outcome: { kind: 'fail', reason: `item read failed: ${errCode(err)}` }, stats };
  }
  if (!loaded || loaded.item.deletedAt !== null || loaded.collection.deletedAt !== null) {
    return { outcome: { kind: 'drop', reason: 'item or collection gone' }, stats };
  }
  if (loaded.workspace.deletedAt !== null) return { outcome: { kind: 'release', reason: 'workspace deleted' }, stats };
  const ref = loaded.item.ref;
  let applies: boolean;
  try {
    applies = appliesNow(set, loaded.item, loaded.collection);
  } catch (err) {
    // A row the rules cannot read (fields or collection schema): park it, visibly, rather than
    // let the error escape the runner and leave the job to the abandon limit.
    return { outcome: { kind: 'park', reason: `eligibility cannot be judged: ${errCode(err)}` }, stats, ref };
  }
  if (!applies) return { outcome: { kind: 'drop', reason: 'set no longer applies' }, stats, ref };

  let questions: Record<string, Question>;
  try {
    questions = { ...(await questionsOf(set, { workspaceId: claim.workspaceId, store: deps.store, logger: deps.logger })) };
  } catch (err) {
    return { outcome: { kind: 'fail', reason: `resolve failed: ${errCode(err)}` }, stats, ref };
  }
  if (Object.keys(questions).length === 0) return { outcome: { kind: 'complete', reason: 'nothing_to_ask' }, stats, ref };

  let chunks: Chunk[];
  try {
    chunks = await plan(set, loaded, questions, deps, claim);
  } catch (err) {
    // Write doors validate fields, so this is a row the builder cannot read: park it, visibly.
    // RangeError: fields nested too deep for the parser's stack; it will fail the same way every time.
    if (err instanceof SyntaxError || err instanceof TypeError || err instanceof RangeError) {
      return { outcome: { kind: 'park', reason: `state cannot be built: ${err.name}` }, stats, ref };
    }
    return { outcome: { kind: 'fail', reason: `idempotency read failed: ${errCode(err)}` }, stats, ref };
  }
  if (chunks.length === 0) return { outcome: { kind: 'complete', reason: 'already_answered' }, stats, ref };

  const held: Held = {};
  for (const [i, chunk] of chunks.entries()) {
    const outcome = await askChunk(chunk, claim, set, loaded, deps, stats, deps.finishInCompletion === true && i === chunks.length - 1 ? held : null);
    if (outcome) return { outcome, stats, ref };
  }
  return { outcome: { kind: 'complete', reason: 'answered' }, stats, ref, finish: held.answers };
}

/** Builds states and the remaining keys (DESIGN §7 step 5, §16.17), split into calls of at most `maxPerCall` questions. */
async function plan(
  set: QuestionSet,
  loaded: ItemForEvaluation,
  questions: Record<string, Question>,
  deps: EvaluateDeps,
  claim: Claim,
): Promise<Chunk[]> {
  const keys = Object.keys(questions).sort();
  const fps = new Map(keys.map((k) => [k, questionFingerprint(questions[k], deps.provider)]));
  // DESIGN §7b: a per-comment set asks about the newest 10 live comments, oldest first.
  const targets = setTargets(set, loaded);
  const chunks: Chunk[] = [];
  // DESIGN §16.17: for a set with maxAgeMs, a key is done while an unexpired answer of it matches
  // the state dated with that answer's own as_of; the rest are asked at the state dated today.
  for (const { target: t, askState, done } of await answeredNow(deps.store, set, claim.itemId, targets, keys, fps)) {
    const remaining = keys.filter((k) => !done.has(k));
    for (let i = 0; i < remaining.length; i += set.maxPerCall) {
      const part = remaining.slice(i, i + set.maxPerCall);
      chunks.push({
        state: askState,
        questions: new Map(part.map((k) => [k, questions[k]])),
        storedKeys: new Map(part.map((k) => [k + t.keySuffix, k])),
        fingerprints: fps,
      });
    }
  }
  return chunks;
}

/** Renews the lease (fenced by the claim token). Returns an outcome to stop, or null when the lease holds. */
async function renew(claim: Claim, deps: EvaluateDeps): Promise<EvalOutcome | null> {
  try {
    if (!(await deps.store.renewLease(claim, deps.leaseMs))) return { kind: 'lost', reason: 'lease lost before a call' };
  } catch (err) {
    return { kind: 'fail', reason: `lease renewal failed: ${errCode(err)}` };
  }
  return null;
}

/**
 * Takes permits, renews the lease, checks liveness last, asks, settles spend and inserts (DESIGN
 * §7 step 6, §16.5). Returns an outcome to stop, or null to go on.
 *
 * Lease order (DESIGN §16.5): with a limiter, the lease is renewed before the permit wait, the
 * wait is bounded by half that lease (`permitWaitBudgetMs`), and the lease is renewed again once
 * the permits are granted, immediately before the final liveness check, so the call starts with a
 * whole lease however long the wait was. Without a limiter there is no wait: one renewal, just
 * before the liveness check.
 */
async function askChunk(
  chunk: Chunk,
  claim: Claim,
  set: QuestionSet,
  loaded: ItemForEvaluation,
  deps: EvaluateDeps,
  stats: EvalStats,
  held: Held | null,
): Promise<EvalOutcome | null> {
  let reservationId: string | null = null;
  if (deps.acquirePermit) {
    const lost = await renew(claim, deps);
    if (lost) return lost;
    let permit: Permit;
    try {
      permit = await deps.acquirePermit({
        ...callEstimate(chunk.questions, chunk.state.bytes, set.explain),
        maxWaitMs: permitWaitBudgetMs(deps.leaseMs),
        reservationTtlMs: deps.leaseMs,
        holder: claim.claimedBy,
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
  const spend = new CallSpend(deps, set, reservationId);
  try {
    return await sendChunk(chunk, claim, set, loaded, deps, stats, spend, held);
  } finally {
    // Every path that did not settle the reservation (no call sent, or a call lost to liveness)
    // releases it now, so a reservation outlives its call only when this process dies.
    await spend.release();
  }
}

/** The permitted part of `askChunk`: renewal, liveness, the call, spend and answers. */
async function sendChunk(
  chunk: Chunk,
  claim: Claim,
  set: QuestionSet,
  loaded: ItemForEvaluation,
  deps: EvaluateDeps,
  stats: EvalStats,
  spend: CallSpend,
  held: Held | null,
): Promise<EvalOutcome | null> {
  const { store, provider } = deps;
  if (deps.signal.aborted) return { kind: 'release', reason: abortCode(deps.signal) };
  const lost = await renew(claim, deps);
  if (lost) return lost;
  const keys = [...chunk.questions.keys()];
  // The claim's generation is part of liveness: any write that owed this job since the claim (an
  // edit, a deleted comment or link) may have changed what the state holds, so the state built
  // for this evaluation is not sent; the newer generation rebuilds it. A resolved set's questions
  // are re-read too, so a deleted or edited convention's text is not sent as a question.
  const liveness = async () => {
    const l = await store.checkLiveness(claim.itemId, claim);
    if (l !== 'live') throw new LivenessLost(l);
    if (set.resolve) {
      const now = await questionsOf(set, { workspaceId: claim.workspaceId, store, logger: deps.logger });
      for (const [key, q] of chunk.questions) {
        const cur = now[key];
        if (!cur || questionFingerprint(cur, provider) !== questionFingerprint(q, provider)) throw new LivenessLost('questions_changed');
      }
    }
  };
  let result;
  try {
    if (deps.beforeAsk) await deps.beforeAsk({ claim, keys });
    await liveness(); // the last statement before the send (principle 8)
    stats.calls++;
    stats.questions += keys.length;
    result = await provider.ask(chunk.state.bytes, chunk.questions, { signal: deps.signal, beforeSend: liveness, explain: set.explain });
  } catch (err) {
    const outcome = classify(err, deps.signal, provider.retryAfterCapMs);
    if (err instanceof ProviderRefusal && err.code === 'input_over_budget') {
      // Refused before any request (DESIGN §9): no call was made, so none is counted or billed.
      stats.calls--;
      stats.questions -= keys.length;
      return outcome;
    }
    if (stats.calls > 0 && !(err instanceof LivenessLost)) {
      // A defective reply was still billed: its usage counts as spend (outcome `defect`).
      const usage = err instanceof AnswerDefect && err.usage ? err.usage : { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
      stats.inputTokens += usage.inputTokens;
      stats.outputTokens += usage.outputTokens;
      stats.cacheReadTokens += usage.cacheReadTokens;
      stats.cacheWriteTokens += usage.cacheWriteTokens;
      // A call cut off by our own stop (SIGTERM, reload) is spend of its own kind, `aborted`:
      // neither a provider failure nor a billed answer (DESIGN §10 shutdown).
      await spend.settle(err instanceof AnswerDefect ? 'defect' : deps.signal.aborted && outcome.kind === 'release' ? SPEND_ABORTED : outcomeLabel(outcome), usage);
    }
    return outcome;
  }
  stats.inputTokens += result.usage.inputTokens;
  stats.outputTokens += result.usage.outputTokens;
  stats.cacheReadTokens += result.usage.cacheReadTokens;
  stats.cacheWriteTokens += result.usage.cacheWriteTokens;
  stats.truncated ||= chunk.state.truncated;

  // This row's share of its call's usage: split evenly, the remainder to the first rows.
  const n = chunk.storedKeys.size;
  const share = (total: number, i: number) => Math.floor(total / n) + (i < total % n ? 1 : 0);
  const rows: NewDecision[] = [...chunk.storedKeys].map(([storedKey, key], i) => {
    const a = result.answers.get(key)!;
    return {
      workspaceId: claim.workspaceId,
      itemId: claim.itemId,
      questionSet: set.name,
      questionKey: storedKey,
      kind: a.answer.type,
      answer: JSON.stringify(a.answer),
      confidence: a.confidence,
      provider: provider.name,
      model: result.responseModel,
      stateHash: chunk.state.hash,
      questionHash: chunk.fingerprints.get(key)!,
      stateVersion: chunk.state.version,
      stateParts: JSON.stringify(chunk.state.parts),
      inputTokens: share(result.usage.inputTokens, i),
      outputTokens: share(result.usage.outputTokens, i),
      itemSeq: loaded.item.seq,
      stateTruncated: chunk.state.truncated,
      rationale: set.explain ? (result.rationales?.get(key) ?? null) : null,
      fingerprintContext: fingerprintContextText(provider),
    };
  });
  // What the store needs to queue the answers' surfacing events with them (DESIGN §16.22).
  const surfacing: SurfacingContext = {
    ref: loaded.item.ref,
    threshold: set.threshold,
    hysteresis: set.hysteresis,
    unsurfaced: [...chunk.storedKeys].filter(([, key]) => set.unsurfaced.includes(key)).map(([storedKey]) => storedKey),
  };
  if (held) {
    held.answers = { decisions: rows, ...spend.handOver('ok', result.usage), surfacing };
    return null;
  }
  await spend.settle('ok', result.usage);
  try {
    stats.answersStored += await store.insertDecisions(rows, surfacing);
  } catch (err) {
    return { kind: 'fail', reason: `answer insert failed: ${errCode(err)}` };
  }
  return null;
}

/** Default deferral for a 429 that named no reset time, in milliseconds. */
export const RATE_LIMIT_DEFAULT_DEFER_MS = 60_000;

/**
 * How long a provider-driven deferral waits, ms: the provider's reset time, held between the
 * backoff's base and cap (30 s to 1 h, DESIGN §3). The provider already waited out short resets
 * inside the attempt (p-retry honours Retry-After up to its cap), so a `retry-after: 0` after that
 * must not bring the job straight back (measured: 765 requests in 300 s for 6 jobs, cycling hot
 * until the 21st defer counted); and one reply must not hide a job for years (`retry-after:
 * 99999999`, or an HTTP-date in 9999, deferred jobs by 3 years and 8,000 years).
 */
export function providerDeferMs(resetMs: number): number {
  return Math.min(Math.max(resetMs, BACKOFF_BASE_MS), BACKOFF_CAP_MS);
}

/**
 * Maps an error from a call to an outcome (DESIGN §3, §16.3, §16.4).
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
export function classify(err: unknown, signal: AbortSignal, retryAfterCapMs: number = DEFAULT_RETRY_POLICY.retryAfterCapMs): EvalOutcome {
  if (err instanceof LivenessLost) {
    switch (err.liveness) {
      case 'workspace_gone':
        return { kind: 'release', reason: 'workspace deleted' };
      case 'item_gone':
        return { kind: 'drop', reason: 'item gone before send' };
      case 'lost':
        return { kind: 'lost', reason: 'claim lost before send' };
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
    return err.code === 'input_over_budget' ? { kind: 'park', reason: err.message } : { kind: 'refuse', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  }
  if (err instanceof ProviderUnavailable) {
    const reason = `${err.code}${err.status ? ` ${err.status}` : ''}`;
    const after = err.retryAfterMs;
    if (err.rateLimited) return { kind: 'defer', delayMs: providerDeferMs(after ?? RATE_LIMIT_DEFAULT_DEFER_MS), reason };
    if (after !== undefined && after > retryAfterCapMs) return { kind: 'defer', delayMs: providerDeferMs(after), reason };
    return after !== undefined ? { kind: 'fail', reason, retryAfterMs: after } : { kind: 'fail', reason };
  }
  if (err instanceof SchemaRejected) return { kind: 'schema_rejected', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  if (err instanceof ProviderMisconfigured) return { kind: 'misconfigured', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  if (err instanceof ProviderError) return { kind: 'refuse', reason: err.code }; // AnswerDefect
  return { kind: 'fail', reason: `unexpected: ${errCode(err)}` };
}

/** The spend outcome of a call aborted by this process's own stop or reload (decision_spend.outcome). */
export const SPEND_ABORTED = 'aborted';

function outcomeLabel(o: EvalOutcome): string {
  return o.kind === 'refuse' ? 'refused' : o.kind === 'fail' ? 'unavailable' : o.kind;
}

/**
 * The spend of one call: recorded as it was billed, settling the call's daily-cap reservation in
 * the same transaction when it holds one (DESIGN §16.8), or releasing the reservation when no
 * call was billed. A store failure is logged, never thrown: the answers matter more, and an
 * unsettled reservation expires with the lease.
 */
class CallSpend {
  private open: boolean;
  constructor(
    private readonly deps: EvaluateDeps,
    private readonly set: QuestionSet,
    private readonly reservationId: string | null,
  ) {
    this.open = reservationId !== null;
  }

  private record(outcome: string, usage: Usage): SpendRecord {
    const { provider } = this.deps;
    return { questionSet: this.set.name, provider: provider.name, model: provider.model, outcome, calls: 1, usage };
  }

  /** The spend record and the open reservation, for the caller to store (`Store.finishJob`); this object then settles nothing. */
  handOver(outcome: string, usage: Usage): { spend: SpendRecord; reservationId: string | null } {
    const reservationId = this.open ? this.reservationId : null;
    this.open = false;
    return { spend: this.record(outcome, usage), reservationId };
  }

  async settle(outcome: string, usage: Usage): Promise<void> {
    const { store } = this.deps;
    const record = this.record(outcome, usage);
    try {
      if (this.open) {
        this.open = false;
        await store.settleSpendReservation(this.reservationId!, record);
      } else await store.recordSpend(record);
    } catch (err) {
      this.deps.logger.warn({ set: this.set.name, err: errCode(err) }, 'spend record failed');
    }
  }

  async release(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    try {
      await this.deps.store.settleSpendReservation(this.reservationId!, null);
    } catch (err) {
      this.deps.logger.warn({ set: this.set.name, err: errCode(err) }, 'spend reservation release failed');
    }
  }
}

/**
 * The release reason of an aborted evaluation: the abort reason's `code` when it is a short
 * lower-case identifier (the worker aborts with `shutdown` or `reload`), else `aborted`. Never the
 * reason's message, which a library caller may have filled with anything.
 */
export function abortCode(signal: AbortSignal): string {
  const code = (signal.reason as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^[a-z_]{1,32}$/.test(code) ? code : 'aborted';
}

/** A loggable name for an error: its code or class, never its message (it may carry provider text). */
export function errCode(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { code?: unknown; name?: unknown };
    if (typeof e.code === 'string') return e.code;
    if (typeof e.name === 'string') return e.name;
  }
  return typeof err;
}
