import { fingerprintContextText, questionFingerprint, type Question } from '../decision/questions.js';
import type { QuestionSet, Registry } from '../decision/registry.js';
import { questionsOf } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import type { BuiltState } from '../decision/state.js';
import { AnswerDefect, ProviderError, ProviderMisconfigured, ProviderRefusal, ProviderUnavailable } from '../providers/errors.js';
import type { Provider, Usage } from '../providers/provider.js';
import type { Claim, ItemForEvaluation, Liveness, NewDecision, Store } from '../store/store.js';
import type { Logger } from '../log.js';
import { appliesNow } from './eligibility.js';
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
   * Takes the rate-limiter and spend-cap permits for one call of about `estimatedInputTokens`.
   * Returns null to go ahead, or a delay in milliseconds after which to try again (the job defers).
   * `signal` is the job's: a wait for a permit ends when it aborts.
   */
  acquirePermit?: (estimatedInputTokens: number, signal?: AbortSignal) => Promise<number | null>;
  /** Test-only seam: runs immediately before the final liveness check of each call (DESIGN §7b). */
  beforeAsk?: (ctx: { claim: Claim; keys: string[] }) => Promise<void> | void;
}

/** Thrown by `beforeSend` when the item or workspace went away; never retried by a provider. */
export class LivenessLost extends VerdictError {
  readonly code = 'liveness_lost';
  constructor(readonly liveness: Exclude<Liveness, 'live'> | 'questions_changed') {
    super(`liveness lost: ${liveness}`);
    this.name = 'LivenessLost';
  }
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
export async function evaluate(claim: Claim, deps: EvaluateDeps): Promise<{ outcome: EvalOutcome; stats: EvalStats; ref?: string }> {
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

  for (const chunk of chunks) {
    const outcome = await askChunk(chunk, claim, set, loaded, deps, stats);
    if (outcome) return { outcome, stats, ref };
  }
  return { outcome: { kind: 'complete', reason: 'answered' }, stats, ref };
}

/** Builds states and the remaining keys, split into calls of at most `maxPerCall` questions. */
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
  for (const t of targets) {
    const wanted = keys.map((k) => ({ questionKey: k + t.keySuffix, stateHash: t.state.hash, questionHash: fps.get(k)!, stateVersion: t.state.version }));
    const done = await deps.store.answeredKeys(claim.itemId, set.name, wanted);
    const remaining = keys.filter((k) => !done.has(k + t.keySuffix));
    for (let i = 0; i < remaining.length; i += set.maxPerCall) {
      const part = remaining.slice(i, i + set.maxPerCall);
      chunks.push({
        state: t.state,
        questions: new Map(part.map((k) => [k, questions[k]])),
        storedKeys: new Map(part.map((k) => [k + t.keySuffix, k])),
        fingerprints: fps,
      });
    }
  }
  return chunks;
}

/** Renews the lease, takes permits, checks liveness last, asks, records spend and inserts. Returns an outcome to stop, or null to go on. */
async function askChunk(
  chunk: Chunk,
  claim: Claim,
  set: QuestionSet,
  loaded: ItemForEvaluation,
  deps: EvaluateDeps,
  stats: EvalStats,
): Promise<EvalOutcome | null> {
  const { store, provider } = deps;
  try {
    if (!(await store.renewLease(claim, deps.leaseMs))) return { kind: 'lost', reason: 'lease lost before a call' };
  } catch (err) {
    return { kind: 'fail', reason: `lease renewal failed: ${errCode(err)}` };
  }
  if (deps.acquirePermit) {
    const wait = await deps.acquirePermit(Math.ceil(chunk.state.bytes.length / 3), deps.signal);
    if (wait !== null) return { kind: 'defer', delayMs: wait, reason: 'rate limiter or spend cap' };
  }
  if (deps.signal.aborted) return { kind: 'release', reason: abortCode(deps.signal) };
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
    const outcome = classify(err, deps.signal);
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
      await recordSpendSafe(deps, set, err instanceof AnswerDefect ? 'defect' : outcomeLabel(outcome), usage);
    }
    return outcome;
  }
  stats.inputTokens += result.usage.inputTokens;
  stats.outputTokens += result.usage.outputTokens;
  stats.cacheReadTokens += result.usage.cacheReadTokens;
  stats.cacheWriteTokens += result.usage.cacheWriteTokens;
  stats.truncated ||= chunk.state.truncated;
  await recordSpendSafe(deps, set, 'ok', result.usage);

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
  try {
    stats.answersStored += await store.insertDecisions(rows);
  } catch (err) {
    return { kind: 'fail', reason: `answer insert failed: ${errCode(err)}` };
  }
  return null;
}

/** Default deferral for a 429 that named no reset time, in milliseconds. */
export const RATE_LIMIT_DEFAULT_DEFER_MS = 60_000;

/** Maps an error from a call to an outcome (DESIGN §3). */
export function classify(err: unknown, signal: AbortSignal): EvalOutcome {
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
    if (err.rateLimited || err.retryAfterMs !== undefined) {
      return { kind: 'defer', delayMs: err.retryAfterMs ?? RATE_LIMIT_DEFAULT_DEFER_MS, reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
    }
    return { kind: 'fail', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  }
  if (err instanceof ProviderMisconfigured) return { kind: 'misconfigured', reason: `${err.code}${err.status ? ` ${err.status}` : ''}` };
  if (err instanceof ProviderError) return { kind: 'refuse', reason: err.code }; // AnswerDefect
  return { kind: 'fail', reason: `unexpected: ${errCode(err)}` };
}

function outcomeLabel(o: EvalOutcome): string {
  return o.kind === 'refuse' ? 'refused' : o.kind === 'fail' ? 'unavailable' : o.kind;
}

async function recordSpendSafe(deps: EvaluateDeps, set: QuestionSet, outcome: string, usage: Usage): Promise<void> {
  try {
    await deps.store.recordSpend({ questionSet: set.name, provider: deps.provider.name, model: deps.provider.model, outcome, calls: 1, usage });
  } catch (err) {
    deps.logger.warn({ set: set.name, err: errCode(err) }, 'spend record failed');
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
