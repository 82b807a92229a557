import { sql, type SQL } from 'drizzle-orm';
import type { Registry } from '../../decision/registry.js';
import type { PgDb } from './open.js';

/** A connection or a transaction: what every Postgres store function runs its statements on. */
export type PgTx = PgDb;

/** Shared state of one Postgres store. */
export interface PgContext {
  readonly db: PgDb;
  /** The process's question sets: the write doors owe jobs for `registry.setsFor(slug)`. */
  registry: Registry;
  /** Fresh opaque lower-case id. */
  readonly newId: () => string;
  /** Fresh random claim token. */
  readonly newToken: () => string;
  /**
   * Test-only: milliseconds added to the database clock, so a test can move "now" past a lease
   * or a backoff without sleeping (DESIGN §2). 0 in production.
   */
  clockOffsetMs: number;
}

/**
 * "Now" in epoch milliseconds from the **database** clock (DESIGN §2, §13): every lease, backoff
 * and debounce time on Postgres is computed from it, so clock skew between worker machines cannot
 * expire a live lease. `now()` is the transaction's start time, so every statement of one
 * transaction sees the same instant, as the SQLite store's single clock read does.
 */
export function nowMs(ctx: PgContext): SQL {
  return sql`(floor(extract(epoch from now()) * 1000)::bigint + ${sql.raw(String(Math.trunc(ctx.clockOffsetMs)))})`;
}

/** Reads the database's now, in epoch milliseconds, on `tx`. */
export async function readNow(ctx: PgContext, tx: PgTx = ctx.db): Promise<number> {
  return (await rows<{ now: number }>(tx, sql`SELECT ${nowMs(ctx)} AS now`))[0].now;
}

/**
 * Runs `fn` in one transaction (READ COMMITTED; rows that a decision depends on are read
 * `FOR UPDATE`). Unlike SQLite's, the callback is async: Postgres transactions hold one pooled
 * connection and may await, but must only await statements on `tx`.
 */
export function writeTx<T>(ctx: PgContext, fn: (tx: PgTx) => Promise<T>): Promise<T> {
  return ctx.db.transaction((tx) => fn(tx as unknown as PgTx));
}

/** Rows of a raw statement (snake_case column names as written in the SQL). */
export async function rows<T>(tx: PgTx, q: SQL): Promise<T[]> {
  const r = (await tx.execute(q)) as unknown as { rows: T[] };
  return r.rows;
}

/** The first row of a raw statement, or undefined. */
export async function one<T>(tx: PgTx, q: SQL): Promise<T | undefined> {
  return (await rows<T>(tx, q))[0];
}

/** Rows changed by a raw statement (node-postgres reports `rowCount`, PGlite `affectedRows`). */
export async function changes(tx: PgTx, q: SQL): Promise<number> {
  const r = (await tx.execute(q)) as unknown as { rowCount?: number | null; affectedRows?: number };
  return r.rowCount ?? r.affectedRows ?? 0;
}
