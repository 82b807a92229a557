import { setTimeout as sleep } from 'node:timers/promises';

/** A source of "now" in epoch milliseconds (UTC). The store owns now (DESIGN §2). */
export interface Clock {
  now(): number;
}

/**
 * A clock that also waits on its own time, for code that both measures intervals and sleeps
 * through them (the provider limiter's buckets and waits, DESIGN §10): a test moves one clock and
 * both follow, so no test waits out real time.
 */
export interface WaitClock extends Clock {
  /**
   * Resolves after `ms` milliseconds of this clock's time.
   * @returns true, or false at once when `signal` aborts the wait (never rejects).
   */
  wait(ms: number, signal?: AbortSignal): Promise<boolean>;
}

/**
 * The one abortable sleep on real time: Node's timer with the caller's signal (a signal that
 * ends any of several things is `AbortSignal.any([...])`). Resolves true after `ms`, false at once
 * on abort; never rejects.
 */
const realWait = (ms: number, signal?: AbortSignal): Promise<boolean> => sleep(ms, true, { signal }).catch(() => false);

/** The wall clock (epoch ms) with real timers: the worker's and its background passes' default. */
export const systemClock: WaitClock = { now: () => Date.now(), wait: realWait };

/**
 * Monotonic time (`performance.now()`, ms since the process started) with real timers: for
 * intervals only, so a wall-clock step (NTP) neither refills nor drains a bucket.
 */
export const monotonicClock: WaitClock = {
  now: () => performance.now(),
  wait: realWait,
};

/** A clock tests move by hand, so no test sleeps to wait for a lease or a backoff. */
export class ManualClock implements WaitClock {
  /** Pending waits, resolved when the clock reaches their time. */
  private waits: Array<{ at: number; done: (v: boolean) => void }> = [];
  constructor(private t: number = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.t;
  }
  /** Moves time forward by `ms` milliseconds, ending the waits it reaches. */
  advance(ms: number): void {
    this.set(this.t + ms);
  }
  set(ms: number): void {
    this.t = ms;
    const due = this.waits.filter((w) => w.at <= ms);
    this.waits = this.waits.filter((w) => w.at > ms);
    for (const w of due) w.done(true);
  }
  /** Resolves when `advance`/`set` reach `ms` from now (at once for 0), false on abort. */
  wait(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    if (ms <= 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const w = { at: this.t + ms, done: resolve };
      this.waits.push(w);
      signal?.addEventListener(
        'abort',
        () => {
          this.waits = this.waits.filter((x) => x !== w);
          resolve(false);
        },
        { once: true },
      );
    });
  }
}
