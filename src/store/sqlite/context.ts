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

/** Runs `fn` in a write transaction that begins IMMEDIATE; `fn` must never await (better-sqlite3). */
export function writeTx<T>(ctx: SqliteContext, fn: (tx: Tx) => T): T {
  return ctx.db.transaction((tx) => fn(tx as unknown as Tx), { behavior: 'immediate' });
}
