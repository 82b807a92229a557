import type {
  AnswerKey,
  Claim,
  ClaimCheck,
  ClaimRequest,
  ClaimResult,
  FinishedJob,
  ItemForEvaluation,
  JobFinish,
  JobFinishResult,
  Liveness,
  NewDecision,
  OutcomeResult,
  SpendRecord,
} from './store.js';
import type { SurfacingContext } from './events.js';

/**
 * The job lifecycle (DESIGN §3 the queue, §7 evaluation): the store calls one job's life makes,
 * from its claim to its fenced outcome, and nothing else. The worker's slots and the runner
 * (src/runner/job-life.ts) see the store only through this; each dialect implements every method
 * explicitly (SQLite: `SqliteStore`, src/store/sqlite/sqlite-store.ts; Postgres: `PgStore`,
 * src/store/postgres/pg-store.ts), so "go to definition" from the runner lands on the code that
 * runs. test/store/conformance.ts holds both dialects to the same tests.
 *
 * Every outcome is fenced by the claim's token: a claim another claimant took since (its lease ran
 * out) gets `lost` and writes nothing; a claim whose item was written since (the generation moved)
 * gets `superseded`, which only clears the claim so the newer generation runs.
 * Durations are milliseconds; times come from the store's clock (`now`).
 */
export interface JobStore {
  /** Epoch milliseconds, from the store's clock. */
  now(): Promise<number>;

  // ------------------------------------------------------------- claims
  /**
   * Claims the claimable job with the lowest (priority, fair_tag, enqueued_at, key), counting the
   * attempt, under a lease of `leaseMs`. The fair tag interleaves workspaces, so one busy
   * workspace's backlog cannot starve the others. A job found at the abandon limit is parked
   * instead and the next one tried; a job whose claimant died below the limit is put back for its
   * abandon backoff (DESIGN §3, "Abandons") and the next one tried.
   */
  claimNextJob(
    workerId: string,
    leaseMs: number,
    abandonLimit: number,
    /** Sets whose jobs are passed over (a set cooling off after a rejected schema, DESIGN §3.8). */
    skipSets?: readonly string[],
    /** Live work only, and the co-asking partners to claim with the job (see `ClaimRequest`). */
    opts?: Pick<ClaimRequest, 'liveOnly' | 'coAsk'>,
  ): Promise<Claim | null>;
  /**
   * Several `claimNextJob`s at once, in the order given, each as `claimNextJob` claims (group
   * commit, DESIGN §10.6: the claims of slots that start or wake together). SQLite: one write
   * transaction, so one commit (one fsync) for all; a failure of it fails every request and claims
   * nothing. PostgreSQL: one claim statement each, one after another (sent together they
   * skip each other's locked rows), each request its own result.
   * @returns one result per request, in order.
   */
  claimNextJobs(requests: readonly ClaimRequest[]): Promise<ClaimResult[]>;
  /**
   * Claims the other owed jobs of `claim`'s item in `sets` that are claimable now, under the same
   * lease (milliseconds), counting their attempts, so one call can ask their keys with the
   * claimed job's (co-asking, DESIGN §7.2). Rows held by another claimant, not due, or at the
   * abandon limit are left alone. @returns the sibling claims in set-name order.
   */
  claimSiblingJobs(
    claim: Claim,
    sets: readonly string[],
    o: { leaseMs: number; abandonLimit: number },
  ): Promise<Claim[]>;

  // ------------------------------------------------------------- outcomes (fenced by the claim token)
  /** Extends the lease; false when the claim was lost (the runner must stop sending). */
  renewLease(claim: Claim, leaseMs: number): Promise<boolean>;
  completeJob(claim: Claim): Promise<OutcomeResult>;
  /**
   * Completes the job as `completeJob` does, and in the same transaction stores the last call's
   * answers and spend and claims the slot's next job (see `JobFinish`): the worker's steady state
   * commits once per evaluation. On any error nothing of it is written (the caller can store the
   * answers and complete separately).
   */
  finishJob(claim: Claim, f: JobFinish): Promise<FinishedJob>;
  /**
   * Several `finishJob`s in one write transaction (group commit, DESIGN §10.6), each entry in its
   * own savepoint: an entry whose statements throw reports `{ ok: false, error }` and nothing of it
   * is written; the others are written as `finishJob` writes them, in the order given.
   * @returns one result per entry, in order.
   * @throws when the transaction fails (BEGIN or COMMIT, a storage error): nothing of any entry is written.
   */
  finishJobs(entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>): Promise<JobFinishResult[]>;
  dropJob(claim: Claim, reason: string): Promise<OutcomeResult>;
  /** Permanent refusal: refusals += 1 and back off, or park at `refusalLimit`. */
  refuseJob(
    claim: Claim,
    o: { backoffMs: number; error: string; refusalLimit: number },
  ): Promise<OutcomeResult | 'parked'>;
  parkJob(claim: Claim, reason: string): Promise<OutcomeResult>;
  /** Transient failure: back off (`not_before >= now + backoffMs`), never drop; resets `defers`. */
  failJob(claim: Claim, o: { backoffMs: number; error: string }): Promise<OutcomeResult>;
  /**
   * Defer without counting an attempt, until at least now + `delayMs`, and count the defer
   * (`defers += 1`). A job that already has `deferLimit` consecutive defers is recorded as a
   * transient fail instead (DESIGN §3.7): the attempt counts, `defers` resets to 0 and
   * `not_before >= now + max(failBackoffMs, delayMs)`; the result is then `failed`.
   */
  deferJob(
    claim: Claim,
    o: { delayMs: number; reason: string; deferLimit: number; failBackoffMs: number },
  ): Promise<OutcomeResult | 'failed'>;
  /**
   * Release without counting an attempt. Claimable at once, or from now + `holdMs` when given (a
   * set cooling off after a rejected schema, DESIGN §3.8). `defers` is kept: a release says
   * nothing about the provider's answer.
   */
  releaseJob(claim: Claim, o?: { holdMs?: number; error?: string }): Promise<OutcomeResult>;

  // ------------------------------------------------------------- evaluation reads and answers
  /**
   * Item, collection, workspace, live comments and links; null when any row is missing. With
   * `links: false` the links are not read and `links` is empty: for a caller whose states show none
   * (DESIGN §5: only the item state of a WithLinks set holds links), so a group of sets without
   * links pays no read for them. @defaultValue links true
   */
  loadItemForEvaluation(itemId: string, o?: { links?: boolean }): Promise<ItemForEvaluation | null>;
  /** The last statement before a send; with `claim`, also whether the claim still holds at its generation. */
  checkLiveness(itemId: string, claim?: Claim): Promise<Liveness>;
  /**
   * `checkLiveness` of a claim with the lease it has left, in one read (DESIGN §7.6): the
   * runner's read before a call, which renews the lease only when less than half is left.
   */
  checkClaim(claim: Claim): Promise<ClaimCheck>;
  /**
   * `checkClaim` of every claim of one provider call (a co-asked group's, DESIGN §7.6) in one
   * read: on PostgreSQL one statement, whatever the number of claims.
   * @returns one ClaimCheck per claim, in the order given.
   */
  checkClaims(claims: readonly Claim[]): Promise<ClaimCheck[]>;
  /** Which of the wanted keys already have a row at exactly that key. */
  answeredKeys(itemId: string, questionSet: string, keys: AnswerKey[]): Promise<Set<string>>;
  /**
   * `answeredKeys` for several sets of one item in one read (a co-asked group's idempotency
   * read, DESIGN §7 step 5): on PostgreSQL one statement, whatever the number of sets and keys.
   * @returns one Set of stored keys per entry, in the order given.
   */
  answeredKeysOfSets(
    itemId: string,
    wanted: ReadonlyArray<{ questionSet: string; keys: readonly AnswerKey[] }>,
  ): Promise<Array<Set<string>>>;
  /**
   * Inserts one call's answers in one transaction; conflicts do nothing. With `surfacing` (the rows
   * must then be of one item and set), each inserted noul whose surfacing moves (DESIGN §8.2:
   * p ≥ threshold, a key that surfaced keeps surfacing down to threshold − hysteresis; a person's
   * value in force decides alone, §8.1) appends a `surfacing_changes` row and queues a
   * `decision.surfaced` or `decision.cleared` event per enabled target in the same transaction
   * (DESIGN §16.2); a conflicting row moves nothing. @returns rows inserted.
   * @throws TypeError when `surfacing` is given for rows of several items or sets.
   */
  insertDecisions(rows: NewDecision[], surfacing?: SurfacingContext): Promise<number>;
  /** Stores one call's spend row (added to its hour bucket). */
  recordSpend(r: SpendRecord): Promise<void>;
}
