/**
 * The daily token cap's rule (DESIGN §10, §10.3), written once for both stores. Pure: the stores
 * read the figures inside their own serialised transaction and ask this whether a call fits.
 */

/** One UTC day in milliseconds: the daily cap's window. */
export const SPEND_DAY_MS = 86_400_000;

/** Start (epoch ms) of the UTC day holding `now`. */
export function spendDayStart(now: number): number {
  return Math.floor(now / SPEND_DAY_MS) * SPEND_DAY_MS;
}

/**
 * Whether a call reserving `tokens` fits under `cap`, given the day's billed tokens (`settled`)
 * and the live reservations of calls in flight (`reserved`). A call larger than the whole cap fits
 * only on a day with nothing billed or reserved, like a request larger than the per-minute token
 * bucket (DESIGN §10): otherwise it could never run, and it still bills at most its own estimate.
 */
export function reservationFits(settled: number, reserved: number, tokens: number, cap: number): boolean {
  if (settled + reserved + tokens <= cap) return true;
  return tokens > cap && settled === 0 && reserved === 0;
}
