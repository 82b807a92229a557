import type { CollectionOweStep } from './collection-owe.js';

/** Job priorities: live writes are claimed before backfill and drift-sweep work. */
export const PRIORITY_LIVE = 0;
export const PRIORITY_BACKFILL = 1;

/** How a write owes work. Live writes: priority 0 with the quiet period; imports: backfill, no quiet period. */
export interface OweOptions {
  /** @defaultValue PRIORITY_LIVE */
  priority?: number;
  /** Apply each set's quiet period. @defaultValue true */
  quietPeriod?: boolean;
  /**
   * Apply each set's re-ask debounce (latest stored answer + `reaskDebounce`). The drift sweep and
   * `verdict reask` pass false: their re-asks are not edits to coalesce, and they are bounded by
   * the sweep's own rate. @defaultValue true
   */
  reaskDebounce?: boolean;
}

export interface JobRow {
  itemId: string;
  questionSet: string;
  workspaceId: string;
  priority: number;
  generation: number;
  enqueuedAt: number;
  notBefore: number;
  claimedBy: string | null;
  claimToken: string | null;
  leaseExpiresAt: number | null;
  attempts: number;
  refusals: number;
  abandons: number;
  /** Consecutive defers since the last enqueue or other recorded outcome (DESIGN §3.7). */
  defers: number;
  /** `batched`: in a provider batch (DESIGN §7.3), not claimable until its result is stored or the batch re-owes it. */
  state: 'owed' | 'parked' | 'batched';
  /** The provider batch (`provider_batches.id`) a batched job is in; may outlive it on a job a write re-owed. */
  batchId: string | null;
  lastError: string | null;
  lastErrorAt: number | null;
  /** Fair-queuing tag: the claim order across workspaces after priority (set once, at insert). */
  fairTag: number;
  /** Epoch ms of the latest enqueue; 0 on rows stored before it was kept (DESIGN §3.4). */
  owedAt: number;
}

export interface JobFilter {
  questionSet?: string;
  state?: 'owed' | 'parked' | 'batched';
  workspaceId?: string;
  itemId?: string;
  /** `listJobs` only: jobs whose last error was recorded within this many milliseconds. */
  errorWithinMs?: number;
  limit?: number;
}

export interface QueueStats {
  /** Rows by state: owed (due now, waiting, in flight) and parked. */
  owedDue: number;
  owedWaiting: number;
  inFlight: number;
  parked: number;
  /** In a provider batch (DESIGN §7.3): neither due nor in flight here; their results come from the batch. */
  batched: number;
  /** Age in ms of the oldest owed job (now − enqueued_at), or null. */
  oldestOwedAgeMs: number | null;
  /** Epoch ms when the next waiting job becomes due, or null. */
  nextDueAt: number | null;
  /** Epoch ms when the last live lease of the jobs in flight ends, or null when none is in flight. */
  leasesEndAt: number | null;
  bySet: Array<{ questionSet: string; state: string; count: number }>;
}

/** Where the jobs of one backfill chunk stand (DESIGN §11: a chunk is drained when none of its jobs is claimable or in flight). */
export interface ChunkJobCounts {
  /** Owed, due, no live lease, workspace live: a runner may claim these now. */
  claimable: number;
  /** Under a live lease. */
  inFlight: number;
  /** Owed but not claimable: backing off, debounced, deferred, or held by a deleted workspace. */
  waiting: number;
  parked: number;
  /** Pairs with no job row: completed, dropped, or never owed. */
  gone: number;
}

/** Jobs of one question set by state (`status`). Times are epoch milliseconds. */
export interface SetJobCounts {
  questionSet: string;
  due: number;
  waiting: number;
  inFlight: number;
  parked: number;
  /** Jobs with a last error that counts as failing: parked, or retried after an attempt or refusal. */
  failing: number;
  /** enqueued_at of the oldest owed job, or null. */
  oldestOwedAt: number | null;
  /** The newest last_error_at among failing jobs, or null. */
  lastErrorAt: number | null;
}

/**
 * The owed-job queue apart from one job's life (DESIGN §3; statements in sql/owe.ts, sql/jobs.ts,
 * sql/operations.ts): owing without a tracker write, the collection-change continuation, and the
 * operator's reads and passes over jobs (`jobs list/retry/drop`, `status`, backfill chunks).
 */
export interface QueueStore {
  /**
   * Owes (item, set) pairs without any tracker write: backfill, drift sweep, reask.
   * With `insertOnly`, existing rows are left alone (backfill never un-parks or resets).
   * @returns the number of rows inserted or updated.
   */
  oweJobs(
    pairs: Array<{ itemId: string; questionSet: string }>,
    opts: OweOptions & {
      insertOnly?: boolean;
      /** A `verdict_meta` row written in the same transaction (the backfill cursor), so a cursor never runs ahead of the work it records. */
      meta?: { key: string; value: string };
    },
  ): Promise<number>;
  /**
   * Owes the next chunk (at most 1,000 items) of a pending collection change, the one that waited
   * longest, in one transaction with its continuation's cursor (DESIGN §3.3). The worker calls it
   * until `pending` is 0; a crash between calls loses nothing (the cursor commits with its chunk).
   */
  advanceCollectionOwes(): Promise<CollectionOweStep>;
  getJob(itemId: string, questionSet: string): Promise<JobRow | null>;
  listJobs(f: JobFilter): Promise<JobRow[]>;
  /** `jobs retry`: owed, counters 0, not_before now. @returns rows changed. */
  retryJobs(f: JobFilter): Promise<number>;
  /** `jobs drop`: deletes matching rows that are not in flight. @returns rows deleted. */
  dropJobs(f: JobFilter): Promise<number>;
  queueStats(): Promise<QueueStats>;
  /** Where the jobs of these (set, item) pairs stand; `itemIds` may be empty. */
  countChunkJobs(questionSet: string, itemIds: readonly string[]): Promise<ChunkJobCounts>;
  /** Jobs by set and state, with failing counts and the oldest owed time, by set name; one workspace's jobs only when `workspaceId` is given. */
  jobCountsBySet(workspaceId?: string): Promise<SetJobCounts[]>;
}
