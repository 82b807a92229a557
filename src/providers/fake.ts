import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { questionFingerprint, type Question } from '../decision/questions.js';
import { deriveAnswers } from './answers.js';
import { AnswerDefect, ProviderMisconfigured, ProviderRefusal, ProviderUnavailable } from './errors.js';
import { estimateTokens, type AskOptions, type AskResult, type Provider } from './provider.js';

/**
 * The fake provider (DESIGN §9): deterministic answers derived from (state hash, question
 * fingerprint), a scriptable handler, latency and fault schedule, and a record of every request's
 * bytes. Tests, benchmarks and the offline demo use it; its name is `fake` wherever it is shown.
 */

/** One scripted fault, consumed by one call. */
export type FakeFault =
  | { status: number; retryAfterMs?: number }
  | 'timeout'
  | 'malformed'
  | 'partial'
  | 'wrong_kind';

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
}

function bytesOf(seed: string): Buffer {
  return createHash('sha256').update(seed).digest();
}

/** Deterministic raw answer for one question from (state hash, fingerprint). */
export function fakeRawAnswer(stateHash: string, fingerprint: string, q: Question): Record<string, unknown> {
  const b = bytesOf(`${stateHash}:${fingerprint}`);
  if (q.kind === 'noul') return { probability: Math.round((b.readUInt32BE(0) / 0xffffffff) * 1000) / 1000 };
  const names = q.kind === 'choice' ? Object.keys(q.options).sort() : q.levels.map((_, i) => String(i));
  const weights = names.map((_, i) => 1 + b[i % b.length]);
  const total = weights.reduce((a, w) => a + w, 0);
  const probabilities: Record<string, number> = {};
  names.forEach((n, i) => (probabilities[n] = weights[i] / total));
  return { probabilities };
}

export class FakeProvider implements Provider {
  readonly name = 'fake';
  readonly model: string;
  readonly promptVersion = 'fake-v1';
  readonly effort = null;
  readonly worstCaseCallMs: number;
  /** Every request received, in order (including ones that then failed). */
  readonly requests: FakeRequest[] = [];
  latencyMs: number;
  faults: FakeFault[];
  handler?: FakeProviderOptions['handler'];
  private readonly inputBudgetTokens: number;

  constructor(opts: FakeProviderOptions = {}) {
    this.model = opts.model ?? 'fake-model-1';
    this.latencyMs = opts.latencyMs ?? 0;
    this.faults = [...(opts.faults ?? [])];
    this.handler = opts.handler;
    this.inputBudgetTokens = opts.inputBudgetTokens ?? 200_000;
    this.worstCaseCallMs = this.latencyMs + 1_000;
  }

  async ask(state: string, questions: ReadonlyMap<string, Question>, opts: AskOptions): Promise<AskResult> {
    const promptText = [...questions.values()].map((q) => JSON.stringify(q)).join('\n');
    const inputTokens = estimateTokens(promptText) + estimateTokens(state);
    if (inputTokens > this.inputBudgetTokens) {
      throw new ProviderRefusal(`estimated ${inputTokens} input tokens exceed the budget of ${this.inputBudgetTokens}`, { overBudget: true });
    }
    opts.signal.throwIfAborted();
    await opts.beforeSend();
    const req: FakeRequest = { state, keys: [...questions.keys()], questions, at: Date.now() };
    this.requests.push(req);
    if (this.latencyMs > 0) await sleep(this.latencyMs, undefined, { signal: opts.signal });
    opts.signal.throwIfAborted();
    const fault = this.faults.shift();
    const stateHash = createHash('sha256').update(state, 'utf8').digest('hex');
    let raw: Record<string, unknown> = {};
    if (this.handler) raw = await this.handler(req);
    else for (const [k, q] of questions) raw[k] = fakeRawAnswer(stateHash, questionFingerprint(q, this), q);
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
    const answers = deriveAnswers(questions, raw);
    return {
      answers,
      usage: { inputTokens, outputTokens: 12 * questions.size, cacheReadTokens: 0, cacheWriteTokens: 0 },
      responseModel: this.model,
    };
  }
}

/** Maps an HTTP status to the typed error a real provider would raise for it. */
export function fakeStatusError(status: number, retryAfterMs?: number): Error {
  if (status === 429) return new ProviderUnavailable('fake: 429 rate limited', { status, rateLimited: true, retryAfterMs });
  if (status === 400 || status === 422) return new ProviderRefusal(`fake: ${status} refused`, { status });
  if (status === 401 || status === 403 || status === 404) return new ProviderMisconfigured(`fake: ${status}`, { status });
  return new ProviderUnavailable(`fake: ${status}`, { status, retryAfterMs });
}
