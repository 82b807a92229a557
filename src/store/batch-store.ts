import type { Question } from '../decision/questions.js';
import type { SurfacingContext } from './events.js';
import type { Claim, NewDecision, SpendRecord } from './store.js';

/** A provider batch as this database records it (`provider_batches`). Times are epoch ms. */
export interface ProviderBatchRow {
  /** Ours; every custom id of the batch starts with it. */
  id: string;
  provider: string;
  model: string;
  /** The provider's id; null while `submitting` (the submit has not returned, or the process died before recording it). */
  providerBatchId: string | null;
  status: 'submitting' | 'in_progress' | 'ended' | 'done';
  requestCount: number;
  createdAt: number;
  submittedAt: number | null;
  expiresAt: number | null;
  endedAt: number | null;
  polledAt: number | null;
  /** How it ended for us (`results`, `expired`, `canceled`, `not_submitted`, `lost`), once `done`. */
  outcome: string | null;
}

/** A batch about to be submitted: its id (see `ProviderBatchRow.id`), provider and model. */
export interface NewProviderBatch {
  id: string;
  provider: string;
  model: string;
}

/** Fields of a batch row to change. */
export type ProviderBatchPatch = Partial<
  Pick<
    ProviderBatchRow,
    'providerBatchId' | 'status' | 'submittedAt' | 'expiresAt' | 'endedAt' | 'polledAt' | 'outcome'
  >
>;

/**
 * What one batch request asked, kept until its result is stored (DESIGN §7.3): the state (hash,
 * version, parts) and, per job co-asked in it, the set's stored keys, fingerprints, questions,
 * surfacing settings and the job's generation at assembly.
 */
export interface BatchPlan {
  stateHash: string;
  stateVersion: number;
  stateParts: Readonly<Record<string, string>>;
  stateTruncated: boolean;
  explain: boolean;
  itemSeq: number;
  ref: string;
  /** Estimated input tokens and the output ceiling of the request, as a call's permit would take them. */
  estimate: { inputTokens: number; maxOutputTokens: number };
  /** The request's reservation against the daily token cap (DESIGN §10.3), when one is set; its result or the batch's close settles it. */
  reservationId?: string | null;
  parts: Array<{
    questionSet: string;
    generation: number;
    /** [stored key, question key] pairs. */
    storedKeys: Array<[string, string]>;
    fingerprints: Record<string, string>;
    questions: Record<string, Question>;
    threshold: number;
    hysteresis: number;
    unsurfaced: string[];
  }>;
}

/** One request of a batch to record with it. */
export interface NewBatchRequest {
  customId: string;
  workspaceId: string;
  itemId: string;
  plan: BatchPlan;
}

/** A recorded request whose result is not stored yet. */
export interface BatchRequestRow extends NewBatchRequest {
  batchId: string;
}

/**
 * What a batch result does to one of its jobs, applied only while the job is still batched in
 * that batch: `complete`/`drop` delete it; `fail` re-owes it after `backoffMs` (the attempt was
 * counted at assembly); `refuse` counts a refusal and parks at `refusalLimit`; `release` re-owes
 * it at once, the attempt given back.
 */
export interface BatchJobOutcome {
  itemId: string;
  questionSet: string;
  outcome: 'complete' | 'drop' | 'fail' | 'refuse' | 'release';
  backoffMs?: number;
  error?: string;
  refusalLimit?: number;
}

/**
 * One request's result to store (`Store.storeBatchResult`). With answers, the item's liveness is
 * checked in the storing transaction: an item (or collection) deleted since keeps none of them and
 * its jobs drop; a deleted workspace's jobs are released.
 */
export interface BatchResultWrite {
  itemId: string;
  answers: Array<{ decisions: NewDecision[]; surfacing: SurfacingContext }>;
  /** The request's daily-cap reservation (`BatchPlan.reservationId`), settled by this spend. */
  reservationId?: string | null;
  spend: SpendRecord[];
  jobs: BatchJobOutcome[];
}

/**
 * Provider batches (DESIGN §7.3–7.5; statements in sql/batches.ts): claiming backfill work for a
 * batch, recording it, storing its results and closing it, so nothing strands in a batch.
 */
export interface BatchStore {
  /**
   * Claims up to `limit` due owed jobs at backfill priority (≥ 1) for a provider batch (DESIGN
   * §7.3), under a lease of `leaseMs` while it is assembled, counting their attempts; jobs at
   * the abandon limit are parked instead. @returns the claims, by item then set.
   */
  claimBatchJobs(
    workerId: string,
    o: { leaseMs: number; limit: number; abandonLimit: number; skipSets?: readonly string[] },
  ): Promise<Claim[]>;
  /**
   * Records a batch before its submit: the batch row (`submitting`), its requests, and its claimed
   * jobs moved to `batched`, in one transaction.
   * @throws BatchClaimLost (store/sql/batches.ts) when a claim was lost; nothing is written then.
   */
  recordBatch(b: NewProviderBatch, requests: readonly NewBatchRequest[], claims: readonly Claim[]): Promise<void>;
  updateProviderBatch(id: string, p: ProviderBatchPatch): Promise<void>;
  /** Batch rows, oldest first; only those in `statuses` when given. */
  listProviderBatches(statuses?: readonly ProviderBatchRow['status'][]): Promise<ProviderBatchRow[]>;
  /** A batch's requests whose results are not stored yet. */
  listBatchRequests(batchId: string): Promise<BatchRequestRow[]>;
  /**
   * Jobs of `batchId`, one read: `batched`, those still batched in it; `named`, those naming it in
   * any state (batched, or re-owed by a write since: the result still serves them), 0 once
   * `jobs retry` / `jobs drop` took every job out (DESIGN §7.5).
   */
  batchJobCounts(batchId: string): Promise<{ batched: number; named: number }>;
  /**
   * Stores one request's result (answers, spend, its jobs' outcomes) and deletes the request, in
   * one transaction; a request already stored does nothing. @returns answers inserted.
   */
  storeBatchResult(batchId: string, customId: string, r: BatchResultWrite): Promise<number>;
  /**
   * Ends a batch: every job still batched in it re-owed (claimable from now + `holdMs`, ms; default
   * at once) without counting the attempt,
   * its remaining requests deleted, the row `done` with `outcome`. @returns jobs re-owed.
   */
  closeBatch(batchId: string, outcome: string, error?: string, holdMs?: number): Promise<number>;
}
