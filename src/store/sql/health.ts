import { sql, type SQL } from 'drizzle-orm';
import { ownCode } from '../../errors.js';
import type { MetaRow } from '../meta-store.js';
import { listMeta } from './operations.js';
import { Registry } from '../../decision/registry.js';
import { nowMs, read, rows, type Dialect, type SqlContext } from './steps.js';

/** What `verdict doctor` reads of a database once connected (ids, counts and timestamps only). */
export interface DatabaseHealth {
  /** Migrations committed in the dialect's folder (`drizzle/`, `drizzle-pg/`). */
  migrationsKnown: number;
  /** Committed migrations recorded as applied in the database. */
  migrationsApplied: number;
  /** Committed migrations newer than the last applied one (drizzle applies by folder timestamp). */
  migrationsPending: number;
  /** Job rows by state, when the queue could be read (no migration pending). */
  queue: { owed: number; parked: number } | null;
  /** The worker heartbeats (`verdict_meta` rows under the prefix) and the database's now (epoch ms) they are judged against. */
  heartbeats: { now: number; rows: MetaRow[] } | null;
}

/**
 * The doctor's database check, the same on both dialects and read-only: the migrations recorded
 * in the first of `migrationTables` that exists (`verdict_migrations`, or on a database no newer
 * version has opened, Verdict's rows of drizzle's legacy `__drizzle_migrations`, which the next
 * open copies over) against the committed ones; once none is pending, the queue by state and
 * the worker heartbeats.
 * @throws the driver's error when the database cannot be read.
 */
export async function readDatabaseHealth(
  d: Dialect,
  db: unknown,
  o: {
    migrationTables: readonly SQL[];
    known: ReadonlyArray<{ hash: string; folderMillis: number }>;
    heartbeatPrefix: string;
  },
): Promise<DatabaseHealth> {
  // A read-only check: no door runs, so no question sets, ids or tokens are needed.
  const c: SqlContext = { d, db, registry: new Registry([]), newId: noId, newToken: noId };
  const out: DatabaseHealth = {
    migrationsKnown: o.known.length,
    migrationsApplied: 0,
    migrationsPending: o.known.length,
    queue: null,
    heartbeats: null,
  };
  for (const table of o.migrationTables) {
    let recorded: Array<{ hash: string; created_at: number | string }>;
    try {
      recorded = await read(c, rows(sql`SELECT hash, created_at FROM ${table}`));
    } catch (err) {
      // SQLite "no such table", Postgres 42P01 (undefined_table): try the next; anything else is a real failure
      const e = (err as { cause?: unknown }).cause ?? err; // drizzle wraps driver errors
      if (ownCode(e) === '42P01' || /no such table/.test(String((e as { message?: unknown }).message))) continue;
      throw err;
    }
    const hashes = new Set(o.known.map((m) => m.hash));
    const applied = recorded.filter((r) => hashes.has(r.hash));
    const last = applied.reduce((m, r) => Math.max(m, Number(r.created_at)), -Infinity);
    out.migrationsApplied = applied.length;
    out.migrationsPending = o.known.filter((m) => m.folderMillis > last).length;
    break;
  }
  if (out.migrationsPending > 0) return out;
  const states = await read(
    c,
    rows<{ state: string; n: number }>(sql`SELECT state, count(*) AS n FROM decision_jobs GROUP BY state`),
  );
  const n = (state: string) => Number(states.find((r) => r.state === state)?.n ?? 0);
  out.queue = { owed: n('owed'), parked: n('parked') };
  out.heartbeats = { now: await read(c, nowMs()), rows: await listMeta(c, o.heartbeatPrefix) };
  return out;
}

const noId = (): string => {
  throw new Error('the health check writes nothing');
};
