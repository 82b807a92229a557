/** A source of "now" in epoch milliseconds (UTC). The store owns now (DESIGN §2). */
export interface Clock {
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** A clock tests move by hand, so no test sleeps to wait for a lease or a backoff. */
export class ManualClock implements Clock {
  constructor(private t: number = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.t;
  }
  /** Moves time forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.t += ms;
  }
  set(ms: number): void {
    this.t = ms;
  }
}
