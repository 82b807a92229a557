import type Database from 'better-sqlite3';
import type pg from 'pg';
import { ConfigError, type ProviderName } from '../config.js';
import { InvalidConfigFile, loadQuestionSetConfig } from '../decision/config-file.js';
import { productionSets } from '../decision/production-sets.js';
import { Registry, type QuestionSet } from '../decision/registry.js';
import type { Clock } from '../clock.js';
import { isPostgresUrl } from '../store/postgres/open.js';
import { PgStore } from '../store/postgres/pg-store.js';
import { SqliteStore } from '../store/sqlite/sqlite-store.js';
import type { Store } from '../store/whole-store.js';

/**
 * Where Verdict keeps its tables (DESIGN §16.1): a SQLite path, `file:` URL or `:memory:`; a
 * `postgres://` URL; or a handle the host owns: `{ sqlite: db }` (the host's better-sqlite3
 * connection) or `{ postgres: pool }` (the host's node-postgres pool). A host handle is never
 * closed by Verdict.
 */
export type DatabaseOption = string | { sqlite: Database.Database } | { postgres: pg.Pool };

/** A Store whose write registry can be swapped (SIGHUP reload, provider `none`). */
export type OpenedStore = Store & { setRegistry(r: Registry): void };

/**
 * How a process may treat the database it names:
 * - `create`: open it, creating the file (and its folders) when missing: the demo, an import.
 * - `existing`: open it for writing, but refuse one that does not exist (a worker without
 *   `--create`, a write command on a mistyped path).
 * - `read`: open it read-only (SQLite), refusing one that does not exist: reads need no write
 *   access to the file or its folder.
 * A Postgres database is never created by Verdict (its tables are, by the migrations); for it the
 * access only matters in that a missing database reads DatabaseNotFound.
 */
export type DatabaseAccess = 'create' | 'existing' | 'read';

/**
 * Opens the store on `database`. SQLite opens (and migrates, unless `migrate: false`) at once;
 * Postgres opens lazily and migrates before its first call (serialised across processes).
 * @param opts.poolSize connections of a Postgres pool Verdict opens itself. @defaultValue 10
 * @param opts.access see DatabaseAccess. @defaultValue 'create'
 * @throws DatabaseNotFound when a SQLite file is missing and `access` is not `create`.
 * @throws DatabaseUnavailable when a SQLite file cannot be opened or migrated (the message names the path and the driver's code).
 */
export function openStoreOn(
  database: DatabaseOption,
  registry: Registry,
  opts: { migrate?: boolean; poolSize?: number; clock?: Clock; access?: DatabaseAccess } = {},
): OpenedStore {
  if (typeof database === 'string') {
    if (isPostgresUrl(database))
      return PgStore.connect(database, { registry, poolSize: opts.poolSize, migrate: opts.migrate });
    const access = opts.access ?? 'create';
    return new SqliteStore({
      url: database,
      registry,
      migrate: opts.migrate,
      clock: opts.clock,
      mustExist: access !== 'create',
      readOnly: access === 'read',
    });
  }
  if ('sqlite' in database)
    return new SqliteStore({
      url: database.sqlite.name,
      connection: database.sqlite,
      registry,
      migrate: opts.migrate,
      clock: opts.clock,
    });
  if ('postgres' in database) return PgStore.onPool(database.postgres, { registry, migrate: opts.migrate });
  throw new ConfigError('database: expected a path, a postgres:// URL, { sqlite: Database } or { postgres: Pool }');
}

/**
 * The registry every process loads: `sets` (the production sets by default) plus the sets of a
 * question-set config file, validated by the same rules. The same registry in every process means
 * the CLI, the worker and a tracker enqueue alike.
 * @throws ConfigError naming the file, the set and the problem when the config file is invalid.
 * @throws InvalidQuestionSet when two sets share a name.
 */
export function buildRegistry(configFile?: string, sets: readonly QuestionSet[] = productionSets()): Registry {
  if (!configFile) return new Registry([...sets]);
  try {
    return new Registry([
      ...sets,
      ...loadQuestionSetConfig(
        configFile,
        sets.map((s) => s.name),
      ),
    ]);
  } catch (err) {
    if (err instanceof InvalidConfigFile) throw new ConfigError(err.message);
    throw err;
  }
}

/**
 * The registry the write doors owe jobs for: `registry`, or none at all when the provider is
 * `none` (DESIGN §9: decisions off, nothing is enqueued).
 */
export function writeRegistryFor(provider: ProviderName | undefined, registry: Registry): Registry {
  return provider === 'none' ? new Registry([]) : registry;
}
