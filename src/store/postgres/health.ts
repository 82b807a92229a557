import { readMigrationFiles } from 'drizzle-orm/migrator';
import pg from 'pg';
import { databaseLabel } from '../database-errors.js';
import { MIGRATIONS_TABLE } from '../migrations-table.js';
import { PG_MIGRATIONS, PG_MIGRATIONS_SCHEMA } from './open.js';

/**
 * The `verdict doctor` database check on Postgres, the twin of store/sqlite/health.ts: connects
 * with one client (no pool, no migration, no write), compares the migrations recorded in
 * `drizzle.verdict_migrations` with the committed ones, and reads the queue and the worker
 * heartbeats. Ids, counts and error codes only.
 */

/** What the check found. */
export interface PgHealth {
  /** The database as messages name it: `postgres://host:port/db`, never the user or password. */
  label: string;
  /** False when the server could not be reached or refused the login. */
  reachable: boolean;
  migrationsKnown: number;
  migrationsApplied: number;
  /** Committed migrations newer than the last applied one (drizzle applies by folder timestamp). */
  migrationsPending: number;
  /** Job rows by state, when the queue could be read (migrations applied). */
  queue: { owed: number; parked: number } | null;
  /**
   * The `verdict_meta` rows under `heartbeatPrefix` (worker heartbeats) and the database clock
   * (epoch ms) they are judged against, when the queue could be read.
   */
  heartbeats: { now: number; rows: Array<{ key: string; value: string; updatedAt: number }> } | null;
  /** Why it could not connect or read (an error code, never row data). */
  error: string | null;
}

/** How long the check waits for a connection, ms. @defaultValue 5000 */
export const PG_HEALTH_CONNECT_TIMEOUT_MS = 5_000;

/** Checks one Postgres database (see the file comment). Never throws: the problem is in `error`. */
export async function checkPgHealth(url: string, heartbeatPrefix: string, connectTimeoutMs = PG_HEALTH_CONNECT_TIMEOUT_MS): Promise<PgHealth> {
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
    const table = `${PG_MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE}`;
    const exists = (await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [table])).rows[0]?.t;
    if (exists) {
      const hashes = new Set(known.map((m) => m.hash));
      const applied = (await client.query<{ hash: string; created_at: string }>(`SELECT hash, created_at FROM ${table}`)).rows.filter((r) => hashes.has(r.hash));
      out.migrationsApplied = applied.length;
      const last = applied.reduce((m, r) => Math.max(m, Number(r.created_at)), -Infinity);
      out.migrationsPending = known.filter((m) => m.folderMillis > last).length;
    }
    if (out.migrationsPending === 0) {
      const rows = (await client.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM decision_jobs GROUP BY state')).rows;
      out.queue = { owed: rows.find((r) => r.state === 'owed')?.n ?? 0, parked: rows.find((r) => r.state === 'parked')?.n ?? 0 };
      const now = Number((await client.query<{ now: string }>('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::text AS now')).rows[0].now);
      const beats = (await client.query<{ key: string; value: string; updated_at: string }>(`SELECT key, value, updated_at::text FROM verdict_meta WHERE left(key, length($1::text)) = $1::text`, [heartbeatPrefix])).rows;
      out.heartbeats = { now, rows: beats.map((b) => ({ key: b.key, value: b.value, updatedAt: Number(b.updated_at) })) };
    }
  } catch (err) {
    const e = err as { code?: unknown; name?: unknown; errors?: Array<{ code?: unknown }> };
    out.error = typeof e.code === 'string' ? e.code : typeof e.errors?.[0]?.code === 'string' ? (e.errors[0].code as string) : typeof e.name === 'string' ? e.name : 'error';
  } finally {
    await client.end().catch(() => undefined);
  }
  return out;
}
