import type { PGlite } from '@electric-sql/pglite';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Registry } from '../../decision/registry.js';
import { SqlStore } from '../sql/sql-store.js';
import type { SqlContext } from '../sql/steps.js';
import type * as S from '../tracker-store.js';
import type { Store } from '../whole-store.js';
import type {
  Claim,
  ClaimRequest,
  ClaimResult,
  FinishedJob,
  JobFinish,
  JobFinishResult,
  NewDecision,
} from '../store.js';
import { postgresDialect } from './dialect.js';
import { drizzle as drizzleNodePg, NodePgTransaction } from 'drizzle-orm/node-postgres';
import type pg from 'pg';
import {
  connectionOnPool,
  connectNodePg,
  connectPglite,
  type PgConnection,
  type PgDb,
  type PipelinedConnection,
} from './open.js';
import * as schema from './schema.js';
import { databaseError, databaseLabel } from '../database-errors.js';
import * as jobs from '../sql/jobs.js';
import { finishJobs } from '../sql/finish-many.js';
import * as decisions from '../sql/decisions.js';
import type { JobStore } from '../job-store.js';
import {
  answeredKeysOfSets,
  checkClaims,
  claimNext,
  finishStatement,
  finishTail,
  loadState,
  lockForSurfacing,
  type FinishDone,
  type PgJobContext,
} from './job-statements.js';
import { surfacingMoves, watchedAnswers, type SurfacingWatch } from '../sql/events.js';
import { memoryOf } from '../sql/surfacing.js';

export interface PgStoreOptions {
  /** Question sets whose jobs the write doors owe. */
  registry: Registry;
  /** Fresh ids. @defaultValue crypto.randomUUID */
  newId?: () => string;
  /** Test-only: milliseconds added to the database clock (DESIGN §2). @defaultValue 0 */
  clockOffsetMs?: number;
  /** Apply the committed migrations before the first call. @defaultValue true */
  migrate?: boolean;
}

/**
 * A host's open Postgres transaction the write doors can join (DESIGN §16.1): a drizzle
 * transaction (`db.transaction(async (tx) => …)`, the shape pg-boss's `fromDrizzle` adapts) or a
 * node-postgres client on which the host has run BEGIN.
 */
export type HostPgTransaction = PgDb | pg.ClientBase;

/**
 * The Store on PostgreSQL (DESIGN §13): many worker processes on many machines, claims with
 * `FOR UPDATE SKIP LOCKED`, every time from the database clock. Opening is lazy: the constructor
 * returns at once and every method first awaits the migrations (serialised across processes by
 * `pg_advisory_lock`), so a bad URL or a failed migration surfaces on the first call.
 *
 * The statements are the shared ones of `../sql/` (see `SqlStore`).
 */
export class PgStore extends SqlStore implements Store {
  /** The connection (or a handle's transaction) and the test-only clock offset (DESIGN §2). */
  readonly ctx: { readonly db: PgDb; clockOffsetMs: number };
  protected readonly c: SqlContext;
  private readonly ready: Promise<void>;

  private constructor(
    private readonly conn: PgConnection,
    opts: PgStoreOptions,
    label = "the host's Postgres pool",
  ) {
    super();
    this.ctx = { db: conn.db, clockOffsetMs: opts.clockOffsetMs ?? 0 };
    this.c = {
      d: postgresDialect(this.ctx),
      db: conn.db,
      registry: opts.registry,
      newId: opts.newId ?? (() => randomUUID()),
      newToken: () => randomBytes(16).toString('hex'),
    };
    // A server that is down or a wrong password reads `verdict: cannot reach …; <fix>`, not a raw ECONNREFUSED.
    this.ready =
      opts.migrate === false
        ? Promise.resolve()
        : conn.migrate().catch((err: unknown) => Promise.reject(databaseError(err, label)));
    this.ready.catch(() => undefined); // surfaced by the first call, not as an unhandled rejection
  }

  /**
   * A store on a `postgres://` URL through node-postgres.
   * @param poolSize connections per process. @defaultValue 10
   */
  static connect(url: string, opts: PgStoreOptions & { poolSize?: number }): PgStore {
    return new PgStore(connectNodePg(url, opts.poolSize), opts, databaseLabel(url));
  }

  /**
   * A store on a host's node-postgres pool (`createVerdict({ database: { postgres: pool } })`).
   * Closing the store leaves the pool open: it is the host's.
   */
  static onPool(pool: pg.Pool, opts: PgStoreOptions): PgStore {
    return new PgStore(connectionOnPool(pool, { ownsPool: false }), opts);
  }

  /** A store on an in-process PGlite database (tests); migrated before it is returned. */
  static async onPglite(client: PGlite, opts: PgStoreOptions & { closeClient?: boolean }): Promise<PgStore> {
    const store = new PgStore(await connectPglite(client, { closeClient: opts.closeClient }), opts);
    await store.ready;
    return store;
  }

  /**
   * Resolves once migrations are applied.
   * @throws DatabaseUnavailable (or DatabaseNotFound) naming the database when it cannot be reached
   *   or migrated; the driver's error is its `cause`.
   */
  async opened(): Promise<void> {
    await this.ready;
  }

  /** Test-only: moves this store's "now" forward by `ms` milliseconds. */
  advanceClockForTests(ms: number): void {
    this.ctx.clockOffsetMs += ms;
  }

  /**
   * Store.transaction on Postgres: one client checked out of the pool, BEGIN … COMMIT (ROLLBACK
   * when `fn` throws); the doors' own transactions run as savepoints on it. On a handle already
   * bound to a transaction it nests as a savepoint.
   * @throws what `fn` throws, after the rollback.
   */
  async transaction<T>(fn: (tx: S.TrackerStore) => Promise<T>): Promise<T> {
    await this.ready;
    return (this.c.db as PgDb).transaction(async (tx) => fn(this.boundTo(tx as unknown as PgDb)));
  }

  /**
   * The tracker part of this store bound to a host's open transaction: its doors' writes and owed
   * jobs commit or roll back with the host's own writes. The host commits; Verdict never does.
   * A node-postgres client is wrapped as a drizzle transaction so the doors use savepoints on it,
   * never BEGIN/COMMIT.
   */
  joinTransaction(host: HostPgTransaction): S.TrackerStore {
    if (typeof (host as pg.ClientBase).query === 'function' && typeof (host as PgDb).select !== 'function') {
      // drizzle's own transaction object over the host's client, at nesting depth 0: its
      // `transaction()` opens savepoints. `dialect` and `session` are drizzle internals (0.45).
      const db = drizzleNodePg({ client: host as pg.PoolClient, schema }) as unknown as {
        dialect: never;
        session: never;
      };
      const tx = new NodePgTransaction(db.dialect, db.session, undefined);
      return this.boundTo(tx as unknown as PgDb);
    }
    return this.boundTo(host as PgDb);
  }

  /**
   * This store with its statements on `db` (a transaction): a copy of its fields under its class's
   * prototype, `c` bound to `db`. Not `Object.create(this)`: a store used as a prototype gets a
   * hidden class of its own, and V8 then throws away code optimised for another store (as
   * ../sqlite/async-tx.ts explains for its handles).
   */
  private boundTo(db: PgDb): PgStore {
    const bound = Object.assign(Object.create(PgStore.prototype) as PgStore, this);
    Object.defineProperty(bound, 'c', { value: { ...this.c, db } });
    return bound;
  }

  /** The job's hot path (job-statements.ts): the pool's prepared statements and this store's clock. */
  private readonly jobs: PgJobContext = {
    query: (name, text, values) => this.conn.query(name, text, values),
    clockOffsetMs: () => this.ctx.clockOffsetMs,
    newToken: () => randomBytes(16).toString('hex'),
  };

  /**
   * Whether this store runs on its own connection (not a handle bound to a host's transaction,
   * whose statements must go through that transaction's client): the job's hot path needs it.
   */
  private get unbound(): boolean {
    return this.c.db === this.conn.db;
  }

  // ------------------------------------------------------------- the job lifecycle (JobStore)
  // Written out, not installed: each runs its statements through `call`, the one place this path
  // awaits the migrations and records a storage problem.

  /** The claim (with its co-asked siblings) in one statement (job-statements.ts `claimNext`). */
  claimNextJob(...a: Parameters<JobStore['claimNextJob']>): ReturnType<JobStore['claimNextJob']> {
    if (!this.unbound) return this.call((c) => jobs.claimNextJob(c, ...a));
    const [workerId, leaseMs, abandonLimit, skipSets = [], opts = {}] = a;
    return this.call(() => claimNext(this.jobs, { workerId, leaseMs, abandonLimit, skipSets, ...opts }));
  }
  /**
   * Each claim its own statement (`claimNextJob`), one after another: claims sent together skip
   * each other's locked rows (SKIP LOCKED), so one could find nothing while jobs were owed. Each
   * request gets its own result; a failing claim fails only its own.
   */
  async claimNextJobs(requests: readonly ClaimRequest[]): Promise<ClaimResult[]> {
    const out: ClaimResult[] = [];
    for (const r of requests) {
      try {
        const claim = await this.claimNextJob(r.workerId, r.leaseMs, r.abandonLimit, r.skipSets, {
          liveOnly: r.liveOnly,
          coAsk: r.coAsk,
        });
        out.push({ ok: true, claim });
      } catch (error) {
        out.push({ ok: false, error });
      }
    }
    return out;
  }
  claimSiblingJobs(...a: Parameters<JobStore['claimSiblingJobs']>): ReturnType<JobStore['claimSiblingJobs']> {
    return this.call((c) => jobs.claimSiblingJobs(c, ...a));
  }
  renewLease(...a: Parameters<JobStore['renewLease']>): ReturnType<JobStore['renewLease']> {
    return this.call((c) => jobs.renewLease(c, ...a));
  }
  completeJob(...a: Parameters<JobStore['completeJob']>): ReturnType<JobStore['completeJob']> {
    return this.call((c) => jobs.completeJob(c, ...a));
  }
  /**
   * The finish with the next claim in one statement (job-statements.ts `finishStatement`); see
   * `finishOne`. A handle bound to a host's transaction, and a connection that cannot hold one
   * client for a surfacing finish's transaction, use the shared statements.
   */
  finishJob(claim: Claim, f: JobFinish): ReturnType<JobStore['finishJob']> {
    if (!this.unbound || (f.answers?.surfacing && !this.conn.onOneConnection))
      return this.call((c) => jobs.finishJob(c, claim, f));
    return this.call((c) => this.finishOne(c, claim, f));
  }

  /**
   * Group commit's store side on PostgreSQL (DESIGN §10.6): each entry is its own finish
   * (`finishOne`: one autocommitted statement, or one short transaction for answers that move
   * surfacing), all sent at once on the pool's connections. A statement is atomic, so an entry
   * whose statement fails writes nothing and gets its error alone, as a savepoint gives on SQLite;
   * the server's own group commit (one WAL flush covers every commit waiting on it) does what one
   * shared transaction does on SQLite. One shared transaction here would hold the hour's spend row
   * from the first entry's finish to the commit, across every later entry's round trips, and the
   * other processes' finishes queue on that row (bench part d: 4 processes ÷ 1 = 0.38×, the
   * waiters' wait event `Lock/transactionid` on the spend insert). PGlite (one connection) and a
   * bound handle run the shared one-transaction form (`sql/finish-many.ts`).
   */
  finishJobs(entries: Parameters<JobStore['finishJobs']>[0]): ReturnType<JobStore['finishJobs']> {
    if (!this.unbound || !this.conn.onOneConnection) return this.call((c) => finishJobs(c, entries));
    return this.call(async (c) => {
      const results = await Promise.all(
        entries.map((e) =>
          this.finishOne(c, e.claim, e.finish).then(
            (finished): JobFinishResult => ({ ok: true, finished }),
            (error: unknown): JobFinishResult => ({ ok: false, error }),
          ),
        ),
      );
      // The entries' errors are theirs; a lost connection is still the store's problem (/healthz).
      for (const r of results) if (!r.ok) this.problem = pgStorageProblem(r.error) ?? this.problem;
      return results;
    });
  }

  /**
   * One job's finish (answers, spend, fenced completion, next claim) on the pool. Answers that
   * may move a key's surfacing (events.ts `watchedAnswers`) add one transaction on one
   * connection (`surfacingFinish`): the item row locked (job-statements.ts `lockForSurfacing`),
   * the finish statement, which also returns the watched keys' memory from before its insert, then
   * one statement with the change rows and events it moves (`sql/events.ts` `surfacingMoves`) and
   * the shared rows (spend, reservation, throughput count; job-statements.ts `finishTail`), and
   * COMMIT. Any other finish is the one statement, autocommitted.
   * When the completion deleted nothing, the shared fence tells lost from superseded, after the
   * commit.
   */
  private async finishOne(c: SqlContext, claim: Claim, f: JobFinish): Promise<FinishedJob> {
    const surfacing = f.answers?.surfacing;
    const watched = surfacing ? watchedAnswers(f.answers!.decisions, surfacing) : new Map<string, NewDecision>();
    let done: FinishDone;
    if (watched.size === 0) done = await finishStatement(this.jobs, claim, f);
    else done = await this.conn.onOneConnection!((p) => this.surfacingFinish(p, c, claim, f, watched));
    const result = done.completed ? 'applied' : await jobs.completeJob(c, claim, f.outcome);
    return { result, answersStored: done.stored.size, next: done.next };
  }
  /**
   * A surfacing finish's transaction on one pipelined connection (`finishOne`), in two network
   * writes where each statement once took its own round trip: BEGIN, the item's lock and the
   * finish statement in the first, the server running them in that order, so the finish's own
   * snapshot is still taken once the lock is held (job-statements.ts `lockForSurfacing`); then the
   * moves worked out from the memory the finish returned, and the last statement (change rows,
   * events and the shared rows: spend, reservation, throughput count) with its COMMIT in the
   * second, so the shared rows are held for the server's time only, never while this process waits
   * for a CPU to send the COMMIT.
   * @throws the first failed statement's error, after the ROLLBACK.
   */
  private async surfacingFinish(
    p: PipelinedConnection,
    c: SqlContext,
    claim: Claim,
    f: JobFinish,
    watched: Map<string, NewDecision>,
  ): Promise<FinishDone> {
    const x = { ...this.jobs, query: p.query };
    const first = f.answers!.decisions[0];
    const keys = [...watched.keys()];
    try {
      // The shared rows (the hour's spend row, the minute's count row) are written by the
      // transaction's last statement, not by the finish: taken by the finish they would be held
      // across the round trip that follows it, and every other finish would queue on them.
      const [, time, got] = await settledInOrder(
        p.inOneWrite(() => [
          p.control('BEGIN'),
          lockForSurfacing(x, first.itemId),
          finishStatement(x, claim, f, keys, true),
        ]),
      );
      const { nowMs, targets } = time as { nowMs: number; targets: number };
      const done = got as FinishDone;
      const watch: SurfacingWatch = {
        nowMs,
        context: f.answers!.surfacing!,
        workspaceId: first.workspaceId,
        itemId: first.itemId,
        questionSet: first.questionSet,
        targets,
        memory: memoryOf(keys, done.memory),
        next: watched,
      };
      const moves = surfacingMoves(watch, done.stored);
      const [, committed] = await settledInOrder(
        p.inOneWrite(() => [
          finishTail(x, f, moves, { nowMs, targets, newId: c.newId }, done.completed),
          p.control('COMMIT'),
        ]),
      );
      if (committed !== 'COMMIT') throw new Error(`COMMIT answered ${String(committed)}`);
      return done;
    } catch (err) {
      await p.control('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }
  dropJob(claim: Claim, _reason: string): ReturnType<JobStore['dropJob']> {
    return this.call((c) => jobs.dropJob(c, claim));
  }
  refuseJob(...a: Parameters<JobStore['refuseJob']>): ReturnType<JobStore['refuseJob']> {
    return this.call((c) => jobs.refuseJob(c, ...a));
  }
  parkJob(...a: Parameters<JobStore['parkJob']>): ReturnType<JobStore['parkJob']> {
    return this.call((c) => jobs.parkJob(c, ...a));
  }
  failJob(...a: Parameters<JobStore['failJob']>): ReturnType<JobStore['failJob']> {
    return this.call((c) => jobs.failJob(c, ...a));
  }
  deferJob(...a: Parameters<JobStore['deferJob']>): ReturnType<JobStore['deferJob']> {
    return this.call((c) => jobs.deferJob(c, ...a));
  }
  releaseJob(...a: Parameters<JobStore['releaseJob']>): ReturnType<JobStore['releaseJob']> {
    return this.call((c) => jobs.releaseJob(c, ...a));
  }
  /** The state read in one statement (job-statements.ts `loadState`). */
  loadItemForEvaluation(
    ...a: Parameters<JobStore['loadItemForEvaluation']>
  ): ReturnType<JobStore['loadItemForEvaluation']> {
    if (!this.unbound) return this.call((c) => decisions.loadItemForEvaluation(c, ...a));
    return this.call(() => loadState(this.jobs, ...a));
  }
  checkLiveness(...a: Parameters<JobStore['checkLiveness']>): ReturnType<JobStore['checkLiveness']> {
    return this.call((c) => decisions.checkLiveness(c, ...a));
  }
  checkClaim(...a: Parameters<JobStore['checkClaim']>): ReturnType<JobStore['checkClaim']> {
    return this.call((c) => decisions.checkClaim(c, ...a));
  }
  /** Every claim of a call in one statement (job-statements.ts `checkClaims`). */
  checkClaims(claims: readonly Claim[]): ReturnType<JobStore['checkClaims']> {
    if (!this.unbound) return this.call((c) => Promise.all(claims.map((claim) => decisions.checkClaim(c, claim))));
    return this.call(() => checkClaims(this.jobs, claims));
  }
  answeredKeys(...a: Parameters<JobStore['answeredKeys']>): ReturnType<JobStore['answeredKeys']> {
    return this.call((c) => decisions.answeredKeys(c, ...a));
  }
  /** Every set's keys in one statement (job-statements.ts `answeredKeysOfSets`). */
  answeredKeysOfSets(
    ...[itemId, wanted]: Parameters<JobStore['answeredKeysOfSets']>
  ): ReturnType<JobStore['answeredKeysOfSets']> {
    if (!this.unbound)
      return this.call((c) =>
        Promise.all(wanted.map((w) => decisions.answeredKeys(c, itemId, w.questionSet, [...w.keys]))),
      );
    return this.call(() => answeredKeysOfSets(this.jobs, itemId, wanted));
  }
  insertDecisions(...a: Parameters<JobStore['insertDecisions']>): ReturnType<JobStore['insertDecisions']> {
    return this.call((c) => decisions.insertDecisions(c, ...a));
  }
  recordSpend(...a: Parameters<JobStore['recordSpend']>): ReturnType<JobStore['recordSpend']> {
    return this.call((c) => decisions.recordSpend(c, ...a));
  }

  private problem: string | null = null;

  /** Runs one call; a connection or disk error sets `storageProblem`, any success clears it. */
  protected override async call<T>(fn: (c: SqlContext) => Promise<T>): Promise<T> {
    try {
      await this.ready;
      const r = await fn(this.c);
      this.problem = null;
      return r;
    } catch (err) {
      this.problem = pgStorageProblem(err) ?? this.problem;
      throw err;
    }
  }

  storageProblem() {
    return this.problem;
  }

  /** Nothing to do: the server checkpoints its own log (DESIGN §10.2 is about SQLite's file). */
  async checkpoint() {
    return null;
  }

  async walBytes() {
    return null;
  }

  async close() {
    await this.ready.catch(() => undefined);
    await this.conn.close();
  }
}

/**
 * The storage problem a Postgres error shows (DESIGN §10.1 /healthz), or null for any other error:
 * socket errors and SQLSTATE classes 08 (connection exception) and 57P (shutdown) mean the server
 * cannot be reached; 53100 is a full disk.
 */
export function pgStorageProblem(err: unknown): string | null {
  // A failed connect at open reaches calls wrapped as DatabaseUnavailable; judge the driver's error.
  if (err instanceof Error && err.cause !== undefined) {
    const inner = pgStorageProblem(err.cause);
    if (inner) return inner;
  }
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code === '53100') return 'disk full';
  if (
    /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EPIPE|EHOSTUNREACH)$/.test(code) ||
    code.startsWith('08') ||
    code.startsWith('57P')
  )
    return 'database unreachable';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (/Connection terminated|timeout exceeded when trying to connect/i.test(message)) return 'database unreachable';
  return null;
}

/**
 * The values of statements sent together (`PipelinedConnection.inOneWrite`), once every one of
 * them is answered: the connection is then idle, so the caller's ROLLBACK is the next thing it
 * runs. Rejects with the first one's error (those behind a failed statement fail with 25P02).
 */
async function settledInOrder(sent: ReadonlyArray<Promise<unknown>>): Promise<unknown[]> {
  const all = await Promise.allSettled(sent);
  const failed = all.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return all.map((r) => (r as PromiseFulfilledResult<unknown>).value);
}
