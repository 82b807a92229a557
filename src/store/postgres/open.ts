import type { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres';
import { migrate as migrateNodePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { sql, type SQL } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { MIGRATIONS_TABLE } from '../migrations-table.js';
import type { PgQuery } from './job-statements.js';
import * as schema from './schema.js';

/** Any drizzle Postgres database or transaction over this schema (node-postgres or PGlite). */
export type PgDb = PgDatabase<PgQueryResultHKT, typeof schema>;

/** The committed Postgres migrations; `src/store/postgres` and `dist/store/postgres` both sit three levels below the root. */
export const PG_MIGRATIONS = fileURLToPath(new URL('../../../drizzle-pg', import.meta.url));

/**
 * Key of the session-level advisory lock that serialises migrations across processes and
 * machines (DESIGN §10): two workers starting together on a fresh database both succeed, one after
 * the other. An arbitrary constant; changing it lets an old and a new build migrate at once.
 */
const MIGRATION_LOCK_KEY = 0x7665_7264; // "verd"

/** Connections per process when not given: a worker slot holds one at a time, plus headroom. @defaultValue 10 */
const DEFAULT_POOL_SIZE = 10;

/**
 * node-postgres reads `bigint` (int8: epoch ms, token totals, counts) and `numeric` as strings by
 * default; here they are JS numbers (values stay below 2^53: ms until the year 287 396). This is
 * set on pg's global type registry because drizzle passes its own per-query `types` that fall
 * back to the global one, so a pool-level setting would be ignored.
 */
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => Number(v));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v: string) => Number(v));

/** The socket's write batching (node's `Writable.cork`/`uncork`), absent on some stream implementations. */
interface Corkable {
  cork(): void;
  uncork(): void;
}

/** An open Postgres connection: the drizzle database, how to migrate it, and how to close it. */
export interface PgConnection {
  db: PgDb;
  /**
   * Runs one statement of the job's hot path (job-statements.ts) outside drizzle: on node-postgres
   * a named prepared statement (parsed and planned once per pooled connection), on PGlite its
   * text with parameters (one connection, nothing to name).
   */
  query: PgQuery;
  /**
   * Runs `fn` on one connection checked out of the pool (node-postgres), for a transaction the
   * caller opens and ends itself. Undefined on PGlite. A connection whose transaction failed half
   * way (an error without a SQLSTATE: the socket, a protocol error) is not handed to the next
   * caller.
   */
  onOneConnection?: <T>(fn: (c: PipelinedConnection) => Promise<T>) => Promise<T>;
  migrate(): Promise<void>;
  close(): Promise<void>;
}

/**
 * One connection whose statements are pipelined (node-postgres' pipeline mode): each is sent
 * without waiting for the answers of those before it, and the server runs them in the order sent,
 * each with its own snapshot (READ COMMITTED) taken when it starts. A statement that fails inside
 * a transaction fails the ones sent behind it (SQLSTATE 25P02) until the caller's ROLLBACK.
 */
export interface PipelinedConnection {
  /** Sends one of the hot path's named prepared statements (job-statements.ts) on this connection. */
  query: PgQuery;
  /** Sends BEGIN, COMMIT or ROLLBACK; resolves with the server's command tag (`ROLLBACK` for the COMMIT of a failed transaction). */
  control(command: 'BEGIN' | 'COMMIT' | 'ROLLBACK'): Promise<string>;
  /**
   * Runs `send`, which starts statements on this connection without awaiting them, and sends them
   * all in one network write (the socket corked meanwhile): one write and one wake-up of the
   * server instead of one per statement. Returns what `send` returns.
   */
  inOneWrite<T>(send: () => T): T;
}

/** True for the URLs that select Postgres (DESIGN §12). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url);
}

/**
 * A node-postgres pool on `url`. Nothing connects until the first query.
 * @param poolSize connections in the pool. @defaultValue DEFAULT_POOL_SIZE
 */
export function connectNodePg(url: string, poolSize = DEFAULT_POOL_SIZE): PgConnection {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  // An idle client's network error is emitted on the pool, and a checked-out client's (one held
  // for a transaction) on the client itself; without a listener either would crash the process
  // (a server restart would kill every worker holding a transaction, and every completion holds
  // one). The statement running on that client
  // fails, and that failure is handled where it runs; the pool replaces the client.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => void client.on('error', () => undefined));
  return connectionOnPool(pool, { ownsPool: true });
}

/**
 * A connection on a node-postgres pool. A host's pool (`createVerdict({ database: { postgres: pool } })`)
 * is `ownsPool: false`: closing the store leaves it open, and no error listener is added to it.
 */
export function connectionOnPool(pool: pg.Pool, opts: { ownsPool: boolean }): PgConnection {
  const db = drizzleNodePg({ client: pool, schema }) as unknown as PgDb;
  return {
    db,
    query: async (name, text, values) => {
      const r = await pool.query({ name, text, values: values as unknown[] });
      return { rows: r.rows as Array<Record<string, unknown>>, rowCount: r.rowCount ?? 0 };
    },
    onOneConnection: async (fn) => {
      const client = await pool.connect();
      // `pipeline` is node-postgres' client option (8.x): each query is written as it is started.
      const piped = client as pg.PoolClient & { pipeline: boolean; connection: { stream: Partial<Corkable> } };
      let broken: unknown;
      piped.pipeline = true;
      try {
        return await fn({
          query: async (name, text, values) => {
            const r = await client.query({ name, text, values: values as unknown[] });
            return { rows: r.rows as Array<Record<string, unknown>>, rowCount: r.rowCount ?? 0 };
          },
          control: async (command) => (await client.query(command)).command,
          inOneWrite: (send) => {
            // node-postgres corks the socket around each query's messages; this cork holds them
            // all until `send` has started every query (a nested cork is a count).
            const stream = piped.connection.stream;
            stream.cork?.();
            try {
              return send();
            } finally {
              stream.uncork?.();
            }
          },
        });
      } catch (err) {
        broken = err;
        throw err;
      } finally {
        piped.pipeline = false;
        client.release(broken instanceof Error && !('code' in broken) ? broken : undefined);
      }
    },
    migrate: async () => {
      const client = await pool.connect();
      try {
        await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
        try {
          const mdb = drizzleNodePg({ client, schema });
          await adoptLegacyMigrations((q) => mdb.execute(q) as unknown as Promise<{ rows: unknown[] }>);
          await migrateNodePg(mdb, {
            migrationsFolder: PG_MIGRATIONS,
            migrationsSchema: PG_MIGRATIONS_SCHEMA,
            migrationsTable: MIGRATIONS_TABLE,
          });
        } finally {
          await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
        }
      } finally {
        client.release();
      }
    },
    close: async () => {
      if (opts.ownsPool) await pool.end();
    },
  };
}

/** Where Postgres migrations are recorded: `drizzle.verdict_migrations` (DESIGN §16.1). */
export const PG_MIGRATIONS_SCHEMA = 'drizzle';

/**
 * Copies Verdict's rows from drizzle's default table (`drizzle.__drizzle_migrations`, used by
 * versions before DESIGN §16.1) into `drizzle.verdict_migrations`, once, when the new table does
 * not exist yet. Only rows whose hash is one of Verdict's own migrations are copied, so a host's
 * drizzle migrations in the default table are neither adopted nor touched. Runs under the
 * migration lock.
 */
async function adoptLegacyMigrations(exec: (q: SQL) => Promise<{ rows: unknown[] }>): Promise<void> {
  const t = (
    await exec(
      sql`SELECT to_regclass('drizzle.verdict_migrations') AS new, to_regclass('drizzle.__drizzle_migrations') AS old`,
    )
  ).rows[0] as { new: string | null; old: string | null };
  if (t.new !== null || t.old === null) return;
  const known = readMigrationFiles({ migrationsFolder: PG_MIGRATIONS }).map((m) => m.hash);
  await exec(
    sql`CREATE TABLE IF NOT EXISTS drizzle.verdict_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
  );
  await exec(
    sql`INSERT INTO drizzle.verdict_migrations (hash, created_at) SELECT hash, created_at FROM drizzle.__drizzle_migrations WHERE hash IN (${sql.join(
      known.map((h) => sql`${h}`),
      sql`, `,
    )}) ORDER BY id`,
  );
}

/**
 * An in-process PGlite database (tests and the conformance suite). PGlite is one connection, so
 * it serialises transactions itself; row-lock contention needs a real server. With
 * `closeClient: false`, closing the store leaves the PGlite instance open for the next one.
 */
export async function connectPglite(client: PGlite, opts: { closeClient?: boolean } = {}): Promise<PgConnection> {
  const { drizzle } = await import('drizzle-orm/pglite');
  const { migrate } = await import('drizzle-orm/pglite/migrator');
  const db = drizzle({ client, schema });
  return {
    db: db as unknown as PgDb,
    query: async (_name, text, values) => {
      const r = await client.query<Record<string, unknown>>(text, values as unknown[]);
      return { rows: r.rows, rowCount: r.affectedRows ?? 0 };
    },
    migrate: async () => {
      await adoptLegacyMigrations((q) => db.execute(q) as unknown as Promise<{ rows: unknown[] }>);
      await migrate(db, {
        migrationsFolder: PG_MIGRATIONS,
        migrationsSchema: PG_MIGRATIONS_SCHEMA,
        migrationsTable: MIGRATIONS_TABLE,
      });
    },
    close: async () => {
      if (opts.closeClient !== false && !client.closed) await client.close();
    },
  };
}
