import { GroupCommit, type GroupLane } from '../store/group-commit.js';
import type { Claim, ClaimRequest, ClaimResult, FinishedJob, JobFinish, JobFinishResult } from '../store/store.js';
import type { Store } from '../store/whole-store.js';

/**
 * Group commit (DESIGN §10.6): one per worker process and store. Each slot hands in its finish
 * (the last call's answers and spend, the fenced completion, and its next-claim request) with
 * `finish`, which resolves once that finish is committed. Everything handed in while no commit runs
 * is committed together in ONE transaction (`Store.finishJobs`; on PostgreSQL one statement per
 * entry, sent together) at the next turn of the event loop
 * (a `setImmediate`: the slots whose calls returned in the same turn all hand in first); whatever
 * is handed in while a commit runs is committed as soon as it ends. So a process of 16 slots
 * commits (and, at `synchronous = FULL`, fsyncs) once for many jobs instead of once per job. The
 * scheduling is `GroupCommit` (store/group-commit.ts), the one SQLite's write doors use too.
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
  private readonly group = new GroupCommit();
  private readonly finishes: GroupLane<{ claim: Claim; finish: JobFinish }, JobFinishResult> = this.group.lane(
    (entries) => this.commit(entries),
  );
  private readonly claims: GroupLane<ClaimRequest, ClaimResult> = this.group.lane((requests) =>
    this.store.claimNextJobs(requests),
  );
  /** Finishes handed in so far. */
  handedIn = 0;

  constructor(private readonly store: Pick<Store, 'finishJobs' | 'claimNextJobs'>) {}

  /** Transactions run so far (each one `Store.finishJobs` or `Store.claimNextJobs` call). */
  get commits(): number {
    return this.group.commits;
  }

  /**
   * Hands in one slot's finish; resolves with its result once committed.
   * @throws (rejects with) the error of this entry's own statements, or of the whole transaction.
   */
  async finish(claim: Claim, finish: JobFinish): Promise<FinishedJob> {
    this.handedIn++;
    const r = await this.finishes.handInOne({ claim, finish });
    if (r.ok) return r.finished;
    throw r.error;
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
    return this.finishes.handIn(entries);
  }

  /**
   * Hands in one slot's claim (as `Store.claimNextJob` claims); resolves with the job claimed, or
   * null when none is claimable, once committed.
   * @throws (rejects with) the error of the claims' transaction, or of this claim alone (PostgreSQL).
   */
  async claim(request: ClaimRequest): Promise<Claim | null> {
    const r = await this.claims.handInOne(request);
    if (r.ok) return r.claim;
    throw r.error;
  }

  /** Finishes and claims handed in and not yet committed (for tests and metrics). */
  get pending(): number {
    return this.group.pending;
  }

  /** Runs one batch of finishes (every slot's that was waiting) in one transaction. */
  private commit(entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>): Promise<JobFinishResult[]> {
    return this.store.finishJobs(entries);
  }
}
