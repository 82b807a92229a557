import { randomBytes, randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { and, asc, count, eq, gt, isNull } from 'drizzle-orm';
import { systemClock, type Clock } from '../../clock.js';
import type { Registry } from '../../decision/registry.js';
import type * as S from '../store.js';
import { TRACKER_STORE_METHODS } from '../store.js';
import { advanceCollectionOwes } from './collection-owe.js';
import { retryBusy, type SqliteContext } from './context.js';
import * as decisions from './decisions.js';
import * as reservations from './spend-reservations.js';
import * as drift from './drift.js';
import * as jobs from './jobs.js';
import * as ops from './operations.js';
import type Database from 'better-sqlite3';
import { gateMethods, runAsyncTransaction, TX_STATE, type ConnectionMutex } from './async-tx.js';
import { openSqlite, sqlitePathFromUrl, wrapSqlite } from './open.js';
import { owePairs } from './owe.js';
import * as retention from './retention.js';
import { collections, itemDecisions, items, workspaces } from './schema.js';
import * as doors from './write-doors.js';

export interface SqliteStoreOptions {
  /** A path, `file:` URL or `:memory:`. Ignored when `connection` is given. */
  url: string;
  /**
   * A host's own better-sqlite3 connection to use instead of opening `url` (DESIGN §16.21): the
   * host's writes and the write doors then share one connection and can commit together. Closing
   * the store leaves it open.
   */
  connection?: Database.Database;
  /** Apply the committed migrations at open. @defaultValue true */
  migrate?: boolean;
  /** Question sets whose jobs the write doors owe. */
  registry: Registry;
  /** @defaultValue the system clock */
  clock?: Clock;
  /** Fresh ids. @defaultValue crypto.randomUUID */
  newId?: () => string;
  /** How long a statement waits (blocking) for another process's write lock, ms. @defaultValue BUSY_TIMEOUT_MS (100) */
  busyTimeoutMs?: number;
  /** How long a call keeps retrying SQLITE_BUSY (awaited waits), ms. @defaultValue BUSY_DEADLINE_MS (60 000) */
  busyDeadlineMs?: number;
  /** Refuse a missing file instead of creating it (see OpenSqliteOptions). @defaultValue false */
  mustExist?: boolean;
  /** Open read-only; implies `mustExist` (see OpenSqliteOptions). @defaultValue false */
  readOnly?: boolean;
}

/**
 * The Store on one SQLite file (DESIGN §13: one machine, several processes allowed). Every
 * statement runs synchronously inside; methods return promises so the runner sees the same
 * interface as on Postgres. Every `async` method is wrapped at construction in `retryBusy`
 * (DESIGN §16.6): SQLITE_BUSY after the short busy timeout is retried with awaited waits, so
 * another process's long write lock delays the call without holding the event loop. A method
 * added here is covered by being `async`.
 */
export class SqliteStore implements S.Store {
  readonly ctx: SqliteContext;
  /** Held while an async `transaction` runs on the connection (see async-tx.ts). */
  readonly mutex: ConnectionMutex = { held: null };
  private readonly ownsConnection: boolean;
  private readonly path: string;

  /** Opens the file (or wraps `connection`) and applies migrations. @throws when the file cannot be opened or migrated. */
  constructor(opts: SqliteStoreOptions) {
    this.ownsConnection = !opts.connection;
    this.path = opts.connection ? opts.connection.name : sqlitePathFromUrl(opts.url);
    this.ctx = {
      db: opts.connection
        ? wrapSqlite(opts.connection, { migrate: opts.migrate })
        : openSqlite(this.path, { busyTimeoutMs: opts.busyTimeoutMs, migrate: opts.migrate, mustExist: opts.mustExist, readOnly: opts.readOnly }),
      clock: opts.clock ?? systemClock,
      registry: opts.registry,
      newId: opts.newId ?? (() => randomUUID()),
      newToken: () => randomBytes(16).toString('hex'),
      storage: { problem: null, gate: Promise.resolve() },
    };
    // Busy retries sit outside the connection gate (async-tx.ts): a call waits for a running async
    // transaction first, then retries SQLITE_BUSY. Calls on a transaction's own handle are not
    // retried: it holds the write lock already, and queueing them behind calls that wait for that
    // transaction would deadlock. `this` stays the caller (the store or a transaction handle).
    const self = this as unknown as Record<string, unknown>;
    const ctx = this.ctx;
    for (const name of BUSY_RETRIED_METHODS) {
      const fn = self[name] as (...a: unknown[]) => Promise<unknown>;
      self[name] = function (this: { [TX_STATE]?: unknown }, ...args: unknown[]) {
        if (this[TX_STATE]) return fn.apply(this, args);
        return retryBusy(ctx, () => fn.apply(this, args), opts.busyDeadlineMs);
      };
    }
  }

  storageProblem() {
    return this.ctx.storage.problem;
  }

  /**
   * `wal_checkpoint(TRUNCATE)` (DESIGN §16.7): copies the write-ahead log into the database and
   * truncates it to zero bytes when no reader still needs it; with a reader on an old snapshot it
   * copies what it can and the WAL keeps its size until a later checkpoint. Waits at most the busy
   * timeout for other writers. @returns the WAL's size after it, bytes.
   */
  async checkpoint() {
    const before = this.walSize();
    if (before === null || before === 0) return before; // nothing to copy: no lock taken
    this.ctx.db.$client.pragma('wal_checkpoint(TRUNCATE)');
    return this.walSize();
  }

  async walBytes() {
    return this.walSize();
  }

  private walSize(): number | null {
    if (this.path === ':memory:') return null;
    try {
      return statSync(`${this.path}-wal`).size;
    } catch {
      return 0; // no WAL file: nothing written since the last close
    }
  }

  /** Swaps the registry (SIGHUP reload); later writes owe the new sets. */
  setRegistry(registry: Registry): void {
    this.ctx.registry = registry;
  }

  async now() {
    return this.ctx.clock.now();
  }
  async close() {
    if (this.ownsConnection && this.ctx.db.$client.open) this.ctx.db.$client.close();
  }

  /**
   * Store.transaction on SQLite: an explicit BEGIN IMMEDIATE under this store's connection mutex;
   * every other call on the store waits until it commits or rolls back (see async-tx.ts).
   * @throws what `fn` throws, after the rollback.
   */
  async transaction<T>(fn: (tx: S.TrackerStore) => Promise<T>): Promise<T> {
    if ((this as { [TX_STATE]?: unknown })[TX_STATE]) return fn(this); // already inside one: join it
    return runAsyncTransaction(this, this.ctx, this.mutex, fn);
  }

  // write doors
  async createWorkspace(w: { id?: string; slug: string }) {
    return doors.createWorkspace(this.ctx, w);
  }
  async softDeleteWorkspace(id: string) {
    return doors.setWorkspaceDeleted(this.ctx, id, true);
  }
  async restoreWorkspace(id: string) {
    return doors.setWorkspaceDeleted(this.ctx, id, false);
  }
  async createCollection(c: Parameters<S.Store['createCollection']>[0]) {
    return doors.createCollection(this.ctx, c);
  }
  async updateCollection(id: string, patch: Parameters<S.Store['updateCollection']>[1]) {
    return doors.updateCollection(this.ctx, id, patch);
  }
  async softDeleteCollection(id: string) {
    return doors.updateCollection(this.ctx, id, { deleted: true });
  }
  async restoreCollection(id: string) {
    return doors.updateCollection(this.ctx, id, { deleted: false });
  }
  async createItem(item: S.NewItem, opts?: S.OweOptions) {
    return doors.createItem(this.ctx, item, opts);
  }
  async updateItem(id: string, patch: S.ItemPatch, opts?: S.OweOptions) {
    return doors.updateItem(this.ctx, id, patch, opts);
  }
  async upsertItem(item: S.NewItem & { id: string }, opts?: S.OweOptions) {
    return doors.upsertItem(this.ctx, item, opts);
  }
  async moveItem(id: string, collectionId: string, opts?: S.OweOptions) {
    return doors.moveItem(this.ctx, id, collectionId, opts);
  }
  async softDeleteItem(id: string, opts?: S.OweOptions) {
    return doors.setItemDeleted(this.ctx, id, true, opts);
  }
  async restoreItem(id: string, opts?: S.OweOptions) {
    return doors.setItemDeleted(this.ctx, id, false, opts);
  }
  async addComment(c: S.NewComment, opts?: S.OweOptions) {
    return doors.addComment(this.ctx, c, opts);
  }
  async upsertComment(c: S.NewComment & { id: string }, opts?: S.OweOptions) {
    return doors.upsertComment(this.ctx, c, opts);
  }
  async editComment(id: string, body: string, opts?: S.OweOptions) {
    return doors.editComment(this.ctx, id, body, opts);
  }
  async deleteComment(id: string, opts?: S.OweOptions) {
    return doors.deleteComment(this.ctx, id, opts);
  }
  async addLink(l: S.NewLink, opts?: S.OweOptions) {
    return doors.addLink(this.ctx, l, opts);
  }
  async removeLink(id: string, opts?: S.OweOptions) {
    return doors.removeLink(this.ctx, id, opts);
  }

  // tracker reads
  async getWorkspaceBySlug(slug: string) {
    return this.ctx.db.select().from(workspaces).where(eq(workspaces.slug, slug)).get() ?? null;
  }
  async listWorkspaces() {
    return this.ctx.db.select().from(workspaces).orderBy(asc(workspaces.slug)).all();
  }
  async getWorkspace(id: string) {
    return this.ctx.db.select().from(workspaces).where(eq(workspaces.id, id)).get() ?? null;
  }
  async listCollections(workspaceId: string) {
    return this.ctx.db
      .select()
      .from(collections)
      .where(eq(collections.workspaceId, workspaceId))
      .orderBy(asc(collections.slug))
      .all()
      .map(doors.toCollectionRow);
  }
  async getItem(id: string) {
    return this.ctx.db.select().from(items).where(eq(items.id, id)).get() ?? null;
  }
  async getItemByRef(workspaceId: string, ref: string) {
    return this.ctx.db.select().from(items).where(and(eq(items.workspaceId, workspaceId), eq(items.ref, ref))).get() ?? null;
  }
  async listItems(q: Parameters<S.Store['listItems']>[0]) {
    const conds = [];
    if (q.workspaceId) conds.push(eq(items.workspaceId, q.workspaceId));
    if (q.collectionId) conds.push(eq(items.collectionId, q.collectionId));
    if (!q.includeDeleted) conds.push(isNull(items.deletedAt));
    if (q.afterId) conds.push(gt(items.id, q.afterId));
    return this.ctx.db
      .select()
      .from(items)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(items.id))
      .limit(q.limit ?? 1_000_000)
      .all();
  }
  async countItems(workspaceId?: string) {
    return this.ctx.db
      .select({ n: count() })
      .from(items)
      .where(workspaceId ? and(eq(items.workspaceId, workspaceId), isNull(items.deletedAt)) : isNull(items.deletedAt))
      .get()!.n;
  }

  // jobs
  async oweJobs(pairs: Array<{ itemId: string; questionSet: string }>, opts: Parameters<S.Store['oweJobs']>[1]) {
    return owePairs(this.ctx, pairs, opts);
  }
  async advanceCollectionOwes() {
    return advanceCollectionOwes(this.ctx);
  }
  async claimNextJob(workerId: string, leaseMs: number, abandonLimit: number, skipSets?: readonly string[]) {
    return jobs.claimNextJob(this.ctx, workerId, leaseMs, abandonLimit, skipSets);
  }
  async renewLease(claim: S.Claim, leaseMs: number) {
    return jobs.renewLease(this.ctx, claim, leaseMs);
  }
  async completeJob(claim: S.Claim) {
    return jobs.completeJob(this.ctx, claim);
  }
  async dropJob(claim: S.Claim, _reason: string) {
    return jobs.dropJob(this.ctx, claim);
  }
  async refuseJob(claim: S.Claim, o: { backoffMs: number; error: string; refusalLimit: number }) {
    return jobs.refuseJob(this.ctx, claim, o);
  }
  async parkJob(claim: S.Claim, reason: string) {
    return jobs.parkJob(this.ctx, claim, reason);
  }
  async failJob(claim: S.Claim, o: { backoffMs: number; error: string }) {
    return jobs.failJob(this.ctx, claim, o);
  }
  async deferJob(claim: S.Claim, o: Parameters<S.Store['deferJob']>[1]) {
    return jobs.deferJob(this.ctx, claim, o);
  }
  async releaseJob(claim: S.Claim, o?: Parameters<S.Store['releaseJob']>[1]) {
    return jobs.releaseJob(this.ctx, claim, o);
  }
  async getJob(itemId: string, questionSet: string) {
    return jobs.getJob(this.ctx, itemId, questionSet);
  }
  async listJobs(f: S.JobFilter) {
    return jobs.listJobs(this.ctx, f);
  }
  async retryJobs(f: S.JobFilter) {
    return jobs.retryJobs(this.ctx, f);
  }
  async dropJobs(f: S.JobFilter) {
    return jobs.dropJobs(this.ctx, f);
  }
  async queueStats() {
    return jobs.queueStats(this.ctx);
  }

  // evaluation
  async loadItemForEvaluation(itemId: string) {
    return decisions.loadItemForEvaluation(this.ctx, itemId);
  }
  async checkLiveness(itemId: string, claim?: S.Claim) {
    return decisions.checkLiveness(this.ctx, itemId, claim);
  }
  async answeredKeys(itemId: string, questionSet: string, keys: S.AnswerKey[]) {
    return decisions.answeredKeys(this.ctx, itemId, questionSet, keys);
  }
  async insertDecisions(rows: S.NewDecision[]) {
    return decisions.insertDecisions(this.ctx, rows);
  }
  async listDecisions(itemId: string) {
    return decisions.listDecisions(this.ctx, itemId);
  }
  async listWorkspaceDecisions(workspaceId: string, questionSet: string) {
    return decisions.listWorkspaceDecisions(this.ctx, workspaceId, questionSet);
  }
  async countDecisions() {
    return this.ctx.db.select({ n: count() }).from(itemDecisions).get()!.n;
  }
  async recordSpend(r: S.SpendRecord) {
    decisions.recordSpend(this.ctx, r);
  }
  async spendSince(windowMs: number) {
    return decisions.spendSince(this.ctx, windowMs);
  }
  async reserveSpend(r: S.SpendReservationRequest) {
    return reservations.reserveSpend(this.ctx, r);
  }
  async settleSpendReservation(id: string, spend: S.SpendRecord | null) {
    return reservations.settleSpendReservation(this.ctx, id, spend);
  }

  // operations
  async spendRowsSince(windowMs: number) {
    return ops.spendRowsSince(this.ctx, windowMs);
  }
  async countChunkJobs(questionSet: string, itemIds: readonly string[]) {
    return ops.countChunkJobs(this.ctx, questionSet, itemIds);
  }
  async jobCountsBySet() {
    return ops.jobCountsBySet(this.ctx);
  }
  async getMeta(key: string) {
    return ops.getMeta(this.ctx, key);
  }
  async setMeta(key: string, value: string) {
    ops.setMeta(this.ctx, key, value);
  }
  async deleteMeta(key: string) {
    ops.deleteMeta(this.ctx, key);
  }
  async listMeta(prefix: string) {
    return ops.listMeta(this.ctx, prefix);
  }
  // drift sweep and retention
  async scanItemsForDrift(q: Parameters<S.Store['scanItemsForDrift']>[0]) {
    return drift.scanItemsForDrift(this.ctx, q);
  }
  async listSupersededDecisions(q: Parameters<S.Store['listSupersededDecisions']>[0]) {
    return retention.listSupersededDecisions(this.ctx, q);
  }
  async deleteDecisions(ids: readonly number[]) {
    return retention.deleteDecisions(this.ctx, ids);
  }
}

/**
 * The store's async methods (every call but `close`, `transaction` and the synchronous helpers):
 * each waits while an async transaction holds the connection (the handle's own calls run), and
 * each retries SQLITE_BUSY with awaited waits (DESIGN §16.6; see the constructor). A method added
 * to the class is covered by being `async`.
 */
const BUSY_RETRIED_METHODS = Object.getOwnPropertyNames(SqliteStore.prototype).filter(
  (n) =>
    !['constructor', 'transaction', 'close'].includes(n) &&
    (SqliteStore.prototype as unknown as Record<string, { constructor?: { name?: string } }>)[n]?.constructor?.name === 'AsyncFunction',
);
gateMethods(
  SqliteStore.prototype,
  [...BUSY_RETRIED_METHODS, 'close'],
  new Set(BUSY_RETRIED_METHODS.filter((n) => !(TRACKER_STORE_METHODS as readonly string[]).includes(n))),
  { mutexOf: (self) => (self as SqliteStore).mutex, clientOf: (self) => (self as SqliteStore).ctx.db.$client },
);
