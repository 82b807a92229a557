/**
 * Backoff for transient failures and refusals (DESIGN §3): 30 s × 2^(attempts−1), capped at one
 * hour, with ±10 % jitter. `attempts` is the claim count since the last enqueue (>= 1 at claim).
 * Changing these constants changes how hard a failing provider is hit; the tests pin them.
 */
export const BACKOFF_BASE_MS = 30_000;
export const BACKOFF_CAP_MS = 3_600_000;
const BACKOFF_JITTER = 0.1;

/**
 * @param attempts claims since the last enqueue, counting the current one (values below 1 count as 1)
 * @param random a source in [0, 1); injected so tests are deterministic
 * @returns delay in milliseconds, within ±10 % of min(30 s × 2^(attempts−1), 1 h)
 */
export function backoffMs(attempts: number, random: () => number = Math.random): number {
  const n = Math.max(1, Math.floor(attempts));
  const base = Math.min(BACKOFF_BASE_MS * 2 ** Math.min(n - 1, 30), BACKOFF_CAP_MS);
  return Math.round(base * (1 + BACKOFF_JITTER * (2 * random() - 1)));
}
