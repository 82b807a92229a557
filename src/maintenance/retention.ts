import { setImmediate as yieldToOthers } from 'node:timers/promises';
import type { Logger } from '../log.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { ThroughputStore } from '../store/throughput.js';
import type { DecisionReader } from '../reads/reads.js';

/**
 * Retention (DESIGN §2): prunes superseded `item_decisions` rows in small batches. It keeps
 * - the latest row per (item, set, key) (the store never lists it, and its delete re-checks it);
 * - any row that is current (the row a read would show as current, judged by the reader, so an
 *   S1 → S2 → S1 state keeps the S1 answer that makes it current again);
 * - every row evaluated within the history window.
 *
 * Each batch is one read and one short write transaction, and the loop yields between batches,
 * so a write door waits at most one batch's delete. A state that moves back to an older row
 * between the check and the delete costs one re-ask, never a wrong answer.
 */

export interface PruneOptions {
  /** Rows evaluated within this many milliseconds are kept. @defaultValue 30 days (config `retentionHistoryMs`) */
  historyMs: number;
  /** Rows examined per batch (one read, one delete transaction). @defaultValue 200 */
  batchSize?: number;
  /** Stop after this many batches (a worker pass); undefined runs to the end. */
  maxBatches?: number;
  /** Count what would be deleted, delete nothing. */
  dryRun?: boolean;
  logger?: Logger;
}

export interface PruneReport {
  /** Superseded rows outside the history window that were examined. */
  examined: number;
  /** Rows kept because they are current. */
  keptCurrent: number;
  /** Rows deleted (or, with dryRun, that would be). */
  deleted: number;
  batches: number;
  /** The walk reached the end. */
  done: boolean;
}

/** Rows per retention batch (our choice): small, so each delete transaction, and the write lock it holds, stays short. */
const PRUNE_BATCH_SIZE = 200;

/**
 * Prunes superseded answer rows (see the file comment).
 * @param reader judges currency against the configured provider; it must not be a decisions-off reader.
 * @throws TypeError for a decisions-off reader.
 * @throws when the store fails; rows deleted before stay deleted, and a re-run continues.
 */
export async function pruneDecisions(
  store: Pick<DecisionStore, 'deleteDecisions' | 'listSupersededDecisions'>,
  reader: DecisionReader,
  o: PruneOptions,
): Promise<PruneReport> {
  // A decisions-off reader calls nothing current: pruning with it would delete current answers.
  if (!reader.enabled)
    throw new TypeError('pruneDecisions needs a reader that judges currency (a configured provider, not none)');
  const batchSize = o.batchSize ?? PRUNE_BATCH_SIZE;
  const report: PruneReport = { examined: 0, keptCurrent: 0, deleted: 0, batches: 0, done: false };
  let afterId = 0;
  while (o.maxBatches === undefined || report.batches < o.maxBatches) {
    const rows = await store.listSupersededDecisions({ olderThanMs: o.historyMs, afterId, limit: batchSize });
    if (rows.length === 0) {
      report.done = true;
      break;
    }
    report.batches++;
    report.examined += rows.length;
    const current = new Set<number>();
    // (item, set) pairs the reader could not judge: their questions or state were unreadable, so
    // "not current" there means "unknown", and unknown is kept (DESIGN §1 principle 7).
    const unjudged = new Set<string>();
    for (const itemId of new Set(rows.map((r) => r.itemId))) {
      for (const d of await reader.decisions(itemId)) {
        if (d.current) current.add(d.rowId);
        if (d.staleReason === 'not_compared') unjudged.add(`${itemId}\u0000${d.questionSet}`);
      }
    }
    const doomed = rows
      .filter((r) => !current.has(r.id) && !unjudged.has(`${r.itemId}\u0000${r.questionSet}`))
      .map((r) => r.id);
    report.keptCurrent += rows.length - doomed.length;
    report.deleted += o.dryRun ? doomed.length : await store.deleteDecisions(doomed);
    afterId = rows[rows.length - 1].id;
    await yieldToOthers();
  }
  o.logger?.info(
    {
      examined: report.examined,
      keptCurrent: report.keptCurrent,
      deleted: report.deleted,
      dryRun: !!o.dryRun,
      done: report.done,
    },
    'retention pass',
  );
  return report;
}

/**
 * Deletes the job_throughput minutes older than the history window (DESIGN §2), with the same
 * pass as the answers: one statement, the chart reads at most the last day. @returns rows deleted.
 * @throws when the store fails.
 */
export async function pruneThroughput(
  store: Pick<ThroughputStore, 'pruneThroughput'>,
  historyMs: number,
  logger?: Logger,
): Promise<number> {
  const deleted = await store.pruneThroughput(historyMs);
  if (deleted > 0) logger?.info({ deleted }, 'throughput minutes pruned');
  return deleted;
}
