import { setTimeout as sleep } from 'node:timers/promises';
import pRetry, { AbortError } from 'p-retry';
import { ProviderUnavailable } from './errors.js';
import { VerdictError } from '../errors.js';

/**
 * The retry policy both real providers share (DESIGN §9): SDK retries off, p-retry owns the loop,
 * the waits and `Retry-After` are computed here, and every wait and request is cancelled by the
 * job's AbortSignal. `beforeSend` runs before every attempt and its errors pass through unchanged.
 */

/** Retry and timeout settings of one provider (milliseconds). */
export interface RetryPolicy {
  /** Attempts per call, the first included. @defaultValue 4 */
  readonly maxAttempts: number;
  /** Timeout of one attempt, from send to the last byte of the response (ms). @defaultValue 60000 */
  readonly perAttemptTimeoutMs: number;
  /** First backoff (ms); it doubles per retry. @defaultValue 500 */
  readonly minBackoffMs: number;
  /** Largest backoff step (ms). @defaultValue 8000 */
  readonly maxBackoffMs: number;
  /**
   * Largest `Retry-After` honoured by waiting (ms). A longer one ends the call at once with
   * `ProviderUnavailable({retryAfterMs})` so the job defers instead of holding its lease.
   * @defaultValue 30000
   */
  readonly retryAfterCapMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 4,
  perAttemptTimeoutMs: 60_000,
  minBackoffMs: 500,
  maxBackoffMs: 8_000,
  retryAfterCapMs: 30_000,
};

/**
 * Backoff steps are stretched by up to this fraction at random, so that workers that hit the same
 * overload do not retry in lockstep.
 */
const BACKOFF_JITTER = 0.2;

/**
 * Upper bound of one provider call including its retries (ms): every attempt timing out plus the
 * longest wait between attempts. The runner's lease must cover it (provider.ts).
 */
export function worstCaseCallMs(p: RetryPolicy): number {
  const longestWait = Math.max(p.retryAfterCapMs, Math.ceil(p.maxBackoffMs * (1 + BACKOFF_JITTER)));
  return p.maxAttempts * p.perAttemptTimeoutMs + (p.maxAttempts - 1) * longestWait;
}

/**
 * Validates a policy; option names in messages are the provider's constructor option names.
 * @throws TypeError naming the option, its value and what was expected.
 */
export function checkRetryPolicy(p: RetryPolicy): void {
  const positive = (name: string, v: number, min: number) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
      throw new TypeError(`${name} must be an integer ≥ ${min}, got ${String(v)}`);
    }
  };
  positive('maxAttempts', p.maxAttempts, 1);
  positive('perAttemptTimeoutMs', p.perAttemptTimeoutMs, 1);
  positive('minBackoffMs', p.minBackoffMs, 0);
  positive('maxBackoffMs', p.maxBackoffMs, 0);
  positive('retryAfterCapMs', p.retryAfterCapMs, 0);
}

/** Backoff before retry number `retry` (1-based), in ms: min × 2^(retry−1), capped, plus jitter. */
export function backoffMs(p: RetryPolicy, retry: number, random: () => number): number {
  const step = Math.min(p.maxBackoffMs, p.minBackoffMs * 2 ** (retry - 1));
  return Math.round(step * (1 + BACKOFF_JITTER * random()));
}

/**
 * How one failed attempt is treated: `retry` with a ProviderUnavailable (whose `retryAfterMs`, when
 * set, is the server's Retry-After), or `fatal` with the error to throw as is.
 */
export type Fault =
  { readonly retry: true; readonly error: ProviderUnavailable } | { readonly retry: false; readonly error: Error };

/** Minimal pino-compatible logger: a structured object first, then a message. */
export interface ProviderLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const noop = () => {};
export const silentLogger: ProviderLogger = { debug: noop, info: noop, warn: noop, error: noop };

/** Time and randomness seams, so tests never sleep on a backoff (DESIGN §14). */
export interface RetryRuntime {
  /** Waits `ms`, rejecting with `signal.reason` as soon as the signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /** Milliseconds since some origin (monotonic). */
  now(): number;
  /** A number in [0, 1). */
  random(): number;
}

export const realRuntime: RetryRuntime = {
  // Node's abortable timer; an abort rejects it, and withRetries then throws the signal's reason.
  sleep: (ms, signal) => sleep(ms, undefined, { signal }),
  now: () => performance.now(),
  random: Math.random,
};

/** Reason an attempt's own controller is aborted with when its timeout fires. */
export class AttemptTimeout extends VerdictError {
  readonly code = 'attempt_timeout';
  constructor(readonly ms: number) {
    super(`attempt timed out after ${ms} ms`);
  }
}

/** Marks an error from `beforeSend` so it can be rethrown unchanged (even a non-Error value). */
class PassThrough extends Error {
  constructor(readonly original: unknown) {
    super('beforeSend failed');
  }
}

/** Everything one retried call needs besides the request itself. */
export interface RetryContext {
  /** Provider name, for log lines and messages. */
  readonly provider: string;
  readonly policy: RetryPolicy;
  readonly runtime: RetryRuntime;
  readonly log: ProviderLogger;
  /** The job's signal: cancels every wait and request. */
  readonly signal: AbortSignal;
  /** Awaited before every attempt; its errors pass through unchanged and are never retried. */
  readonly beforeSend: () => Promise<void> | void;
  /**
   * Absolute `runtime.now()` after which no attempt starts and no wait begins; shared by the halves
   * of a split chunk so one `ask` never outlives `worstCaseCallMs`.
   */
  readonly deadline: number;
}

/**
 * Runs `send` under the retry policy. `send` gets an AbortSignal that fires on the job's abort or
 * on the attempt timeout; `classify` maps whatever it threw (with `timedOut` true when the attempt
 * timeout fired) to a Fault.
 *
 * - at most `maxAttempts` attempts, strictly one after another (never two requests at once);
 * - between attempts: the backoff, or the server's Retry-After when longer (up to the cap);
 * - a Retry-After above the cap ends the call at once with ProviderUnavailable({retryAfterMs});
 * - when the attempts or the deadline run out, the last ProviderUnavailable is thrown;
 * - an abort of `ctx.signal` rejects with `signal.reason` and starts nothing more.
 * @throws whatever `beforeSend` threw; `signal.reason`; the fatal Fault's error; ProviderUnavailable.
 */
export async function withRetries<T>(
  ctx: RetryContext,
  send: (signal: AbortSignal, attempt: number) => Promise<T>,
  classify: (err: unknown, timedOut: boolean) => Fault,
): Promise<T> {
  const { policy, runtime, signal, log } = ctx;
  let last: ProviderUnavailable | undefined;

  const attempt = async (attemptNumber: number): Promise<T> => {
    try {
      await ctx.beforeSend();
    } catch (err) {
      throw new AbortError(new PassThrough(err));
    }
    signal.throwIfAborted();
    const remaining = ctx.deadline - runtime.now();
    if (remaining <= 0) throw new AbortError(gaveUp(ctx, last, attemptNumber - 1, 'time budget spent'));
    const timeoutMs = Math.max(1, Math.min(policy.perAttemptTimeoutMs, Math.floor(remaining)));

    const controller = new AbortController();
    const onAbort = () => controller.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => controller.abort(new AttemptTimeout(timeoutMs)), timeoutMs);
    try {
      return await send(controller.signal, attemptNumber);
    } catch (err) {
      if (signal.aborted) throw new AbortError(new PassThrough(signal.reason));
      const timedOut = controller.signal.aborted && controller.signal.reason instanceof AttemptTimeout;
      const fault = classify(err, timedOut);
      if (!fault.retry) throw new AbortError(fault.error);
      const after = fault.error.retryAfterMs;
      if (after !== undefined && after > policy.retryAfterCapMs) {
        log.warn(
          { provider: ctx.provider, attempt: attemptNumber, status: fault.error.status, retryAfterMs: after },
          'provider asked to wait longer than the cap; deferring',
        );
        throw new AbortError(fault.error);
      }
      last = fault.error;
      throw fault.error;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  };

  try {
    return await pRetry(attempt, {
      retries: policy.maxAttempts - 1,
      // The waits are computed and slept in onFailedAttempt (Retry-After needs it, DESIGN §9), so
      // p-retry's own delay is zero.
      minTimeout: 0,
      maxTimeout: 0,
      factor: 1,
      randomize: false,
      signal,
      onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
        signal.throwIfAborted();
        if (!(error instanceof ProviderUnavailable)) throw error;
        const err = error;
        const retryAfter = err.retryAfterMs;
        const waitMs =
          retriesLeft > 0 ? Math.max(backoffMs(policy, attemptNumber, runtime.random), retryAfter ?? 0) : 0;
        log.warn(
          {
            provider: ctx.provider,
            attempt: attemptNumber,
            // Built from status, error type and request id only (classify.ts), so safe to log.
            reason: err.message,
            status: err.status,
            rateLimited: err.rateLimited,
            retryAfterMs: retryAfter,
            retriesLeft,
            waitMs: retriesLeft > 0 ? waitMs : undefined,
          },
          'provider attempt failed',
        );
        if (retriesLeft <= 0) throw gaveUp(ctx, err, attemptNumber, 'attempts exhausted');
        if (runtime.now() + waitMs > ctx.deadline) throw gaveUp(ctx, err, attemptNumber, 'time budget spent');
        await runtime.sleep(waitMs, signal);
      },
    });
  } catch (err) {
    if (err instanceof PassThrough) throw err.original;
    if (signal.aborted) throw signal.reason;
    throw err;
  }
}

/** The ProviderUnavailable a call ends with when it stops retrying; keeps the last Retry-After. */
function gaveUp(
  ctx: RetryContext,
  last: ProviderUnavailable | undefined,
  attempts: number,
  why: string,
): ProviderUnavailable {
  const head = last ? `${last.message}; ` : `${ctx.provider}: `;
  return new ProviderUnavailable(`${head}${why} after ${attempts} attempt(s)`, {
    retryAfterMs: last?.retryAfterMs,
    rateLimited: last?.rateLimited,
    status: last?.status,
  });
}

/**
 * Parses `retry-after-ms` (milliseconds) or `retry-after` (seconds, or an HTTP date) into ms.
 * @returns undefined when absent or unparseable; 0 for a date in the past.
 */
export function parseRetryAfter(
  headers: { get(name: string): string | null } | undefined | null,
  nowMs = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '') {
    const v = Number(ms);
    if (Number.isFinite(v) && v >= 0) return Math.ceil(v);
  }
  const ra = headers.get('retry-after');
  if (ra === null || ra.trim() === '') return undefined;
  const secs = Number(ra);
  if (Number.isFinite(secs)) return secs >= 0 ? Math.ceil(secs * 1000) : undefined;
  const at = Date.parse(ra);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}
