import { createHash } from 'node:crypto';
import type { Question } from '../decision/questions.js';
import {
  ANTHROPIC_BATCH_MAX_BODY_BYTES,
  ANTHROPIC_BATCH_MAX_REQUESTS,
  checkBatchId,
  checkBatchRequests,
  checkCustomId,
} from './batch.js';
import { AnswerDefect, BatchNotFound, ProviderRefusal, ProviderUnavailable } from './errors.js';
import type { AskResult, BatchApi, BatchInfo, BatchRequest, BatchResult } from './provider.js';

/**
 * The fake provider's batch API (DESIGN §7.3), in memory, with the semantics of Anthropic's
 * Message Batches: the same limits and custom-id rules, `in_progress` until it ends, results in no
 * particular order (sorted by a hash of the custom id, so a caller that relies on the submission
 * order fails in tests), each succeeded answer exactly what the fake's `ask` returns for the same
 * request. Time comes from an injected clock; faults are set per batch.
 */

/**
 * What happens to one batch:
 * - `expired`: it ends with every request expired;
 * - `partial`: the first request and every second one after it error (ProviderRefusal, as for an
 *   `invalid_request_error`), the others succeed;
 * - `canceled`: it ends with every request canceled;
 * - `ambiguous`: the batch is created (listed, and it ends as usual) but `submit` throws
 *   ProviderUnavailable, as after a timeout on a create that reached the API;
 * - `lost`: the batch is created, then forgotten: `retrieve`, `results` and `cancel` throw
 *   BatchNotFound and `list` leaves it out;
 * - `{ status }`: `submit` throws the error a real provider raises for that HTTP status, and no
 *   batch is created;
 * - null: none.
 */
export type FakeBatchFault =
  'expired' | 'partial' | 'canceled' | 'ambiguous' | 'lost' | { status: number; retryAfterMs?: number } | null;

/** A batch as the fake holds it. `fault` may be changed by a test until the batch ends. */
export interface FakeBatch {
  readonly id: string;
  /** Clock time of the submit (epoch ms). */
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly requests: readonly BatchRequest[];
  fault: FakeBatchFault;
  status: BatchInfo['status'];
  /** Retrieves so far. */
  retrieves: number;
  /** Clock time it ended at, null before. */
  endedAt: number | null;
  /** The results once it has ended, in the order `results` yields them. */
  outcomes: BatchResult[] | null;
}

/** What the batches need from their FakeProvider. */
export interface FakeBatchesDeps {
  now(): number;
  /** Throws what `ask` throws before any request (the input budget). */
  check(r: BatchRequest): void;
  /** What `ask` returns for the request, without its latency, faults, beforeSend or record. */
  answer(r: BatchRequest): Promise<AskResult>;
  /** Turns a `{status}` fault into the error `ask` would throw for it. */
  statusError(status: number, retryAfterMs?: number): Error;
}

export interface FakeBatchesOptions {
  /**
   * A batch ends at its first retrieve once `now() ≥ createdAt + batchLatencyMs`; 0 ends it at the
   * first retrieve. At 24 h or more it ends at its expiry with every request expired.
   * @defaultValue 0
   */
  latencyMs?: number;
  /** Faults consumed one per submit, in order; submits after the schedule have none. */
  faults?: FakeBatchFault[];
  /** @defaultValue 100000 (Anthropic's limit) */
  maxRequests?: number;
  /** Bound on the sum of `requestBytes` of one batch. @defaultValue 256000000 (Anthropic's body limit) */
  maxBytes?: number;
}

/** Anthropic's processing limit: a batch not ended 24 h after creation expires. */
export const BATCH_EXPIRY_MS = 24 * 60 * 60 * 1000;

export class FakeBatches implements BatchApi {
  readonly maxRequests: number;
  readonly maxBytes: number;
  /** The fake has no host: `fake` names it in the batch availability mark. */
  readonly endpoint = 'fake';
  latencyMs: number;
  faults: FakeBatchFault[];
  /** Every batch created, in submit order (a `lost` one included). */
  readonly submitted: FakeBatch[] = [];
  /** Calls of `retrieve`, for benchmarks that report polling. */
  retrieveCalls = 0;
  readonly #d: FakeBatchesDeps;

  constructor(deps: FakeBatchesDeps, opts: FakeBatchesOptions = {}) {
    this.#d = deps;
    this.latencyMs = opts.latencyMs ?? 0;
    this.faults = [...(opts.faults ?? [])];
    this.maxRequests = opts.maxRequests ?? ANTHROPIC_BATCH_MAX_REQUESTS;
    this.maxBytes = opts.maxBytes ?? ANTHROPIC_BATCH_MAX_BODY_BYTES;
  }

  /** Batches created so far. */
  get count(): number {
    return this.submitted.length;
  }

  /** Requests of every batch created so far. */
  get requestCount(): number {
    return this.submitted.reduce((n, b) => n + b.requests.length, 0);
  }

  requestBytes(r: BatchRequest): number {
    checkCustomId(r.customId);
    if (r.questions.size === 0) throw new TypeError(`batch request "${r.customId}" asks no question`);
    this.#d.check(r);
    const body = { custom_id: r.customId, state: r.state, questions: [...r.questions], explain: r.explain };
    return Buffer.byteLength(JSON.stringify(body)) + 1;
  }

  async submit(requests: readonly BatchRequest[], opts: { signal: AbortSignal }): Promise<BatchInfo> {
    opts.signal.throwIfAborted();
    checkBatchRequests(requests, this.maxRequests);
    const bytes = requests.reduce((n, r) => n + this.requestBytes(r), 0);
    if (bytes > this.maxBytes) throw new TypeError(`a batch holds at most ${this.maxBytes} bytes, got ${bytes}`);
    const fault = this.faults.shift() ?? null;
    if (fault !== null && typeof fault === 'object') throw this.#d.statusError(fault.status, fault.retryAfterMs);
    const createdAt = this.#d.now();
    const batch: FakeBatch = {
      id: `fakebatch_${this.submitted.length + 1}`,
      createdAt,
      expiresAt: createdAt + BATCH_EXPIRY_MS,
      requests: [...requests],
      fault,
      status: 'in_progress',
      retrieves: 0,
      endedAt: null,
      outcomes: null,
    };
    this.submitted.push(batch);
    if (fault === 'ambiguous')
      throw new ProviderUnavailable('fake: batch create timed out; the batch may have been created (list finds it)');
    return info(batch);
  }

  async retrieve(id: string, opts: { signal: AbortSignal }): Promise<BatchInfo> {
    opts.signal.throwIfAborted();
    this.retrieveCalls++;
    const batch = this.#find(id);
    batch.retrieves++;
    await this.#advance(batch);
    return info(batch);
  }

  async list(opts: { signal: AbortSignal; since: number }): Promise<BatchInfo[]> {
    opts.signal.throwIfAborted();
    if (typeof opts.since !== 'number' || !Number.isFinite(opts.since))
      throw new TypeError(`since must be epoch milliseconds, got ${String(opts.since)}`);
    return this.submitted
      .map((b, i) => ({ b, i }))
      .filter(({ b }) => b.fault !== 'lost' && b.createdAt >= opts.since)
      .sort((x, y) => y.b.createdAt - x.b.createdAt || y.i - x.i)
      .map(({ b }) => info(b));
  }

  async cancel(id: string, opts: { signal: AbortSignal }): Promise<BatchInfo> {
    opts.signal.throwIfAborted();
    const batch = this.#find(id);
    if (batch.status === 'in_progress') batch.status = 'canceling';
    return info(batch);
  }

  async *results(
    id: string,
    lookup: (customId: string) => { questions: ReadonlyMap<string, Question>; explain: boolean } | null,
    opts: { signal: AbortSignal },
  ): AsyncGenerator<BatchResult> {
    opts.signal.throwIfAborted();
    const batch = this.#find(id);
    if (batch.status !== 'ended' || batch.outcomes === null)
      throw new TypeError(`batch ${id} has not ended (status ${batch.status})`);
    const asked = new Map(batch.requests.map((r) => [r.customId, r]));
    for (const outcome of batch.outcomes) {
      opts.signal.throwIfAborted();
      const known = lookup(outcome.customId);
      if (known === null) {
        const usage = outcome.type === 'succeeded' ? outcome.result.usage : undefined;
        yield {
          customId: outcome.customId,
          type: 'errored',
          error: new AnswerDefect('fake: batch result for an unknown custom id', { usage }),
        };
      } else if (outcome.type === 'succeeded' && !sameKeys(known.questions, asked.get(outcome.customId)!.questions)) {
        // A real reply is read against the looked-up questions; answers to other questions do not fit them.
        yield {
          customId: outcome.customId,
          type: 'errored',
          error: new AnswerDefect('fake: batch answers do not fit the questions looked up', {
            usage: outcome.result.usage,
          }),
        };
      } else {
        yield outcome;
      }
    }
  }

  #find(id: string): FakeBatch {
    checkBatchId(id);
    const batch = this.submitted.find((b) => b.id === id);
    if (!batch || batch.fault === 'lost') throw new BatchNotFound(id);
    return batch;
  }

  /** Ends the batch when its time has come (or a cancel was asked), computing every outcome. */
  async #advance(batch: FakeBatch): Promise<void> {
    if (batch.status === 'ended') return;
    const now = this.#d.now();
    const expired = batch.createdAt + this.latencyMs >= batch.expiresAt;
    const due = batch.status === 'canceling' || now >= (expired ? batch.expiresAt : batch.createdAt + this.latencyMs);
    if (!due) return;
    const kind =
      batch.status === 'canceling' || batch.fault === 'canceled'
        ? 'canceled'
        : expired || batch.fault === 'expired'
          ? 'expired'
          : null;
    const outcomes: BatchResult[] = [];
    for (const [i, r] of batch.requests.entries()) {
      if (kind !== null) outcomes.push({ customId: r.customId, type: kind });
      else if (batch.fault === 'partial' && i % 2 === 0) {
        outcomes.push({
          customId: r.customId,
          type: 'errored',
          error: new ProviderRefusal('fake: batch request errored (invalid_request_error)', { status: 400 }),
        });
      } else {
        try {
          outcomes.push({ customId: r.customId, type: 'succeeded', result: await this.#d.answer(r) });
        } catch (err) {
          outcomes.push({
            customId: r.customId,
            type: 'errored',
            error: err instanceof Error ? err : new Error(String(err)),
          });
        }
      }
    }
    const order = (id: string) => createHash('sha256').update(id).digest('hex');
    outcomes.sort((a, b) => (order(a.customId) < order(b.customId) ? -1 : 1));
    batch.outcomes = outcomes;
    batch.status = 'ended';
    batch.endedAt = expired && kind === 'expired' ? batch.expiresAt : now;
  }
}

function sameKeys(a: ReadonlyMap<string, Question>, b: ReadonlyMap<string, Question>): boolean {
  return a.size === b.size && [...a.keys()].every((k) => b.has(k));
}

function info(b: FakeBatch): BatchInfo {
  const counts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 };
  if (b.outcomes === null) counts.processing = b.requests.length;
  else for (const o of b.outcomes) counts[o.type]++;
  return { id: b.id, status: b.status, createdAt: b.createdAt, expiresAt: b.expiresAt, counts };
}
