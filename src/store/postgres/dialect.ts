import { sql, StringChunk, type SQL } from 'drizzle-orm';
import {
  builtWithValues,
  isBound,
  isSql,
  type Dialect,
  type Statement,
  type Step,
  type Steps,
  type Tables,
} from '../sql/steps.js';
import type { PgDb } from './open.js';
import * as schema from './schema.js';

/** An empty clause, for a difference this dialect does not have. */
const NOTHING = new StringChunk('');

/**
 * Key of the transaction-scoped advisory lock that serialises spend reservations. An arbitrary
 * constant, distinct from the migration lock (open.ts `MIGRATION_LOCK_KEY`).
 */
const SPEND_RESERVATION_LOCK_KEY = 0x7665_7273; // "vers"

/**
 * PostgreSQL's side of the one SQL store (see ../sql/steps.ts): each yielded statement is awaited
 * on the transaction's client; a write is one `db.transaction` (a savepoint when `db` is already a
 * transaction); "now" is the database clock (DESIGN §2, §13).
 * @param clock.clockOffsetMs test-only milliseconds added to the database clock, so a test can move
 *   "now" past a lease or a backoff without sleeping; 0 in production. Read at each statement.
 */
export function postgresDialect(clock: { clockOffsetMs: number }): Dialect {
  const nowExpr = (): SQL =>
    sql`(floor(extract(epoch from now()) * 1000)::bigint + ${sql.raw(String(Math.trunc(clock.clockOffsetMs)))})`;
  // A bound shape is built per call with its values as parameters (see ../sql/steps.ts `Shape`):
  // next to a round trip, the build is noise, and SQL expressions can stand for values here.
  const statement = (q: Statement) => (isBound(q) ? builtWithValues(d, q) : q);
  const drive = async <T>(db: PgDb, steps: Steps<T>): Promise<T> => {
    const run = async (s: Step): Promise<unknown> => {
      switch (s.kind) {
        case 'rows': {
          const q = statement(s.q);
          if (isSql(q)) return ((await db.execute(q)) as unknown as { rows: unknown[] }).rows;
          return await (q(db as never) as unknown as Promise<unknown[]>);
        }
        case 'changes': {
          const q = statement(s.q);
          const r = (isSql(q) ? await db.execute(q) : await (q(db as never) as unknown as Promise<unknown>)) as {
            rowCount?: number | null;
            affectedRows?: number;
          };
          // node-postgres reports rowCount, PGlite affectedRows
          return r.rowCount ?? r.affectedRows ?? 0;
        }
        case 'now':
          return ((await db.execute(sql`SELECT ${nowExpr()} AS now`)) as unknown as { rows: Array<{ now: number }> })
            .rows[0].now;
        case 'nowSql':
          return nowExpr();
      }
    };
    let r = steps.next();
    while (!r.done) {
      let value: unknown;
      try {
        value = await run(r.value);
      } catch (err) {
        r = steps.throw(err);
        continue;
      }
      r = steps.next(value);
    }
    return r.value;
  };
  const d: Dialect = {
    name: 'postgres',
    t: schema as unknown as Tables,
    max: new StringChunk('greatest'),
    min: new StringChunk('least'),
    int8: (v) => sql`${v}::bigint`,
    int4: (v) => sql`${v}::int`,
    text: (v) => sql`${v}::text`,
    byteOrder: (x) => sql`${x} COLLATE "C"`,
    // jsonb equality is by value: 1 = 1.0, "a" <> 1; a missing key is NULL, so never equal.
    jsonFieldEquals: (column, key, value) =>
      sql`((${column})::jsonb -> ${key}::text) = ${JSON.stringify(value)}::jsonb`,
    indexedBy: () => NOTHING,
    unindexed: (column) => new StringChunk(`${column} + 0`),
    claimStates: {
      where: new StringChunk("j.state > 'batched' AND j.state <> 'parked'"),
      orderPrefix: new StringChunk('j.state, '),
    },
    forUpdate: new StringChunk(' FOR UPDATE'),
    skipLocked: new StringChunk(' FOR UPDATE OF j SKIP LOCKED'),
    lock: (q) => (q as unknown as { for(s: 'update'): unknown }).for('update') as typeof q,
    serialiseSpend: sql`SELECT pg_advisory_xact_lock(${SPEND_RESERVATION_LOCK_KEY})`,
    write: (db, op) => (db as PgDb).transaction((tx) => drive(tx as unknown as PgDb, op())),
    autocommit: (db, op) => drive(db as PgDb, op()),
    read: (db, steps) => drive(db as PgDb, steps),
  };
  return d;
}
