import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import pg from 'pg';
import { databaseLabel } from '../database-errors.js';
import { LEGACY_MIGRATIONS_TABLE, MIGRATIONS_TABLE } from '../migrations-table.js';
import { readDatabaseHealth, type DatabaseHealth } from '../sql/health.js';
import { postgresDialect } from './dialect.js';
import { PG_MIGRATIONS, PG_MIGRATIONS_SCHEMA } from './open.js';
import * as schema from './schema.js';

/** What the check found on one Postgres database (see `checkPgHealth`). */
export interface PgHealth extends DatabaseHealth {
  /** The database as messages name it: `postgres://host:port/db`, never the user or password. */
  label: string;
  /** False when the server could not be reached or refused the login. */
  reachable: boolean;
  /** Why it could not connect or read (an error code, never row data). */
  error: string | null;
}

/** How long the check waits for a connection, ms. @defaultValue 5000 */
const PG_HEALTH_CONNECT_TIMEOUT_MS = 5_000;

/**
 * The `verdict doctor` database check on Postgres (../sql/health.ts reads the same on both
 * dialects): one client (no pool, no migration, no write), and whether the server is reachable.
 * Never throws: the problem is in `error`.
 */
export async function checkPgHealth(
  url: string,
  heartbeatPrefix: string,
  connectTimeoutMs = PG_HEALTH_CONNECT_TIMEOUT_MS,
): Promise<PgHealth> {
  const known = readMigrationFiles({ migrationsFolder: PG_MIGRATIONS });
  const out: PgHealth = {
    label: databaseLabel(url),
    reachable: false,
    migrationsKnown: known.length,
    migrationsApplied: 0,
    migrationsPending: known.length,
    queue: null,
    heartbeats: null,
    error: null,
  };
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    out.reachable = true;
    const table = (name: string) => sql`${sql.identifier(PG_MIGRATIONS_SCHEMA)}.${sql.identifier(name)}`;
    Object.assign(
      out,
      await readDatabaseHealth(postgresDialect({ clockOffsetMs: 0 }), drizzle({ client, schema }), {
        migrationTables: [table(MIGRATIONS_TABLE), table(LEGACY_MIGRATIONS_TABLE)],
        known,
        heartbeatPrefix,
      }),
    );
  } catch (err) {
    const e = err as { code?: unknown; name?: unknown; errors?: Array<{ code?: unknown }> };
    out.error =
      typeof e.code === 'string'
        ? e.code
        : typeof e.errors?.[0]?.code === 'string'
          ? (e.errors[0].code as string)
          : typeof e.name === 'string'
            ? e.name
            : 'error';
  } finally {
    await client.end().catch(() => undefined);
  }
  return out;
}
