import { sql, StringChunk, type SQL } from 'drizzle-orm';
import type { Clock } from '../../clock.js';
import { isSql, type Db, type Expr, type Dialect, type Step, type Steps, type Tables } from '../sql/steps.js';
import { writeTx, type SqliteContext } from './context.js';
import * as schema from './schema.js';

/** An empty clause, for a difference this dialect does not have. */
const NOTHING = new StringChunk('');

/**
 * SQLite's side of the one SQL store (see ../sql/steps.ts): statements run synchronously on the
 * better-sqlite3 connection, a write inside one IMMEDIATE transaction (`writeTx`, which also
 * records storage problems for /healthz), so no await ever falls between BEGIN and COMMIT; "now"
 * is the store's injected clock, read once per operation.
 */
export function sqliteDialect(ctx: SqliteContext): Dialect {
  // `db` is always this store's one connection (a transaction handle shares it), so writeTx runs
  // on `ctx` itself: no context object is built per write.
  const write = async <T>(_db: unknown, steps: Steps<T>): Promise<T> => writeTx(ctx, (tx) => drive(tx, ctx.clock, steps));
  return {
    name: 'sqlite',
    t: schema as Tables,
    max: new StringChunk('max'),
    min: new StringChunk('min'),
    int8: (v) => v,
    int4: (v) => v,
    text: (v) => v,
    byteOrder: (x) => sql`${x}`,
    indexedBy: (index) => new StringChunk(`INDEXED BY ${index}`),
    unindexed: (column) => new StringChunk(column),
    claimStates: { where: new StringChunk("j.state = 'owed'"), orderPrefix: NOTHING },
    forUpdate: NOTHING,
    skipLocked: NOTHING,
    lock: (q) => q,
    serialiseSpend: null,
      write,
    autocommit: write,
    read: async (db, steps) => drive(db as Db, ctx.clock, steps),
  };
}

/** Runs every step of `steps` at once on `db`, passing each result back in the same tick. */
function drive<T>(db: Db, clock: Clock, steps: Steps<T>): T {
  let now: number | undefined;
  const run = (s: Step): unknown => {
    switch (s.kind) {
      case 'rows':
        return isSql(s.q) ? db.all(s.q) : s.q(db).all();
      case 'changes':
        return ((isSql(s.q) ? db.run(s.q) : s.q(db).run()) as { changes: number }).changes;
      case 'now':
        return (now ??= clock.now());
      case 'nowSql':
        return (now ??= clock.now());
    }
  };
  let r = steps.next();
  while (!r.done) {
    let value: unknown;
    try {
      value = run(r.value);
    } catch (err) {
      r = steps.throw(err);
      continue;
    }
    r = steps.next(value);
  }
  return r.value;
}
