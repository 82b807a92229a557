/**
 * The scheduling of a group commit (DESIGN §10.6), one mechanism for the worker's committer
 * (src/runner/committer.ts: finishes and claims) and SQLite's write doors (sqlite/write-group.ts).
 *
 * Callers hand entries to a lane (`GroupLane.handIn`). Everything handed in while no commit runs is
 * committed at the next turn of the event loop (a `setImmediate`, so every caller whose I/O came
 * back in the same turn, a slot's call or an HTTP request, hands in first); whatever is handed in
 * while a commit runs is committed as soon as it ends (its callers have waited a whole commit
 * already). One cycle commits each lane's waiting entries, lanes in the order they were made, one
 * `commit` call per lane that holds any: so one transaction, and at `synchronous = FULL` one fsync,
 * serves every caller of the turn instead of one each.
 *
 * A hand-in's promise settles only after the `commit` call that holds its entries settled: nobody
 * is told before the commit. What one entry's result means (its own error, say) is the lane's
 * business; a `commit` that throws rejects every hand-in of it with that error.
 */
export class GroupCommit {
  private readonly lanes: Array<Lane<never, unknown>> = [];
  private committing = false;
  private scheduled = false;
  private idleWaiters: Array<() => void> = [];
  /** `commit` calls that resolved so far (each one transaction). */
  commits = 0;

  /**
   * A new lane, committed after the lanes made before it in each cycle.
   * @param commit commits `entries` (every hand-in waiting, in the order handed in) together and
   * resolves with one result per entry, in that order; rejects when nothing of them was written.
   */
  lane<E, R>(commit: (entries: E[]) => Promise<R[]>): GroupLane<E, R> {
    const lane = new Lane<E, R>(this, commit);
    this.lanes.push(lane as unknown as Lane<never, unknown>);
    return lane;
  }

  /** Entries handed in to any lane and not yet in a commit. */
  get pending(): number {
    return this.lanes.reduce((n, l) => l.waiting.reduce((m, w) => m + w.entries.length, n), 0);
  }

  /** Resolves once nothing is waiting and no commit runs: every hand-in made before it has settled. */
  idle(): Promise<void> {
    if (!this.committing && !this.scheduled && this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** A commit at the next turn of the event loop, unless one runs or is due (a lane's hand-in calls it). */
  schedule(): void {
    if (this.committing || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.commitWaiting();
    });
  }

  private async commitWaiting(): Promise<void> {
    if (this.committing) return;
    if (this.pending === 0) return this.wakeIdle();
    this.committing = true;
    const taken = this.lanes.map((l) => {
      const w = l.waiting;
      l.waiting = [];
      return w;
    });
    for (const [i, batch] of taken.entries()) if (batch.length) await this.commitLane(this.lanes[i]!, batch);
    this.committing = false;
    if (this.pending) void this.commitWaiting();
    else if (!this.scheduled) this.wakeIdle();
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  private async commitLane(lane: Lane<never, unknown>, batch: ReadonlyArray<Waiting<never, unknown>>) {
    let results: unknown[] | undefined;
    let failure: { error: unknown } | undefined;
    try {
      results = await lane.commit(batch.flatMap((w) => w.entries));
      this.commits++;
    } catch (error) {
      failure = { error };
    }
    let at = 0;
    for (const w of batch) {
      const mine = results?.slice(at, (at += w.entries.length));
      if (failure || !mine || mine.length !== w.entries.length)
        w.reject(failure ? failure.error : new Error('group commit returned no result for an entry'));
      else w.resolve(mine);
    }
  }
}

/** One kind of entry of a `GroupCommit`, with its own `commit`. */
export interface GroupLane<E, R> {
  /**
   * Hands in `entries` (committed together, in this order, with everything else waiting);
   * resolves once committed with one result per entry, in the order given.
   * @throws (rejects with) the commit's error: nothing of any entry of it was written.
   */
  handIn(entries: readonly E[]): Promise<R[]>;
  /** `handIn` of one entry; resolves with its result. @throws (rejects with) the commit's error. */
  handInOne(entry: E): Promise<R>;
  /** Entries of this lane handed in and not yet in a commit. */
  pending(): number;
}

interface Waiting<E, R> {
  entries: readonly E[];
  resolve: (r: R[]) => void;
  reject: (err: unknown) => void;
}

/**
 * A lane: its commit and the hand-ins waiting for it. A class, so every lane's `handIn` is the one
 * function on its prototype: per-lane closures made the committer's call to it a new call target
 * for each worker a process started, and V8 threw away the code that called it.
 */
class Lane<E, R> implements GroupLane<E, R> {
  waiting: Array<Waiting<E, R>> = [];

  constructor(
    private readonly group: GroupCommit,
    readonly commit: (entries: E[]) => Promise<R[]>,
  ) {}

  handIn(entries: readonly E[]): Promise<R[]> {
    return new Promise<R[]>((resolve, reject) => this.wait({ entries, resolve, reject }));
  }

  // One result per entry is guaranteed by `commitLane`, so the one entry's result is there.
  handInOne(entry: E): Promise<R> {
    return new Promise<R>((resolve, reject) => this.wait({ entries: [entry], resolve: (r) => resolve(r[0]!), reject }));
  }

  pending(): number {
    return this.waiting.reduce((n, w) => n + w.entries.length, 0);
  }

  private wait(w: Waiting<E, R>): void {
    this.waiting.push(w);
    this.group.schedule();
  }
}
