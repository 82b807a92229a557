import type { AccessStore } from './access-store.js';
import type { ActionStore } from './actions.js';
import type { BatchStore } from './batch-store.js';
import type { DecisionStore } from './decision-store.js';
import type { EventOutbox, SurfacingContext } from './events.js';
import type { MetaStore } from './meta-store.js';
import type { QueueStore } from './queue-store.js';
import type { SpendStore } from './spend-store.js';
import type { AnswerKey, Claim, ClaimCheck, ClaimRequest, FinishedJob, ItemForEvaluation, JobFinish, Liveness, NewDecision, OutcomeResult, SpendRecord } from './store.js';
import type { TrackerStore } from './tracker-store.js';
import type { ItemSearchReads } from './tracker-reads.js';
import type { HumanVerdictStore } from './verdicts.js';

/** The database's health and upkeep (DESIGN §10.1, §10.2): for /healthz, status, /metrics and the worker's idle checkpoint. */
export interface StorageHealth {
  /**
   * Why the database cannot take writes now, for /healthz (DESIGN §10.1): `database locked`,
   * `disk full`, `disk I/O error` (SQLite), `database unreachable` (Postgres); null once a write
   * (Postgres: any statement) succeeds again. Synchronous and cheap: read on every probe.
   */
  storageProblem(): string | null;
  /**
   * Storage upkeep for an idle moment and at most every minute while busy (DESIGN §10.2): on SQLite
   * `wal_checkpoint(TRUNCATE)`; nothing on Postgres (the server checkpoints its own log).
   * @returns the write-ahead log's size afterwards, bytes; null where the store has none to report.
   */
  checkpoint(): Promise<number | null>;
  /** The write-ahead log's size now, bytes (DESIGN §10.2: in status, doctor, /metrics); null on Postgres and `:memory:`. */
  walBytes(): Promise<number | null>;
}

/**
 * The whole Store: every SQL statement lives behind it (DESIGN §13). The runner, the CLI and
 * trackers see only it, or the parts of it they call; SQLite (`./sqlite/`) and Postgres (`./postgres/`) implement it,
 * and test/store/conformance.ts holds both to the same tests. Methods are async so both dialects
 * fit; the SQLite implementation does its work synchronously inside.
 *
 * Time: the store owns "now" (an injected clock on SQLite, the database's clock on Postgres).
 * Callers pass durations in milliseconds, never timestamps.
 *
 * It is the composition of one interface per concern (each in its own file beside this one); a
 * caller takes the part, or the `Pick` of it, that it calls. Only what opens, closes or hands on
 * the whole store takes `Store`.
 */
export interface Store
  extends TrackerStore,
    ItemSearchReads,
    QueueStore,
    BatchStore,
    DecisionStore,
    SpendStore,
    MetaStore,
    AccessStore,
    EventOutbox,
    HumanVerdictStore,
    ActionStore,
    StorageHealth {
  close(): Promise<void>;
  /**
   * Runs `fn` with a TrackerStore whose write doors all join one transaction: it commits when `fn`
   * resolves and rolls back, leaving no row and no owed job, when `fn` throws (the error is
   * rethrown). Inside `fn`, use `tx`, not this store. Called on a connection the host has already
   * opened a transaction on, it joins that transaction as a savepoint. How each dialect does it
   * (SQLite's connection mutex, Postgres' pooled client) is described on the implementations.
   */
  transaction<T>(fn: (tx: TrackerStore) => Promise<T>): Promise<T>;

  // ------------------------------------------------------------- one job's life (DESIGN §3, §7)
  /**
   * Claims the claimable job with the lowest (priority, fair_tag, enqueued_at, key), counting the
   * attempt, under a lease of `leaseMs`. The fair tag interleaves workspaces, so one busy
   * workspace's backlog cannot starve the others. A job found at the abandon limit is parked
   * instead and the next one tried.
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
   * Claims the other owed jobs of `claim`'s item in `sets` that are claimable now, under the same
   * lease (milliseconds), counting their attempts, so one call can ask their keys with the
   * claimed job's (co-asking, DESIGN §7.2). Rows held by another claimant, not due, or at the
   * abandon limit are left alone. @returns the sibling claims in set-name order.
   */
  claimSiblingJobs(claim: Claim, sets: readonly string[], o: { leaseMs: number; abandonLimit: number }): Promise<Claim[]>;
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
  dropJob(claim: Claim, reason: string): Promise<OutcomeResult>;
  /** Permanent refusal: refusals += 1 and back off, or park at `refusalLimit`. */
  refuseJob(claim: Claim, o: { backoffMs: number; error: string; refusalLimit: number }): Promise<OutcomeResult | 'parked'>;
  parkJob(claim: Claim, reason: string): Promise<OutcomeResult>;
  /** Transient failure: back off (`not_before >= now + backoffMs`), never drop; resets `defers`. */
  failJob(claim: Claim, o: { backoffMs: number; error: string }): Promise<OutcomeResult>;
  /**
   * Defer without counting an attempt, until at least now + `delayMs`, and count the defer
   * (`defers += 1`). A job that already has `deferLimit` consecutive defers is recorded as a
   * transient fail instead (DESIGN §3.7): the attempt counts, `defers` resets to 0 and
   * `not_before >= now + max(failBackoffMs, delayMs)`; the result is then `failed`.
   */
  deferJob(claim: Claim, o: { delayMs: number; reason: string; deferLimit: number; failBackoffMs: number }): Promise<OutcomeResult | 'failed'>;
  /**
   * Release without counting an attempt. Claimable at once, or from now + `holdMs` when given (a
   * set cooling off after a rejected schema, DESIGN §3.8). `defers` is kept: a release says
   * nothing about the provider's answer.
   */
  releaseJob(claim: Claim, o?: { holdMs?: number; error?: string }): Promise<OutcomeResult>;
  /** Item, collection, workspace, live comments and links; null when any row is missing. */
  loadItemForEvaluation(itemId: string): Promise<ItemForEvaluation | null>;
  /** The last statement before a send; with `claim`, also whether the claim still holds at its generation. */
  checkLiveness(itemId: string, claim?: Claim): Promise<Liveness>;
  /**
   * `checkLiveness` of a claim with the lease it has left, in one read (DESIGN §7.6): the
   * runner's read before a call, which renews the lease only when less than half is left.
   */
  checkClaim(claim: Claim): Promise<ClaimCheck>;
  /** Which of the wanted keys already have a row at exactly that key. */
  answeredKeys(itemId: string, questionSet: string, keys: AnswerKey[]): Promise<Set<string>>;
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
  recordSpend(r: SpendRecord): Promise<void>;
}
