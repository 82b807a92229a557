import { fillPlaceholders, sql, StringChunk } from 'drizzle-orm';
import { SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import Database from 'better-sqlite3';
import type { Clock } from '../../clock.js';
import {
  isBound,
  isSql,
  type Bound,
  type Db,
  type Dialect,
  type Expr,
  type Shape,
  type Step,
  type Steps,
  type Tables,
} from '../sql/steps.js';
import { writeTx, type SqliteContext } from './context.js';
import * as schema from './schema.js';
import type { WriteGroup } from './write-group.js';

/** An empty clause, for a difference this dialect does not have. */
const NOTHING = new StringChunk('');

/**
 * SQLite's side of the one SQL store (see ../sql/steps.ts): statements run synchronously on the
 * better-sqlite3 connection, a write inside one IMMEDIATE transaction, so no await ever falls
 * between BEGIN and COMMIT; "now" is the store's injected clock, read once per operation. With
 * `writes` (a store's), a write made while the connection is in no transaction is handed to that
 * group commit and committed with the other writes of its turn (write-group.ts); a write inside an
 * open transaction, or without `writes` (a one-off connection), runs at once in its own
 * (`writeTx`, which also records storage problems for /healthz; a savepoint inside an open one).
 */
export function sqliteDialect(ctx: SqliteContext, writes?: WriteGroup): SqliteDialect {
  // `db` is always this store's one connection (a transaction handle shares it), so a write runs
  // on `ctx` itself: no context object is built per write.
  const client = ctx.db.$client;
  const write = async <T>(_db: unknown, op: () => Steps<T>): Promise<T> => {
    if (writes && !client.inTransaction)
      return (await writes.write(() => drive(ctx.db as unknown as Db, ctx.clock, prepared, op()))) as T;
    return writeTx(ctx, (tx) => drive(tx, ctx.clock, prepared, op()));
  };
  const prepared = new PreparedShapes(ctx.db as unknown as Db, () => d);
  const d: SqliteDialect = {
    name: 'sqlite',
    t: schema as Tables,
    max: new StringChunk('max'),
    min: new StringChunk('min'),
    int8: (v) => v,
    int4: (v) => v,
    text: (v) => v,
    byteOrder: (x) => sql`${x}`,
    jsonFieldEquals: (column, key, value) => {
      // `atom` holds true as 1: the type tells a boolean from a number. A string atom never equals a
      // number (no affinity on json_each's columns), so a string needs no type test.
      const matches =
        value === null
          ? sql`je.type = 'null'`
          : typeof value === 'boolean'
            ? sql`je.type = ${value ? 'true' : 'false'}`
            : typeof value === 'number'
              ? sql`je.type IN ('integer', 'real') AND je.atom = ${value}`
              : sql`je.atom = ${value}`;
      return sql`EXISTS (SELECT 1 FROM json_each(${column}) je WHERE je.key = ${key} AND ${matches})`;
    },
    indexedBy: (index) => new StringChunk(`INDEXED BY ${index}`),
    unindexed: (column) => new StringChunk(column),
    claimStates: { where: new StringChunk("j.state = 'owed'"), orderPrefix: NOTHING },
    forUpdate: NOTHING,
    skipLocked: NOTHING,
    lock: (q) => q,
    serialiseSpend: null,
    write,
    autocommit: write,
    read: async (db, steps) => drive(db as Db, ctx.clock, prepared, steps),
    runNow: (steps, now) => drive(ctx.db as unknown as Db, { now: () => now }, prepared, steps),
  };
  return d;
}

/** SQLite's dialect, with the one thing only a synchronous driver can offer. */
export interface SqliteDialect extends Dialect {
  /**
   * Runs `steps` at once on the connection, inside whatever transaction is open on it, with
   * `now` (epoch ms) as their "now", and returns their result: for the job statements
   * (job-statements.ts), whose transaction is their own, to run a cold rule written once for both
   * dialects (the completion fence, surfacing) without a second transaction.
   */
  runNow<T>(steps: Steps<T>, now: number): T;
}

/** A shape's statement, prepared once on the connection: binds values and runs. */
interface PreparedShape {
  all(values: Readonly<Record<string, unknown>>): unknown[];
  run(values: Readonly<Record<string, unknown>>): { changes: number };
}

/**
 * The prepared statements of one connection, one per `Shape` (see ../sql/steps.ts `Shape`), made
 * on first use: a `sql` template is compiled once by drizzle's SQLite dialect and prepared once
 * by better-sqlite3; a builder is prepared once by drizzle (`.prepare()`, which keeps its row
 * mapping). Every later run only fills the placeholders. Statements are finalised when the
 * connection closes.
 */
class PreparedShapes {
  private readonly byShape = new Map<Shape<string>, PreparedShape>();
  private readonly compiler = new SQLiteSyncDialect();
  /** Stands for every parameter at build time: `p.x` is `sql.placeholder('x')`. */
  private readonly placeholders = new Proxy({} as Record<string, Expr>, { get: (_t, k) => sql.placeholder(String(k)) });

  constructor(
    private readonly db: Db,
    private readonly dialect: () => Dialect,
  ) {}

  get(b: Bound): PreparedShape {
    let p = this.byShape.get(b.shape);
    if (!p) this.byShape.set(b.shape, (p = this.prepare(b.shape)));
    return p;
  }

  private prepare(s: Shape<string>): PreparedShape {
    const q = s.build(this.dialect(), this.placeholders);
    if (isSql(q)) {
      const query = this.compiler.sqlToQuery(q);
      // Prepared past the connection's text-keyed cache (open.ts `cacheStatements`): this statement
      // is this shape's alone, so nothing else can switch it to raw (array) rows.
      const client = (this.db as unknown as { $client: Database.Database }).$client;
      const stmt = Database.prototype.prepare.call(client, query.sql) as unknown as BetterStatement;
      const params = (values: Readonly<Record<string, unknown>>) => fillPlaceholders(query.params, plain(s, values));
      return {
        all: (values) => (stmt.reader ? stmt.all(...params(values)) : (stmt.run(...params(values)), [])),
        run: (values) => stmt.run(...params(values)),
      };
    }
    const built = (
      q(this.db) as unknown as { prepare(): { all(v: object): unknown[]; run(v: object): { changes: number } } }
    ).prepare();
    return { all: (values) => built.all(plain(s, values)), run: (values) => built.run(plain(s, values)) };
  }
}

interface BetterStatement {
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}

/**
 * The values of a bound shape, checked plain: an SQL expression cannot fill a placeholder, and
 * binding its object would run a different statement than the one written.
 * @throws TypeError naming the shape and the parameter.
 */
function plain(s: Shape<string>, values: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> {
  for (const k in values) {
    const v = values[k];
    if (v !== null && typeof v === 'object')
      throw new TypeError(`statement ${s.name}: parameter ${k} is an expression; SQLite binds plain values only`);
  }
  return values;
}

/** Runs every step of `steps` at once on `db`, passing each result back in the same tick. */
function drive<T>(db: Db, clock: Clock, prepared: PreparedShapes, steps: Steps<T>): T {
  let now: number | undefined;
  const run = (s: Step): unknown => {
    switch (s.kind) {
      case 'rows':
        if (isBound(s.q)) return prepared.get(s.q).all(s.q.values);
        return isSql(s.q) ? db.all(s.q) : s.q(db).all();
      case 'changes':
        if (isBound(s.q)) return prepared.get(s.q).run(s.q.values).changes;
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
