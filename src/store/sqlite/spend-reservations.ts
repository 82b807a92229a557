import { sql } from 'drizzle-orm';
import type { SpendRecord, SpendReservation, SpendReservationRequest } from '../store.js';
import { reservationFits, SPEND_DAY_MS, spendDayStart } from '../spend-rules.js';
import { writeTx, type SqliteContext } from './context.js';
import { recordSpendTx } from './decisions.js';

/**
 * Daily-token-cap reservations on SQLite (DESIGN §16.8). The check and the insert run in one
 * BEGIN IMMEDIATE transaction, which holds the database's write lock: two processes reserving at
 * once are serialised, so together they can never pass the cap (the in-process cache this
 * replaces let every process spend for seconds past it).
 */

/** Reserves `r.tokens` when the day's billed tokens plus live reservations leave room (spend-rules.ts). */
export function reserveSpend(ctx: SqliteContext, r: SpendReservationRequest): SpendReservation {
  return writeTx(ctx, (tx) => {
    const now = ctx.clock.now();
    const dayStart = spendDayStart(now);
    // Expired rows belong to processes that died mid-call: they stop counting, and go.
    tx.run(sql`DELETE FROM decision_spend_reservations WHERE expires_at <= ${now}`);
    const f = tx.get<{ settled: number; reserved: number }>(sql`
      SELECT
        (SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0)
           FROM decision_spend WHERE hour >= ${dayStart}) AS settled,
        (SELECT coalesce(sum(tokens), 0) FROM decision_spend_reservations) AS reserved`)!;
    const windowEndsInMs = dayStart + SPEND_DAY_MS - now;
    if (!reservationFits(f.settled, f.reserved, r.tokens, r.capTokens)) {
      return { granted: false, settledTokens: f.settled, reservedTokens: f.reserved, windowEndsInMs };
    }
    const id = ctx.newToken();
    tx.run(sql`
      INSERT INTO decision_spend_reservations (id, holder, tokens, created_at, expires_at)
      VALUES (${id}, ${r.holder}, ${Math.ceil(r.tokens)}, ${now}, ${now + r.ttlMs})`);
    return { granted: true, id, settledTokens: f.settled, reservedTokens: f.reserved, windowEndsInMs };
  });
}

/** Records the real usage (when a call was sent) and deletes the reservation, in one transaction. */
export function settleSpendReservation(ctx: SqliteContext, id: string, spend: SpendRecord | null): boolean {
  return writeTx(ctx, (tx) => {
    if (spend) recordSpendTx(tx, ctx.clock.now(), spend);
    return tx.run(sql`DELETE FROM decision_spend_reservations WHERE id = ${id}`).changes === 1;
  });
}
