import { TokenBucket } from 'limiter';
import { monotonicClock, type WaitClock } from '../clock.js';
import type { RateLimitSnapshot, RateLimitWindow } from '../providers/provider.js';
import { RATE_LIMIT_RESET_CAP_MS } from '../providers/rate-limit-headers.js';
import type { Permit, PermitRequest } from '../runner/evaluate.js';
import { reservationFits, SPEND_DAY_MS } from '../store/spend-rules.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { SpendStore } from '../store/spend-store.js';

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
 * Every wait is bounded by the request's `maxWaitMs` (the runner passes half the lease it holds,
 * DESIGN §3.6), counted from the moment the permit was asked for, time queued behind other slots
 * included: no wait of ours outlasts a lease.
 *
 * The daily cap (DESIGN §10.3) is a hard cap up to the calls in flight: once the buckets grant a
 * call, it reserves its estimated input tokens plus its output ceiling in the store
 * (`reserveSpend`, a database row shared by every process), and the runner settles the
 * reservation to the real usage after the call. A refused reservation defers the job: until the
 * next UTC day when the billed tokens alone leave no room for it, or `SETTLE_RETRY_MS` when the
 * calls in flight may settle below their reservations. The worker stops claiming while the day's
 * billed tokens are at the cap (`claimDelay`, re-read at most every `spendRefreshMs`).
 *
 * The provider's own rate-limit headers (DESIGN §9.3) are a third bucket, the server's: given
 * `rateLimitState`, a call waits, like any bucket wait, until the reset of a window the last
 * response reported spent: no request left, or fewer input tokens (or tokens) left than the call's
 * estimate (a call larger than the whole window goes once it is full, as with our bucket), or no
 * output tokens left. So the worker slows before a 429 instead of after it. Each grant debits the
 * reading locally (one request, the estimate in tokens) until a newer response replaces it, so
 * slots granted between two responses do not all spend the same last request. A reading whose
 * reset has passed is ignored; resets lie at most 60 s ahead (`RATE_LIMIT_RESET_CAP_MS`), so a
 * header can never hold the worker for longer.
 *
 * Every interval the limiter measures and every wait it makes reads one injected `clock` (monotonic
 * time by default), so a test moves the clock instead of waiting out a minute's refill.
 */
export interface ProviderLimiterOptions {
  /** Reads "now" and the recorded spend, and holds the daily-cap reservations. */
  store: Pick<TrackerStore, 'now'> & Pick<SpendStore, 'reserveSpend' | 'spendSince'>;
  /** Provider requests per minute in this process; undefined is no cap. */
  requestsPerMinute?: number;
  /** Estimated input tokens per minute in this process; undefined is no cap. */
  inputTokensPerMinute?: number;
  /** Billed tokens per UTC day across all processes on the store; undefined is no cap. */
  dailyTokenCap?: number;
  /**
   * Longest in-process wait for a bucket, in milliseconds; a longer wait defers the job. Each
   * request's own `maxWaitMs` (half its lease) bounds it further.
   * @defaultValue 10 000
   */
  maxWaitMs?: number;
  /** How long a spend reading is reused, in milliseconds. @defaultValue 5 000 */
  spendRefreshMs?: number;
  /**
   * The provider's latest rate-limit reading (`Provider.rateLimitState`), read before each grant;
   * undefined: the server's limits are not consulted. @defaultValue undefined
   */
  rateLimitState?: () => RateLimitSnapshot | null;
  /**
   * Time for the buckets' refill, the wait bounds, the spend reading's age and the in-process
   * waits. A rate-limit reading's `resetAt` is epoch ms, so `serverWait` compares it with
   * `Date.now()`. @defaultValue monotonicClock
   */
  clock?: WaitClock;
}

const LIMITER_DEFAULTS = { maxWaitMs: 10_000, spendRefreshMs: 5_000 } as const;

/**
 * Deferral when a daily-cap reservation is refused only because calls in flight hold
 * reservations, ms: they settle within a call's time, usually below their estimates.
 */
export const SETTLE_RETRY_MS = 1_000;

/** One UTC day in milliseconds: the spend cap's window. */
export const DAY_MS = SPEND_DAY_MS;

const MINUTE_MS = 60_000;

/** The windows of a rate-limit reading the limiter consults. */
type WindowName = 'requests' | 'tokens' | 'inputTokens' | 'outputTokens';
const WINDOW_NAMES: readonly WindowName[] = ['requests', 'tokens', 'inputTokens', 'outputTokens'];

/**
 * The `limiter` package's bucket (its wait and debit arithmetic) refilled on `clock`: the package
 * reads `performance.now()` in `drip`, which no test can move without faking the global timers.
 */
class ClockBucket extends TokenBucket {
  constructor(
    private readonly clock: WaitClock,
    perMinute: number,
  ) {
    super({ bucketSize: perMinute, tokensPerInterval: perMinute, interval: MINUTE_MS });
    this.content = perMinute; // the package starts its buckets empty; ours start full
    this.lastDrip = clock.now();
  }

  /** Adds what dripped in since the last call at the steady rate, up to the bucket size. */
  override drip(): boolean {
    const now = this.clock.now();
    const before = this.content;
    this.content = Math.min(
      this.bucketSize,
      this.content + (Math.max(0, now - this.lastDrip) * this.tokensPerInterval) / this.interval,
    );
    this.lastDrip = now;
    return Math.floor(this.content) > Math.floor(before);
  }
}

export class ProviderLimiter {
  private readonly requests: ClockBucket | null;
  private readonly tokens: ClockBucket | null;
  private readonly clock: WaitClock;
  private readonly maxWaitMs: number;
  private readonly spendRefreshMs: number;
  /** Permits are served in arrival order, so a large request is not starved by small ones. */
  private queue: Promise<unknown> = Promise.resolve();
  /** The last reading of the daily cap: ms left until claims may resume (null: not capped), as of `readAt` (`clock` ms). */
  private spend: { readAt: number; leftMs: number | null } | null = null;
  /** The server's last rate-limit reading, and what is left of each window after the grants made since. */
  private server: { source: RateLimitSnapshot; left: Partial<Record<WindowName, number>> } | null = null;

  /** @throws RangeError when a cap is not a positive number. */
  constructor(private readonly opts: ProviderLimiterOptions) {
    for (const k of ['requestsPerMinute', 'inputTokensPerMinute', 'dailyTokenCap'] as const) {
      const v = opts[k];
      if (v !== undefined && !(Number.isFinite(v) && v > 0))
        throw new RangeError(`${k} must be a positive number, got ${v}`);
    }
    this.clock = opts.clock ?? monotonicClock;
    this.requests = opts.requestsPerMinute ? new ClockBucket(this.clock, opts.requestsPerMinute) : null;
    this.tokens = opts.inputTokensPerMinute ? new ClockBucket(this.clock, opts.inputTokensPerMinute) : null;
    this.maxWaitMs = opts.maxWaitMs ?? LIMITER_DEFAULTS.maxWaitMs;
    this.spendRefreshMs = opts.spendRefreshMs ?? LIMITER_DEFAULTS.spendRefreshMs;
  }

  /** True when any cap is configured. */
  get active(): boolean {
    return (
      this.requests !== null ||
      this.tokens !== null ||
      this.opts.dailyTokenCap !== undefined ||
      this.opts.rateLimitState !== undefined
    );
  }

  /**
   * Takes the permits for one provider call (the runner's `acquirePermit`): the per-minute
   * buckets, waiting in process for at most min(`maxWaitMs`, the request's `maxWaitMs`), then the
   * daily-cap reservation.
   * @returns a grant with the reservation id to settle (null without a daily cap), or a delay in
   *   milliseconds after which the job should be tried again (it defers without counting an
   *   attempt).
   * @throws whatever the store throws while reserving (the runner maps it to a transient fail).
   */
  acquire = async (req: PermitRequest): Promise<Permit> => {
    const askedAt = this.clock.now();
    const budgetMs = Math.max(0, Math.min(this.maxWaitMs, req.maxWaitMs));
    const capped = await this.spendCapDelay();
    if (capped !== null) return { granted: false, delayMs: capped };
    if (this.requests || this.tokens || this.opts.rateLimitState) {
      const tokens = Math.max(0, Math.ceil(req.inputTokens));
      const turn = this.queue.then(() => this.take(tokens, askedAt, budgetMs, req.signal));
      this.queue = turn.catch(() => undefined);
      const wait = await turn;
      if (wait !== null) return { granted: false, delayMs: wait };
    }
    if (this.opts.dailyTokenCap === undefined) return { granted: true, reservationId: null };
    return this.reserve(req, this.opts.dailyTokenCap);
  };

  /**
   * The worker asks before each claim: null to claim, or milliseconds until the spend window
   * resets (the worker stops claiming until then).
   */
  claimDelay = async (): Promise<number | null> => this.spendCapDelay();

  /**
   * Waits for the buckets until `budgetMs` after `askedAt` (time queued behind other slots
   * counts), then debits them. @returns null when granted, else the wait still needed (ms).
   */
  private async take(tokens: number, askedAt: number, budgetMs: number, signal?: AbortSignal): Promise<number | null> {
    // A request larger than the bucket takes the whole bucket once it is full (DESIGN §10).
    const want = this.tokens ? Math.min(tokens, this.tokens.bucketSize) : 0;
    for (;;) {
      const wait = Math.max(
        this.requests?.getWaitTime(1) ?? 0,
        want > 0 ? this.tokens!.getWaitTime(want) : 0,
        this.serverWait(tokens),
      );
      if (wait === 0) {
        // No await between the check above and these debits, so no other slot can interleave.
        this.requests?.tryRemoveTokens(1);
        if (want > 0) this.tokens!.tryRemoveTokens(want);
        this.debitServer(tokens);
        return null;
      }
      const waited = this.clock.now() - askedAt;
      if (waited + wait > budgetMs || signal?.aborted) return wait;
      if (!(await this.clock.wait(wait, signal))) return wait; // aborted: the runner releases the job itself
    }
  }

  /**
   * Milliseconds until the server's reading lets a call of `tokens` estimated input tokens through
   * (0: now), adopting a newer reading first.
   */
  private serverWait(tokens: number): number {
    const source = this.opts.rateLimitState?.() ?? null;
    if (source && source !== this.server?.source) {
      const left: Partial<Record<WindowName, number>> = {};
      for (const k of WINDOW_NAMES) if (source[k]) left[k] = source[k]!.remaining;
      this.server = { source, left };
    }
    if (!this.server) return 0;
    const { source: s, left } = this.server;
    const now = Date.now();
    let wait = 0;
    const need = (name: WindowName, w: RateLimitWindow | undefined, n: number) => {
      const l = left[name];
      if (!w || l === undefined || w.resetAt <= now) return;
      // Capped again here: a reading from any provider holds a call for a minute at most.
      if (l < n) wait = Math.max(wait, Math.min(w.resetAt - now, RATE_LIMIT_RESET_CAP_MS));
    };
    // A call larger than a whole token window goes once the window is full, so none waits for ever.
    const fits = (w: RateLimitWindow | undefined) => Math.max(1, Math.min(tokens, w?.limit ?? tokens));
    need('requests', s.requests, 1);
    need('inputTokens', s.inputTokens, fits(s.inputTokens));
    need('tokens', s.tokens, fits(s.tokens));
    need('outputTokens', s.outputTokens, 1);
    return Math.ceil(wait);
  }

  /** Spends one request and the estimate from the server's reading (what a newer response would report). */
  private debitServer(tokens: number): void {
    const left = this.server?.left;
    if (!left) return;
    if (left.requests !== undefined) left.requests -= 1;
    if (left.inputTokens !== undefined) left.inputTokens -= tokens;
    if (left.tokens !== undefined) left.tokens -= tokens;
  }

  /** Reserves the call's estimate against the daily cap (DESIGN §10.3). */
  private async reserve(req: PermitRequest, cap: number): Promise<Permit> {
    const tokens = Math.max(0, Math.ceil(req.inputTokens)) + Math.max(0, Math.ceil(req.maxOutputTokens));
    const r = await this.opts.store.reserveSpend({
      tokens,
      capTokens: cap,
      ttlMs: req.reservationTtlMs,
      holder: req.holder,
    });
    if (r.granted) return { granted: true, reservationId: r.id };
    if (r.settledTokens >= cap) this.spend = { readAt: this.clock.now(), leftMs: r.windowEndsInMs }; // stop claiming at once
    // Room may come back today only if the calls in flight settle below their reservations.
    const mayFitToday = reservationFits(r.settledTokens, 0, tokens, cap);
    return { granted: false, delayMs: mayFitToday ? SETTLE_RETRY_MS : r.windowEndsInMs };
  }

  private async spendCapDelay(): Promise<number | null> {
    const cap = this.opts.dailyTokenCap;
    if (cap === undefined) return null;
    const at = this.clock.now();
    if (!this.spend || at - this.spend.readAt >= this.spendRefreshMs) {
      const now = await this.opts.store.now();
      const dayStart = Math.floor(now / DAY_MS) * DAY_MS;
      const s = await this.opts.store.spendSince(now - dayStart);
      const used = s.inputTokens + s.outputTokens + s.cacheReadTokens + s.cacheWriteTokens;
      this.spend = { readAt: at, leftMs: used >= cap ? dayStart + DAY_MS - now : null };
    }
    const { leftMs, readAt } = this.spend;
    if (leftMs === null) return null;
    const left = leftMs - (at - readAt);
    return left > 0 ? left : null;
  }
}
