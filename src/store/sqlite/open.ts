import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { LEGACY_MIGRATIONS_TABLE, MIGRATIONS_TABLE } from '../migrations-table.js';
import * as schema from './schema.js';
import { DatabaseNotFound, DatabaseUnavailable, ownCode } from '../../errors.js';
import { databaseError } from '../database-errors.js';

export type SqliteDb = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

/** The committed migrations folder; `src/store/sqlite` and `dist/store/sqlite` both sit three levels below the root. */
export const SQLITE_MIGRATIONS = fileURLToPath(new URL('../../../drizzle', import.meta.url));

/**
 * Busy timeout in ms: a statement waits this long for another process's lock before SQLITE_BUSY.
 * SQLite's busy handler sleeps inside the statement, so the event loop is held for the whole wait;
 * DESIGN §10.1 bounds that at 250 ms. Longer waits are the store's awaited retries
 * (context.ts `retryBusy`). Was 10 000: a held lock froze /healthz for up to 61 s.
 */
const BUSY_TIMEOUT_MS = 100;

/**
 * Busy timeout in ms while opening (migrations) and for one-shot reads such as `doctor`: nothing
 * else runs on the loop then, and a worker starting beside a migrating one must wait, not fail.
 */
export const STARTUP_BUSY_TIMEOUT_MS = 10_000;

/**
 * `journal_size_limit`, bytes (DESIGN §10.2: 64 MiB): after a checkpoint resets the write-ahead log,
 * SQLite truncates the file to this size instead of keeping its peak. Without it a WAL that grew
 * behind a long reader (1.34 GB measured for a 4.8 MB database) kept its size until the worker exited.
 */
const JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

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

/** File names a SQLite database is usually given (the demo writes `demo.db`, the default is `verdict.db`). */
const DATABASE_FILE = /\.(db|sqlite3?)$/i;
/** At most this many names are listed beside a missing database (a folder of many files is not printed whole). */
const DATABASES_LISTED = 5;

/**
 * The databases in the folder of a missing `path`, as a clause for its DatabaseNotFound: the
 * mistake is usually the name (`verdict.db` given, `demo.db` written), so the message says which
 * are there: ` (./data holds demo.db)`, ` (./data holds no database file)`, or nothing when the
 * folder cannot be listed. File names only, never their contents.
 */
function databasesBeside(path: string): string {
  const dir = dirname(path);
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((n) => DATABASE_FILE.test(n))
      .sort();
  } catch {
    return '';
  }
  if (names.length === 0) return ` (${dir} holds no database file)`;
  const more = names.length > DATABASES_LISTED ? ` and ${names.length - DATABASES_LISTED} more` : '';
  return ` (${dir} holds ${names
    .slice(0, DATABASES_LISTED)
    .map((n) => (dir.endsWith(sep) ? dir + n : `${dir}${sep}${n}`))
    .join(', ')}${more})`;
}

/** How `openSqlite` treats the file. */
export interface OpenSqliteOptions {
  /** Apply pending migrations (see migrateSqlite). @defaultValue true */
  migrate?: boolean;
  /** How long a statement waits for another process's write lock, ms. @defaultValue BUSY_TIMEOUT_MS */
  busyTimeoutMs?: number;
  /**
   * Refuse a path with no database instead of creating it (and its folders): a worker or a read
   * given a mistyped path must not start on a fresh empty file. @defaultValue false
   */
  mustExist?: boolean;
  /**
   * Open read-only (implies `mustExist`): reads then need no write access to the file or its folder.
   * Pending migrations are applied first through a short read-write open, since the reads need
   * the current schema. @defaultValue false
   */
  readOnly?: boolean;
}

/**
 * Opens a SQLite database with WAL, `journal_size_limit`, a busy timeout (`busyTimeoutMs`, default
 * BUSY_TIMEOUT_MS, after STARTUP_BUSY_TIMEOUT_MS while migrating), NORMAL sync and foreign keys, and
 * applies the migrations in `drizzle/` (unless `migrate: false`; see migrateSqlite). See OpenSqliteOptions for
 * `mustExist` and `readOnly`.
 * @throws DatabaseNotFound when the file is missing and `mustExist` or `readOnly` is set (nothing is created).
 * @throws DatabaseUnavailable naming the path and the driver's code when it cannot be opened or migrated.
 */
export function openSqlite(path: string, opts: OpenSqliteOptions = {}): SqliteDb {
  const mustExist = opts.mustExist || opts.readOnly;
  if (path !== ':memory:' && mustExist && !existsSync(path)) {
    throw new DatabaseNotFound(
      `no database at ${path}${databasesBeside(path)}; pass the path the demo, an import or a worker wrote (--database-url / VERDICT_DATABASE_URL)${opts.readOnly ? '' : ', or --create to start a new one'}`,
    );
  }
  if (path !== ':memory:' && existsSync(path) && statSync(path).isDirectory()) {
    throw new DatabaseUnavailable(
      `${path} is a folder, not a database file; pass the database file itself (--database-url / VERDICT_DATABASE_URL)`,
    );
  }
  try {
    if (opts.readOnly && path !== ':memory:') return openSqliteReadOnly(path, opts);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const sqlite = new Database(path, { fileMustExist: !!mustExist && path !== ':memory:' });
    try {
      cacheStatements(sqlite);
      sqlite.pragma(`busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
      sqlite.pragma('journal_mode = WAL');
      sqlite.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT_BYTES}`);
      // FULL: a commit is fsynced before it returns, so a write acknowledged (an HTTP 201, a stored
      // answer) survives a power cut (DESIGN §3.9; the cost, measured, is there too).
      sqlite.pragma('synchronous = FULL');
      sqlite.pragma('foreign_keys = ON');
      const db = drizzle({ client: sqlite, schema }) as SqliteDb;
      if (opts.migrate !== false) migrateSqlite(db);
      sqlite.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? BUSY_TIMEOUT_MS}`);
      return db;
    } catch (err) {
      sqlite.close();
      throw err;
    }
  } catch (err) {
    throw databaseError(err, path);
  }
}

/**
 * A read-only connection (no journal mode change, no statement that writes). Migrations still
 * pending are applied by a read-write open first; a file this user may not write then fails with
 * a message saying so.
 */
function openSqliteReadOnly(path: string, opts: OpenSqliteOptions): SqliteDb {
  const db = readOnlyOpen(path, opts);
  if (opts.migrate === false || pendingMigrationsOn(db.$client) === 0) return db;
  db.$client.close();
  openSqlite(path, { ...opts, readOnly: false, mustExist: true }).$client.close();
  return readOnlyOpen(path, opts);
}

function readOnlyOpen(path: string, opts: OpenSqliteOptions): SqliteDb {
  try {
    return readOnlyConnection(path, opts);
  } catch (err) {
    // A WAL database whose folder we may not write cannot get its -shm index. With no -wal file
    // no writer has it open, so it is read as immutable (needs URI filenames: the CLI sets
    // SQLITE_USE_URI=1 before the driver loads). Without URI support the first error stands.
    const code = ownCode(err);
    if (
      (code === 'SQLITE_READONLY_DIRECTORY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY_CANTINIT') &&
      !existsSync(`${path}-wal`)
    ) {
      try {
        return readOnlyConnection(`${pathToFileURL(resolve(path)).href}?immutable=1`, opts);
      } catch {
        throw err;
      }
    }
    throw err;
  }
}

/** A read-only connection on `filename` (a path, or a `file:` URI when URIs are enabled). */
function readOnlyConnection(filename: string, opts: OpenSqliteOptions): SqliteDb {
  const sqlite = new Database(filename, { readonly: true, fileMustExist: true });
  try {
    cacheStatements(sqlite);
    sqlite.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? BUSY_TIMEOUT_MS}`);
    sqlite.pragma('foreign_keys = ON');
    // A WAL file needs its -shm index: touch the schema now so a folder we may not write fails
    // here, at open, with the path named, rather than in the middle of a read.
    sqlite.prepare('SELECT count(*) FROM sqlite_master').get();
    return drizzle({ client: sqlite, schema }) as SqliteDb;
  } catch (err) {
    sqlite.close();
    throw err;
  }
}

/** Committed migrations not recorded on this connection's database; 1 when it cannot tell. */
function pendingMigrationsOn(client: Database.Database): number {
  try {
    const has = (name: string) =>
      client.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;
    if (!has(MIGRATIONS_TABLE)) return 1;
    const applied = new Set(
      (client.prepare(`SELECT hash FROM ${MIGRATIONS_TABLE}`).all() as Array<{ hash: string }>).map((r) => r.hash),
    );
    return readMigrationFiles({ migrationsFolder: SQLITE_MIGRATIONS }).filter((m) => !applied.has(m.hash)).length;
  } catch {
    return 1;
  }
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
 * Applies the committed migrations, recorded in `verdict_migrations` (DESIGN §16.1). Migrations
 * are serialised across processes by an exclusive lock on a side file (`<db>.migrate-lock`):
 * drizzle's migrator reads the last applied migration before it begins its transaction, so two
 * workers starting together on a fresh file would otherwise both try to create the tables.
 * With nothing pending it only reads and takes no lock, so no side file appears beside a database
 * that is up to date; after a run the side file is removed (when it is still the one this process
 * locked: a process that waited on a removed file finds nothing pending and removes nothing).
 * @throws when a migration fails, or when the connection is inside a transaction.
 */
function migrateSqlite(db: SqliteDb): void {
  const path = db.$client.name;
  const run = () => {
    adoptLegacyMigrations(db);
    migrate(db, { migrationsFolder: SQLITE_MIGRATIONS, migrationsTable: MIGRATIONS_TABLE });
  };
  if (path === ':memory:' || path === '' || db.$client.memory) {
    run();
    return;
  }
  if (pendingMigrationsOn(db.$client) === 0) return;
  const lockPath = `${path}.migrate-lock`;
  const lock = new Database(lockPath);
  const lockedIno = statSync(lockPath).ino;
  lock.pragma(`busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
  try {
    lock.exec('BEGIN EXCLUSIVE');
    run();
    lock.exec('COMMIT');
  } finally {
    if (lock.inTransaction) lock.exec('ROLLBACK');
    lock.close();
    try {
      if (statSync(lockPath).ino === lockedIno) rmSync(lockPath, { force: true });
    } catch {
      /* already removed by the process that held it before us */
    }
  }
}

/**
 * Copies Verdict's rows from drizzle's default `__drizzle_migrations` (versions before DESIGN
 * §16.1) into `verdict_migrations`, once, when the new table does not exist yet. Only rows whose
 * hash is one of Verdict's own migrations are copied, so a host's drizzle migrations in the default
 * table are neither adopted nor touched; the old table is left in place.
 */
function adoptLegacyMigrations(db: SqliteDb): void {
  const has = (name: string) =>
    db.$client.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;
  if (has(MIGRATIONS_TABLE) || !has(LEGACY_MIGRATIONS_TABLE)) return;
  const known = new Set(readMigrationFiles({ migrationsFolder: SQLITE_MIGRATIONS }).map((m) => m.hash));
  const rows = db.$client
    .prepare(`SELECT hash, created_at FROM ${LEGACY_MIGRATIONS_TABLE} ORDER BY id`)
    .all() as Array<{ hash: string; created_at: number }>;
  db.$client.transaction(() => {
    // The same DDL drizzle's migrator uses, so it finds the table as its own.
    db.$client.exec(
      `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
    );
    const insert = db.$client.prepare(`INSERT INTO ${MIGRATIONS_TABLE} (hash, created_at) VALUES (?, ?)`);
    for (const r of rows) if (known.has(r.hash)) insert.run(r.hash, r.created_at);
  })();
}
