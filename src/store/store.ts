import type { StateLink, TrailComment } from '../decision/state.js';
import type { CollectionRow, ItemRow } from '../tracker-rows.js';
import type { Usage } from '../usage.js';
import type { SurfacingContext } from './events.js';
import type { WorkspaceRow } from './tracker-reads.js';
import { ownCode, VerdictError } from '../errors.js';
import type { FinishOutcome } from './throughput.js';

/** The rows and results of one job's life (DESIGN §3, §7), and the errors every store call may throw. */

/** The live claim of one job, handed to every outcome as its fence. */
export interface Claim {
  itemId: string;
  questionSet: string;
  workspaceId: string;
  /** The job's generation at claim time; a later enqueue bumps it. */
  generation: number;
  claimToken: string;
  claimedBy: string;
  /** Claims since the last enqueue, counting this one. */
  attempts: number;
  refusals: number;
  abandons: number;
  /** Consecutive defers before this claim (DESIGN §3.7). */
  defers: number;
  priority: number;
  enqueuedAt: number;
  /** Jobs of the same item claimed with this one for co-asking (DESIGN §7.2; `ClaimRequest.coAsk`), under the same lease. */
  coAsked?: Claim[];
}

/**
 * What an outcome did:
 * - `applied`: the outcome took effect;
 * - `superseded`: a write landed during the evaluation (generation moved); only the claim was
 *   cleared and `not_before` recomputed, so the newer generation runs;
 * - `lost`: the claim token no longer matches (the lease ran out and another runner claimed the
 *   job, or the row is gone); nothing was changed.
 */
export type OutcomeResult = 'applied' | 'superseded' | 'lost';

/** What a claim asks for (see `Store.claimNextJob`): the claimant, its lease in milliseconds, the abandon limit, sets to pass over. */
export interface ClaimRequest {
  workerId: string;
  leaseMs: number;
  abandonLimit: number;
  /** Sets whose jobs are passed over (a set cooling off after a rejected schema, DESIGN §3.8). */
  skipSets?: readonly string[];
  /** Live work only (priority 0): backfill-priority jobs are left to a provider batch (DESIGN §7.3). */
  liveOnly?: boolean;
  /**
   * Co-asking (DESIGN §7.2): set → the sets whose jobs of the same item are claimed with it when
   * due (`Claim.coAsked`), in the claim's own statements, so another slot cannot take them between.
   */
  coAsk?: Readonly<Record<string, readonly string[]>>;
}

/**
 * What `Store.finishJob` does besides completing the job, in the same transaction: one commit
 * per evaluation in the steady state instead of five (a commit is one fsync at `synchronous=FULL`).
 */
export interface JobFinish {
  /**
   * The answers of the job's last call and that call's spend. They are stored whatever the fence
   * says (lost, superseded or applied): the call was paid for, and its answers are keyed by the
   * state they answer, so a newer generation finds them current or asks again (DESIGN §7 step 6).
   * With `reservationId` the spend settles that daily-cap reservation (DESIGN §10.3).
   */
  answers?: {
    decisions: NewDecision[];
    spend: SpendRecord;
    reservationId: string | null;
    /** The item's ref and the set's threshold: the answers' surfacing events are queued in the same transaction (DESIGN §16.2; see `insertDecisions`). */
    surfacing?: SurfacingContext;
  };
  /** Claims the slot's next job (as `claimNextJob` would) after the completion. */
  claimNext?: ClaimRequest;
  /** What the completion records in the throughput count (DESIGN §2 job_throughput). @defaultValue 'complete' */
  outcome?: FinishOutcome;
}

/** What `Store.finishJob` did: the completion's fenced result, the answers inserted, and the next claim (null when none was asked for or none is claimable). */
export interface FinishedJob {
  result: OutcomeResult;
  answersStored: number;
  next: Claim | null;
}

/**
 * One entry's result in `Store.finishJobs`: what its `finishJob` did, or the error its own
 * statements threw (nothing of that entry was written; the other entries are unaffected).
 */
export type JobFinishResult = { ok: true; finished: FinishedJob } | { ok: false; error: unknown };

/**
 * One request's result in `Store.claimNextJobs`: the job it claimed (null when none was claimable),
 * or the error that kept it from claiming (nothing was claimed for it).
 */
export type ClaimResult = { ok: true; claim: Claim | null } | { ok: false; error: unknown };

/** Everything the state builder needs about an item, read in one go. */
export interface ItemForEvaluation {
  item: ItemRow;
  collection: CollectionRow;
  workspace: WorkspaceRow;
  /** Live comments (tombstones excluded), any order. */
  comments: TrailComment[];
  /** Links to and from live items, as the state reads them. */
  links: StateLink[];
}

/** Liveness right before a send (DESIGN §7 step 6). */
/**
 * Liveness right before a send (DESIGN §7 step 6): `item_gone` (item or collection deleted),
 * `workspace_gone`, and, when the claim is given, `superseded` (a write bumped the job's
 * generation since the claim: the state built for this evaluation may hold text that was since
 * edited or deleted, so it must not be sent) or `lost` (the claim token no longer matches).
 */
export type Liveness = 'live' | 'item_gone' | 'workspace_gone' | 'superseded' | 'lost';

/** A claim's liveness and the lease it has left (`Store.checkClaim`). */
export interface ClaimCheck {
  liveness: Liveness;
  /** The lease's expiry less the store's now, ms: ≤ 0 once it ran out, -Infinity when the row holds no lease. */
  leaseLeftMs: number;
}

/** One answer row to insert (DESIGN §2 item_decisions). */
export interface NewDecision {
  workspaceId: string;
  itemId: string;
  questionSet: string;
  questionKey: string;
  kind: 'noul' | 'choice' | 'score';
  /** JSON text of the answer. */
  answer: string;
  confidence: number | null;
  provider: string;
  model: string;
  stateHash: string;
  questionHash: string;
  stateVersion: number;
  /** JSON text: part → hash. */
  stateParts: string;
  inputTokens: number;
  outputTokens: number;
  itemSeq: number;
  stateTruncated: boolean;
  rationale?: string | null;
  /**
   * The fingerprint context the question was asked under (`fingerprintContextText`): canonical
   * JSON of the configured model id, prompt-template version and effort. Null on older rows.
   */
  fingerprintContext?: string | null;
}

/** The currency key of one wanted answer: is there a row at exactly this key? */
export interface AnswerKey {
  questionKey: string;
  stateHash: string;
  questionHash: string;
  stateVersion: number;
}

export interface SpendRecord {
  questionSet: string;
  provider: string;
  model: string;
  /**
   * `ok` (answered), `defect` (a billed reply that cannot be valid), `aborted` (cut off by this
   * process's stop), `batch`, `eval`, `eval_failed`, or the job outcome a failed call led to
   * (`refuse`, `fail`, `defer`, `misconfigured`, ...: the words of `EvalOutcome`, DESIGN §3).
   */
  outcome: string;
  calls: number;
  usage: Usage;
}

/** Thrown by a write door when a row it needs does not exist. */
export class NotFound extends VerdictError {
  readonly code = 'not_found';
  constructor(what: string, id: string) {
    super(`${what} ${id} not found`);
  }
}

/**
 * Thrown by a tracker door when the write would break a uniqueness rule (a workspace slug, a
 * collection slug in its workspace, an item ref in its workspace, a fixed id): nothing was written.
 * The message names the table and columns, never a value.
 */
export class Conflict extends VerdictError {
  readonly code = 'conflict';
  constructor(readonly constraint: string) {
    super(`already exists: ${constraint}`);
  }
}

/**
 * Thrown by a tracker door or read when the database could not do it: the store is closed, the
 * server is unreachable, the disk is full, or another driver error. `driverCode` is the driver's
 * own code (`SQLITE_FULL`, `ECONNREFUSED`, a SQLSTATE) for diagnosis; the driver error is `cause`.
 */
export class StoreFailure extends VerdictError {
  readonly code = 'store_failure';
  constructor(
    message: string,
    readonly driverCode: string | null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Maps an error from a store call to one of Verdict's (DESIGN §16.1: every error a host sees
 * extends VerdictError): a unique violation (SQLite `SQLITE_CONSTRAINT_UNIQUE` or
 * `SQLITE_CONSTRAINT_PRIMARYKEY`, Postgres SQLSTATE 23505) becomes Conflict; any other driver or
 * runtime error becomes StoreFailure with the driver's code. Verdict's own errors pass unchanged.
 */
export function toStoreError(err: unknown): VerdictError {
  if (err instanceof VerdictError) return err;
  const e = err as { message?: unknown; constraint?: unknown; table?: unknown };
  const code = ownCode(err) ?? null;
  const message = typeof e.message === 'string' ? e.message : String(err);
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return new Conflict(
      message.replace(/^UNIQUE constraint failed: /, '').replace(/^PRIMARY KEY constraint failed: /, ''),
    );
  }
  if (code === '23505') return new Conflict(typeof e.constraint === 'string' ? e.constraint : 'a unique constraint');
  if (/connection is not open|pool after calling end|Client was closed/i.test(message)) {
    return new StoreFailure('the store is closed (verdict.close() was called)', code, { cause: err });
  }
  // SQLite's messages name tables and columns, never values, so they are kept; other drivers'
  // (Postgres' can quote an input value) are left to `cause`.
  const detail = code?.startsWith('SQLITE_') ? `: ${message}` : '';
  return new StoreFailure(`the database failed: ${code ?? (err as Error)?.name ?? 'error'}${detail}`, code, {
    cause: err,
  });
}

/** Thrown by a write door for bad input (fields not an object, unknown collection ...). */
export class InvalidWrite extends VerdictError {
  readonly code = 'invalid_write';
}
