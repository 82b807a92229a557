import type { SpendRecord } from './store.js';

export interface SpendTotals {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** What `reserveSpend` asks for (DESIGN §10.3). Tokens and milliseconds. */
export interface SpendReservationRequest {
  /** Estimated input tokens plus the call's output ceiling. */
  tokens: number;
  /** The daily token cap: billed tokens of the store's current UTC day plus live reservations may not pass it. */
  capTokens: number;
  /** How long the reservation holds if it is never settled (its holder died), ms: the call's lease. */
  ttlMs: number;
  /** Who holds it (`claimed_by` of the job), for diagnostics. */
  holder: string;
}

/**
 * What `reserveSpend` decided. `settledTokens` are the billed tokens of the current UTC day
 * (every kind: input, output, cache read and write), `reservedTokens` the live reservations of
 * other calls, both read in the deciding transaction; `windowEndsInMs` is the time left until the
 * next UTC day.
 */
export type SpendReservation =
  | { granted: true; id: string; settledTokens: number; reservedTokens: number; windowEndsInMs: number }
  | { granted: false; settledTokens: number; reservedTokens: number; windowEndsInMs: number };

/** Spend of one (provider, model, set, outcome) summed over hour buckets. */
export interface SpendRow extends SpendTotals {
  provider: string;
  model: string;
  questionSet: string;
  outcome: string;
}

/** Spend of one (hour, provider, model, set, outcome). */
export interface SpendHourRow extends SpendRow {
  /** Start of the hour bucket, epoch ms. */
  hour: number;
}

/**
 * Provider spend (DESIGN §2 decision_spend, §10.3; statements in sql/decisions.ts,
 * sql/spend-reservations.ts, sql/operations.ts): the limiter's reads, the daily cap's
 * reservations, and the spend reports. Spend is recorded by one job's life (`recordSpend`).
 */
export interface SpendStore {
  /** Spend since `sinceMs` milliseconds ago, summed. */
  spendSince(windowMs: number): Promise<SpendTotals>;
  /**
   * Reserves `tokens` against the daily token cap before a call is sent (DESIGN §10.3), across
   * processes: in one serialised transaction (SQLite BEGIN IMMEDIATE; a transaction-scoped
   * advisory lock on Postgres) it drops expired reservations, reads the current UTC day's billed
   * tokens and the live reservations, and inserts a reservation only when
   * `settled + reserved + tokens <= capTokens`. A single call larger than the whole cap is granted
   * only on a day with nothing billed or reserved, so no job waits forever (the rule of the
   * per-minute token bucket, DESIGN §10).
   */
  reserveSpend(r: SpendReservationRequest): Promise<SpendReservation>;
  /**
   * Settles a reservation to the call's real usage: records `spend` (when given; null when no
   * call was sent) and deletes the reservation, in one transaction, so the call is never counted
   * twice or not at all. Recording happens even when the reservation had already expired.
   * @returns true when the reservation was still held.
   */
  settleSpendReservation(id: string, spend: SpendRecord | null): Promise<boolean>;
  /**
   * Spend grouped by (provider, model, set, outcome) over the hour buckets that overlap the last
   * `windowMs` (so "the last hour" reads the current and the previous bucket).
   * @returns `sinceHour`, the start (epoch ms) of the oldest bucket read, and the rows.
   */
  spendRowsSince(windowMs: number): Promise<{ sinceHour: number; rows: SpendRow[] }>;
  /**
   * The same rows kept apart per bucket, oldest first: the dashboard's spend charts. `bucket`
   * `hour` (the default) keeps the stored hours; `day` sums them per UTC day in the query, so a
   * 30-day series reads a row per (day, provider, model, set, outcome), not 720 hours of them.
   * Each row's `hour` is the start of its bucket (epoch ms).
   */
  spendByHourSince(windowMs: number, bucket?: 'hour' | 'day'): Promise<{ sinceHour: number; rows: SpendHourRow[] }>;
  /**
   * Records the spend of a spooled record (DESIGN §10.5) at most once: in one transaction it
   * inserts the marker `verdict_meta` row `spend-spooled:<id>` and, only when that row was new,
   * adds `spend` to its hour bucket. A spool replayed again after a crash between this write and
   * the spool's clearing finds the marker and adds nothing.
   * @param id the record's spool id (`[0-9a-f-]{36}`, a random UUID).
   * @returns true when the spend was added now, false when the marker was already there.
   */
  recordSpooledSpend(id: string, spend: SpendRecord): Promise<boolean>;
  /** Deletes the markers of spooled records (`recordSpooledSpend`) once no spool holds them; unknown ids are ignored. */
  forgetSpooledSpend(ids: readonly string[]): Promise<void>;
}
