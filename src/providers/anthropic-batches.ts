import type Anthropic from '@anthropic-ai/sdk';
import type { Question } from '../decision/questions.js';
import type { Usage } from '../usage.js';
import { checkBatchId, checkBatchRequests, checkCustomId } from './batch.js';
import { BadEnvelope, classifyAnthropicError, classifyHttpStatus, safeToken, SchemaTooComplex } from './classify.js';
import {
  AnswerDefect,
  BatchNotFound,
  BatchUnsupported,
  ProviderMisconfigured,
  ProviderRefusal,
  ProviderUnavailable,
} from './errors.js';
import type { AskResult, BatchApi, BatchCounts, BatchInfo, BatchRequest, BatchResult } from './provider.js';
import { AttemptTimeout, withRetries, type Fault, type ProviderLogger, type RetryContext } from './retry.js';

/**
 * Anthropic Message Batches (DESIGN §7.3, STACK §3) through the official SDK's
 * `client.messages.batches`: each request's params are exactly the body `ask` sends, and each
 * succeeded message is read by the same parser as `ask`'s replies. Calls run under the provider's
 * retry policy without `beforeSend`. Log lines carry batch ids and counts only, never a request
 * body or a provider error text.
 */

type CreateParams = Anthropic.MessageCreateParamsNonStreaming;
type BatchItem = { custom_id: string; params: CreateParams };

/** What the batches need from their AnthropicProvider; closures over its private parts. */
export interface AnthropicBatchesDeps {
  /** The SDK client (loads the SDK on first use). */
  client(): Promise<Anthropic>;
  /** The Messages body `ask` would send for this request, after the checks `ask` makes before any request. */
  params(r: BatchRequest): CreateParams;
  /** `ask`'s reader of a complete message: stop reason, structured output or forced tool, aliases mapped back. */
  read(message: Anthropic.Message, questions: ReadonlyMap<string, Question>, explain: boolean): AskResult;
  /** The billed usage of a message, as `read` reports it. */
  usage(message: Anthropic.Message): Usage;
  /** A fresh retry context for one call (no beforeSend, the provider's deadline). */
  context(signal: AbortSignal): RetryContext;
  readonly log: ProviderLogger;
  /** Longest wait for the next chunk of a results stream (ms): the per-attempt timeout. */
  readonly idleTimeoutMs: number;
  readonly maxRequests: number;
  readonly maxBodyBytes: number;
  /** The API base URL the batches go to (`BatchApi.endpoint`). */
  readonly endpoint: string;
}

/** Bytes of the body around its requests: `{"requests":[` and `]}`, less the comma the last request does not need. */
const ENVELOPE_BYTES = Buffer.byteLength(JSON.stringify({ requests: [] })) - 1;

/** Batches listed per page (the API's largest page is 1000; 100 keeps one answer small). */
const LIST_PAGE = 100;

const STATUSES = new Set(['in_progress', 'canceling', 'ended']);

/**
 * The HTTP status the Messages API would have sent with an error of this type: an errored batch
 * result carries only the type, and `classifyHttpStatus` decides by status first.
 */
const STATUS_OF_ERROR_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

export class AnthropicBatches implements BatchApi {
  readonly maxRequests: number;
  /** Bound on the sum of `requestBytes` of one batch: the API's body limit less the body's envelope. */
  readonly maxBytes: number;
  readonly endpoint: string;
  readonly #d: AnthropicBatchesDeps;

  constructor(deps: AnthropicBatchesDeps) {
    this.#d = deps;
    this.endpoint = deps.endpoint;
    this.maxRequests = deps.maxRequests;
    this.maxBytes = deps.maxBodyBytes - ENVELOPE_BYTES;
  }

  requestBytes(r: BatchRequest): number {
    return itemBytes(this.#item(r));
  }

  #item(r: BatchRequest): BatchItem {
    checkCustomId(r.customId);
    if (r.questions.size === 0) throw new TypeError(`batch request "${r.customId}" asks no question`);
    return { custom_id: r.customId, params: this.#d.params(r) };
  }

  /**
   * Creates the batch. Only a 429 or a 529 (refused before any work) is retried: after a timeout,
   * a dropped connection or another 5xx the batch may exist, and a second create would pay for
   * every request twice, so the call ends with ProviderUnavailable and `list` tells.
   * @throws TypeError (empty, too many requests or bytes, a bad or repeated custom id, a request
   *   without questions) and what `ask` throws before any request, both before any request.
   * @throws BatchUnsupported when the endpoint has no batch API (`unsupportedBatchRoute`).
   */
  async submit(requests: readonly BatchRequest[], opts: { signal: AbortSignal }): Promise<BatchInfo> {
    opts.signal.throwIfAborted();
    checkBatchRequests(requests, this.maxRequests);
    const items = requests.map((r) => this.#item(r));
    const bytes = items.reduce((n, item) => n + itemBytes(item), ENVELOPE_BYTES);
    if (bytes > this.#d.maxBodyBytes)
      throw new TypeError(`a batch body holds at most ${this.#d.maxBodyBytes} bytes, got ${bytes}`);
    const client = await this.#d.client();
    const info = await withRetries(
      this.#d.context(opts.signal),
      async (signal) => toInfo(await client.messages.batches.create({ requests: items }, { signal })),
      classifyCreate,
    );
    this.#d.log.info(
      { provider: 'anthropic', batchId: safeToken(info.id, 128), requests: items.length, bytes },
      'batch submitted',
    );
    return info;
  }

  /** @throws BatchNotFound for an id the API does not know. */
  async retrieve(id: string, opts: { signal: AbortSignal }): Promise<BatchInfo> {
    checkBatchId(id);
    opts.signal.throwIfAborted();
    const client = await this.#d.client();
    return withRetries(
      this.#d.context(opts.signal),
      async (signal) => toInfo(await client.messages.batches.retrieve(id, {}, { signal })),
      classifyOf(id),
    );
  }

  /** @throws BatchUnsupported when the endpoint has no batch API (`unsupportedBatchRoute`). */
  async list(opts: { signal: AbortSignal; since: number }): Promise<BatchInfo[]> {
    if (typeof opts.since !== 'number' || !Number.isFinite(opts.since))
      throw new TypeError(`since must be epoch milliseconds, got ${String(opts.since)}`);
    opts.signal.throwIfAborted();
    const client = await this.#d.client();
    const out: BatchInfo[] = [];
    let afterId: string | null = null;
    for (;;) {
      const cursor: string | null = afterId;
      const page = await withRetries(
        this.#d.context(opts.signal),
        async (signal) => {
          // The SDK's Page makes `data` an array and `last_id` a non-empty string or null, whatever the body held.
          const p = await client.messages.batches.list(
            { limit: LIST_PAGE, ...(cursor !== null ? { after_id: cursor } : {}) },
            { signal },
          );
          return { infos: p.data.map(toInfo), more: p.has_more === true ? p.last_id : null };
        },
        (err, timedOut) => unsupportedBatchRoute(err, timedOut) ?? classifyAnthropicError(err, timedOut),
      );
      // Newest first: the first batch older than `since` ends the walk.
      const older = page.infos.findIndex((b) => b.createdAt < opts.since);
      out.push(...(older < 0 ? page.infos : page.infos.slice(0, older)));
      if (older >= 0 || page.more === null) return out;
      afterId = page.more;
    }
  }

  async cancel(id: string, opts: { signal: AbortSignal }): Promise<BatchInfo> {
    checkBatchId(id);
    opts.signal.throwIfAborted();
    const client = await this.#d.client();
    const info = await withRetries(
      this.#d.context(opts.signal),
      async (signal) => toInfo(await client.messages.batches.cancel(id, {}, { signal })),
      classifyOf(id),
    );
    this.#d.log.info(
      { provider: 'anthropic', batchId: safeToken(id, 128), status: info.status },
      'batch cancel requested',
    );
    return info;
  }

  /**
   * Streams the results (JSONL, decoded by the SDK). Opening the stream is retried; a stream that
   * breaks or stalls for `idleTimeoutMs` part way throws ProviderUnavailable. A line without a
   * custom id cannot be matched and is skipped (logged); a repeated custom id is skipped.
   */
  async *results(
    id: string,
    lookup: (customId: string) => { questions: ReadonlyMap<string, Question>; explain: boolean } | null,
    opts: { signal: AbortSignal },
  ): AsyncGenerator<BatchResult> {
    const { signal } = opts;
    const info = await this.retrieve(id, opts);
    if (info.status !== 'ended') throw new TypeError(`batch ${id} has not ended (status ${info.status})`);
    const client = await this.#d.client();
    // The stream outlives the attempt that opened it: this controller follows the caller's signal
    // and the idle timeout for as long as the body is read.
    const stream = new AbortController();
    const onAbort = () => stream.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const counts = { succeeded: 0, errored: 0, canceled: 0, expired: 0, skipped: 0 };
    const log = this.#d.log;
    const batchId = safeToken(id, 128);
    try {
      const decoder = await withRetries(
        this.#d.context(signal),
        (attempt) => client.messages.batches.results(id, {}, { signal: AbortSignal.any([attempt, stream.signal]) }),
        classifyOf(id),
      );
      const lines = decoder[Symbol.asyncIterator]();
      const seen = new Set<string>();
      for (;;) {
        let next: IteratorResult<unknown>;
        const idle = setTimeout(() => stream.abort(new AttemptTimeout(this.#d.idleTimeoutMs)), this.#d.idleTimeoutMs);
        try {
          next = await lines.next();
        } catch (err) {
          if (signal.aborted) throw signal.reason;
          const stalled = stream.signal.aborted && stream.signal.reason instanceof AttemptTimeout;
          const fault = classifyAnthropicError(err, stalled);
          throw fault.retry
            ? new ProviderUnavailable(`${fault.error.message} (batch results stream, after ${seen.size} results)`, {
                status: fault.error.status,
              })
            : fault.error;
        } finally {
          clearTimeout(idle);
        }
        if (next.done) break;
        const r = this.#result(next.value, lookup);
        if (r === null || seen.has(r.customId)) {
          counts.skipped++;
          continue;
        }
        seen.add(r.customId);
        counts[r.type]++;
        yield r;
      }
      if (counts.skipped > 0)
        log.warn(
          { provider: 'anthropic', batchId, skipped: counts.skipped },
          'batch result lines without a new custom id skipped',
        );
      log.info({ provider: 'anthropic', batchId, ...counts }, 'batch results read');
    } finally {
      signal.removeEventListener('abort', onAbort);
      // Releases the connection when the caller stops early; a no-op once the body is read.
      stream.abort();
    }
  }

  /** One JSONL line as a BatchResult; null for a line whose custom id is missing. */
  #result(line: unknown, lookup: Parameters<BatchApi['results']>[1]): BatchResult | null {
    const l = line as Partial<Anthropic.Messages.MessageBatchIndividualResponse> | null;
    if (l === null || typeof l !== 'object' || typeof l.custom_id !== 'string') return null;
    const customId = l.custom_id;
    const result = (l.result ?? null) as { type?: unknown; message?: unknown; error?: unknown } | null;
    const type = result !== null && typeof result === 'object' ? result.type : undefined;
    switch (type) {
      case 'succeeded': {
        const message = result!.message as Anthropic.Message;
        if (
          message === null ||
          typeof message !== 'object' ||
          message.type !== 'message' ||
          !Array.isArray(message.content)
        ) {
          return { customId, type: 'errored', error: new AnswerDefect('anthropic: batch result carries no message') };
        }
        const asked = lookup(customId);
        if (asked === null) {
          return {
            customId,
            type: 'errored',
            error: new AnswerDefect('anthropic: batch result for an unknown custom id', {
              usage: this.#d.usage(message),
            }),
          };
        }
        try {
          return { customId, type: 'succeeded', result: this.#d.read(message, asked.questions, asked.explain) };
        } catch (err) {
          return { customId, type: 'errored', error: err instanceof Error ? err : new Error(String(err)) };
        }
      }
      case 'errored':
        return { customId, type: 'errored', error: batchError(result!.error) };
      case 'canceled':
      case 'expired':
        return { customId, type };
      default:
        return {
          customId,
          type: 'errored',
          error: new ProviderUnavailable(
            `anthropic: batch result of unknown type ${typeof type === 'string' ? safeToken(type) : String(type)}`,
          ),
        };
    }
  }
}

function itemBytes(item: BatchItem): number {
  // The SDK sends the body as JSON.stringify of `{requests}`; each request adds its JSON and a comma.
  return Buffer.byteLength(JSON.stringify(item)) + 1;
}

/**
 * A batch object as BatchInfo.
 * @throws BadEnvelope for anything that is not a message_batch with an identifier-like id, a known
 *   status and parseable times (retried like a malformed message envelope).
 */
function toInfo(value: unknown): BatchInfo {
  const b = value as Partial<Anthropic.Messages.MessageBatch> & {
    error?: { type?: unknown };
    _request_id?: string | null;
  };
  const ok =
    b !== null &&
    typeof b === 'object' &&
    b.type === 'message_batch' &&
    typeof b.id === 'string' &&
    safeToken(b.id, 128) === b.id &&
    typeof b.processing_status === 'string' &&
    STATUSES.has(b.processing_status);
  const createdAt = ok ? Date.parse(String(b.created_at)) : NaN;
  const expiresAt = ok ? Date.parse(String(b.expires_at)) : NaN;
  if (!ok || Number.isNaN(createdAt) || Number.isNaN(expiresAt)) {
    const errorType = b && typeof b === 'object' && typeof b.error?.type === 'string' ? b.error.type : null;
    throw new BadEnvelope(errorType, b && typeof b === 'object' ? (b._request_id ?? null) : null);
  }
  const c = (b.request_counts ?? {}) as Partial<Record<keyof BatchCounts, unknown>>;
  const n = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : 0);
  return {
    id: b.id!,
    status: b.processing_status as BatchInfo['status'],
    createdAt,
    expiresAt,
    counts: {
      processing: n(c.processing),
      succeeded: n(c.succeeded),
      errored: n(c.errored),
      canceled: n(c.canceled),
      expired: n(c.expired),
    },
  };
}

/**
 * Classifies a failed create. A 429 or 529 is retried (the API refused before any work); any
 * other retryable fault (a timeout, a dropped connection, another 5xx, a malformed 200) is not:
 * the batch may have been created.
 */
function classifyCreate(err: unknown, timedOut: boolean): Fault {
  const unsupported = unsupportedBatchRoute(err, timedOut);
  if (unsupported) return unsupported;
  const f = classifyAnthropicError(err, timedOut);
  if (!f.retry) return f;
  if (f.error.rateLimited || f.error.status === 529) return f;
  return {
    retry: false,
    error: new ProviderUnavailable(`${f.error.message}; the batch may have been created (list finds it)`, {
      status: f.error.status,
      retryAfterMs: f.error.retryAfterMs,
    }),
  };
}

/**
 * A batch route that does not exist at this endpoint (DESIGN §7.4): a 404 or 405, a 400 that is
 * not about billing (every rule of a batch create is checked before it is sent, so a 400 is the
 * route, not the batch), or a 200 whose body is not a batch object and carries no error type (a
 * gateway's page; an error object in a 200, seen in incidents, stays retryable). null for
 * anything else. Only for the collection routes (create, list): a 404 about one batch is
 * BatchNotFound.
 */
function unsupportedBatchRoute(err: unknown, timedOut: boolean): Fault | null {
  if (timedOut) return null;
  if (err instanceof BadEnvelope)
    return err.errorType === null ? { retry: false, error: new BatchUnsupported(200) } : null;
  const status = (err as { status?: unknown } | null)?.status;
  if (status !== 404 && status !== 405 && status !== 400) return null;
  // Billing and account faults stay provider-wide (ProviderMisconfigured).
  const f = classifyAnthropicError(err, timedOut);
  if (status === 400 && f.error instanceof ProviderMisconfigured) return null;
  return { retry: false, error: new BatchUnsupported(status) };
}

/** Classifies a failed call about one batch: a 404 is BatchNotFound, the rest as `ask`'s calls. */
function classifyOf(id: string): (err: unknown, timedOut: boolean) => Fault {
  return (err, timedOut) => {
    if (!timedOut && (err as { status?: unknown } | null)?.status === 404)
      return { retry: false, error: new BatchNotFound(safeToken(id, 128) ?? '') };
    return classifyAnthropicError(err, timedOut);
  };
}

/**
 * The typed error of an errored batch result (`{type: 'error', error: {type, message}}`), as `ask`
 * would have thrown it for the same API error. The message is read only to classify. A schema too
 * complex is a ProviderRefusal: one batch request cannot be split as `ask` splits a chunk.
 */
function batchError(value: unknown): Error {
  const e = (value ?? {}) as { error?: { type?: unknown; message?: unknown }; request_id?: unknown };
  const type = typeof e.error?.type === 'string' ? e.error.type : null;
  const status =
    (type !== null && Object.prototype.hasOwnProperty.call(STATUS_OF_ERROR_TYPE, type)
      ? STATUS_OF_ERROR_TYPE[type]
      : undefined) ?? 500;
  const fault = classifyHttpStatus('anthropic', status, {
    errorType: type,
    requestId: typeof e.request_id === 'string' ? e.request_id : null,
    text: typeof e.error?.message === 'string' ? e.error.message : null,
  });
  if (fault.error instanceof SchemaTooComplex) {
    return new ProviderRefusal(`anthropic: ${fault.error.message} (a batch request is not split)`, { status });
  }
  return fault.error;
}
