import type { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres';
import { migrate as migrateNodePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
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
export const MIGRATION_LOCK_KEY = 0x7665_7264; // "verd"

/** Connections per process when not given: a worker slot holds one at a time, plus headroom. @defaultValue 10 */
export const DEFAULT_POOL_SIZE = 10;

/**
 * node-postgres reads `bigint` (int8: epoch ms, token totals, counts) and `numeric` as strings by
 * default; here they are JS numbers (values stay below 2^53: ms until the year 287 396). This is
 * set on pg's global type registry because drizzle passes its own per-query `types` that fall
 * back to the global one, so a pool-level setting would be ignored.
 */
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => Number(v));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v: string) => Number(v));

/** An open Postgres connection: the drizzle database, how to migrate it, and how to close it. */
export interface PgConnection {
  db: PgDb;
  migrate(): Promise<void>;
  close(): Promise<void>;
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
  // An idle client's network error is emitted on the pool; without a listener it would crash the
  // process. The next query on that client fails and is handled where it runs.
  pool.on('error', () => undefined);
  const db = drizzleNodePg({ client: pool, schema }) as unknown as PgDb;
  return {
    db,
    migrate: async () => {
      const client = await pool.connect();
      try {
        await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
        try {
          await migrateNodePg(drizzleNodePg({ client, schema }), { migrationsFolder: PG_MIGRATIONS });
        } finally {
          await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
        }
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
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
    migrate: () => migrate(db, { migrationsFolder: PG_MIGRATIONS }),
    close: async () => {
      if (opts.closeClient !== false && !client.closed) await client.close();
    },
  };
}
