import type { ItemRow } from '../tracker-rows.js';
import type { NewDecision } from './store.js';

export interface DecisionRow extends NewDecision {
  id: number;
  evaluatedAt: number;
}

/** One item as the drift sweep reads it (`scanItemsForDrift`). */
export interface DriftScanItem {
  item: ItemRow;
  /**
   * The latest stored row per question key of the set (per-comment keys included): its question
   * hash, state version, and when it was stored (epoch ms; the expiry sweep, DESIGN §5.2).
   */
  latest: Array<{ questionKey: string; questionHash: string; stateVersion: number; evaluatedAt: number }>;
  /** Ids of the newest 10 live comments, oldest first; [] unless `withComments`. */
  commentIds: string[];
  /** The item's job of this set, if one exists. */
  job: 'owed' | 'parked' | null;
}

/** A stored answer that a newer row of the same (item, set, key) supersedes (retention). */
export interface SupersededDecision {
  id: number;
  itemId: string;
  questionSet: string;
  questionKey: string;
  evaluatedAt: number;
}

/**
 * The stored answers (DESIGN §2 item_decisions; statements in sql/decisions.ts, sql/drift.ts,
 * sql/retention.ts): the reads of answers, the drift sweep's walk, and retention's pruning of
 * superseded rows. Answers are written by one job's life (`insertDecisions`, `finishJob`).
 */
export interface DecisionStore {
  /** Every stored answer of an item (all sets, or only `questionSet`'s), oldest first. */
  listDecisions(itemId: string, questionSet?: string): Promise<DecisionRow[]>;
  /** Stored answers of a set within a workspace (latest per key and any matching keys are picked by the reader). */
  listWorkspaceDecisions(workspaceId: string, questionSet: string): Promise<DecisionRow[]>;
  countDecisions(): Promise<number>;
  /**
   * The drift sweep's walk: live items of a workspace with an id after `afterItemId` (all when
   * null), in id order, at most `limit`, each with the question hash of its latest row per key of
   * `questionSet`, its job state for that set, and (with `withComments`) the ids of its newest 10
   * live comments. One read; no lock held between calls.
   */
  scanItemsForDrift(q: {
    workspaceId: string;
    questionSet: string;
    afterItemId: string | null;
    limit: number;
    withComments: boolean;
  }): Promise<DriftScanItem[]>;
  /**
   * Retention's walk: rows with id > `afterId`, evaluated more than `olderThanMs` milliseconds
   * ago, that a newer row of the same (item, set, key) supersedes; in id order, at most `limit`.
   * The latest row per key is never listed.
   */
  listSupersededDecisions(q: { olderThanMs: number; afterId: number; limit: number }): Promise<SupersededDecision[]>;
  /**
   * Deletes these answer rows in one short write transaction, each only while a newer row of its
   * (item, set, key) still exists, so the latest row per key survives any caller. Callers pass
   * small batches (hundreds) so the write lock stays short. @returns rows deleted.
   */
  deleteDecisions(ids: readonly number[]): Promise<number>;
}
