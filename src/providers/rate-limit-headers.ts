import type { RateLimitSnapshot, RateLimitWindow } from './provider.js';

/**
 * Reads Anthropic's rate-limit headers (DESIGN §9.3). Every Messages response, success or error,
 * carries, per window (`requests`, `tokens`, `input-tokens`, `output-tokens`):
 * `anthropic-ratelimit-<window>-limit`, `-remaining` (integers) and `-reset` (an RFC 3339 time,
 * when the window is fully replenished). Pure; never throws.
 *
 * Parsed defensively, since the values come from the network: a window is kept only when its
 * `-remaining` is a plain non-negative integer and its `-reset` a well-formed RFC 3339 time;
 * anything else leaves that window out (and a response with no usable window gives null, which
 * changes nothing). A reset is capped at `RATE_LIMIT_RESET_CAP_MS` after the response was read, so
 * a malformed or skewed one can hold the worker for a minute at most, never for ever. The values
 * are numbers once parsed; header text is never kept or logged.
 */

/**
 * Longest a reset may lie ahead of the response that reported it, ms. Anthropic's limits are
 * per-minute windows (STACK.md §3), so a window refills within a minute; a reset beyond it is a
 * malformed header or clock skew between the server and this machine, and waiting longer would
 * only trade a possible 429 (which the retry and defer paths handle) for an idle worker.
 */
export const RATE_LIMIT_RESET_CAP_MS = 60_000;

/** Header name part of each window, as the API names it. */
const WINDOWS = {
  requests: 'requests',
  tokens: 'tokens',
  inputTokens: 'input-tokens',
  outputTokens: 'output-tokens',
} as const;

const COUNT = /^\d{1,15}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

function count(v: string | null): number | null {
  if (v === null) return null;
  const t = v.trim();
  return COUNT.test(t) ? Number(t) : null;
}

function time(v: string | null): number | null {
  if (v === null) return null;
  const t = v.trim();
  if (!RFC3339.test(t)) return null;
  const ms = Date.parse(t);
  return Number.isFinite(ms) ? ms : null;
}

type HeaderSource = { get(name: string): string | null } | null | undefined;

function read(headers: { get(name: string): string | null }, name: string): string | null {
  try {
    const v = headers.get(name);
    return typeof v === 'string' ? v : null;
  } catch {
    return null;
  }
}

/**
 * The rate-limit windows of one response's headers.
 * @param headers the response's headers (a fetch `Headers`, or an SDK error's `.headers`); any
 *   value, including undefined.
 * @param nowMs when the response was read, wall-clock epoch ms (caps each reset).
 * @returns the snapshot, or null when no window is usable.
 */
export function parseRateLimitHeaders(headers: HeaderSource | unknown, nowMs: number): RateLimitSnapshot | null {
  if (!headers || typeof (headers as { get?: unknown }).get !== 'function') return null;
  const h = headers as { get(name: string): string | null };
  const out: { -readonly [K in keyof RateLimitSnapshot]: RateLimitSnapshot[K] } = { observedAt: nowMs };
  let any = false;
  for (const [key, name] of Object.entries(WINDOWS) as Array<[keyof typeof WINDOWS, string]>) {
    const remaining = count(read(h, `anthropic-ratelimit-${name}-remaining`));
    const reset = time(read(h, `anthropic-ratelimit-${name}-reset`));
    if (remaining === null || reset === null) continue;
    const w: RateLimitWindow = {
      limit: count(read(h, `anthropic-ratelimit-${name}-limit`)),
      remaining,
      resetAt: Math.min(reset, nowMs + RATE_LIMIT_RESET_CAP_MS),
    };
    out[key] = w;
    any = true;
  }
  return any ? out : null;
}
