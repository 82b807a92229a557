import type { BatchRequest } from './provider.js';

/**
 * Rules every batch API of ours shares (DESIGN §7.3), checked before any request so a batch the
 * provider would refuse as a whole is never sent.
 */

/** The Message Batches API's rule for a custom id (STACK §3): refused with a 400 otherwise. */
const BATCH_CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;

/** Anthropic's limit of requests per batch (Message Batches docs). */
export const ANTHROPIC_BATCH_MAX_REQUESTS = 100_000;

/**
 * Anthropic's limit of one batch body, "256 MB", read as 256 × 10^6 bytes: the docs do not say
 * which megabyte, and the smaller reading is never refused.
 */
export const ANTHROPIC_BATCH_MAX_BODY_BYTES = 256_000_000;

/**
 * Checks a batch before it is sent: at least one request and at most `maxRequests`, every custom id
 * legal and unique. (Each implementation's `requestBytes` refuses a request without questions: an
 * empty chunk has nothing to ask, and `ask` sends no request for it.)
 * @throws TypeError naming the rule and the offending custom id (ids are ours, never tracker text).
 */
export function checkBatchRequests(requests: readonly BatchRequest[], maxRequests: number): void {
  if (!Array.isArray(requests) || requests.length === 0) throw new TypeError('a batch needs at least one request');
  if (requests.length > maxRequests)
    throw new TypeError(`a batch holds at most ${maxRequests} requests, got ${requests.length}`);
  const seen = new Set<string>();
  for (const r of requests) {
    checkCustomId(r.customId);
    if (seen.has(r.customId)) throw new TypeError(`custom id "${r.customId}" appears twice in one batch`);
    seen.add(r.customId);
  }
}

/** @throws TypeError unless `id` matches BATCH_CUSTOM_ID. */
export function checkCustomId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || !BATCH_CUSTOM_ID.test(id)) {
    const shown = typeof id === 'string' ? JSON.stringify(id.slice(0, 80)) : String(id);
    throw new TypeError(`custom id must match ${BATCH_CUSTOM_ID.source}, got ${shown}`);
  }
}

/** @throws TypeError unless `id` is a non-blank string (a batch id the provider returned). */
export function checkBatchId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id.trim() === '')
    throw new TypeError(`batch id must be a non-blank string, got ${String(id)}`);
}
