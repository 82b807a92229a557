import type * as AnthropicSdk from '@anthropic-ai/sdk';
import { ProviderMisconfigured, ProviderRefusal, ProviderUnavailable, SchemaRejected } from './errors.js';
import { parseRetryAfter, type Fault } from './retry.js';
import { ownCode, VerdictError } from '../errors.js';

/**
 * Maps SDK and HTTP failures onto the typed provider errors (DESIGN §9) and the retry split.
 * Pure functions. Messages carry the provider name, HTTP status, error `type` names, error codes,
 * request ids and counts only: never a provider's error text (it can echo the request, i.e. item
 * or question text), never a key. The provider's text is read here, only to classify.
 */

/** The API rejected the answer schema as too complex: the caller splits the chunk in halves. */
export class SchemaTooComplex extends VerdictError {
  readonly code = 'schema_too_complex';
  constructor(
    readonly status: number,
    readonly requestId: string | null,
  ) {
    super(`HTTP ${status}: answer schema too complex${requestId ? ` (request ${requestId})` : ''}`);
  }
}

/** An OpenAI-compatible server rejected `response_format: json_schema`: fall back to json_object. */
export class ResponseFormatRejected extends VerdictError {
  readonly code = 'response_format_rejected';
  constructor(readonly status: number) {
    super(`HTTP ${status}: response format rejected`);
  }
}

/**
 * A 200 whose body is not a usable message: an error object delivered with status 200 (seen for
 * `overloaded_error` during incidents), or an envelope of the wrong shape (a proxy's page).
 */
export class BadEnvelope extends VerdictError {
  readonly code = 'bad_envelope';
  constructor(
    readonly errorType: string | null,
    readonly requestId: string | null,
  ) {
    super(
      `HTTP 200 carrying ${errorType ? `error ${errorType}` : 'no message'}${requestId ? ` (request ${requestId})` : ''}`,
    );
  }
}

/** Error codes (`error.details.error_code`) that mean the account cannot pay or is held. */
const ACCOUNT_CODES = /(_spend_limit_reached|organization_on_hold|billing_unavailable|insufficient_quota)$/;
/** Provider error text that means the account has no credit (Anthropic sends it as a 400). */
const BILLING_TEXT = /credit balance|billing|insufficient.?(quota|funds|credit)|spend(ing)? limit|usage limits?/i;
/** Provider error text of a schema the API would not compile because of its size. */
const TOO_COMPLEX_TEXT =
  /(grammar|schema)[^.]{0,80}(too (large|complex|big)|exceeds)|too many (properties|optional|strict|enum)/i;
/** Provider error text that is about the schema or the response format at all. */
const SCHEMA_TEXT = /schema|output_config|output_format|response_format|input_schema|grammar/i;

/**
 * A provider-chosen token (error type, error code, request id) is kept only when it looks like an
 * identifier: these strings come from the response, and logs carry ids and outcomes, never
 * provider text (DESIGN §1 principle 9). Anything else is replaced by a fixed marker.
 */
export function safeToken(v: string | null | undefined, max = 64): string | null {
  if (!v) return null;
  return /^[A-Za-z0-9_.:-]+$/.test(v) && v.length <= max ? v : '[unprintable]';
}

function describe(
  provider: string,
  status: number | undefined,
  type: string | null | undefined,
  requestId: string | null | undefined,
  code?: string | null,
): string {
  const parts = [`${provider}:`, status !== undefined ? `HTTP ${status}` : 'no response'];
  const t = safeToken(type);
  const c = safeToken(code);
  const r = safeToken(requestId, 128);
  if (t) parts.push(t);
  if (c) parts.push(`(${c})`);
  if (r) parts.push(`(request ${r})`);
  return parts.join(' ');
}

/** Which typed error an error-type name means when the HTTP status does not settle it. */
function byErrorType(errorType: string | null, status: number | undefined, msg: string): Fault | null {
  switch (errorType) {
    case 'overloaded_error':
    case 'api_error':
    case 'timeout_error':
      return { retry: true, error: new ProviderUnavailable(msg, { status }) };
    case 'rate_limit_error':
      return { retry: true, error: new ProviderUnavailable(msg, { status, rateLimited: true }) };
    case 'authentication_error':
    case 'permission_error':
    case 'billing_error':
    case 'not_found_error':
      return { retry: false, error: new ProviderMisconfigured(msg, { status }) };
    case 'invalid_request_error':
      return { retry: false, error: new ProviderRefusal(msg, { status }) };
    default:
      return null;
  }
}

/**
 * Classifies an HTTP error response of either provider.
 * @param status the HTTP status (≥ 400).
 * @param text the provider's error message, read only to classify (never copied into the result).
 * @returns a retryable ProviderUnavailable (408, 409, 429, ≥ 500), or a fatal ProviderRefusal
 *   (400, 413, 422, other 4xx), ProviderMisconfigured (401, 402, 403, 404, billing or account
 *   codes), SchemaRejected (a 400 naming the schema or tool definition) or SchemaTooComplex.
 */
export function classifyHttpStatus(
  provider: string,
  status: number,
  info: {
    headers?: { get(name: string): string | null } | null;
    errorType?: string | null;
    errorCode?: string | null;
    requestId?: string | null;
    text?: string | null;
  },
): Fault {
  const msg = describe(provider, status, info.errorType, info.requestId, info.errorCode);
  const text = info.text ?? '';
  const retryAfterMs = parseRetryAfter(info.headers);
  if (info.errorType === 'billing_error' || (info.errorCode && ACCOUNT_CODES.test(info.errorCode))) {
    return { retry: false, error: new ProviderMisconfigured(msg, { status }) };
  }
  if (status === 429) {
    return { retry: true, error: new ProviderUnavailable(msg, { status, rateLimited: true, retryAfterMs }) };
  }
  if (status === 408 || status === 409 || status >= 500) {
    return { retry: true, error: new ProviderUnavailable(msg, { status, retryAfterMs }) };
  }
  if (status === 401 || status === 402 || status === 403 || status === 404) {
    return { retry: false, error: new ProviderMisconfigured(msg, { status }) };
  }
  if (status === 400) {
    if (BILLING_TEXT.test(text)) return { retry: false, error: new ProviderMisconfigured(msg, { status }) };
    if (TOO_COMPLEX_TEXT.test(text))
      return { retry: false, error: new SchemaTooComplex(status, info.requestId ?? null) };
    if (SCHEMA_TEXT.test(text)) {
      // The set's fault, not the provider's (DESIGN §3.8): that set cools off, others keep running.
      return { retry: false, error: new SchemaRejected(`${msg}: answer schema rejected`, { status }) };
    }
  }
  return { retry: false, error: new ProviderRefusal(msg, { status }) };
}

/**
 * True for a failure while reading a 200's body, which the SDK does not wrap: undici's
 * `TypeError: terminated` (socket closed mid-body) or a SyntaxError from a cut or non-JSON body.
 */
function isBrokenBody(err: unknown): boolean {
  if (err instanceof SyntaxError) return true;
  if (!(err instanceof TypeError)) return false;
  return err.message === 'terminated' || (ownCode(err.cause)?.startsWith('UND_ERR') ?? false);
}

/**
 * The Anthropic SDK, loaded on the first request (`loadAnthropicSdk`) rather than at import:
 * importing it cost about 0.35 s of every CLI start (1.0 s for `verdict --version`, measured),
 * most of them never calling Anthropic. Until it is loaded, no error can be one of its classes.
 */
let sdk: typeof AnthropicSdk | null = null;

/** Stands for the SDK's error classes before it is loaded: classes nothing is an instance of. */
const NO_SDK = {
  APIUserAbortError: class {},
  APIConnectionTimeoutError: class {},
  APIConnectionError: class {},
  APIError: class {},
} as unknown as typeof AnthropicSdk;

/** Loads the Anthropic SDK once; the classifier below then knows its error classes. */
export async function loadAnthropicSdk(): Promise<typeof AnthropicSdk> {
  sdk ??= await import('@anthropic-ai/sdk');
  return sdk;
}

/**
 * Classifies whatever one Anthropic attempt threw (DESIGN §9): SDK `APIError`s by status, connection
 * errors and timeouts as retryable, a BadEnvelope by its error type. Anything else (a bug) is fatal
 * and passes through unchanged.
 * @param timedOut true when the attempt's own timeout aborted it.
 */
export function classifyAnthropicError(err: unknown, timedOut: boolean): Fault {
  const provider = 'anthropic';
  // The attempt's own timeout can fire during the body read too, where fetch rejects with a plain
  // AbortError rather than the SDK's APIUserAbortError.
  if (timedOut) return { retry: true, error: new ProviderUnavailable(`${provider}: attempt timed out`) };
  const { APIUserAbortError, APIConnectionTimeoutError, APIConnectionError, APIError } = sdk ?? NO_SDK;
  if (err instanceof APIUserAbortError) {
    // The job's own abort is handled before classification; this one is the attempt timeout.
    return {
      retry: true,
      error: new ProviderUnavailable(`${provider}: attempt ${timedOut ? 'timed out' : 'aborted'}`),
    };
  }
  if (err instanceof APIConnectionTimeoutError) {
    return { retry: true, error: new ProviderUnavailable(`${provider}: attempt timed out`) };
  }
  if (err instanceof APIConnectionError) {
    return { retry: true, error: new ProviderUnavailable(`${provider}: connection failed`) };
  }
  if (err instanceof APIError && typeof err.status === 'number') {
    return classifyHttpStatus(provider, err.status, {
      headers: err.headers,
      errorType: err.type,
      errorCode: err.errorCode,
      requestId: err.requestID ?? null,
      text: err.apiMessage,
    });
  }
  if (isBrokenBody(err)) {
    return { retry: true, error: new ProviderUnavailable(`${provider}: connection failed while reading the response`) };
  }
  if (err instanceof BadEnvelope) {
    const msg = describe(provider, 200, err.errorType, err.requestId);
    return (
      byErrorType(err.errorType, 200, msg) ?? {
        retry: true,
        error: new ProviderUnavailable(`${msg}: malformed response envelope`, { status: 200 }),
      }
    );
  }
  return { retry: false, error: err instanceof Error ? err : new Error(String(err)) };
}

/** A non-2xx HTTP response of the OpenAI-compatible provider (plain fetch). */
export class HttpFailure extends VerdictError {
  readonly code = 'http_failure';
  constructor(
    readonly status: number,
    readonly headers: Headers,
    /** The response body text; read only to classify, never copied into messages. */
    readonly bodyText: string,
  ) {
    super(`HTTP ${status}`);
  }
}

/** Text of a 400 that is about the `response_format` (json_schema unsupported or rejected). */
const RESPONSE_FORMAT_TEXT = /response_format|json_schema|structured output|grammar/i;

function openAIErrorFields(bodyText: string): { type: string | null; code: string | null; message: string } {
  try {
    const body = JSON.parse(bodyText) as { error?: unknown; message?: unknown };
    const e = body && typeof body === 'object' ? body.error : undefined;
    if (e && typeof e === 'object') {
      const o = e as { type?: unknown; code?: unknown; message?: unknown };
      return {
        type: typeof o.type === 'string' ? o.type : null,
        code: typeof o.code === 'string' ? o.code : null,
        message: typeof o.message === 'string' ? o.message : bodyText,
      };
    }
    // Ollama and llama.cpp sometimes send {"error": "text"}.
    if (typeof e === 'string') return { type: null, code: null, message: e };
  } catch {
    // Not JSON: classify on the raw text.
  }
  return { type: null, code: null, message: bodyText };
}

/**
 * Classifies whatever one OpenAI-compatible attempt threw: an HttpFailure by status (a 400 about
 * the response format becomes ResponseFormatRejected while `jsonSchemaMode`), a fetch TypeError or
 * an aborted fetch as retryable, a BadEnvelope as retryable. Anything else is fatal, unchanged.
 */
export function classifyOpenAIError(err: unknown, timedOut: boolean, jsonSchemaMode: boolean): Fault {
  const provider = 'openai';
  if (err instanceof HttpFailure) {
    const f = openAIErrorFields(err.bodyText);
    if (jsonSchemaMode && err.status === 400 && RESPONSE_FORMAT_TEXT.test(f.message)) {
      return { retry: false, error: new ResponseFormatRejected(err.status) };
    }
    return classifyHttpStatus(provider, err.status, {
      headers: err.headers,
      errorType: f.type,
      errorCode: f.code,
      requestId: err.headers.get('x-request-id'),
      text: f.message,
    });
  }
  if (err instanceof BadEnvelope) {
    return {
      retry: true,
      error: new ProviderUnavailable(`${provider}: ${err.message}: malformed response envelope`, { status: 200 }),
    };
  }
  if (timedOut || (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError'))) {
    return { retry: true, error: new ProviderUnavailable(`${provider}: attempt timed out`) };
  }
  if (err instanceof TypeError) {
    // undici's "fetch failed": refused, reset or dropped connections.
    return { retry: true, error: new ProviderUnavailable(`${provider}: connection failed`) };
  }
  return { retry: false, error: err instanceof Error ? err : new Error(String(err)) };
}
