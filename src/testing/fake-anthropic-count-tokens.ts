import type { RecordedRequest, Reply } from './fake-server-core.js';

/**
 * POST /v1/messages/count_tokens of the fake Anthropic API (hooked into
 * `FakeAnthropicServer.defaultReply`). The answer is `{"input_tokens": N}` with N computed from the
 * request body by a fixed rule, `fakeCountTokens`, at a ratio the heuristic does not use
 * (`FAKE_CHARS_PER_TOKEN` against `estimateTokens`' 3), so an `estimate --exact` test sees a
 * non-zero, known heuristic error: about +20 % (3.6 / 3 − 1) when the heuristic counts the same
 * text. The server records every request like any other (`server.requestsTo(COUNT_TOKENS_PATH)`).
 */

/** The route, as the SDK's `client.messages.countTokens` calls it. */
export const COUNT_TOKENS_PATH = '/v1/messages/count_tokens';

/** UTF-16 code units per token of the fake's count (the heuristic, src/providers/provider.ts `estimateTokens`, uses 3). */
export const FAKE_CHARS_PER_TOKEN = 3.6;

/**
 * Body fields count_tokens takes (the SDK's `MessageCountTokensParams`, whose `user_profile_id`
 * and `workspace_id` travel as headers). The real endpoint refuses any other field with a 400
 * "Extra inputs are not permitted" (seen for `max_tokens`), and so does the fake.
 */
const COUNT_TOKENS_FIELDS: ReadonlySet<string> = new Set([
  'messages',
  'model',
  'cache_control',
  'output_config',
  'speed',
  'system',
  'thinking',
  'tool_choice',
  'tools',
]);

/** Text length of a `system` or message `content` value: a string, or the `text` of each block, in UTF-16 code units. */
function textLength(v: unknown): number {
  if (typeof v === 'string') return v.length;
  if (!Array.isArray(v)) return 0;
  let n = 0;
  for (const b of v)
    if (b && typeof b === 'object' && typeof (b as { text?: unknown }).text === 'string')
      n += (b as { text: string }).text.length;
  return n;
}

/**
 * The UTF-16 code units the fake counts in a Messages-shaped body: the system text, every
 * message's text, the structured-output schema as JSON (`output_config.format.schema`), and each
 * tool's name, description and input schema as JSON. For a structured-output request this is
 * exactly the text the heuristic counts (system prompt + schema JSON + state).
 */
export function countedCodeUnits(body: any): number {
  let n = textLength(body?.system);
  for (const m of Array.isArray(body?.messages) ? body.messages : []) n += textLength(m?.content);
  const schema = body?.output_config?.format?.schema;
  if (schema !== undefined) n += JSON.stringify(schema).length;
  for (const t of Array.isArray(body?.tools) ? body.tools : []) {
    n +=
      String(t?.name ?? '').length + String(t?.description ?? '').length + JSON.stringify(t?.input_schema ?? {}).length;
  }
  return n;
}

/** The fake's token count of a body: ⌈countedCodeUnits / 3.6⌉ tokens. */
export function fakeCountTokens(body: any): number {
  return Math.ceil(countedCodeUnits(body) / FAKE_CHARS_PER_TOKEN);
}

const error = (type: string, message: string): Reply => ({
  kind: 'json',
  status: 400,
  body: { type: 'error', error: { type, message } },
  headers: { 'request-id': 'req_fake_count_400' },
});

/**
 * The reply to a count_tokens request: 400 invalid_request_error for a body without `model` or
 * `messages` or with a field the endpoint does not take, else 200 `{"input_tokens": N}`.
 */
export function countTokensReply(req: RecordedRequest): Reply {
  const body = req.body;
  if (!body || typeof body !== 'object' || typeof body.model !== 'string' || !Array.isArray(body.messages)) {
    return error('invalid_request_error', 'model: Field required; messages: Field required');
  }
  const extra = Object.keys(body).find((k) => !COUNT_TOKENS_FIELDS.has(k));
  if (extra !== undefined) return error('invalid_request_error', `${extra}: Extra inputs are not permitted`);
  return {
    kind: 'json',
    status: 200,
    body: { input_tokens: fakeCountTokens(body) },
    headers: { 'request-id': `req_fake_count_${req.index}` },
  };
}
