import type { Store } from '../store/store.js';

/**
 * The sweeps' rate (DESIGN §8 "Drift sweep", §16.17): a token bucket on the store's clock, one
 * token per (item, set) owed, `perMinute` tokens a minute, holding at most `perMinute`. The drift
 * sweep and the expiry sweep of one worker share one bucket, so `--drift-sweep-per-minute` bounds
 * the work the two owe together, not each.
 */
export class OweBucket {
  private available: number;
  private lastRefill: number | null = null;

  /** @param perMinute items owed per minute at most; 0 owes nothing. */
  constructor(
    private readonly store: Pick<Store, 'now'>,
    readonly perMinute: number,
  ) {
    this.available = perMinute;
  }

  /** Tokens left now (fractional between refills). */
  get tokens(): number {
    return this.available;
  }

  /** Adds the tokens earned since the last refill (`perMinute` per 60 000 ms of the store's clock). */
  async refill(): Promise<void> {
    const now = await this.store.now();
    if (this.lastRefill !== null && now > this.lastRefill) {
      this.available = Math.min(this.perMinute, this.available + ((now - this.lastRefill) * this.perMinute) / 60_000);
    }
    this.lastRefill = now;
  }

  /** Takes one token when a whole one is left. */
  take(): boolean {
    if (this.available < 1) return false;
    this.available -= 1;
    return true;
  }
}
