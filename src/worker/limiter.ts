import { TokenBucket } from 'limiter';
import type { Store } from '../store/store.js';

/**
 * The provider limiter (DESIGN §10): caps provider requests per minute and input tokens per
 * minute **per process**, and a token spend per UTC day across every process sharing the store.
 *
 * The minute caps are token buckets from the `limiter` package, refilled continuously and
 * starting full (a burst of one minute's allowance, then the steady rate). A slot that needs a
 * permit waits in this process for at most `maxWaitMs`; a longer wait defers the job instead
 * (no attempt counted), so a slot never holds a lease idle for long. A single request larger
 * than the token bucket takes the whole bucket when it is full, so no job waits forever.
 *
 * The daily cap counts every billed token (input, output, cache read and cache write) recorded
 * in `decision_spend` since the start of the store's current UTC day. When it is reached, permits
 * defer their jobs and the worker stops claiming until the next UTC day. Spend is re-read at most
 * every `spendRefreshMs`, and calls already in flight still land, so the cap can be overshot by
 * about one refresh interval of calls.
 */
export interface ProviderLimiterOptions {
  /** Reads "now" and the recorded spend. */
  store: Pick<Store, 'now' | 'spendSince'>;
  /** Provider requests per minute in this process; undefined is no cap. */
  requestsPerMinute?: number;
  /** Estimated input tokens per minute in this process; undefined is no cap. */
  inputTokensPerMinute?: number;
  /** Billed tokens per UTC day across all processes on the store; undefined is no cap. */
  dailyTokenCap?: number;
  /**
   * Longest in-process wait for a bucket, in milliseconds; a longer wait defers the job.
   * @defaultValue 10 000 (well inside any lease, which covers a whole provider call)
   */
  maxWaitMs?: number;
  /** How long a spend reading is reused, in milliseconds. @defaultValue 5 000 */
  spendRefreshMs?: number;
}

export const LIMITER_DEFAULTS = { maxWaitMs: 10_000, spendRefreshMs: 5_000 } as const;

/** One UTC day in milliseconds: the spend cap's window. */
export const DAY_MS = 86_400_000;

const MINUTE_MS = 60_000;

/**
 * Waits `ms` on the global timer (which tests can fake, like the buckets' `performance.now`).
 * @returns false when `signal` aborted the wait.
 */
function pause(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** A bucket that starts full: the `limiter` package starts its buckets empty. */
function fullBucket(perMinute: number): TokenBucket {
  const b = new TokenBucket({ bucketSize: perMinute, tokensPerInterval: perMinute, interval: MINUTE_MS });
  b.content = perMinute;
  return b;
}

export class ProviderLimiter {
  private readonly requests: TokenBucket | null;
  private readonly tokens: TokenBucket | null;
  private readonly maxWaitMs: number;
  private readonly spendRefreshMs: number;
  /** Permits are served in arrival order, so a large request is not starved by small ones. */
  private queue: Promise<unknown> = Promise.resolve();
  private spend: { readAt: number; blockedUntil: number | null; storeNow: number } | null = null;

  /** @throws RangeError when a cap is not a positive number. */
  constructor(private readonly opts: ProviderLimiterOptions) {
    for (const k of ['requestsPerMinute', 'inputTokensPerMinute', 'dailyTokenCap'] as const) {
      const v = opts[k];
      if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new RangeError(`${k} must be a positive number, got ${v}`);
    }
    this.requests = opts.requestsPerMinute ? fullBucket(opts.requestsPerMinute) : null;
    this.tokens = opts.inputTokensPerMinute ? fullBucket(opts.inputTokensPerMinute) : null;
    this.maxWaitMs = opts.maxWaitMs ?? LIMITER_DEFAULTS.maxWaitMs;
    this.spendRefreshMs = opts.spendRefreshMs ?? LIMITER_DEFAULTS.spendRefreshMs;
  }

  /** True when any cap is configured. */
  get active(): boolean {
    return this.requests !== null || this.tokens !== null || this.opts.dailyTokenCap !== undefined;
  }

  /**
   * Takes the permits for one provider call of about `estimatedInputTokens` tokens (the runner's
   * `acquirePermit`). Waits in process for up to `maxWaitMs`.
   * @returns null to go ahead, or a delay in milliseconds after which the job should be tried
   *   again (it defers without counting an attempt).
   */
  acquire = async (estimatedInputTokens: number, signal?: AbortSignal): Promise<number | null> => {
    const capped = await this.spendCapDelay();
    if (capped !== null) return capped;
    if (!this.requests && !this.tokens) return null;
    const turn = this.queue.then(() => this.take(Math.max(0, Math.ceil(estimatedInputTokens)), signal));
    this.queue = turn.catch(() => undefined);
    return turn;
  };

  /**
   * The worker asks before each claim: null to claim, or milliseconds until the spend window
   * resets (the worker stops claiming until then).
   */
  claimDelay = async (): Promise<number | null> => this.spendCapDelay();

  private async take(tokens: number, signal?: AbortSignal): Promise<number | null> {
    const started = Date.now();
    // A request larger than the bucket takes the whole bucket once it is full (DESIGN §10).
    const want = this.tokens ? Math.min(tokens, this.tokens.bucketSize) : 0;
    for (;;) {
      const wait = Math.max(this.requests?.getWaitTime(1) ?? 0, want > 0 ? this.tokens!.getWaitTime(want) : 0);
      if (wait === 0) {
        // No await between the check above and these debits, so no other slot can interleave.
        this.requests?.tryRemoveTokens(1);
        if (want > 0) this.tokens!.tryRemoveTokens(want);
        return null;
      }
      const waited = Date.now() - started;
      if (waited + wait > this.maxWaitMs || signal?.aborted) return wait;
      if (!(await pause(wait, signal))) return wait; // aborted: the runner releases the job itself
    }
  }

  private async spendCapDelay(): Promise<number | null> {
    const cap = this.opts.dailyTokenCap;
    if (cap === undefined) return null;
    const wall = Date.now();
    if (!this.spend || wall - this.spend.readAt >= this.spendRefreshMs) {
      const now = await this.opts.store.now();
      const dayStart = Math.floor(now / DAY_MS) * DAY_MS;
      const s = await this.opts.store.spendSince(now - dayStart);
      const used = s.inputTokens + s.outputTokens + s.cacheReadTokens + s.cacheWriteTokens;
      this.spend = { readAt: wall, storeNow: now, blockedUntil: used >= cap ? dayStart + DAY_MS : null };
    }
    const { blockedUntil, storeNow, readAt } = this.spend;
    if (blockedUntil === null) return null;
    const left = blockedUntil - (storeNow + (wall - readAt));
    return left > 0 ? left : null;
  }
}
