import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type Database from 'better-sqlite3';
import { TransactionClosed, TransactionMisuse } from '../transaction-errors.js';
import { retryBusy, type SqliteContext } from './context.js';

/**
 * Async transactions on one better-sqlite3 connection: an explicit BEGIN IMMEDIATE under a
 * connection mutex when a host's async transaction spans several write doors (DESIGN §16.1).
 *
 * better-sqlite3 transactions are synchronous: a callback that awaits would let any other work on
 * the connection (a worker slot's claim in the same process, another request of the host) run
 * inside the open transaction and commit or roll back with it. So `store.transaction(fn)` takes
 * the connection's mutex, runs `BEGIN IMMEDIATE` (the write lock is taken at BEGIN, where the busy
 * timeout applies), and while `fn` runs every other call on the store waits for the mutex; the
 * doors called through `tx` run their own write transactions as savepoints inside it (better-sqlite3
 * nests them). COMMIT when `fn` resolves; ROLLBACK when it throws.
 */

/** Per-store state of the mutex: the promise that resolves when the open transaction ends. */
export interface ConnectionMutex {
  held: Promise<void> | null;
}

/** Marks a transaction-bound store object: its calls go straight to the connection. */
export const TX_STATE = Symbol('verdict.sqlite.tx');

/** State of one transaction handle; calls after the transaction ended are refused. */
export interface TxState {
  done: boolean;
}

/**
 * Runs `op` once no async transaction holds the connection. The check and `op` run in the same
 * microtask (no await between them), so a transaction cannot begin in between.
 */
async function whenFree<T>(m: ConnectionMutex, op: () => T): Promise<Awaited<T>> {
  while (m.held) await m.held;
  return op() as Awaited<T>;
}

/** The transaction whose callback is running in this async context (see TransactionMisuse). */
const txScope = new AsyncLocalStorage<TxState>();

/**
 * Async transactions whose callback runs now, on any store of the process. When the last one ends
 * `txScope` is disabled: on Node 20 an enabled AsyncLocalStorage keeps promise hooks on for every
 * promise of the process (about 2 % of a 0 ms evaluation's CPU, profile of
 * scripts/cpu-per-job.ts, whose seeding opens one transaction), and once every transaction is
 * done no context it kept can matter (a done scope reads as no scope). The next `run` enables it
 * again.
 */
let openScopes = 0;

/** Whether `txScope` is enabled now (its promise hooks on), for tests; false on a Node whose AsyncLocalStorage has no such state. */
export function txScopeEnabled(): boolean {
  return (txScope as unknown as { enabled?: boolean }).enabled === true;
}

/** Polling interval while a host's own transaction holds the connection, ms: 2 doubling to 100. */
const HOST_TX_POLL_MIN_MS = 2;
const HOST_TX_POLL_MAX_MS = 100;

/**
 * Runs `op` once the host's own transaction on the connection (a `BEGIN` it issued itself on a
 * `{ sqlite: db }` connection) has ended. The check and `op` run in the same microtask.
 */
async function whenHostTxEnds<T>(client: Database.Database, op: () => T): Promise<Awaited<T>> {
  for (let wait = HOST_TX_POLL_MIN_MS; client.inTransaction; wait = Math.min(wait * 2, HOST_TX_POLL_MAX_MS))
    await sleep(wait);
  return op() as Awaited<T>;
}

/**
 * Runs `op` once the connection is in no transaction: none held by an async `store.transaction`
 * (`mutex`), none the host opened itself on a shared connection (polled as `whenHostTxEnds`). Both
 * are checked in the microtask that runs `op`, so neither can begin in between (the write doors'
 * group commit, write-group.ts, begins its own transaction there).
 */
export async function whenConnectionIdle<T>(
  mutex: ConnectionMutex,
  client: Database.Database,
  op: () => T,
): Promise<T> {
  for (let wait = HOST_TX_POLL_MIN_MS; ;) {
    if (mutex.held) await mutex.held;
    else if (client.inTransaction) {
      await sleep(wait);
      wait = Math.min(wait * 2, HOST_TX_POLL_MAX_MS);
    } else return op();
  }
}

/**
 * Runs `op` for a call on `self` (the store or a transaction handle) once the connection is free
 * for it: at once on a live transaction handle; after the async transaction holding `mutex` ends;
 * with `waitsForHost`, also after a transaction the host opened itself on `client` (see
 * sqlite-store.ts `onConnection`). With nothing open it runs synchronously.
 * @throws TransactionClosed on a handle whose transaction ended; TransactionMisuse for a call on
 * the store from inside its own `store.transaction` callback (both as rejected promises).
 */
export function whenConnectionFree<T>(
  self: object & { [TX_STATE]?: TxState },
  mutex: ConnectionMutex,
  client: Database.Database,
  waitsForHost: boolean,
  op: () => T,
): T | Promise<Awaited<T>> {
  const tx = self[TX_STATE];
  if (tx) return tx.done ? Promise.reject(new TransactionClosed()) : op();
  if (mutex.held) {
    const scope = txScope.getStore();
    if (scope && !scope.done) return Promise.reject(new TransactionMisuse());
    return whenFree(mutex, () => (waitsForHost && client.inTransaction ? whenHostTxEnds(client, op) : op()));
  }
  if (waitsForHost && client.inTransaction) return whenHostTxEnds(client, op);
  return op();
}

/**
 * Runs `fn(handle)` in one transaction on the store's connection (see the file comment). When the
 * connection is already inside a transaction the host opened (`{ sqlite: db }` with its own
 * BEGIN), the work joins it as a savepoint and the host's COMMIT or ROLLBACK decides.
 * @throws what `fn` throws, after the rollback; SQLITE_BUSY when the write lock stays taken past
 * the busy timeout and BUSY_RETRIES retries.
 */
export async function runAsyncTransaction<S extends object, T>(
  store: S,
  ctx: SqliteContext,
  mutex: ConnectionMutex,
  fn: (tx: S) => Promise<T>,
): Promise<T> {
  const scope = txScope.getStore();
  if (mutex.held && scope && !scope.done) throw new TransactionMisuse();
  while (mutex.held) await mutex.held;
  let release!: () => void;
  mutex.held = new Promise<void>((r) => (release = r)); // taken in the microtask that saw it free
  const state: TxState = { done: false };
  // The handle is a copy of the store's own fields (all readonly references) under its class's
  // prototype, plus TX_STATE; not Object.create(store): a store used as a prototype gets a hidden
  // class of its own, so code V8 optimised for one store was thrown away ("wrong map") for every
  // other store the process opened (a bench opens one per drain, a test suite hundreds).
  const handle = Object.assign(Object.create(Object.getPrototypeOf(store) as object) as S, store);
  Object.defineProperty(handle, TX_STATE, { value: state });
  const client = ctx.db.$client;
  const nested = client.inTransaction;
  try {
    if (nested) client.exec('SAVEPOINT verdict_tx');
    else await beginImmediate(ctx);
    let result: T;
    openScopes++;
    try {
      result = await txScope.run(state, () => fn(handle));
    } catch (err) {
      if (client.inTransaction) {
        if (nested) client.exec('ROLLBACK TO verdict_tx; RELEASE verdict_tx');
        else client.exec('ROLLBACK');
      }
      throw err;
    } finally {
      if (--openScopes === 0) txScope.disable();
    }
    if (nested) client.exec('RELEASE verdict_tx');
    else client.exec('COMMIT');
    return result;
  } finally {
    if (!nested && client.inTransaction) client.exec('ROLLBACK'); // a failed COMMIT
    state.done = true;
    mutex.held = null;
    release();
  }
}

/**
 * BEGIN IMMEDIATE, retried on SQLITE_BUSY with awaited waits like every store call (context.ts
 * `retryBusy`), so a held lock never blocks the event loop longer than the busy timeout (DESIGN
 * §10.1); the lock problem is reported in `ctx.storage` (/healthz) and cleared once it is taken.
 * @throws the last SQLITE_BUSY after the deadline, and any other error at once.
 */
function beginImmediate(ctx: SqliteContext): Promise<void> {
  return retryBusy(ctx, async () => {
    ctx.db.$client.exec('BEGIN IMMEDIATE');
    ctx.storage.problem = null;
  });
}
