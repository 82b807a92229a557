import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scriptable node:http server on 127.0.0.1:0, shared by the fake Anthropic and OpenAI servers.
 * It records every request (headers, raw and parsed body, arrival and close times) and tracks how
 * many requests are open at once, so tests can prove a provider never sends two at a time.
 */

/** One request as the server saw it. Times are performance.now() milliseconds. */
export interface RecordedRequest {
  readonly index: number;
  readonly method: string;
  readonly path: string;
  /** The query string's parameters (the batch list's `after_id`, `limit`); absent on a request built by hand. */
  readonly query?: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly rawBody: string;
  /** The JSON-parsed body, or undefined when it is not JSON. */
  readonly body: any;
  readonly receivedAt: number;
  /** When the response or the connection closed. */
  closedAt?: number;
  /** True when the connection closed before the response was fully written (client abort, drop). */
  aborted?: boolean;
}

/** What the server does with one request. */
export type Reply =
  /** A JSON body with a status (default 200), optional headers, optionally after a delay (ms). */
  | {
      readonly kind: 'json';
      readonly status?: number;
      readonly body: unknown;
      readonly headers?: Record<string, string>;
      readonly delayMs?: number;
    }
  /** A raw text body (for non-JSON answers). */
  | {
      readonly kind: 'raw';
      readonly status?: number;
      readonly text: string;
      readonly headers?: Record<string, string>;
      readonly delayMs?: number;
    }
  /** Never answers; the request stays open until the client gives up. */
  | { readonly kind: 'hang' }
  /** Destroys the socket without a response (optionally after sending the headers). */
  | { readonly kind: 'drop'; readonly afterHeaders?: boolean; readonly delayMs?: number };

/** Decides the reply from the recorded request; may be async. */
export type Handler = (req: RecordedRequest) => Reply | Promise<Reply>;

export class FakeHttpServer {
  readonly requests: RecordedRequest[] = [];
  /** Requests open right now, and the most ever open at once. */
  inFlight = 0;
  maxInFlight = 0;
  #server: Server;
  #queue: Array<Reply | Handler> = [];
  #fallback: Handler;
  /**
   * Checks every request before the scripted replies and the fallback, as a real API validates a
   * request before answering it: a reply here answers the request and leaves the script untouched.
   */
  protected validate: (req: RecordedRequest) => Reply | undefined = () => undefined;
  /** Rewrites every scripted or fallback reply just before it is sent (the fake Anthropic server's realistic usage). */
  protected finish: (req: RecordedRequest, reply: Reply) => Reply = (_req, reply) => reply;
  #url = '';
  #timers = new Set<NodeJS.Timeout>();

  constructor(fallback: Handler) {
    this.#fallback = fallback;
    this.#server = createServer((req, res) => void this.#handle(req, res));
  }

  /** Starts listening on 127.0.0.1 on a free port. */
  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    const { port } = this.#server.address() as AddressInfo;
    this.#url = `http://127.0.0.1:${port}`;
    return this;
  }

  /** `http://127.0.0.1:PORT`, no trailing slash. */
  get url(): string {
    return this.#url;
  }

  /** Queues replies (or handlers) for the next requests, in order; afterwards the fallback answers. */
  script(...replies: Array<Reply | Handler>): this {
    this.#queue.push(...replies);
    return this;
  }

  /** Replaces the fallback handler used when the queue is empty. */
  setFallback(handler: Handler): this {
    this.#fallback = handler;
    return this;
  }

  /** Requests to `path` (e.g. '/v1/messages'). */
  requestsTo(path: string): RecordedRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  /** Clears the recorded requests, the queue and the in-flight high-water mark. */
  reset(): void {
    this.requests.length = 0;
    this.#queue.length = 0;
    this.maxInFlight = this.inFlight;
  }

  async close(): Promise<void> {
    for (const t of this.#timers) clearTimeout(t);
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const receivedAt = performance.now();
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = rawBody ? JSON.parse(rawBody) : undefined;
    } catch {
      body = undefined;
    }
    const rec: RecordedRequest = {
      index: this.requests.length,
      method: req.method ?? 'GET',
      path: (req.url ?? '/').split('?')[0],
      query: new URLSearchParams((req.url ?? '').split('?')[1] ?? ''),
      headers: req.headers,
      rawBody,
      body,
      receivedAt,
    };
    this.requests.push(rec);
    res.on('close', () => {
      this.inFlight--;
      rec.closedAt = performance.now();
      rec.aborted = !res.writableFinished;
    });

    const invalid = this.validate(rec);
    if (invalid) return this.#respond(invalid, req, res);
    const next = this.#queue.shift() ?? this.#fallback;
    const reply = typeof next === 'function' ? await next(rec) : next;
    this.#respond(this.finish(rec, reply), req, res);
  }

  #later(ms: number | undefined, res: ServerResponse, fn: () => void): void {
    if (!ms) return fn();
    const t = setTimeout(() => {
      this.#timers.delete(t);
      if (!res.destroyed) fn();
    }, ms);
    this.#timers.add(t);
    res.on('close', () => {
      clearTimeout(t);
      this.#timers.delete(t);
    });
  }

  #respond(reply: Reply, req: IncomingMessage, res: ServerResponse): void {
    switch (reply.kind) {
      case 'hang':
        return;
      case 'drop':
        return this.#later(reply.delayMs, res, () => {
          if (reply.afterHeaders) {
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
            res.write('{"partial":');
            setImmediate(() => req.socket.destroy());
          } else {
            req.socket.destroy();
          }
        });
      case 'json':
        return this.#later(reply.delayMs, res, () => {
          const text = JSON.stringify(reply.body);
          res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
          res.end(text);
        });
      case 'raw':
        return this.#later(reply.delayMs, res, () => {
          res.writeHead(reply.status ?? 200, { 'content-type': 'text/plain', ...reply.headers });
          res.end(reply.text);
        });
    }
  }
}

/**
 * Valid raw answers for a request's JSON schema: a probability of 0.5 per `{probability}` question,
 * a uniform distribution per `{probabilities}` question, and a rationale where the schema asks.
 */
export function autoAnswers(schema: any): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries<any>(schema?.properties ?? {})) {
    const a: Record<string, unknown> = {};
    if (member.properties?.rationale) a.rationale = `auto rationale for ${key}`;
    if (member.properties?.probability) a.probability = 0.5;
    if (member.properties?.probabilities) {
      const names: string[] = member.properties.probabilities.required ?? [];
      a.probabilities = Object.fromEntries(names.map((n) => [n, 1 / names.length]));
    }
    out[key] = a;
  }
  return out;
}
