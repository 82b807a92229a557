import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { existsSync, statSync } from 'node:fs';
import { systemClock } from '../../clock.js';
import { LEGACY_MIGRATIONS_TABLE, MIGRATIONS_TABLE } from '../migrations-table.js';
import { readDatabaseHealth, type DatabaseHealth } from '../sql/health.js';
import { sqliteAddonError } from '../database-errors.js';
import { errCode } from '../../errors.js';
import { sqliteDialect } from './dialect.js';
import { openSqlite, STARTUP_BUSY_TIMEOUT_MS, SQLITE_MIGRATIONS, type SqliteDb } from './open.js';

/** What the check found on one SQLite file (see `checkSqliteHealth`). */
export interface SqliteHealth extends DatabaseHealth {
  path: string;
  /** False when the file does not exist yet (the first command that opens it creates it). */
  exists: boolean;
  /** Size of `<path>-wal`, bytes (0 when absent; DESIGN §10.2). */
  walBytes: number;
  /** Why the file could not be opened or read (an error code or class name, never row data). */
  error: string | null;
  /**
   * When the cause is not the file but the SQLite driver itself (its native addon does not load:
   * `sqliteAddonError`), that error's message, `<what>; <how to fix>`; null otherwise.
   */
  driverProblem: string | null;
}

/**
 * The `verdict doctor` database check on SQLite (../sql/health.ts reads the same on both
 * dialects): opens the file read-only, so the check itself never creates or migrates anything,
 * and works in a folder this user may not write (see open.ts). Never throws for a bad file: the
 * problem is in `error`.
 */
export async function checkSqliteHealth(path: string, heartbeatPrefix: string): Promise<SqliteHealth> {
  const known = readMigrationFiles({ migrationsFolder: SQLITE_MIGRATIONS });
  const exists = path === ':memory:' || existsSync(path);
  const out: SqliteHealth = {
    path,
    exists,
    migrationsKnown: known.length,
    migrationsApplied: 0,
    migrationsPending: known.length,
    queue: null,
    heartbeats: null,
    walBytes: walFileBytes(path),
    error: null,
    driverProblem: null,
  };
  if (!exists || path === ':memory:') return out;
  let db: SqliteDb | undefined;
  try {
    db = openSqlite(path, { readOnly: true, migrate: false });
    db.$client.pragma(`busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
    const d = sqliteDialect({ db, clock: systemClock, storage: { problem: null, gate: Promise.resolve() } });
    Object.assign(
      out,
      await readDatabaseHealth(d, db, {
        migrationTables: [sql`${sql.identifier(MIGRATIONS_TABLE)}`, sql`${sql.identifier(LEGACY_MIGRATIONS_TABLE)}`],
        known,
        heartbeatPrefix,
      }),
    );
  } catch (err) {
    out.error = errCode(err);
    out.driverProblem = sqliteAddonError((err as { cause?: unknown }).cause ?? err)?.message ?? null;
  } finally {
    db?.$client.close();
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
