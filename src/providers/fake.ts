import { setTimeout as sleep } from 'node:timers/promises';
import { questionFingerprint, type Question } from '../decision/questions.js';
import { sha256 } from '../decision/state.js';
import { deriveAnswers } from './answers.js';
import { AnswerDefect, ProviderMisconfigured, ProviderRefusal, ProviderUnavailable } from './errors.js';
import { buildAnswerSchema, buildSystemPrompt, questionAliases } from './prompt.js';
import {
  estimateTokens,
  type AskOptions,
  type AskResult,
  type BatchRequest,
  type CountTokensOptions,
  type Provider,
} from './provider.js';
import { FakeBatches, type FakeBatchFault } from './fake-batches.js';

/**
 * The fake provider (DESIGN §9): deterministic answers derived from (state hash, question
 * fingerprint), a scriptable handler, latency and fault schedule, and a record of every request's
 * bytes. Tests, benchmarks and the offline demo use it; its name is `fake` wherever it is shown.
 */

/** One scripted fault, consumed by one call. */
export type FakeFault = { status: number; retryAfterMs?: number } | 'timeout' | 'malformed' | 'partial' | 'wrong_kind';

/** A request as the fake received it. */
export interface FakeRequest {
  readonly state: string;
  readonly keys: string[];
  readonly questions: ReadonlyMap<string, Question>;
  readonly at: number;
}

export interface FakeProviderOptions {
  /** @defaultValue 'fake-model-1' */
  model?: string;
  /** Delay per call in milliseconds, cancelled by the job's signal. @defaultValue 0 */
  latencyMs?: number;
  /** Faults consumed one per call, in order; calls after the schedule succeed. */
  faults?: FakeFault[];
  /** Overrides the deterministic answers: returns raw answers per key. */
  handler?: (req: FakeRequest) => Record<string, unknown> | Promise<Record<string, unknown>>;
  /** Refuse requests whose estimated input tokens exceed this. @defaultValue 200 000 */
  inputBudgetTokens?: number;
  /** How the fake counts a call's tokens (see FakeUsageMode). @defaultValue 'questions' */
  usage?: FakeUsageMode;
  /** Clock of the batch API (creation times, latency) and of `FakeRequest.at`. @defaultValue Date.now */
  now?: () => number;
  /** false: the fake has no batch API (`batch` is undefined), like a provider without one. @defaultValue true */
  batch?: boolean;
  /** A batch ends at the first retrieve once this much clock time has passed since its submit (ms). @defaultValue 0 */
  batchLatencyMs?: number;
  /** Batch faults consumed one per submit (see FakeBatchFault). */
  batchFaults?: FakeBatchFault[];
  /**
   * Keep every request in `requests` (tests read them back). false keeps none, only the count
   * (`calls`): a long-running worker on the fake (`--provider fake`, `createProvider`) would
   * otherwise hold the state text of every call it ever made. @defaultValue true
   */
  keepRequests?: boolean;
  /** Requests per batch. @defaultValue 100000 */
  batchMaxRequests?: number;
  /** Bound on the sum of `requestBytes` of one batch. @defaultValue 256000000 */
  batchMaxBytes?: number;
}

/**
 * How the fake counts the tokens of a call (its `usage`, its `countTokens` and its input budget):
 * - `questions`: input = the questions' JSON + the state, output = 12 per question. Small numbers
 *   that many tests pin; not what a real request carries.
 * - `prompt`: what the Anthropic request of the same chunk would carry, as `checkInputBudget` and
 *   `callEstimate` count it: input = system prompt + answer schema + state; output = the reply JSON
 *   under the aliases `q1`…`qN`, probabilities at 3 decimals. All through `estimateTokens` (1 token
 *   per 3 UTF-16 code units). For benchmarks that price the fake's usage (scripts/bench-cost.ts).
 */
export type FakeUsageMode = 'questions' | 'prompt';

/**
 * Byte `i` of a sha256 given as 64 hex digits (`sha256`'s output: the one-shot hash's 'buffer'
 * output costs as much as `createHash`, so the bytes are read from the hex).
 */
function byteOf(hex: string, i: number): number {
  return parseInt(hex.slice(2 * i, 2 * i + 2), 16);
}

/** Deterministic raw answer for one question from (state hash, fingerprint). */
function fakeRawAnswer(stateHash: string, fingerprint: string, q: Question): Record<string, unknown> {
  const h = sha256(`${stateHash}:${fingerprint}`);
  // The first four bytes big-endian, as Buffer.readUInt32BE(0) read them.
  if (q.kind === 'noul') return { probability: Math.round((parseInt(h.slice(0, 8), 16) / 0xffffffff) * 1000) / 1000 };
  const names = q.kind === 'choice' ? Object.keys(q.options).sort() : q.levels.map((_, i) => String(i));
  const weights = names.map((_, i) => 1 + byteOf(h, i % 32));
  const total = weights.reduce((a, w) => a + w, 0);
  const probabilities: Record<string, number> = {};
  names.forEach((n, i) => (probabilities[n] = weights[i] / total));
  return { probabilities };
}

/** Input tokens the fake reports for a request (see FakeUsageMode), through `estimateTokens`. */
function fakeInputTokens(
  state: string,
  questions: ReadonlyMap<string, Question>,
  mode: FakeUsageMode = 'questions',
  explain = false,
): number {
  if (mode === 'prompt') {
    return (
      estimateTokens(buildSystemPrompt(questions, { explain })) +
      estimateTokens(JSON.stringify(buildAnswerSchema(questions, { explain }))) +
      estimateTokens(state)
    );
  }
  // The length of the questions' JSON joined by newlines, from each question's JSON length.
  let promptLength = questions.size > 0 ? questions.size - 1 : 0;
  for (const q of questions.values()) promptLength += questionJsonLength(q);
  return Math.ceil(promptLength / 3) + estimateTokens(state);
}

/**
 * `JSON.stringify(q).length`, worked out once per question object: a question is immutable (a
 * resolved or reloaded set makes new objects), and the fake counts every call's questions.
 */
const questionJsonLengths = new WeakMap<Question, number>();
function questionJsonLength(q: Question): number {
  let n = questionJsonLengths.get(q);
  if (n === undefined) questionJsonLengths.set(q, (n = JSON.stringify(q).length));
  return n;
}

/** Output tokens the fake reports for a reply of raw answers `raw` (see FakeUsageMode). */
function fakeOutputTokens(
  questions: ReadonlyMap<string, Question>,
  raw: Record<string, unknown>,
  mode: FakeUsageMode,
): number {
  if (mode === 'questions') return 12 * questions.size;
  const reply = Object.fromEntries(questionAliases(questions).map(([alias, key]) => [alias, raw[key]]));
  return estimateTokens(
    JSON.stringify(reply, (_k, v: unknown) => (typeof v === 'number' ? Math.round(v * 1000) / 1000 : v)),
  );
}

export class FakeProvider implements Provider {
  readonly name = 'fake';
  readonly model: string;
  readonly promptVersion = 'fake-v1';
  readonly effort = null;
  readonly worstCaseCallMs: number;
  /** Every request received, in order (including ones that then failed); empty with `keepRequests: false`. */
  readonly requests: FakeRequest[] = [];
  /** Requests received, each one `requests` would hold, kept there or not. */
  calls = 0;
  readonly #keepRequests: boolean;
  /** Every `countTokens` request, in order. */
  readonly countRequests: FakeRequest[] = [];
  latencyMs: number;
  faults: FakeFault[];
  handler?: FakeProviderOptions['handler'];
  private readonly inputBudgetTokens: number;
  /** How calls are counted (FakeProviderOptions.usage). */
  readonly usageMode: FakeUsageMode;
  /**
   * The in-memory batch API (DESIGN §7.3): each succeeded answer and its usage exactly what `ask`
   * returns for the same request. `batch.submitted` records every batch. Undefined with `batch: false`.
   */
  readonly batch?: FakeBatches;
  readonly #now: () => number;

  constructor(opts: FakeProviderOptions = {}) {
    this.model = opts.model ?? 'fake-model-1';
    this.latencyMs = opts.latencyMs ?? 0;
    this.faults = [...(opts.faults ?? [])];
    this.handler = opts.handler;
    this.inputBudgetTokens = opts.inputBudgetTokens ?? 200_000;
    this.usageMode = opts.usage ?? 'questions';
    this.worstCaseCallMs = this.latencyMs + 1_000;
    this.#now = opts.now ?? Date.now;
    this.#keepRequests = opts.keepRequests !== false;
    if (opts.batch !== false) {
      this.batch = new FakeBatches(
        {
          now: this.#now,
          check: (r) => void this.#checkBudget(r.state, r.questions, r.explain),
          answer: (r) => this.#batchAnswer(r),
          statusError: fakeStatusError,
        },
        {
          latencyMs: opts.batchLatencyMs,
          faults: opts.batchFaults,
          maxRequests: opts.batchMaxRequests,
          maxBytes: opts.batchMaxBytes,
        },
      );
    }
  }

  /** @returns the input tokens of the request. @throws ProviderRefusal (`input_over_budget`) above the budget, as `ask` before any request. */
  #checkBudget(state: string, questions: ReadonlyMap<string, Question>, explain: boolean | undefined): number {
    const inputTokens = fakeInputTokens(state, questions, this.usageMode, explain);
    if (inputTokens > this.inputBudgetTokens) {
      throw new ProviderRefusal(
        `estimated ${inputTokens} input tokens exceed the budget of ${this.inputBudgetTokens}`,
        { overBudget: true },
      );
    }
    return inputTokens;
  }

  /** The raw answers of a request: the handler's, or the deterministic ones of (state hash, fingerprint). */
  async #rawAnswers(req: FakeRequest): Promise<Record<string, unknown>> {
    if (this.handler) return this.handler(req);
    const stateHash = sha256(req.state);
    const raw: Record<string, unknown> = {};
    for (const [k, q] of req.questions) raw[k] = fakeRawAnswer(stateHash, questionFingerprint(q, this), q);
    return raw;
  }

  /** What `ask` returns for raw answers: the derived answers and the usage. @throws AnswerDefect */
  #askResult(questions: ReadonlyMap<string, Question>, raw: Record<string, unknown>, inputTokens: number): AskResult {
    const answers = deriveAnswers(questions, raw);
    return {
      answers,
      usage: {
        inputTokens,
        outputTokens: fakeOutputTokens(questions, raw, this.usageMode),
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
      },
      responseModel: this.model,
    };
  }

  /** One batch request answered as `ask` answers it (no latency, faults or beforeSend; not in `requests`). */
  async #batchAnswer(r: BatchRequest): Promise<AskResult> {
    const inputTokens = this.#checkBudget(r.state, r.questions, r.explain);
    const raw = await this.#rawAnswers({
      state: r.state,
      keys: [...r.questions.keys()],
      questions: r.questions,
      at: this.#now(),
    });
    return this.#askResult(r.questions, raw, inputTokens);
  }

  /**
   * The fake's own exact count: the input tokens its `ask` reports for the same request (as its
   * `usage` mode counts them, FakeUsageMode), so `estimate --exact` runs offline. Records the request in `countRequests`; no latency, no faults, no budget check.
   */
  async countTokens(
    state: string,
    questions: ReadonlyMap<string, Question>,
    opts: CountTokensOptions,
  ): Promise<number> {
    opts.signal.throwIfAborted();
    this.countRequests.push({ state, keys: [...questions.keys()], questions, at: Date.now() });
    return questions.size === 0 ? 0 : fakeInputTokens(state, questions, this.usageMode, opts.explain);
  }

  async ask(state: string, questions: ReadonlyMap<string, Question>, opts: AskOptions): Promise<AskResult> {
    const inputTokens = this.#checkBudget(state, questions, opts.explain);
    opts.signal.throwIfAborted();
    await opts.beforeSend();
    const req: FakeRequest = { state, keys: [...questions.keys()], questions, at: this.#now() };
    this.calls++;
    if (this.#keepRequests) this.requests.push(req);
    if (this.latencyMs > 0) await sleep(this.latencyMs, undefined, { signal: opts.signal });
    opts.signal.throwIfAborted();
    const fault = this.faults.shift();
    const raw = await this.#rawAnswers(req);
    if (fault !== undefined) {
      if (fault === 'timeout') throw new ProviderUnavailable('fake: request timed out');
      if (fault === 'malformed') throw new AnswerDefect('fake: response is not valid JSON');
      if (fault === 'partial') delete raw[[...questions.keys()][0]];
      if (fault === 'wrong_kind') {
        const k = [...questions.keys()][0];
        raw[k] = questions.get(k)!.kind === 'noul' ? { probabilities: { a: 1 } } : { probability: 0.5 };
      }
      if (typeof fault === 'object') throw fakeStatusError(fault.status, fault.retryAfterMs);
    }
    return this.#askResult(questions, raw, inputTokens);
  }
}

/** Maps an HTTP status to the typed error a real provider would raise for it. */
function fakeStatusError(status: number, retryAfterMs?: number): Error {
  if (status === 429)
    return new ProviderUnavailable('fake: 429 rate limited', { status, rateLimited: true, retryAfterMs });
  if (status === 400 || status === 422) return new ProviderRefusal(`fake: ${status} refused`, { status });
  if (status === 401 || status === 403 || status === 404)
    return new ProviderMisconfigured(`fake: ${status}`, { status });
  return new ProviderUnavailable(`fake: ${status}`, { status, retryAfterMs });
}
