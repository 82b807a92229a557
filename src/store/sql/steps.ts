import { SQL, sql, type Column, type SQLWrapper, type StringChunk } from 'drizzle-orm';
import type { RunResult } from 'better-sqlite3';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import type { Registry } from '../../decision/registry.js';
import type * as schema from '../sqlite/schema.js';

/**
 * One SQL store for both dialects (DESIGN §13: one interface, two implementations): the statements and rules of every store method are
 * written once, in `src/store/sql/`, as generators that *yield* statements; a `Dialect` runs them.
 *
 * Why generators. better-sqlite3 transactions are synchronous: a transaction callback that awaits
 * would let other work on the connection (another worker slot's claim, a host request) run inside
 * the open transaction and commit or roll back with it. Postgres transactions hold one pooled
 * client and must await every statement. A generator serves both without a connection mutex: on
 * SQLite the dialect drives it synchronously inside `db.transaction(…).immediate()` (each yielded
 * statement runs at once and its result is passed back in the same tick); on Postgres it awaits
 * each statement on the transaction's client. So the SQLite paths keep exactly their old cost and
 * locking (no await between BEGIN and COMMIT), and the rule between two statements (the fence, the
 * write rules, the owe rule) exists once. The alternative, async everywhere with an explicit
 * `BEGIN IMMEDIATE` under a connection mutex (Kysely's SqliteDriver), would put every SQLite call
 * behind a promise-based mutex and let a slow host transaction stall the worker's claims; it was
 * not chosen. Queue path (`npm run bench -- --only a`, one store per dialect against this one, run
 * alternately): 2,289 → 2,213 and 1,771 → 2,030 jobs/s, i.e. unchanged within run-to-run noise.
 *
 * What differs between the dialects is only what a `Dialect` holds (functions, casts, planner
 * hints, the locking clause, where "now" comes from, result shapes, the transaction runner).
 *
 * Statements are drizzle `sql` templates (raw rows, snake_case columns as written), drizzle query
 * builders built on the running connection (`(db) => db.select()…`, camelCase rows mapped by the
 * table's columns), or either of those written once as a `Shape` and bound to values (`bind`),
 * which SQLite prepares once per connection: the hot paths (claim, outcomes, evaluation reads,
 * answers, spend, the owe statement, the write doors' item reads and writes) are shapes.
 * Builders are typed against the SQLite schema; the Postgres
 * schema has the same tables, columns and JS types (the schema parity test pins that), so the same
 * builder code runs on either.
 */

/** The SQLite schema's tables: the type both dialects' tables are used through. */
export type Tables = typeof schema;

/** A connection or transaction, as query builders see it (typed as SQLite's; see the file comment). */
export type Db = BaseSQLiteDatabase<'sync', RunResult, Tables>;

/** A query builder over the running connection: SQLite runs `.all()`/`.run()`, Postgres awaits it. */
export type Built<R> = (db: Db) => { all(): R[]; run(): unknown };

/**
 * A statement written once with named parameters: `build` makes it from the dialect and
 * one expression per parameter. Where the dialect can keep a prepared statement (SQLite),
 * `build` runs once per connection with placeholders (`sql.placeholder(name)`) and every later
 * run only binds values: no drizzle walk and no SQLite compile per call. drizzle's building and
 * binding was a third of the CPU of bench parts f, g and h (9.4 s of 28.6 s under --cpu-prof),
 * 1.8 s of 20.2 s after. Postgres builds it per call with the values bound as parameters.
 *
 * So the statement's text must depend on `d` and on nothing else: a structural choice (a list's
 * length, an optional clause) is a separate shape (see `shapeFamily`). Values must be plain (number,
 * string, null) on SQLite; an SQL expression as a value works on Postgres only (`nowSql()`), which
 * is the only place one is passed.
 */
export interface Shape<P extends string> {
  /** For messages: which statement this is. */
  readonly name: string;
  readonly build: (d: Dialect, p: { readonly [K in P]: Expr }) => SQL | Built<unknown>;
}

/** Makes a `Shape`; its parameter names are the keys `build` reads from `p`. */
export function shape<P extends string>(name: string, build: Shape<P>['build']): Shape<P> {
  return { name, build };
}

/**
 * Shapes that differ in one structural choice (the number of keys, of rows, whether a clause is
 * there), made on first use and kept: `family(variant)` returns the same Shape object for the same
 * variant, so the dialect's statement cache (keyed by the Shape object) reuses it.
 */
export function shapeFamily<V extends string | number, P extends string>(
  make: (variant: V) => Shape<P>,
): (variant: V) => Shape<P> {
  const made = new Map<V, Shape<P>>();
  return (variant) => {
    let s = made.get(variant);
    if (!s) made.set(variant, (s = make(variant)));
    return s;
  };
}

/** A shape with its values: what a generator yields to run a prepared statement. */
export interface Bound {
  readonly shape: Shape<string>;
  readonly values: Readonly<Record<string, unknown>>;
}

/** Binds `values` to `s` for `rows`, `one`, `changes` or `exec`. */
export function bind<P extends string>(s: Shape<P>, values: { readonly [K in P]: Expr | null }): Bound {
  return { shape: s as Shape<string>, values };
}

/** What a step runs: a `sql` template, a builder on the running connection, or a bound shape. */
export type Statement = SQL | Built<unknown> | Bound;

/** One statement a generator yields, or a request for the transaction's "now". */
export type Step =
  { kind: 'rows'; q: Statement } | { kind: 'changes'; q: Statement } | { kind: 'now' } | { kind: 'nowSql' };

/**
 * An SQL expression, or a plain value that `sql` templates bind as a parameter. SQLite's dialect
 * binds numbers and strings as they are rather than wrapping them (`sql\`${v}\``, `sql.param(v)`):
 * drizzle walks every wrapper again at every statement, and primitives are the cheapest chunk it
 * has; wrappers made the owe statement's enqueue about a third slower (`npm run bench -- --only a`).
 */
export type Expr = SQLWrapper | number | string;

/** A store operation written once: yields statements, returns `T`. */
export type Steps<T> = Generator<Step, T, unknown>;

/** The rows of a statement. */
export function rows<R>(q: SQL | Bound): Steps<R[]>;
export function rows<R>(q: Built<R>): Steps<R[]>;
export function* rows<R>(q: Statement): Steps<R[]> {
  return (yield { kind: 'rows', q }) as R[];
}

/** The first row of a statement, or undefined. */
export function one<R>(q: SQL | Bound): Steps<R | undefined>;
export function one<R>(q: Built<R>): Steps<R | undefined>;
export function* one<R>(q: Statement): Steps<R | undefined> {
  return ((yield { kind: 'rows', q }) as R[])[0];
}

/** The number of rows a statement changed. */
export function* changes(q: Statement): Steps<number> {
  return (yield { kind: 'changes', q }) as number;
}

/** Runs a statement for its effect. */
export function* exec(q: Statement): Steps<void> {
  yield { kind: 'changes', q };
}

/**
 * "Now" of the running operation, epoch milliseconds. SQLite: the store's clock, read once per
 * operation (every statement of one transaction sees the same instant). Postgres: the database
 * clock (`SELECT now()`, the transaction's start time), so clock skew between worker machines
 * cannot expire a live lease (DESIGN §2, §13); that is one round trip, so statements that only
 * need "now" inside SQL use `nowSql()`.
 */
export function* nowMs(): Steps<number> {
  return (yield { kind: 'now' }) as number;
}

/** "Now" as an SQL expression of epoch milliseconds: the same instant as `nowMs()`, without a round trip on Postgres. */
export function* nowSql(): Steps<Expr> {
  return (yield { kind: 'nowSql' }) as Expr;
}

/** What really differs between SQLite and PostgreSQL; everything else is in `src/store/sql/`. */
export interface Dialect {
  /** For messages and tests only: shared code never branches on it (a difference belongs in a member here). */
  readonly name: 'sqlite' | 'postgres';
  /** The tables as drizzle objects of this dialect (typed as SQLite's; see the file comment). */
  readonly t: Tables;
  /**
   * The scalar greatest-of function's name, to write `${d.max}(a, b, …)` inside a template:
   * `max` on SQLite, `greatest` on Postgres (NULL handling differs, so callers coalesce). Names,
   * not wrapper functions, so a statement stays one flat query object (see `Expr`).
   */
  readonly max: StringChunk;
  /** The scalar least-of function's name: `min` on SQLite, `least` on Postgres. */
  readonly min: StringChunk;
  /** A bigint parameter: `$n::bigint` on Postgres (parameters in `greatest`/`least`/`+` need a type there), bare on SQLite. */
  int8(v: number | Expr): Expr;
  /** A 4-byte integer parameter: `$n::int` on Postgres, bare on SQLite. */
  int4(v: number | Expr): Expr;
  /** A text parameter: `$n::text` on Postgres, bare on SQLite. */
  text(v: string | Expr): Expr;
  /**
   * A text expression to sort in byte order, whatever the database's collation: `x COLLATE "C"` on
   * Postgres (servers are usually created with an ICU or glibc collation); `x` on SQLite, whose
   * default BINARY collation is byte order (and which has no collation named "C").
   */
  byteOrder(x: SQL | Column): SQL;
  /**
   * Whether a JSON-object text column holds `value` at its top-level `key` (store.ts
   * `ItemQuery.fieldsEqual` says what equals what): SQLite walks the object with `json_each`
   * (any key, no path quoting), Postgres compares `column::jsonb -> key` with the value as jsonb.
   */
  jsonFieldEquals(column: Column, key: string, value: string | number | boolean | null): SQL;
  /**
   * A planner hint naming the index a subquery must use, placed after `FROM <table> <alias>`:
   * `INDEXED BY <index>` on SQLite, nothing on Postgres (the statement steers the plan there).
   */
  indexedBy(index: string): StringChunk;
  /**
   * `column + 0` on Postgres, which keeps its planner from choosing an index range on the column
   * (see sql/jobs.ts `claimCandidateSql`); the column itself on SQLite, where `INDEXED BY` fixes
   * the index and the bare column measured faster (claim + complete about 40 µs less a job).
   */
  unindexed(column: string): StringChunk;
  /**
   * How the claim walk names the rows it wants: SQLite `j.state = 'owed'` (an equality seek on the
   * forced index); Postgres `j.state > 'batched' AND j.state <> 'parked'` with `j.state` leading
   * the ORDER BY, so the whole index order is the sort order whatever the statistics (sql/jobs.ts
   * `claimCandidateSql`), and the walk starts past every batched row (DESIGN §7.3: 'batched' sorts
   * before 'owed') instead of filtering them one by one.
   */
  readonly claimStates: { where: StringChunk; orderPrefix: StringChunk };
  /** Row locks for a read the decision depends on: ` FOR UPDATE` on Postgres; nothing on SQLite, whose IMMEDIATE transaction serialises all writers. */
  readonly forUpdate: StringChunk;
  /** The claim's lock: ` FOR UPDATE OF j SKIP LOCKED` on Postgres (claimers pass over each other's rows); nothing on SQLite. */
  readonly skipLocked: StringChunk;
  /**
   * The statement that serialises spend reservations across processes (DESIGN §10.3), run first in
   * the reservation's transaction: on Postgres a transaction-scoped advisory lock, since READ
   * COMMITTED alone would let two machines read the same total and both insert; null on SQLite,
   * whose IMMEDIATE transaction already holds the database's write lock.
   */
  readonly serialiseSpend: SQL | null;
  /** Locks the rows of a builder select (`.for('update')` on Postgres; unchanged on SQLite). */
  lock<Q>(q: Q): Q;
  /**
   * Runs the steps `op` makes in one write transaction on `db` (nested in an open one as a
   * savepoint). `op` may be called more than once: SQLite's group commit runs a write again when
   * another write of its group threw (sqlite/write-group.ts), so the steps keep their state inside.
   */
  write<T>(db: unknown, op: () => Steps<T>): Promise<T>;
  /**
   * Runs writes whose statements may each commit on their own (the claim, a single-statement
   * outcome): on Postgres without BEGIN/COMMIT, one round trip a statement; on SQLite one IMMEDIATE
   * transaction, as every SQLite write (so `op` may be called more than once, as for `write`).
   */
  autocommit<T>(db: unknown, op: () => Steps<T>): Promise<T>;
  /** Runs `steps` outside an explicit transaction (reads). */
  read<T>(db: unknown, steps: Steps<T>): Promise<T>;
}

/** Everything a store operation needs besides its arguments. */
export interface SqlContext {
  readonly d: Dialect;
  /** The connection, or the transaction a handle is bound to. */
  readonly db: unknown;
  /** The process's question sets: the write doors owe jobs for `registry.setsFor(slug)`. */
  registry: Registry;
  /** Fresh opaque lower-case id. */
  readonly newId: () => string;
  /** Fresh random claim token. */
  readonly newToken: () => string;
}

/** An operation's steps, or a generator function that makes them (called once, when run). */
export type Operation<T> = Steps<T> | (() => Steps<T>);

const stepsOf = <T>(op: Operation<T>): Steps<T> => (typeof op === 'function' ? op() : op);

/**
 * Runs the steps `op` makes in one write transaction of `c`. A generator function, not its
 * steps: SQLite's group commit may run a write twice (see Dialect.write).
 */
export function write<T>(c: SqlContext, op: () => Steps<T>): Promise<T> {
  return c.d.write(c.db, op);
}

/** Runs the steps `op` makes on `c`, each statement committing on its own where the dialect allows (see Dialect.autocommit). */
export function autocommit<T>(c: SqlContext, op: () => Steps<T>): Promise<T> {
  return c.d.autocommit(c.db, op);
}

/** Runs `op` on `c` without an explicit transaction. */
export function read<T>(c: SqlContext, op: Operation<T>): Promise<T> {
  return c.d.read(c.db, stepsOf(op));
}

/** `a IN (…)` over literal values; `FALSE` for none (an empty IN list is a syntax error on Postgres). */
export function inList(col: SQL, values: readonly unknown[]): SQL {
  if (values.length === 0) return sql`FALSE`;
  return sql`${col} IN (${sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  )})`;
}

/** Whether a step's statement is a raw `sql` template. */
export function isSql(q: Statement): q is SQL {
  return q instanceof SQL;
}

/** Whether a step's statement is a bound shape. */
export function isBound(q: Statement): q is Bound {
  return typeof q === 'object' && 'shape' in q;
}

/**
 * The statement of a bound shape built with its values as parameters, for a dialect that does not
 * keep prepared statements (Postgres).
 */
export function builtWithValues(d: Dialect, b: Bound): SQL | Built<unknown> {
  return b.shape.build(d, b.values as Record<string, Expr>);
}
