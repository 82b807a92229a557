import { sql } from 'drizzle-orm';
import type { SpendRecord, SpendReservation, SpendReservationRequest } from '../store.js';
import { reservationFits, SPEND_DAY_MS, spendDayStart } from '../spend-rules.js';
import { changes, one, readNow, writeTx, type PgContext } from './context.js';
import { recordSpend } from './decisions.js';

/**
 * Daily-token-cap reservations on Postgres (DESIGN §16.8), the twin of `../sqlite/spend-reservations.ts`.
 * READ COMMITTED alone would let two machines read the same total and both insert, so every
 * reservation first takes a transaction-scoped advisory lock: the check and the insert are
 * serialised across every process on the database, and the lock goes with the commit.
 */

/**
 * Key of the transaction-scoped advisory lock that serialises reservations. An arbitrary
 * constant, distinct from the migration lock (open.ts `MIGRATION_LOCK_KEY`).
 */
export const SPEND_RESERVATION_LOCK_KEY = 0x7665_7273; // "vers"

/** Reserves `r.tokens` when the day's billed tokens plus live reservations leave room (spend-rules.ts). */
export async function reserveSpend(ctx: PgContext, r: SpendReservationRequest): Promise<SpendReservation> {
  return writeTx(ctx, async (tx) => {
    await tx.execute(sql`SELECT pg_advisory_xact_lock(${SPEND_RESERVATION_LOCK_KEY})`);
    const now = await readNow(ctx, tx);
    const dayStart = spendDayStart(now);
    // Expired rows belong to processes that died mid-call: they stop counting, and go.
    await tx.execute(sql`DELETE FROM decision_spend_reservations WHERE expires_at <= ${now}::bigint`);
    const f = (await one<{ settled: number; reserved: number }>(
      tx,
      sql`
      SELECT
        (SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0)::bigint
           FROM decision_spend WHERE hour >= ${dayStart}::bigint) AS settled,
        (SELECT coalesce(sum(tokens), 0)::bigint FROM decision_spend_reservations) AS reserved`,
    ))!;
    const settled = Number(f.settled);
    const reserved = Number(f.reserved);
    const windowEndsInMs = dayStart + SPEND_DAY_MS - now;
    if (!reservationFits(settled, reserved, r.tokens, r.capTokens)) {
      return { granted: false, settledTokens: settled, reservedTokens: reserved, windowEndsInMs };
    }
    const id = ctx.newToken();
    await tx.execute(sql`
      INSERT INTO decision_spend_reservations (id, holder, tokens, created_at, expires_at)
      VALUES (${id}, ${r.holder}, ${Math.ceil(r.tokens)}::bigint, ${now}::bigint, ${now + r.ttlMs}::bigint)`);
    return { granted: true, id, settledTokens: settled, reservedTokens: reserved, windowEndsInMs } as const;
  });
}

/** Records the real usage (when a call was sent) and deletes the reservation, in one transaction. */
export async function settleSpendReservation(ctx: PgContext, id: string, spend: SpendRecord | null): Promise<boolean> {
  return writeTx(ctx, async (tx) => {
    if (spend) await recordSpend(ctx, spend, tx);
    return (await changes(tx, sql`DELETE FROM decision_spend_reservations WHERE id = ${id}`)) === 1;
  });
}
