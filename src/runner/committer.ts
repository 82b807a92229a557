import type { Claim, FinishedJob, JobFinish, JobFinishResult } from '../store/store.js';
import type { Store } from '../store/whole-store.js';

/** One slot's finish waiting for the next group commit, and how to wake the slot. */
interface Waiting {
  claim: Claim;
  finish: JobFinish;
  resolve: (f: FinishedJob) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit (DESIGN §10.6): one per worker process and store. Each slot hands in its finish
 * (the last call's answers and spend, the fenced completion, and its next-claim request) with
 * `finish`, which resolves once that finish is committed. Everything handed in while no commit runs
 * is committed together in ONE transaction (`Store.finishJobs`; on PostgreSQL one statement per
 * entry, sent together) at the next turn of the event loop
 * (a `setImmediate`: the slots whose calls returned in the same turn all hand in first); whatever
 * is handed in while a commit runs is committed as soon as it ends. So a process of 16 slots
 * commits (and, at `synchronous = FULL`, fsyncs) once for many jobs instead of once per job.
 *
 * A slot never acts on a claim before its commit: `finish` resolves with the slot's own
 * `FinishedJob` (its fenced result and its next claim) only after the transaction committed. An
 * entry whose own statements threw rejects with that error alone (the store rolled back to its
 * savepoint; the other entries are committed). When the transaction fails, every entry of it
 * rejects with that error and nothing of any of them was written; each slot then runs its own
 * fallback (job-life.ts `finishWithAnswers`). Crash semantics are those of `finishJob`: an outcome
 * is durable before the claim taken with it is used.
 */
export class Committer {
  private waiting: Waiting[] = [];
  private committing = false;
  private scheduled = false;
  /** Transactions run so far (each one `Store.finishJobs` call). */
  commits = 0;
  /** Finishes handed in so far. */
  handedIn = 0;

  constructor(private readonly store: Pick<Store, 'finishJobs'>) {}

  /**
   * Hands in one slot's finish; resolves with its result once committed.
   * @throws (rejects with) the error of this entry's own statements, or of the whole transaction.
   */
  finish(claim: Claim, finish: JobFinish): Promise<FinishedJob> {
    this.handedIn++;
    return new Promise<FinishedJob>((resolve, reject) => {
      this.waiting.push({ claim, finish, resolve, reject });
      this.schedule();
    });
  }

  /** Finishes handed in and not yet committed (for tests and metrics). */
  get pending(): number {
    return this.waiting.length;
  }

  private schedule(): void {
    if (this.committing || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.commitWaiting();
    });
  }

  private async commitWaiting(): Promise<void> {
    if (this.committing || this.waiting.length === 0) return;
    this.committing = true;
    const batch = this.waiting;
    this.waiting = [];
    let results: JobFinishResult[] | undefined;
    let failure: { error: unknown } | undefined;
    try {
      results = await this.commit(batch);
      this.commits++;
    } catch (error) {
      failure = { error };
    }
    this.committing = false;
    for (const [i, w] of batch.entries()) {
      const r = results?.[i];
      if (r?.ok) w.resolve(r.finished);
      else w.reject(failure ? failure.error : r ? r.error : new Error('group commit returned no result for an entry'));
    }
    // What was handed in during this commit goes at once: its slots have waited a whole commit already.
    if (this.waiting.length) void this.commitWaiting();
  }

  /** Runs one batch in one transaction. */
  private commit(batch: readonly Waiting[]): Promise<JobFinishResult[]> {
    return this.store.finishJobs(batch.map((w) => ({ claim: w.claim, finish: w.finish })));
  }
}
