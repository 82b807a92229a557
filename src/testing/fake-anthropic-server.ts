import { autoAnswers, FakeHttpServer, type Handler, type RecordedRequest, type Reply } from './fake-server-core.js';
import { COUNT_TOKENS_PATH, countTokensReply } from './fake-anthropic-count-tokens.js';
import { FakeAnthropicUsage, type FakeAnthropicUsageOptions } from './fake-anthropic-usage.js';
import { FakeAnthropicBatches } from './fake-anthropic-batches.js';

/**
 * A fake Anthropic API speaking the Messages wire format (DESIGN §14): POST /v1/messages, plus
 * GET /v1/models and /v1/models/{id} for a doctor check, and the Message Batches endpoints
 * (`server.batches`, fake-anthropic-batches.ts). Point the real SDK at `server.url` as its
 * baseURL. Each request is answered by the next scripted reply, or else by the fallback, which
 * answers every question of the request's schema validly (as structured output, or as a tool_use
 * block when the request forces a tool).
 *
 * Replies come from the static builders: `answer`, `toolAnswer`, `text`, `error`, `rateLimited`,
 * `overloaded`, `errorIn200`, `truncated`, `refusal`, `slow`, `hang`, `drop`.
 */

export interface MessageOptions {
  stopReason?: string;
  model?: string;
  usage?: Partial<{
    input_tokens: number;
    output_tokens: number;
    cache_read_input_tokens: number | null;
    cache_creation_input_tokens: number | null;
  }>;
  /** Blocks put before the answer (e.g. a thinking block), to prove blocks are selected by type. */
  leadingBlocks?: unknown[];
  delayMs?: number;
  headers?: Record<string, string>;
}

let counter = 0;

function envelope(req: RecordedRequest | undefined, content: unknown[], o: MessageOptions, defaultStop: string) {
  counter++;
  return {
    id: `msg_fake_${counter}`,
    type: 'message',
    role: 'assistant',
    model: o.model ?? req?.body?.model ?? 'claude-fake',
    content: [...(o.leadingBlocks ?? []), ...content],
    stop_reason: o.stopReason ?? defaultStop,
    stop_sequence: null,
    stop_details: null,
    usage: {
      input_tokens: 100,
      output_tokens: 20,
      cache_creation_input_tokens: null,
      cache_read_input_tokens: null,
      ...o.usage,
    },
  };
}

const json = (
  body: unknown,
  o: { status?: number; headers?: Record<string, string>; delayMs?: number } = {},
): Reply => ({
  kind: 'json',
  status: o.status ?? 200,
  body,
  headers: { 'request-id': `req_fake_${++counter}`, ...o.headers },
  delayMs: o.delayMs,
});

/** A handler that answers as a message whose text block is the given text. */
function textReply(text: string, o: MessageOptions, defaultStop = 'end_turn'): Handler {
  return (req) => json(envelope(req, [{ type: 'text', text, citations: null }], o, defaultStop), o);
}

/**
 * Property names the Messages API takes at the top level of a tool's `input_schema`. A request
 * with any other name gets a 400 invalid_request_error naming `tools.N.custom.input_schema.properties`
 * (reported by many tool authors; only top-level names are checked), so a question key such as
 * `conv:bd-7h7` cannot be a property name on the forced-tool path (DESIGN §9.2).
 */
export const TOOL_PROPERTY_KEY = /^[a-zA-Z0-9_.-]{1,64}$/;

/** The 400 the API sends for a tool whose input_schema has a property name it refuses; undefined when all are legal. */
function toolPropertyKeyError(req: RecordedRequest): Reply | undefined {
  if (req.method !== 'POST' || req.path !== '/v1/messages' || !Array.isArray(req.body?.tools)) return undefined;
  const bad = (req.body.tools as any[]).findIndex((t) =>
    Object.keys(t?.input_schema?.properties ?? {}).some((k) => !TOOL_PROPERTY_KEY.test(k)),
  );
  if (bad < 0) return undefined;
  return FakeAnthropicServer.errorReply(
    400,
    'invalid_request_error',
    `tools.${bad}.custom.input_schema.properties: Property keys should match pattern '^[a-zA-Z0-9_.-]{1,64}$'`,
  );
}

export class FakeAnthropicServer extends FakeHttpServer {
  /** Models the doctor check can find. */
  models = ['claude-haiku-5-5', 'claude-haiku-4-5'];

  /**
   * Realistic usage (fake-anthropic-usage.ts): token counts estimated from each request and a
   * prompt cache with the API's minimums and TTLs, in place of the usage of every message reply.
   * null (the default) keeps the fixed usage 100 / 20. `reset()` leaves its cache alone.
   */
  usageModel: FakeAnthropicUsage | null;

  /** Message Batches (fake-anthropic-batches.ts): the batches created, their faults, their answers. `reset()` leaves them alone. */
  readonly batches = new FakeAnthropicBatches({
    url: () => this.url,
    answer: (req) => FakeAnthropicServer.autoReply(req, {}),
    check: toolPropertyKeyError,
    finish: (req, reply) => this.finish(req, reply),
  });

  /** @param opts.realisticUsage turn on `usageModel` (with its clock). @defaultValue off */
  constructor(opts: { realisticUsage?: boolean | FakeAnthropicUsageOptions } = {}) {
    super((req) => this.defaultReply(req));
    this.validate = (req) => toolPropertyKeyError(req) ?? this.batches.validate(req);
    const u = opts.realisticUsage;
    this.usageModel = u ? new FakeAnthropicUsage(u === true ? {} : u) : null;
    this.finish = (req, reply) => (this.usageModel ? this.usageModel.applyTo(req, reply) : reply);
  }

  /** Starts a fake server on 127.0.0.1:0. */
  static async start(
    opts: { realisticUsage?: boolean | FakeAnthropicUsageOptions } = {},
  ): Promise<FakeAnthropicServer> {
    return new FakeAnthropicServer(opts).listen();
  }

  /** Requests to POST /v1/messages, in arrival order. */
  get messages(): RecordedRequest[] {
    return this.requestsTo('/v1/messages');
  }

  defaultReply(req: RecordedRequest): Reply {
    if (req.method === 'GET' && req.path === '/v1/models') {
      return json({
        data: this.models.map((id) => ({ id, type: 'model', display_name: id, created_at: '2026-10-07T00:00:00Z' })),
        has_more: false,
        first_id: this.models[0] ?? null,
        last_id: this.models.at(-1) ?? null,
      });
    }
    const m = /^\/v1\/models\/([^/]+)$/.exec(req.path);
    if (req.method === 'GET' && m) {
      const id = decodeURIComponent(m[1]);
      if (!this.models.includes(id)) return FakeAnthropicServer.errorReply(404, 'not_found_error', `model: ${id}`);
      return json({ id, type: 'model', display_name: `Fake ${id}`, created_at: '2026-10-07T00:00:00Z' });
    }
    if (req.method === 'POST' && req.path === '/v1/messages') return FakeAnthropicServer.autoReply(req, {});
    if (req.method === 'POST' && req.path === COUNT_TOKENS_PATH) return countTokensReply(req);
    const batchReply = this.batches.route(req);
    if (batchReply) return batchReply;
    return FakeAnthropicServer.errorReply(404, 'not_found_error', 'no such route');
  }

  /** Valid answers to whatever the request asked, in the request's mode (text or forced tool). */
  static autoReply(req: RecordedRequest, o: MessageOptions): Reply {
    const tool = req.body?.tools?.[0];
    if (tool) return FakeAnthropicServer.toolAnswer(autoAnswers(tool.input_schema), o)(req) as Reply;
    return textReply(JSON.stringify(autoAnswers(req.body?.output_config?.format?.schema)), o)(req) as Reply;
  }

  /** Structured output: a text block holding `JSON.stringify(answers)`. */
  static answer(answers: unknown, o: MessageOptions = {}): Handler {
    return textReply(JSON.stringify(answers), o);
  }

  /** Valid answers to the request's schema (like the fallback), with options. */
  static auto(o: MessageOptions = {}): Handler {
    return (req) => FakeAnthropicServer.autoReply(req, o);
  }

  /** Forced-tool reply: a tool_use block whose input is `input`. */
  static toolAnswer(input: unknown, o: MessageOptions = {}): Handler {
    return (req) =>
      json(
        envelope(
          req,
          [
            {
              type: 'tool_use',
              id: 'toolu_fake',
              name: req.body?.tool_choice?.name ?? 'record_answers',
              input,
              caller: { type: 'direct' },
            },
          ],
          o,
          'tool_use',
        ),
        o,
      );
  }

  /** A text block with arbitrary (e.g. malformed) text. */
  static text(text: string, o: MessageOptions = {}): Handler {
    return textReply(text, o);
  }

  /** stop_reason max_tokens with a cut-off JSON text. */
  static truncated(): Handler {
    return textReply('{"blocked": {"probab', {}, 'max_tokens');
  }

  /** stop_reason refusal with no answer. */
  static refusal(): Handler {
    return (req) => json(envelope(req, [], {}, 'refusal'));
  }

  /** An API error with the wire shape `{"type":"error","error":{type,message}}`. */
  static errorReply(
    status: number,
    type: string,
    message = 'fake error',
    headers: Record<string, string> = {},
    details?: unknown,
  ): Reply {
    return json({ type: 'error', error: { type, message, ...(details ? { details } : {}) } }, { status, headers });
  }

  static error(status: number, type: string, message?: string, headers?: Record<string, string>): Reply {
    return FakeAnthropicServer.errorReply(status, type, message, headers);
  }

  /** 529 overloaded_error. */
  static overloaded(headers?: Record<string, string>): Reply {
    return FakeAnthropicServer.errorReply(529, 'overloaded_error', 'Overloaded', headers);
  }

  /** 429 rate_limit_error with `retry-after` in seconds (as the API sends it). */
  static rateLimited(retryAfterSeconds?: number, extraHeaders: Record<string, string> = {}): Reply {
    const headers =
      retryAfterSeconds === undefined ? extraHeaders : { 'retry-after': String(retryAfterSeconds), ...extraHeaders };
    return FakeAnthropicServer.errorReply(429, 'rate_limit_error', 'Rate limited', headers);
  }

  /** An error object delivered with status 200 (seen during incidents). */
  static errorIn200(type = 'overloaded_error'): Reply {
    return json({ type: 'error', error: { type, message: 'Overloaded' } }, { status: 200 });
  }

  /** The reply `inner` after `ms` milliseconds (to trigger the attempt timeout). */
  static slow(ms: number, inner: Handler = FakeAnthropicServer.auto()): Handler {
    return async (req) => ({ ...(await inner(req)), delayMs: ms }) as Reply;
  }

  /** Never answers. */
  static hang(): Reply {
    return { kind: 'hang' };
  }

  /** Destroys the connection without a response. */
  static drop(afterHeaders = false): Reply {
    return { kind: 'drop', afterHeaders };
  }
}
