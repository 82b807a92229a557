import type Database from 'better-sqlite3';
import { GroupCommit, type GroupLane } from '../group-commit.js';
import { whenConnectionIdle, type ConnectionMutex } from './async-tx.js';
import { isBusy, storageProblemOf, type SqliteContext } from './context.js';

/**
 * One write of a write door, as the group runs it: its statements, run synchronously on the
 * connection inside the group's transaction, returning the door's result. It may run twice (see
 * `commitWrites`), so it keeps its state inside, as every store call already must for the busy
 * retry (context.ts `retryBusy` re-runs the whole call).
 */
export type GroupedWrite = () => unknown;

/** One write's outcome in its group: its result, or the error its own statements threw. */
export type GroupedResult = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Group commit of the SQLite write doors (DESIGN §10.6, §3.9): every write transaction a store call
 * runs on its own (`Dialect.write`, `autocommit`: the tracker doors, `oweJobs`, the worker's single
 * outcomes, sessions, events), when the connection is in no transaction, is handed in here and
 * committed with every other write handed in in the same turn of the event loop, or while the
 * previous group waited for the connection, in ONE IMMEDIATE transaction: one fsync at
 * `synchronous = FULL` for all of them instead of one each. The scheduling is the worker
 * committer's (`GroupCommit`). Each caller's promise settles only after the COMMIT of the
 * transaction that holds its write returned, with its own result or its own error.
 *
 * A write made while the connection is inside a transaction (a `store.transaction` handle's door,
 * a door joining a host's own transaction on a shared connection) runs at once as a savepoint of
 * it, as before: that transaction's COMMIT is the one that counts.
 */
export class WriteGroup {
  private readonly group = new GroupCommit();
  private readonly lane: GroupLane<GroupedWrite, GroupedResult>;
  /** The connection's IMMEDIATE transaction function, made once (better-sqlite3 prepares its BEGIN and COMMIT). */
  private readonly tx: Database.Transaction<(run: () => GroupedResult[]) => GroupedResult[]>;

  /**
   * @param mutex the store's connection mutex: a group waits while an async `store.transaction`
   * holds the connection, and while a host's own transaction is open on a shared one, so its writes
   * never join work they were not called in.
   */
  constructor(
    private readonly ctx: SqliteContext,
    mutex: ConnectionMutex,
  ) {
    const client = ctx.db.$client;
    this.tx = client.transaction((run: () => GroupedResult[]) => run());
    this.lane = this.group.lane((writes) => whenConnectionIdle(mutex, client, () => this.commitWrites(writes)));
  }

  /** Group transactions committed so far (each one COMMIT, one fsync at FULL). */
  get commits(): number {
    return this.group.commits;
  }

  /** Resolves once every write handed in so far has settled (the store waits for it before closing). */
  idle(): Promise<void> {
    return this.group.idle();
  }

  /**
   * Hands in one write; resolves with its result once the transaction holding it committed.
   * @throws (rejects with) what the write's own statements threw (nothing of it written, the rest
   * of its group committed), or the group transaction's error (nothing of the group written):
   * SQLITE_BUSY then, which the store call's busy retry runs again.
   */
  write(run: GroupedWrite): Promise<unknown> {
    return this.lane.handInOne(run).then(resultOf);
  }

  /**
   * Runs `writes` in one IMMEDIATE transaction, in the order given, with no savepoint: the common
   * case, where none throws. When one throws, that transaction is rolled back whole and the writes
   * run again in a second one, each in its own savepoint, so only the throwing write is undone and
   * gets its error (the worker's finishes do the same, job-statements.ts `finishJobs`, and the
   * reason is theirs: an open savepoint makes SQLite copy each page a statement first changes into
   * its statement journal). A lone write needs no second run: its rollback is its error.
   * A failure of the transaction itself (BEGIN, COMMIT, SQLITE_BUSY, an error after which SQLite
   * rolled the whole transaction back) throws: nothing of any write is left.
   * Records the outcome for /healthz as context.ts `writeTx` does.
   * @throws that failure.
   */
  private commitWrites(writes: readonly GroupedWrite[]): GroupedResult[] {
    try {
      try {
        return this.immediate(() => writes.map((w) => ({ ok: true, value: runEntry(w) })));
      } catch (err) {
        if (!(err instanceof EntryThrew)) throw err;
        if (isBusy(err.error)) throw err.error;
        const problem = storageProblemOf(err.error);
        if (problem) this.ctx.storage.problem = problem;
        if (writes.length === 1) return [{ ok: false, error: err.error }];
        return this.immediate(() => writes.map((w) => this.inSavepoint(w)));
      }
    } catch (err) {
      const problem = storageProblemOf(err);
      if (problem) this.ctx.storage.problem = problem;
      throw err;
    }
  }

  private immediate(run: () => GroupedResult[]): GroupedResult[] {
    const r = this.tx.immediate(run);
    this.ctx.storage.problem = null;
    return r;
  }

  /**
   * The second run's entry: its own savepoint, rolled back alone when it throws. When the
   * savepoint is gone (SQLite rolled the whole transaction back on an I/O error), the whole group
   * fails.
   */
  private inSavepoint(w: GroupedWrite): GroupedResult {
    const db = this.ctx.db.$client;
    db.exec('SAVEPOINT write_entry');
    try {
      const value = w();
      db.exec('RELEASE write_entry');
      return { ok: true, value };
    } catch (error) {
      if (isBusy(error)) throw error;
      try {
        db.exec('ROLLBACK TO write_entry; RELEASE write_entry');
      } catch {
        throw error;
      }
      return { ok: false, error };
    }
  }
}

/** One write's value from its group's results, or its own error. */
function resultOf(r: GroupedResult): unknown {
  if (r.ok) return r.value;
  throw r.error;
}

/** A write's own statements threw inside the first run (not BEGIN or COMMIT): worth a second run with savepoints. */
class EntryThrew extends Error {
  constructor(readonly error: unknown) {
    super('a grouped write threw');
  }
}

function runEntry(w: GroupedWrite): unknown {
  try {
    return w();
  } catch (error) {
    throw new EntryThrew(error);
  }
}
