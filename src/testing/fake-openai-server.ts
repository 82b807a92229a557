import { autoAnswers, FakeHttpServer, type Handler, type RecordedRequest, type Reply } from './fake-server-core.js';

/**
 * A fake OpenAI-compatible server (Ollama, vLLM, llama-server, OpenAI): POST /v1/chat/completions
 * and GET /v1/models. The provider's baseURL is `${server.url}/v1`. Each request is answered by the
 * next scripted reply, or else by the fallback, which answers every question of the request's
 * schema validly (taken from `response_format.json_schema.schema`, or in json_object mode from the
 * schema embedded at the end of the system prompt).
 *
 * `rejectJsonSchema` makes the fallback answer every json_schema request with the 400 older
 * llama-server builds send, to exercise the json_object fallback.
 */

export interface CompletionOptions {
  finishReason?: string | null;
  model?: string;
  usage?: Record<string, unknown>;
  refusal?: string;
  delayMs?: number;
  headers?: Record<string, string>;
}

let counter = 0;

/** The schema a request asked for, in either response-format mode. */
function requestedSchema(req: RecordedRequest): any {
  const rf = req.body?.response_format;
  if (rf?.type === 'json_schema') return rf.json_schema?.schema;
  const system: string = req.body?.messages?.find((m: any) => m.role === 'system')?.content ?? '';
  const lastLine = system.split('\n').at(-1) ?? '';
  try {
    return JSON.parse(lastLine);
  } catch {
    return undefined;
  }
}

export class FakeOpenAIServer extends FakeHttpServer {
  models = ['qwen3:8b', 'llama3.2:3b'];
  rejectJsonSchema = false;

  constructor() {
    super((req) => this.defaultReply(req));
  }

  static async start(): Promise<FakeOpenAIServer> {
    return new FakeOpenAIServer().listen();
  }

  /** The provider's baseURL: the server URL with `/v1`. */
  get baseURL(): string {
    return `${this.url}/v1`;
  }

  get completions(): RecordedRequest[] {
    return this.requestsTo('/v1/chat/completions');
  }

  defaultReply(req: RecordedRequest): Reply {
    if (req.method === 'GET' && req.path === '/v1/models') {
      return {
        kind: 'json',
        body: { object: 'list', data: this.models.map((id) => ({ id, object: 'model', owned_by: 'fake' })) },
      };
    }
    if (req.method === 'POST' && req.path === '/v1/chat/completions') {
      if (this.rejectJsonSchema && req.body?.response_format?.type === 'json_schema') {
        return FakeOpenAIServer.error(
          400,
          'invalid_request_error',
          'Either "json_schema" or "grammar" can be specified, but not both',
        );
      }
      return FakeOpenAIServer.autoReply(req, {});
    }
    return FakeOpenAIServer.error(404, 'not_found_error', 'no such route');
  }

  static completion(req: RecordedRequest | undefined, content: string | null, o: CompletionOptions = {}): Reply {
    counter++;
    return {
      kind: 'json',
      status: 200,
      headers: { 'x-request-id': `req_oai_${counter}`, ...o.headers },
      delayMs: o.delayMs,
      body: {
        id: `chatcmpl-${counter}`,
        object: 'chat.completion',
        created: 1_790_000_000,
        model: o.model ?? req?.body?.model ?? 'fake-model',
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content, ...(o.refusal !== undefined ? { refusal: o.refusal } : {}) },
            finish_reason: o.finishReason === undefined ? 'stop' : o.finishReason,
          },
        ],
        usage: { prompt_tokens: 200, completion_tokens: 30, total_tokens: 230, ...o.usage },
      },
    };
  }

  static autoReply(req: RecordedRequest, o: CompletionOptions): Reply {
    return FakeOpenAIServer.completion(req, JSON.stringify(autoAnswers(requestedSchema(req))), o);
  }

  static auto(o: CompletionOptions = {}): Handler {
    return (req) => FakeOpenAIServer.autoReply(req, o);
  }

  /** Content = JSON.stringify(answers). */
  static answer(answers: unknown, o: CompletionOptions = {}): Handler {
    return (req) => FakeOpenAIServer.completion(req, JSON.stringify(answers), o);
  }

  /** Content = arbitrary text. */
  static text(text: string, o: CompletionOptions = {}): Handler {
    return (req) => FakeOpenAIServer.completion(req, text, o);
  }

  /** An OpenAI-style error body `{"error":{message,type,code}}`. */
  static error(
    status: number,
    type: string,
    message = 'fake error',
    headers: Record<string, string> = {},
    code: string | null = null,
  ): Reply {
    return { kind: 'json', status, body: { error: { message, type, param: null, code } }, headers };
  }

  static slow(ms: number, inner: Handler = FakeOpenAIServer.auto()): Handler {
    return async (req) => ({ ...(await inner(req)), delayMs: ms }) as Reply;
  }

  static hang(): Reply {
    return { kind: 'hang' };
  }

  static drop(afterHeaders = false): Reply {
    return { kind: 'drop', afterHeaders };
  }
}
