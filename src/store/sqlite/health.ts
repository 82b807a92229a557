import Database from 'better-sqlite3';
import { count, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { existsSync, statSync } from 'node:fs';
import { openSqlite, STARTUP_BUSY_TIMEOUT_MS, SQLITE_MIGRATIONS } from './open.js';
import { LEGACY_MIGRATIONS_TABLE, MIGRATIONS_TABLE } from '../migrations-table.js';
import * as schema from './schema.js';

/**
 * The `verdict doctor` database check on SQLite: opens the file read-only (so the check itself
 * never creates or migrates anything), compares the migrations recorded in `verdict_migrations` (or the legacy `__drizzle_migrations`)
 * with the committed ones, and reads the queue.
 */

/** What the check found. */
export interface SqliteHealth {
  path: string;
  /** False when the file does not exist yet (the first command that opens it creates it). */
  exists: boolean;
  /** Migrations committed in `drizzle/`. */
  migrationsKnown: number;
  /** Migrations recorded as applied in the file. */
  migrationsApplied: number;
  /** Committed migrations newer than the last applied one (drizzle applies by folder timestamp). */
  migrationsPending: number;
  /** Job rows by state, when the queue could be read. */
  queue: { owed: number; parked: number } | null;
  /** Size of `<path>-wal`, bytes (0 when absent; DESIGN §16.7). */
  walBytes: number;
  /** Why the file could not be opened or read (an error code or class name, never row data). */
  error: string | null;
}

/**
 * Checks one SQLite file (see the file comment). Never throws for a bad file: the problem is in
 * `error`.
 */
export function checkSqliteHealth(path: string): SqliteHealth {
  const known = readMigrationFiles({ migrationsFolder: SQLITE_MIGRATIONS });
  const out: SqliteHealth = {
    path,
    exists: path === ':memory:' || existsSync(path),
    migrationsKnown: known.length,
    migrationsApplied: 0,
    migrationsPending: known.length,
    queue: null,
    walBytes: walFileBytes(path),
    error: null,
  };
  if (!out.exists || path === ':memory:') return out;
  let client: Database.Database | undefined;
  try {
    // The reads' own read-only open: works in a folder this user may not write (see open.ts).
    client = openSqlite(path, { readOnly: true, migrate: false }).$client;
    client.pragma(`busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
    const db = drizzle({ client, schema });
    // `verdict_migrations`, or on a file no newer version has opened yet, Verdict's rows of the
    // legacy `__drizzle_migrations` (the next open copies them over).
    const hasTable = (name: string) => (db.get<{ n: number }>(sql`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ${name}`)?.n ?? 0) > 0;
    const table = hasTable(MIGRATIONS_TABLE) ? MIGRATIONS_TABLE : hasTable(LEGACY_MIGRATIONS_TABLE) ? LEGACY_MIGRATIONS_TABLE : null;
    if (table) {
      const hashes = new Set(known.map((m) => m.hash));
      const applied = db.all<{ hash: string; created_at: number }>(sql`SELECT hash, created_at FROM ${sql.identifier(table)}`).filter((r) => hashes.has(r.hash));
      out.migrationsApplied = applied.length;
      const last = applied.reduce((m, r) => Math.max(m, Number(r.created_at)), -Infinity);
      out.migrationsPending = known.filter((m) => m.folderMillis > last).length;
    }
    if (out.migrationsPending === 0) {
      const rows = db
        .select({ state: schema.decisionJobs.state, n: count() })
        .from(schema.decisionJobs)
        .groupBy(schema.decisionJobs.state)
        .all();
      out.queue = { owed: rows.find((r) => r.state === 'owed')?.n ?? 0, parked: rows.find((r) => r.state === 'parked')?.n ?? 0 };
    }
  } catch (err) {
    const e = ((err as { cause?: unknown }).cause ?? err) as { code?: unknown; name?: unknown };
    out.error = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'error';
  } finally {
    client?.close();
  }
  return out;
}

function walFileBytes(path: string): number {
  if (path === ':memory:') return 0;
  try {
    return statSync(`${path}-wal`).size;
  } catch {
    return 0;
  }
}
