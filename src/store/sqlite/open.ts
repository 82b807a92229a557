import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { LEGACY_MIGRATIONS_TABLE, MIGRATIONS_TABLE } from '../migrations-table.js';
import * as schema from './schema.js';

export type SqliteDb = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

/** The committed migrations folder; `src/store/sqlite` and `dist/store/sqlite` both sit three levels below the root. */
export const SQLITE_MIGRATIONS = fileURLToPath(new URL('../../../drizzle', import.meta.url));

/**
 * Busy timeout in ms: a statement waits this long for another process's lock before SQLITE_BUSY.
 * SQLite's busy handler sleeps inside the statement, so the event loop is held for the whole wait;
 * DESIGN §16.6 bounds that at 250 ms. Longer waits are the store's awaited retries
 * (context.ts `retryBusy`). Was 10 000: a held lock froze /healthz for up to 61 s.
 */
export const BUSY_TIMEOUT_MS = 100;

/**
 * Busy timeout in ms while opening (migrations) and for one-shot reads such as `doctor`: nothing
 * else runs on the loop then, and a worker starting beside a migrating one must wait, not fail.
 */
export const STARTUP_BUSY_TIMEOUT_MS = 10_000;

/**
 * `journal_size_limit`, bytes (DESIGN §16.7: 64 MiB): after a checkpoint resets the write-ahead log,
 * SQLite truncates the file to this size instead of keeping its peak. Without it a WAL that grew
 * behind a long reader (1.34 GB measured for a 4.8 MB database) kept its size until the worker exited.
 */
export const JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/** Distinct SQL texts kept prepared per connection; statements beyond it are prepared each time. */
export const STATEMENT_CACHE_SIZE = 512;

/**
 * Keeps prepared statements per SQL text on this connection. drizzle's better-sqlite3 driver
 * prepares every statement it runs afresh; on the job path that was a third of the CPU (measured
 * with --cpu-prof on the queue benchmark: 1.3 s of 5.3 s for 5,000 jobs). Values are always bound
 * parameters, so the texts repeat. A cached reader is reset to object rows, since drizzle switches
 * a statement to raw (array) rows for some reads and better-sqlite3 keeps that mode on the object.
 */
function cacheStatements(sqlite: Database.Database): void {
  const cache = new Map<string, Database.Statement>();
  const prepare = sqlite.prepare.bind(sqlite);
  sqlite.prepare = ((source: string) => {
    const hit = cache.get(source);
    if (hit) {
      if (hit.reader) hit.raw(false);
      return hit;
    }
    const stmt = prepare(source);
    if (cache.size < STATEMENT_CACHE_SIZE) cache.set(source, stmt);
    return stmt;
  }) as Database.Database['prepare'];
}

/**
 * Resolves `VERDICT_DATABASE_URL` forms to a SQLite path: a plain path, `file:path` or
 * `file://path`, or `:memory:`.
 */
export function sqlitePathFromUrl(url: string): string {
  if (url === ':memory:') return url;
  if (url.startsWith('file://')) return fileURLToPath(url);
  if (url.startsWith('file:')) return url.slice('file:'.length);
  return url;
}

/**
 * Opens a SQLite database with WAL, `journal_size_limit`, a busy timeout (`busyTimeoutMs`, default
 * BUSY_TIMEOUT_MS, after STARTUP_BUSY_TIMEOUT_MS while migrating), NORMAL sync and foreign keys, and
 * applies the migrations in `drizzle/` (unless `migrate: false`; see migrateSqlite).
 * @throws when the file cannot be opened or a migration fails.
 */
export function openSqlite(path: string, opts: { migrate?: boolean; busyTimeoutMs?: number } = {}): SqliteDb {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new Database(path);
  cacheStatements(sqlite);
  sqlite.pragma(`busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT_BYTES}`);
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  const db = drizzle({ client: sqlite, schema }) as SqliteDb;
  if (opts.migrate !== false) migrateSqlite(db);
  sqlite.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? BUSY_TIMEOUT_MS}`);
  return db;
}

/**
 * Wraps a host's own better-sqlite3 connection (`createVerdict({ database: { sqlite: db } })`):
 * Verdict's statements run on that very connection, so the host's writes and Verdict's write doors
 * can commit together. Only what Verdict's schema needs is set: foreign keys on, and a busy
 * timeout of BUSY_TIMEOUT_MS when the host left it at 0. The journal mode and the host's prepared
 * statements are left as they are (no statement cache is installed on a host's connection).
 * @throws when a migration fails.
 */
export function wrapSqlite(sqlite: Database.Database, opts: { migrate?: boolean } = {}): SqliteDb {
  sqlite.pragma('foreign_keys = ON');
  if (Number(sqlite.pragma('busy_timeout', { simple: true })) === 0) sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  const db = drizzle({ client: sqlite, schema }) as SqliteDb;
  if (opts.migrate !== false) migrateSqlite(db);
  return db;
}

/**
 * Applies the committed migrations, recorded in `verdict_migrations` (DESIGN §16.21). Migrations
 * are serialised across processes by an exclusive lock on a side file (`<db>.migrate-lock`):
 * drizzle's migrator reads the last applied migration before it begins its transaction, so two
 * workers starting together on a fresh file would otherwise both try to create the tables.
 * Idempotent: with nothing pending it only reads.
 * @throws when a migration fails, or when the connection is inside a transaction.
 */
export function migrateSqlite(db: SqliteDb): void {
  const path = db.$client.name;
  const run = () => {
    adoptLegacyMigrations(db);
    migrate(db, { migrationsFolder: SQLITE_MIGRATIONS, migrationsTable: MIGRATIONS_TABLE });
  };
  if (path === ':memory:' || path === '' || db.$client.memory) {
    run();
    return;
  }
  const lock = new Database(`${path}.migrate-lock`);
  lock.pragma(`busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
  try {
    lock.exec('BEGIN EXCLUSIVE');
    run();
    lock.exec('COMMIT');
  } finally {
    if (lock.inTransaction) lock.exec('ROLLBACK');
    lock.close();
  }
}

/**
 * Copies Verdict's rows from drizzle's default `__drizzle_migrations` (versions before DESIGN
 * §16.21) into `verdict_migrations`, once, when the new table does not exist yet. Only rows whose
 * hash is one of Verdict's own migrations are copied, so a host's drizzle migrations in the default
 * table are neither adopted nor touched; the old table is left in place.
 */
function adoptLegacyMigrations(db: SqliteDb): void {
  const has = (name: string) => db.$client.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;
  if (has(MIGRATIONS_TABLE) || !has(LEGACY_MIGRATIONS_TABLE)) return;
  const known = new Set(readMigrationFiles({ migrationsFolder: SQLITE_MIGRATIONS }).map((m) => m.hash));
  const rows = db.$client.prepare(`SELECT hash, created_at FROM ${LEGACY_MIGRATIONS_TABLE} ORDER BY id`).all() as Array<{ hash: string; created_at: number }>;
  db.$client.transaction(() => {
    // The same DDL drizzle's migrator uses, so it finds the table as its own.
    db.$client.exec(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`);
    const insert = db.$client.prepare(`INSERT INTO ${MIGRATIONS_TABLE} (hash, created_at) VALUES (?, ?)`);
    for (const r of rows) if (known.has(r.hash)) insert.run(r.hash, r.created_at);
  })();
}
