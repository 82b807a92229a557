import type { PGlite } from '@electric-sql/pglite';
import { and, asc, count, eq, gt, isNull, sql, type SQL } from 'drizzle-orm';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Registry } from '../../decision/registry.js';
import type * as S from '../store.js';
import { toCollectionRow } from '../write-rules.js';
import { advanceCollectionOwes } from './collection-owe.js';
import { readNow, type PgContext } from './context.js';
import * as decisions from './decisions.js';
import * as drift from './drift.js';
import * as jobs from './jobs.js';
import { drizzle as drizzleNodePg, NodePgTransaction } from 'drizzle-orm/node-postgres';
import type pg from 'pg';
import { connectionOnPool, connectNodePg, connectPglite, type PgConnection, type PgDb } from './open.js';
import * as ops from './operations.js';
import { owePairs } from './owe.js';
import * as retention from './retention.js';
import * as reservations from './spend-reservations.js';
import * as schema from './schema.js';
import { collections, itemDecisions, items, workspaces } from './schema.js';
import * as doors from './write-doors.js';
import { databaseError, databaseLabel } from '../database-errors.js';

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
 * A host's open Postgres transaction the write doors can join (DESIGN §16.21): a drizzle
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
 * Adding a method: write it as a function of `PgContext` in the module of its concern
 * (`jobs.ts`, `decisions.ts`, `write-doors.ts`, ...) and add a one-line `this.run(...)` here.
 */
export class PgStore implements S.Store {
  readonly ctx: PgContext;
  private readonly ready: Promise<void>;

  private constructor(
    private readonly conn: PgConnection,
    opts: PgStoreOptions,
    label = "the host's Postgres pool",
  ) {
    this.ctx = {
      db: conn.db,
      registry: opts.registry,
      newId: opts.newId ?? (() => randomUUID()),
      newToken: () => randomBytes(16).toString('hex'),
      clockOffsetMs: opts.clockOffsetMs ?? 0,
    };
    // A server that is down or a wrong password reads `verdict: cannot reach …; <fix>`, not a raw ECONNREFUSED.
    this.ready = opts.migrate === false ? Promise.resolve() : conn.migrate().catch((err: unknown) => Promise.reject(databaseError(err, label)));
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

  /** Swaps the registry (SIGHUP reload); later writes owe the new sets. */
  setRegistry(registry: Registry): void {
    this.ctx.registry = registry;
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
    return this.ctx.db.transaction(async (tx) => fn(this.boundTo(tx as unknown as PgDb)));
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
      const db = drizzleNodePg({ client: host as pg.PoolClient, schema }) as unknown as { dialect: never; session: never };
      const tx = new NodePgTransaction(db.dialect, db.session, undefined);
      return this.boundTo(tx as unknown as PgDb);
    }
    return this.boundTo(host as PgDb);
  }

  /** This store with its statements on `db` (a transaction). */
  private boundTo(db: PgDb): PgStore {
    const bound = Object.create(this) as PgStore;
    Object.defineProperty(bound, 'ctx', { value: { ...this.ctx, db } });
    return bound;
  }

  private problem: string | null = null;

  /** Runs one call; a connection or disk error sets `storageProblem`, any success clears it. */
  private async run<T>(fn: (ctx: PgContext) => Promise<T>): Promise<T> {
    try {
      await this.ready;
      const r = await fn(this.ctx);
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

  /** Nothing to do: the server checkpoints its own log (DESIGN §16.7 is about SQLite's file). */
  async checkpoint() {
    return null;
  }

  async walBytes() {
    return null;
  }

  async now() {
    return this.run((c) => readNow(c));
  }
  async close() {
    await this.ready.catch(() => undefined);
    await this.conn.close();
  }

  // write doors
  async createWorkspace(w: { id?: string; slug: string }) {
    return this.run((c) => doors.createWorkspace(c, w));
  }
  async softDeleteWorkspace(id: string) {
    return this.run((c) => doors.setWorkspaceDeleted(c, id, true));
  }
  async restoreWorkspace(id: string) {
    return this.run((c) => doors.setWorkspaceDeleted(c, id, false));
  }
  async createCollection(col: Parameters<S.Store['createCollection']>[0]) {
    return this.run((c) => doors.createCollection(c, col));
  }
  async updateCollection(id: string, patch: Parameters<S.Store['updateCollection']>[1]) {
    return this.run((c) => doors.updateCollection(c, id, patch));
  }
  async softDeleteCollection(id: string) {
    return this.run((c) => doors.updateCollection(c, id, { deleted: true }));
  }
  async restoreCollection(id: string) {
    return this.run((c) => doors.updateCollection(c, id, { deleted: false }));
  }
  async createItem(item: S.NewItem, opts?: S.OweOptions) {
    return this.run((c) => doors.createItem(c, item, opts));
  }
  async updateItem(id: string, patch: S.ItemPatch, opts?: S.OweOptions) {
    return this.run((c) => doors.updateItem(c, id, patch, opts));
  }
  async upsertItem(item: S.NewItem & { id: string }, opts?: S.OweOptions) {
    return this.run((c) => doors.upsertItem(c, item, opts));
  }
  async moveItem(id: string, collectionId: string, opts?: S.OweOptions) {
    return this.run((c) => doors.moveItem(c, id, collectionId, opts));
  }
  async softDeleteItem(id: string, opts?: S.OweOptions) {
    return this.run((c) => doors.setItemDeleted(c, id, true, opts));
  }
  async restoreItem(id: string, opts?: S.OweOptions) {
    return this.run((c) => doors.setItemDeleted(c, id, false, opts));
  }
  async addComment(cm: S.NewComment, opts?: S.OweOptions) {
    return this.run((c) => doors.addComment(c, cm, opts));
  }
  async upsertComment(cm: S.NewComment & { id: string }, opts?: S.OweOptions) {
    return this.run((c) => doors.upsertComment(c, cm, opts));
  }
  async editComment(id: string, body: string, opts?: S.OweOptions) {
    return this.run((c) => doors.editComment(c, id, body, opts));
  }
  async deleteComment(id: string, opts?: S.OweOptions) {
    return this.run((c) => doors.deleteComment(c, id, opts));
  }
  async addLink(l: S.NewLink, opts?: S.OweOptions) {
    return this.run((c) => doors.addLink(c, l, opts));
  }
  async removeLink(id: string, opts?: S.OweOptions) {
    return this.run((c) => doors.removeLink(c, id, opts));
  }

  // tracker reads. Listings sort text in byte order (COLLATE "C", SQLite's BINARY), so both stores
  // list in the same order whatever the database's collation; id-order scans keep the primary
  // key's order (its index), which callers only page through.
  async getWorkspaceBySlug(slug: string) {
    return this.run(async (c) => (await c.db.select().from(workspaces).where(eq(workspaces.slug, slug)))[0] ?? null);
  }
  async listWorkspaces() {
    return this.run((c) => c.db.select().from(workspaces).orderBy(sql`${workspaces.slug} COLLATE "C"`));
  }
  async getWorkspace(id: string) {
    return this.run(async (c) => (await c.db.select().from(workspaces).where(eq(workspaces.id, id)))[0] ?? null);
  }
  async listCollections(workspaceId: string) {
    return this.run(async (c) =>
      (await c.db.select().from(collections).where(eq(collections.workspaceId, workspaceId)).orderBy(sql`${collections.slug} COLLATE "C"`)).map(toCollectionRow),
    );
  }
  async getItem(id: string) {
    return this.run(async (c) => (await c.db.select().from(items).where(eq(items.id, id)))[0] ?? null);
  }
  async getItemByRef(workspaceId: string, ref: string) {
    return this.run(async (c) => (await c.db.select().from(items).where(and(eq(items.workspaceId, workspaceId), eq(items.ref, ref))))[0] ?? null);
  }
  async listItems(q: Parameters<S.Store['listItems']>[0]) {
    const conds: SQL[] = [];
    if (q.workspaceId) conds.push(eq(items.workspaceId, q.workspaceId));
    if (q.collectionId) conds.push(eq(items.collectionId, q.collectionId));
    if (!q.includeDeleted) conds.push(isNull(items.deletedAt));
    if (q.afterId) conds.push(gt(items.id, q.afterId));
    return this.run((c) =>
      c.db
        .select()
        .from(items)
        .where(conds.length ? and(...conds) : undefined)
        .orderBy(asc(items.id))
        .limit(q.limit ?? 1_000_000),
    );
  }
  async countItems(workspaceId?: string) {
    return this.run(
      async (c) =>
        (
          await c.db
            .select({ n: count() })
            .from(items)
            .where(workspaceId ? and(eq(items.workspaceId, workspaceId), isNull(items.deletedAt)) : isNull(items.deletedAt))
        )[0].n,
    );
  }

  // jobs
  async oweJobs(pairs: Array<{ itemId: string; questionSet: string }>, opts: Parameters<S.Store['oweJobs']>[1]) {
    return this.run((c) => owePairs(c, pairs, opts));
  }
  async advanceCollectionOwes() {
    return this.run((c) => advanceCollectionOwes(c));
  }
  async claimNextJob(workerId: string, leaseMs: number, abandonLimit: number, skipSets?: readonly string[]) {
    return this.run((c) => jobs.claimNextJob(c, workerId, leaseMs, abandonLimit, skipSets));
  }
  async renewLease(claim: S.Claim, leaseMs: number) {
    return this.run((c) => jobs.renewLease(c, claim, leaseMs));
  }
  async completeJob(claim: S.Claim) {
    return this.run((c) => jobs.completeJob(c, claim));
  }
  async dropJob(claim: S.Claim, _reason: string) {
    return this.run((c) => jobs.dropJob(c, claim));
  }
  async refuseJob(claim: S.Claim, o: { backoffMs: number; error: string; refusalLimit: number }) {
    return this.run((c) => jobs.refuseJob(c, claim, o));
  }
  async parkJob(claim: S.Claim, reason: string) {
    return this.run((c) => jobs.parkJob(c, claim, reason));
  }
  async failJob(claim: S.Claim, o: { backoffMs: number; error: string }) {
    return this.run((c) => jobs.failJob(c, claim, o));
  }
  async deferJob(claim: S.Claim, o: Parameters<S.Store['deferJob']>[1]) {
    return this.run((c) => jobs.deferJob(c, claim, o));
  }
  async releaseJob(claim: S.Claim, o?: Parameters<S.Store['releaseJob']>[1]) {
    return this.run((c) => jobs.releaseJob(c, claim, o));
  }
  async getJob(itemId: string, questionSet: string) {
    return this.run((c) => jobs.getJob(c, itemId, questionSet));
  }
  async listJobs(f: S.JobFilter) {
    return this.run((c) => jobs.listJobs(c, f));
  }
  async retryJobs(f: S.JobFilter) {
    return this.run((c) => jobs.retryJobs(c, f));
  }
  async dropJobs(f: S.JobFilter) {
    return this.run((c) => jobs.dropJobs(c, f));
  }
  async queueStats() {
    return this.run((c) => jobs.queueStats(c));
  }

  // evaluation
  async loadItemForEvaluation(itemId: string) {
    return this.run((c) => decisions.loadItemForEvaluation(c, itemId));
  }
  async checkLiveness(itemId: string, claim?: S.Claim) {
    return this.run((c) => decisions.checkLiveness(c, itemId, claim));
  }
  async answeredKeys(itemId: string, questionSet: string, keys: S.AnswerKey[]) {
    return this.run((c) => decisions.answeredKeys(c, itemId, questionSet, keys));
  }
  async insertDecisions(list: S.NewDecision[]) {
    return this.run((c) => decisions.insertDecisions(c, list));
  }
  async listDecisions(itemId: string) {
    return this.run((c) => decisions.listDecisions(c, itemId));
  }
  async listWorkspaceDecisions(workspaceId: string, questionSet: string) {
    return this.run((c) => decisions.listWorkspaceDecisions(c, workspaceId, questionSet));
  }
  async countDecisions() {
    return this.run(async (c) => (await c.db.select({ n: count() }).from(itemDecisions))[0].n);
  }
  async recordSpend(r: S.SpendRecord) {
    return this.run((c) => decisions.recordSpend(c, r));
  }
  async spendSince(windowMs: number) {
    return this.run((c) => decisions.spendSince(c, windowMs));
  }
  async reserveSpend(r: S.SpendReservationRequest) {
    return this.run((c) => reservations.reserveSpend(c, r));
  }
  async settleSpendReservation(id: string, spend: S.SpendRecord | null) {
    return this.run((c) => reservations.settleSpendReservation(c, id, spend));
  }

  // operations
  async spendRowsSince(windowMs: number) {
    return this.run((c) => ops.spendRowsSince(c, windowMs));
  }
  async countChunkJobs(questionSet: string, itemIds: readonly string[]) {
    return this.run((c) => ops.countChunkJobs(c, questionSet, itemIds));
  }
  async jobCountsBySet() {
    return this.run((c) => ops.jobCountsBySet(c));
  }
  async getMeta(key: string) {
    return this.run((c) => ops.getMeta(c, key));
  }
  async setMeta(key: string, value: string) {
    return this.run((c) => ops.setMeta(c, key, value));
  }
  async deleteMeta(key: string) {
    return this.run((c) => ops.deleteMeta(c, key));
  }
  async listMeta(prefix: string) {
    return this.run((c) => ops.listMeta(c, prefix));
  }
  // drift sweep and retention
  async scanItemsForDrift(q: Parameters<S.Store['scanItemsForDrift']>[0]) {
    return this.run((c) => drift.scanItemsForDrift(c, q));
  }
  async listSupersededDecisions(q: Parameters<S.Store['listSupersededDecisions']>[0]) {
    return this.run((c) => retention.listSupersededDecisions(c, q));
  }
  async deleteDecisions(ids: readonly number[]) {
    return this.run((c) => retention.deleteDecisions(c, ids));
  }
}

/**
 * The storage problem a Postgres error shows (DESIGN §16.6 /healthz), or null for any other error:
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
  if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EPIPE|EHOSTUNREACH)$/.test(code) || code.startsWith('08') || code.startsWith('57P')) return 'database unreachable';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (/Connection terminated|timeout exceeded when trying to connect/i.test(message)) return 'database unreachable';
  return null;
}
