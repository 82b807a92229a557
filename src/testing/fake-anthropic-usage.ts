import { createHash } from 'node:crypto';
import { minCacheablePrefixTokens } from '../providers/pricing.js';
import type { RecordedRequest, Reply } from './fake-server-core.js';

/**
 * Realistic usage for the fake Anthropic server (DESIGN §9.3 tests): token counts estimated from
 * the request, and a prompt cache that behaves as the API's does, so a test can see whether a
 * request's cache breakpoint could ever pay. Off by default: the server then reports the fixed
 * usage 100 / 20 that the older tests pin.
 *
 * Counting: 1 token per 3 UTF-16 units, rounded up per part (`estimateTokens` in
 * src/providers/provider.ts, the provider's own estimate), over the parts in the API's prefix
 * order: the tool definitions (one JSON text), each system block, the `output_config.format`
 * schema (which the API compiles into the prompt, so the provider counts it in its prefix too:
 * anthropic.ts `cachedPrefixTokens`), then each message's text.
 *
 * Caching: the cached prefix is every part up to and including the last block that carries
 * `cache_control` (a tool or a system block; the schema goes with the system blocks), and it is
 * cached only when it reaches the model's minimum cacheable length (pricing.ts
 * `minCacheablePrefixTokens`; an unknown model caches nothing), as the API does silently. The first
 * request with a prefix reports `cache_creation_input_tokens` = the prefix; a request with the
 * byte-identical prefix (same model) before the entry expires reports `cache_read_input_tokens`
 * and refreshes the entry, as a hit does; `input_tokens` is the rest. An entry lives 5 minutes, or
 * 1 hour under `ttl: '1h'`, by the injected clock.
 */

/** Options of FakeAnthropicUsage. */
export interface FakeAnthropicUsageOptions {
  /** Wall clock in milliseconds, for cache expiry. @defaultValue Date.now */
  now?: () => number;
}

/** Lifetime of a cache entry by TTL, ms: the API's 5 minutes (default) and 1 hour. */
export const FAKE_CACHE_TTL_MS = { '5m': 5 * 60_000, '1h': 60 * 60_000 } as const;

/** The usage block of one reply, as the API shapes it. */
export interface FakeUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

const tokens = (text: string): number => Math.ceil(text.length / 3);

interface Part {
  text: string;
  /** The TTL of this part's breakpoint, when it carries one. */
  ttl?: '5m' | '1h';
}

function ttlOf(block: any): '5m' | '1h' | undefined {
  const cc = block?.cache_control;
  if (!cc || typeof cc !== 'object' || cc.type !== 'ephemeral') return undefined;
  return cc.ttl === '1h' ? '1h' : '5m';
}

/** The request's prompt parts in the API's order; `prefixEnd` is how many of them the cached prefix holds. */
function partsOf(body: any): { parts: Part[]; prefixEnd: number; ttl: '5m' | '1h' } {
  const parts: Part[] = [];
  let prefixEnd = 0;
  let ttl: '5m' | '1h' = '5m';
  const mark = (t: '5m' | '1h' | undefined) => {
    if (t === undefined) return;
    prefixEnd = parts.length;
    ttl = t;
  };
  const tools: any[] = Array.isArray(body?.tools) ? body.tools : [];
  if (tools.length > 0) {
    parts.push({ text: JSON.stringify(tools) });
    for (const t of tools) mark(ttlOf(t));
  }
  const system: any[] =
    typeof body?.system === 'string'
      ? [{ type: 'text', text: body.system }]
      : Array.isArray(body?.system)
        ? body.system
        : [];
  for (const b of system) {
    parts.push({ text: typeof b?.text === 'string' ? b.text : '' });
    mark(ttlOf(b));
  }
  const schema = body?.output_config?.format?.schema;
  if (schema !== undefined) {
    // Compiled into the system prompt: cached with it when the breakpoint ends the system blocks.
    const withSystem = system.length > 0 && prefixEnd === parts.length;
    parts.push({ text: JSON.stringify(schema) });
    if (withSystem) prefixEnd = parts.length;
  }
  for (const m of Array.isArray(body?.messages) ? body.messages : []) {
    const content = m?.content;
    if (typeof content === 'string') parts.push({ text: content });
    else if (Array.isArray(content))
      for (const c of content) parts.push({ text: typeof c?.text === 'string' ? c.text : JSON.stringify(c) });
  }
  return { parts, prefixEnd, ttl };
}

/** The prompt cache of one fake server, and the usage it reports. */
export class FakeAnthropicUsage {
  /** Cache entries: hash of (model, prefix text) → expiry (ms, `now()` clock). */
  readonly #entries = new Map<string, number>();
  readonly #now: () => number;
  /** Cache writes and reads reported so far, in requests. */
  writes = 0;
  reads = 0;

  constructor(opts: FakeAnthropicUsageOptions = {}) {
    this.#now = opts.now ?? Date.now;
  }

  /** Forgets every cache entry and count. */
  reset(): void {
    this.#entries.clear();
    this.writes = 0;
    this.reads = 0;
  }

  /** The usage one Messages request body is billed, updating the cache. */
  usageFor(body: any): FakeUsage {
    const { parts, prefixEnd, ttl } = partsOf(body);
    const total = parts.reduce((n, p) => n + tokens(p.text), 0);
    const prefix = parts.slice(0, prefixEnd).reduce((n, p) => n + tokens(p.text), 0);
    const none = {
      input_tokens: total,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    };
    const model = typeof body?.model === 'string' ? body.model : '';
    const minimum = minCacheablePrefixTokens('anthropic', model);
    if (prefixEnd === 0 || minimum === null || prefix < minimum) return none;
    const key = createHash('sha256')
      .update(JSON.stringify([model, parts.slice(0, prefixEnd).map((p) => p.text)]))
      .digest('hex');
    const now = this.#now();
    const expires = this.#entries.get(key);
    this.#entries.set(key, Math.max(expires ?? 0, now + FAKE_CACHE_TTL_MS[ttl]));
    if (expires !== undefined && now < expires) {
      this.reads++;
      return { ...none, input_tokens: total - prefix, cache_read_input_tokens: prefix };
    }
    this.writes++;
    return {
      input_tokens: total - prefix,
      cache_creation_input_tokens: prefix,
      cache_read_input_tokens: 0,
      cache_creation: {
        ephemeral_5m_input_tokens: ttl === '5m' ? prefix : 0,
        ephemeral_1h_input_tokens: ttl === '1h' ? prefix : 0,
      },
    };
  }

  /**
   * `reply` with this cache's usage in place of its own, when it answers a Messages request with a
   * message (status 200, `type: message`); any other reply unchanged. The output tokens stay the
   * reply's.
   */
  applyTo(req: RecordedRequest, reply: Reply): Reply {
    if (req.method !== 'POST' || req.path !== '/v1/messages' || reply.kind !== 'json' || (reply.status ?? 200) !== 200)
      return reply;
    const body = reply.body as { type?: unknown; usage?: Record<string, unknown> } | null;
    if (!body || typeof body !== 'object' || body.type !== 'message') return reply;
    return { ...reply, body: { ...body, usage: { ...body.usage, ...this.usageFor(req.body) } } };
  }
}
