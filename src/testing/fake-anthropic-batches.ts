import type { RecordedRequest, Reply } from './fake-server-core.js';

/**
 * The Message Batches endpoints of the fake Anthropic API (STACK §3), in memory:
 * POST /v1/messages/batches, GET /v1/messages/batches (newest first, paged with `after_id` as the
 * SDK pages), GET /v1/messages/batches/{id}, GET /v1/messages/batches/{id}/results (JSONL) and
 * POST /v1/messages/batches/{id}/cancel. Each request of a batch is answered like a POST
 * /v1/messages carrying its params (the server's auto answer unless `answer` is replaced), when the
 * batch ends: by default at the first retrieve after its creation. Faults are set per batch
 * (`plan`, or on the batch itself before it ends).
 */

/**
 * - `expired`: every result is `expired` (as when 24 h pass);
 * - `partial`: the first request and every second one after it are `errored` with an
 *   invalid_request_error, the rest answered;
 * - `canceled`: every result is `canceled`, as after a cancel by someone else.
 */
export type FakeServerBatchFault = 'expired' | 'partial' | 'canceled' | null;

/**
 * How an endpoint without a batch API answers the batch routes (DESIGN §7.4), as gateways and
 * proxies in front of the Messages API do: `404` and `405` with a body of their own, `400` with a
 * body that is no Anthropic error, `not_a_batch` a 200 whose JSON body is no batch object.
 */
export type FakeServerBatchRoute = 'batches' | 404 | 405 | 400 | 'not_a_batch';

/** One request of a batch as it was sent. */
export interface FakeServerBatchRequest {
  readonly custom_id: string;
  readonly params: any;
}

/** A batch the fake server holds. Fields a test may change before the batch ends: `fault`, `endAfterRetrieves`, `rawResults`. */
export interface FakeServerBatch {
  readonly id: string;
  /** Server clock at creation (epoch ms). */
  readonly createdAt: number;
  readonly requests: readonly FakeServerBatchRequest[];
  status: 'in_progress' | 'canceling' | 'ended';
  /** Retrieves so far (the SDK's `results()` retrieves once too). */
  retrieves: number;
  /** The retrieve at which the batch ends (1: the first after creation). */
  endAfterRetrieves: number;
  fault: FakeServerBatchFault;
  cancelInitiatedAt: number | null;
  endedAt: number | null;
  /** The result lines once ended, in the order they are sent (not the request order). */
  results: Array<{ custom_id: string; result: unknown }> | null;
  /** When set, the body of the results endpoint instead of `results` (for malformed lines). */
  rawResults?: string;
}

/** Settings of the next batch created. */
export interface FakeServerBatchPlan {
  fault?: FakeServerBatchFault;
  endAfterRetrieves?: number;
}

/** What the batches need from their server. */
export interface FakeAnthropicBatchesDeps {
  /** The server's base URL, for `results_url`. */
  url(): string;
  /** The default answer of one request, as the server answers a POST /v1/messages. */
  answer(req: RecordedRequest): Reply;
  /** The server's request validation of a POST /v1/messages (a 400 becomes an errored result). */
  check(req: RecordedRequest): Reply | undefined;
  /** The server's last rewrite of a message reply (realistic usage). */
  finish(req: RecordedRequest, reply: Reply): Reply;
}

const BATCHES = '/v1/messages/batches';
const ONE = /^\/v1\/messages\/batches\/([^/]+)(\/results|\/cancel)?$/;
const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;
const DAY_MS = 24 * 60 * 60 * 1000;

let counter = 0;

function json(body: unknown, status = 200): Reply {
  return { kind: 'json', status, body, headers: { 'request-id': `req_fakebatch_${++counter}` } };
}

function apiError(status: number, type: string, message: string): Reply {
  return json({ type: 'error', error: { type, message } }, status);
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export class FakeAnthropicBatches {
  /** Every batch created, in creation order. */
  readonly batches: FakeServerBatch[] = [];
  /** Requests per batch (the API's limit); more is a 400. */
  maxRequests = 100_000;
  /** Bytes of one create body (the API's 256 MB); more is a 413. */
  maxBodyBytes = 256_000_000;
  /** The retrieve at which a batch without a plan ends. */
  endAfterRetrieves = 1;
  /** Server clock (created_at, expires_at, ended_at). */
  now: () => number = Date.now;
  /** How every batch route answers: `batches` (the default) as the API does, or as an endpoint without one. */
  routeMode: FakeServerBatchRoute = 'batches';
  /**
   * Answers one request of a batch, given a request shaped like a POST /v1/messages with its params
   * as the body. A JSON 200 message reply succeeds; a JSON error reply (`errorReply`) becomes an
   * errored result carrying its error object; anything else an errored api_error.
   */
  answer: (req: RecordedRequest, customId: string) => Reply;
  readonly #d: FakeAnthropicBatchesDeps;
  #plans: FakeServerBatchPlan[] = [];

  constructor(deps: FakeAnthropicBatchesDeps) {
    this.#d = deps;
    this.answer = (req) => deps.answer(req);
  }

  /** Queues settings for the next batches created, one per batch, in order. */
  plan(...plans: FakeServerBatchPlan[]): this {
    this.#plans.push(...plans);
    return this;
  }

  get(id: string): FakeServerBatch | undefined {
    return this.batches.find((b) => b.id === id);
  }

  /** Forgets every batch and plan. */
  clear(): void {
    this.batches.length = 0;
    this.#plans.length = 0;
  }

  /** The 400 or 413 the API sends for a create it refuses as a whole; undefined for any other request. */
  validate(req: RecordedRequest): Reply | undefined {
    if (req.method !== 'POST' || req.path !== BATCHES) return undefined;
    if (this.routeMode !== 'batches') return this.#withoutBatches();
    if (Buffer.byteLength(req.rawBody) > this.maxBodyBytes)
      return apiError(
        413,
        'request_too_large',
        `Request exceeds the maximum allowed number of bytes (${this.maxBodyBytes})`,
      );
    const requests: unknown = req.body?.requests;
    if (!Array.isArray(requests)) return apiError(400, 'invalid_request_error', 'requests: Field required');
    if (requests.length === 0)
      return apiError(400, 'invalid_request_error', 'requests: List should have at least 1 item');
    if (requests.length > this.maxRequests)
      return apiError(400, 'invalid_request_error', `requests: List should have at most ${this.maxRequests} items`);
    const seen = new Set<string>();
    for (const [i, r] of requests.entries()) {
      const id: unknown = r?.custom_id;
      if (typeof id !== 'string' || !CUSTOM_ID.test(id)) {
        return apiError(
          400,
          'invalid_request_error',
          `requests.${i}.custom_id: String should match pattern '${CUSTOM_ID.source}'`,
        );
      }
      if (seen.has(id))
        return apiError(400, 'invalid_request_error', `requests.${i}.custom_id: Duplicate custom_id found: ${id}`);
      seen.add(id);
      if (r.params === null || typeof r.params !== 'object')
        return apiError(400, 'invalid_request_error', `requests.${i}.params: Field required`);
    }
    return undefined;
  }

  /** The reply of a batch endpoint; undefined when `req` is not for one. */
  route(req: RecordedRequest): Reply | undefined {
    if (this.routeMode !== 'batches' && (req.path === BATCHES || req.path.startsWith(`${BATCHES}/`)))
      return this.#withoutBatches();
    if (req.path === BATCHES) {
      if (req.method === 'POST') return this.#create(req);
      if (req.method === 'GET') return this.#list(req);
      return undefined;
    }
    const m = ONE.exec(req.path);
    if (!m) return undefined;
    const batch = this.get(decodeURIComponent(m[1]));
    const what = m[2] ?? '';
    if (
      !(req.method === 'GET' && (what === '' || what === '/results')) &&
      !(req.method === 'POST' && what === '/cancel')
    )
      return undefined;
    if (!batch) return apiError(404, 'not_found_error', 'message batch not found');
    if (what === '/results') return this.#results(batch);
    if (what === '/cancel') {
      if (batch.status === 'in_progress') {
        batch.status = 'canceling';
        batch.cancelInitiatedAt = this.now();
      }
      return json(this.#object(batch));
    }
    batch.retrieves++;
    if (batch.status === 'canceling' || (batch.status === 'in_progress' && batch.retrieves >= batch.endAfterRetrieves))
      this.#end(batch);
    return json(this.#object(batch));
  }

  /** A gateway's answer to a route it does not have (`routeMode`). */
  #withoutBatches(): Reply {
    switch (this.routeMode) {
      case 404:
        return { kind: 'json', status: 404, body: { detail: 'Not Found' } };
      case 405:
        return { kind: 'json', status: 405, body: { detail: 'Method Not Allowed' }, headers: { allow: 'POST' } };
      case 400:
        return { kind: 'json', status: 400, body: { error: { message: 'unsupported path', code: 'bad_request' } } };
      default:
        return { kind: 'json', status: 200, body: { status: 'ok', service: 'llm-gateway' } };
    }
  }

  #create(req: RecordedRequest): Reply {
    const plan = this.#plans.shift() ?? {};
    const batch: FakeServerBatch = {
      id: `msgbatch_fake${String(++counter).padStart(8, '0')}`,
      createdAt: this.now(),
      requests: (req.body.requests as any[]).map((r) => ({ custom_id: r.custom_id, params: r.params })),
      status: 'in_progress',
      retrieves: 0,
      endAfterRetrieves: plan.endAfterRetrieves ?? this.endAfterRetrieves,
      fault: plan.fault ?? null,
      cancelInitiatedAt: null,
      endedAt: null,
      results: null,
    };
    this.batches.push(batch);
    return json(this.#object(batch));
  }

  /** Newest first; `after_id` continues after that batch, `before_id` before it; `limit` 1–1000, default 20. */
  #list(req: RecordedRequest): Reply {
    const q = req.query ?? new URLSearchParams();
    const limit = q.has('limit') ? Number(q.get('limit')) : 20;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      return apiError(400, 'invalid_request_error', 'limit: Input should be between 1 and 1000');
    const all = this.batches
      .map((b, i) => ({ b, i }))
      .sort((x, y) => y.b.createdAt - x.b.createdAt || y.i - x.i)
      .map(({ b }) => b);
    let from = 0;
    let to = all.length;
    const after = q.get('after_id');
    const before = q.get('before_id');
    if (after !== null) from = all.findIndex((b) => b.id === after) + 1;
    if (before !== null)
      to = Math.max(
        0,
        all.findIndex((b) => b.id === before),
      );
    const page =
      before !== null && after === null
        ? all.slice(Math.max(from, to - limit), to)
        : all.slice(from, Math.min(to, from + limit));
    const more = before !== null && after === null ? to - limit > from : from + limit < to;
    return json({
      data: page.map((b) => this.#object(b)),
      has_more: more,
      first_id: page[0]?.id ?? null,
      last_id: page.at(-1)?.id ?? null,
    });
  }

  #results(batch: FakeServerBatch): Reply {
    if (batch.results === null)
      return apiError(400, 'invalid_request_error', 'message batch has not ended; its results are not available yet');
    const text = batch.rawResults ?? batch.results.map((r) => JSON.stringify(r)).join('\n') + '\n';
    return {
      kind: 'raw',
      status: 200,
      text,
      headers: { 'content-type': 'application/binary', 'request-id': `req_fakebatch_${++counter}` },
    };
  }

  /** Ends the batch: every request's result, from the fault, the cancel or the answer. */
  #end(batch: FakeServerBatch): void {
    const canceled = batch.status === 'canceling' || batch.fault === 'canceled';
    const results = batch.requests.map((r, i) => {
      if (canceled) return { custom_id: r.custom_id, result: { type: 'canceled' } };
      if (batch.fault === 'expired') return { custom_id: r.custom_id, result: { type: 'expired' } };
      if (batch.fault === 'partial' && i % 2 === 0) {
        return { custom_id: r.custom_id, result: errored('invalid_request_error', 'fake: this request was refused') };
      }
      return { custom_id: r.custom_id, result: this.#answerOne(r) };
    });
    // Results are not in request order (the API says so): the fake sends them reversed.
    batch.results = results.reverse();
    batch.status = 'ended';
    batch.endedAt = this.now();
    if (canceled) batch.cancelInitiatedAt ??= batch.endedAt;
  }

  #answerOne(r: FakeServerBatchRequest): unknown {
    const req: RecordedRequest = {
      index: -1,
      method: 'POST',
      path: '/v1/messages',
      headers: {},
      rawBody: JSON.stringify(r.params),
      body: r.params,
      receivedAt: performance.now(),
    };
    const reply = this.#d.finish(req, this.#d.check(req) ?? this.answer(req, r.custom_id));
    if (reply.kind === 'json') {
      const body = reply.body as { type?: unknown; error?: { type?: unknown; message?: unknown } } | null;
      if ((reply.status ?? 200) === 200 && body?.type === 'message') return { type: 'succeeded', message: body };
      if (body?.type === 'error' && typeof body.error?.type === 'string') {
        return errored(body.error.type, typeof body.error.message === 'string' ? body.error.message : 'error');
      }
    }
    return errored('api_error', 'Internal server error');
  }

  #object(b: FakeServerBatch) {
    const counts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 };
    if (b.results === null) counts.processing = b.requests.length;
    else for (const r of b.results) counts[(r.result as { type: keyof typeof counts }).type]++;
    return {
      id: b.id,
      type: 'message_batch',
      processing_status: b.status,
      request_counts: counts,
      ended_at: iso(b.endedAt),
      created_at: iso(b.createdAt),
      expires_at: iso(b.createdAt + DAY_MS),
      archived_at: null,
      cancel_initiated_at: iso(b.cancelInitiatedAt),
      results_url: b.status === 'ended' ? `${this.#d.url()}${BATCHES}/${encodeURIComponent(b.id)}/results` : null,
    };
  }
}

/** An errored result as the API writes it: `{type: 'errored', error: {type: 'error', error: {type, message}, request_id}}`. */
function errored(type: string, message: string) {
  return { type: 'errored', error: { type: 'error', error: { type, message }, request_id: null } };
}
