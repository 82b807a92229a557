import { sql } from 'drizzle-orm';
import type { SpendRecord } from '../store.js';
import type { SpendReservation, SpendReservationRequest } from '../spend-store.js';
import { reservationFits, SPEND_DAY_MS, spendDayStart } from '../spend-rules.js';
import { recordSpendTx } from './decisions.js';
import { changes, exec, nowMs, nowSql, one, write, type SqlContext, type Steps } from './steps.js';

/**
 * Daily-token-cap reservations (DESIGN §10.3). The check and the insert run in one transaction
 * serialised across every process on the database (SQLite: BEGIN IMMEDIATE holds the write lock;
 * Postgres: a transaction-scoped advisory lock, `Dialect.serialiseSpend`, released by the commit),
 * so two processes reserving at once can never together pass the cap (the in-process cache this
 * replaces let every process spend for seconds past it).
 */

/** Reserves `r.tokens` when the day's billed tokens plus live reservations leave room (spend-rules.ts). */
export function reserveSpend(c: SqlContext, r: SpendReservationRequest): Promise<SpendReservation> {
  const d = c.d;
  return write(c, function* (): Steps<SpendReservation> {
    if (d.serialiseSpend) yield* exec(d.serialiseSpend);
    const now = yield* nowMs();
    const dayStart = spendDayStart(now);
    // Expired rows belong to processes that died mid-call: they stop counting, and go.
    yield* exec(sql`DELETE FROM decision_spend_reservations WHERE expires_at <= ${d.int8(now)}`);
    const f = (yield* one<{ settled: number; reserved: number }>(sql`
      SELECT
        (SELECT CAST(coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0) AS bigint)
           FROM decision_spend WHERE hour >= ${d.int8(dayStart)}) AS settled,
        (SELECT CAST(coalesce(sum(tokens), 0) AS bigint) FROM decision_spend_reservations) AS reserved`))!;
    const settledTokens = Number(f.settled);
    const reservedTokens = Number(f.reserved);
    const windowEndsInMs = dayStart + SPEND_DAY_MS - now;
    if (!reservationFits(settledTokens, reservedTokens, r.tokens, r.capTokens))
      return { granted: false, settledTokens, reservedTokens, windowEndsInMs };
    const id = c.newToken();
    yield* exec(sql`
      INSERT INTO decision_spend_reservations (id, holder, tokens, created_at, expires_at)
      VALUES (${id}, ${r.holder}, ${d.int8(Math.ceil(r.tokens))}, ${d.int8(now)}, ${d.int8(now + r.ttlMs)})`);
    return { granted: true, id, settledTokens, reservedTokens, windowEndsInMs };
  });
}

/** Records the real usage (when a call was sent) and deletes the reservation, in one transaction. */
export function settleSpendReservation(c: SqlContext, id: string, spend: SpendRecord | null): Promise<boolean> {
  return write(c, function* () {
    if (spend) yield* recordSpendTx(c, yield* nowSql(), spend);
    return yield* settleReservationTx(id);
  });
}

/** Deletes a reservation inside the caller's transaction (its spend recorded there). @returns whether it still existed. */
export function* settleReservationTx(id: string): Steps<boolean> {
  return (yield* changes(sql`DELETE FROM decision_spend_reservations WHERE id = ${id}`)) === 1;
}
