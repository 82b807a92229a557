import type { Claim, ClaimRequest, FinishedJob, JobFinish, JobFinishResult } from '../store/store.js';
import type { Store } from '../store/whole-store.js';

/** One slot's finishes (its job's, or its co-asked group's) waiting for the next group commit, and how to wake the slot. */
interface Waiting {
  entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>;
  resolve: (r: JobFinishResult[]) => void;
  reject: (err: unknown) => void;
}

/** One slot's claim with no finish before it (its first, or its first after an idle wait) waiting for the next group commit. */
interface WaitingClaim {
  request: ClaimRequest;
  resolve: (c: Claim | null) => void;
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
 * A slot's claim with no finish to carry it (its first, or its first after an idle wait) is handed in
 * with `claim` and committed the same way, every claim waiting in one `Store.claimNextJobs`: the
 * slots of a worker that starts, or wakes to new work, claim in one commit instead of one each
 * (32 slots: 32 fsyncs in a row before the first call was sent, bench part b). A turn that holds
 * both kinds commits the finishes, then the claims: two transactions.
 *
 * A slot never acts on a claim before its commit: `finish` resolves with the slot's own
 * `FinishedJob` (its fenced result and its next claim) only after the transaction committed. An
 * entry whose own statements threw rejects with that error alone (the store rolled back to its
 * savepoint; the other entries are committed). When the transaction fails, every entry of it
 * rejects with that error and nothing of any of them was written; each slot then runs its own
 * fallback (job-life.ts `finishGroup`, `finishAlone`). Crash semantics are those of `finishJob`: an outcome
 * is durable before the claim taken with it is used.
 */
export class Committer {
  private waiting: Waiting[] = [];
  private claims: WaitingClaim[] = [];
  private committing = false;
  private scheduled = false;
  /** Transactions run so far (each one `Store.finishJobs` or `Store.claimNextJobs` call). */
  commits = 0;
  /** Finishes handed in so far. */
  handedIn = 0;

  constructor(private readonly store: Pick<Store, 'finishJobs' | 'claimNextJobs'>) {}

  /**
   * Hands in one slot's finish; resolves with its result once committed.
   * @throws (rejects with) the error of this entry's own statements, or of the whole transaction.
   */
  async finish(claim: Claim, finish: JobFinish): Promise<FinishedJob> {
    const [r] = await this.finishAll([{ claim, finish }]);
    if (r?.ok) return r.finished;
    throw r ? r.error : new Error('group commit returned no result for an entry');
  }

  /**
   * Hands in several finishes of one slot at once (a co-asked group: every job of it that ended
   * complete or drop, the slot's own job with its next claim), committed in the same transaction
   * as each other; resolves once committed, with one result per entry in the order given (an
   * entry whose own statements threw is `{ ok: false }`, the others are written).
   * @throws (rejects with) the whole transaction's error: nothing of any entry was written.
   */
  finishAll(entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>): Promise<JobFinishResult[]> {
    this.handedIn += entries.length;
    return new Promise<JobFinishResult[]>((resolve, reject) => {
      this.waiting.push({ entries, resolve, reject });
      this.schedule();
    });
  }

  /**
   * Hands in one slot's claim (as `Store.claimNextJob` claims); resolves with the job claimed, or
   * null when none is claimable, once committed.
   * @throws (rejects with) the error of the claims' transaction, or of this claim alone (PostgreSQL).
   */
  claim(request: ClaimRequest): Promise<Claim | null> {
    return new Promise<Claim | null>((resolve, reject) => {
      this.claims.push({ request, resolve, reject });
      this.schedule();
    });
  }

  /** Finishes and claims handed in and not yet committed (for tests and metrics). */
  get pending(): number {
    return this.waiting.reduce((n, w) => n + w.entries.length, this.claims.length);
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
    if (this.committing || (this.waiting.length === 0 && this.claims.length === 0)) return;
    this.committing = true;
    const batch = this.waiting;
    const claims = this.claims;
    this.waiting = [];
    this.claims = [];
    if (batch.length) await this.commitFinishes(batch);
    if (claims.length) await this.commitClaims(claims);
    this.committing = false;
    // What was handed in during this commit goes at once: its slots have waited a whole commit already.
    if (this.waiting.length || this.claims.length) void this.commitWaiting();
  }

  private async commitFinishes(batch: readonly Waiting[]): Promise<void> {
    let results: JobFinishResult[] | undefined;
    let failure: { error: unknown } | undefined;
    try {
      results = await this.commit(batch);
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

  private async commitClaims(claims: readonly WaitingClaim[]): Promise<void> {
    try {
      const results = await this.store.claimNextJobs(claims.map((c) => c.request));
      this.commits++;
      claims.forEach((c, i) => {
        const r = results[i];
        if (r?.ok) c.resolve(r.claim);
        else c.reject(r ? r.error : new Error('group commit returned no result for a claim'));
      });
    } catch (error) {
      for (const c of claims) c.reject(error);
    }
  }

  /** Runs one batch in one transaction. */
  private commit(batch: readonly Waiting[]): Promise<JobFinishResult[]> {
    return this.store.finishJobs(batch.flatMap((w) => w.entries));
  }
}
