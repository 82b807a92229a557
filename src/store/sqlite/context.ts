import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../../clock.js';
import { ownCode } from '../../errors.js';
import type { Db } from '../sql/steps.js';
import type { SqliteDb } from './open.js';

/** The SQLite-only state of one store: its connection, its clock, and its storage health. */
export interface SqliteContext {
  readonly db: SqliteDb;
  readonly clock: Clock;
  /**
   * Whether writes work now (DESIGN §10.1 /healthz): `problem` is set by a storage error (locked,
   * full) and cleared by the next committed write transaction; `gate` serialises tries while locked.
   */
  readonly storage: { problem: StorageProblem | null; gate: Promise<void> };
}

/**
 * Async retries of a store call that failed with SQLITE_BUSY after the (short) busy timeout, or
 * with a BUSY variant SQLite raises without waiting (a stale WAL snapshot, WAL recovery by another
 * process). DESIGN §10.1: a lock wait never blocks the event loop for more than 250 ms at a time,
 * so the waits between tries are awaited timers, 25 ms doubling to 1 s, until
 * `BUSY_DEADLINE_MS` has passed since the first try. The old blocking scheme (a 10 s busy timeout
 * and 5 sleeping retries) held the loop up to about 61 s per statement; the deadline keeps that
 * budget, so a job outcome still survives a long writer in another process (a 25 s
 * `BEGIN IMMEDIATE` was measured: nothing lost) while /healthz answers throughout.
 */
const BUSY_RETRY_BASE_MS = 25;
const BUSY_RETRY_MAX_MS = 1_000;
const BUSY_DEADLINE_MS = 60_000;

/** True for SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_RECOVERY, ...). */
export function isBusy(err: unknown): boolean {
  return ownCode(err)?.startsWith('SQLITE_BUSY') ?? false;
}

/** Why the database cannot take writes now, as /healthz reports it (DESIGN §10.1). */
export type StorageProblem = 'database locked' | 'disk full' | 'disk I/O error';

/** The storage problem an error shows, or null for any other error (a constraint, a bad row). */
export function storageProblemOf(err: unknown): StorageProblem | null {
  const code = ownCode(err);
  if (code === undefined) return null;
  if (code.startsWith('SQLITE_BUSY')) return 'database locked';
  if (code.startsWith('SQLITE_FULL')) return 'disk full';
  if (code.startsWith('SQLITE_IOERR')) return 'disk I/O error';
  return null;
}

/**
 * Runs `fn` in a write transaction that begins IMMEDIATE; `fn` must never await (better-sqlite3).
 * IMMEDIATE takes the write lock at BEGIN, where the busy timeout applies, so a transaction never
 * fails half-way to upgrade a read lock. One try only: a SQLITE_BUSY is retried by the store's
 * async wrapper (`retryBusy`), which re-runs the whole call (`fn` reads everything it needs
 * inside, so a re-run is safe). Records the outcome in `ctx.storage`: a storage error sets the
 * problem, a committed transaction clears it.
 * @throws SQLITE_BUSY when the lock is still held after the busy timeout, and any other error.
 */
export function writeTx<T>(ctx: SqliteContext, fn: (tx: Db) => T): T {
  try {
    const r = ctx.db.transaction((tx) => fn(tx as unknown as Db), { behavior: 'immediate' });
    ctx.storage.problem = null;
    return r;
  } catch (err) {
    const problem = storageProblemOf(err);
    if (problem) ctx.storage.problem = problem;
    throw err;
  }
}

/**
 * Runs one store call, retrying it on SQLITE_BUSY with awaited waits (see BUSY_RETRY_BASE_MS)
 * until `deadlineMs` has passed. While the database is known to be locked, tries go one at a time
 * through `ctx.storage.gate`, each after a timer turn of the event loop, so several waiting calls
 * never block the loop back to back (each try blocks at most the busy timeout; measured: five
 * calls released together held a 20 ms timer 337 ms when they ran back to back).
 * @throws the last SQLITE_BUSY error after the deadline, and any other error at once.
 */
export async function retryBusy<T>(
  ctx: SqliteContext,
  call: () => T | Promise<T>,
  deadlineMs = BUSY_DEADLINE_MS,
): Promise<T> {
  const started = performance.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return ctx.storage.problem === 'database locked' ? await gated(ctx, call) : await call();
    } catch (err) {
      const problem = storageProblemOf(err);
      if (problem) ctx.storage.problem = problem;
      if (!isBusy(err)) throw err;
      const wait = Math.min(BUSY_RETRY_BASE_MS * 2 ** attempt, BUSY_RETRY_MAX_MS);
      if (performance.now() - started + wait > deadlineMs) throw err;
      await sleep(wait);
    }
  }
}

/**
 * Runs `call` alone, after the previous gated call and a timer turn: a timer set now cannot fire
 * in the timers phase under way, so due timers and pending I/O (/healthz) run between two tries.
 */
function gated<T>(ctx: SqliteContext, call: () => T | Promise<T>): Promise<T> {
  const run = ctx.storage.gate.then(turn).then(call);
  ctx.storage.gate = run.then(noop, noop);
  return run;
}

const turn = () => sleep(1);
const noop = () => undefined;
