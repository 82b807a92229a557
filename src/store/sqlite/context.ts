import type { RunResult } from 'better-sqlite3';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import type { Clock } from '../../clock.js';
import type { Registry } from '../../decision/registry.js';
import type * as schema from './schema.js';
import type { SqliteDb } from './open.js';

/** A connection or a transaction: what every SQLite store function runs its statements on. */
export type Tx = BaseSQLiteDatabase<'sync', RunResult, typeof schema>;

/** Shared state of one SQLite store. */
export interface SqliteContext {
  readonly db: SqliteDb;
  readonly clock: Clock;
  /** The process's question sets: the write doors owe jobs for `registry.setsFor(slug)`. */
  registry: Registry;
  /** Fresh opaque lower-case id. */
  readonly newId: () => string;
  /** Fresh random claim token. */
  readonly newToken: () => string;
}

/**
 * Retries of a write transaction that still failed with SQLITE_BUSY after the busy timeout, or
 * with a BUSY variant SQLite raises without waiting (a stale WAL snapshot, WAL recovery by another
 * process). The waits double from `BUSY_RETRY_BASE_MS`: 25 + 50 + 100 + 200 + 400 ms on top of
 * the busy timeout, so a job outcome survives a checkpoint or a long writer in another process
 * instead of reaching the runner as an error.
 */
export const BUSY_RETRIES = 5;
export const BUSY_RETRY_BASE_MS = 25;

/** True for SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_RECOVERY, ...). */
export function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs `fn` in a write transaction that begins IMMEDIATE; `fn` must never await (better-sqlite3).
 * IMMEDIATE takes the write lock at BEGIN, where the busy timeout applies, so a transaction never
 * fails half-way to upgrade a read lock. A transaction that fails with SQLITE_BUSY is rolled back
 * and run again from the start (`fn` reads everything it needs inside, so a re-run is safe),
 * up to `BUSY_RETRIES` times; the wait blocks the thread, as SQLite's own busy handler does.
 * @throws the last SQLITE_BUSY error after the retries, and any other error at once.
 */
export function writeTx<T>(ctx: SqliteContext, fn: (tx: Tx) => T): T {
  for (let attempt = 0; ; attempt++) {
    try {
      return ctx.db.transaction((tx) => fn(tx as unknown as Tx), { behavior: 'immediate' });
    } catch (err) {
      if (!isBusy(err) || attempt >= BUSY_RETRIES) throw err;
      Atomics.wait(sleeper, 0, 0, BUSY_RETRY_BASE_MS * 2 ** attempt);
    }
  }
}
