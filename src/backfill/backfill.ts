import { systemClock } from '../clock.js';
import type { QuestionSet } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { PRIORITY_BACKFILL, type ChunkJobCounts } from '../store/queue-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { Store } from '../store/whole-store.js';
import { eligibleItems } from './eligible-items.js';

/**
 * Backfill (DESIGN §11): owe one set for every eligible item, or for one workspace, in chunks at
 * backfill priority, waiting for each chunk to drain before owing the next so live writes are
 * never starved.
 *
 * - Insert-only: an existing job row is left exactly as it is (never un-parked, never reset).
 * - A chunk is drained when none of its jobs is claimable or in flight. Parked jobs and jobs
 *   backing off (or debounced, or held by a deleted workspace) do not hold it up; they are counted.
 * - Resumable: the cursor (`verdict_meta`, key `backfillCursorKey`) is written in the same
 *   transaction as the chunk it records, and holds that chunk's item ids until it drains. A rerun
 *   first waits for that chunk, then owes the items after it; nothing is owed twice and nothing owed
 *   is forgotten. A finished backfill deletes its cursor, so the next run starts over (cheaply:
 *   answers already current are not asked again).
 * - Stoppable: aborting `signal` stops owing and waiting at once; owed jobs stay owed for any
 *   worker, and the cursor says where to resume.
 */

/** The stored cursor of one backfill (JSON in `verdict_meta`). */
export interface BackfillCursor {
  v: 1;
  set: string;
  /** The workspace backfilled, or null for every workspace. */
  workspaceId: string | null;
  /** The last item id owed; the next chunk starts after it (items are scanned in id order). */
  afterId: string | null;
  /** Item ids of the last chunk owed, kept until it drains. */
  pending: string[];
  /** Chunks owed so far, across runs. */
  chunks: number;
  /** Items owed so far, across runs. */
  owedItems: number;
  /** Epoch ms the backfill began (its first run). */
  startedAt: number;
}

/** The `verdict_meta` key of a backfill's cursor. */
export function backfillCursorKey(setName: string, workspaceId: string | null | undefined): string {
  return `backfill:${setName}:${workspaceId ?? '*'}`;
}

/** Reads a stored cursor; null when there is none. @throws SyntaxError for a row that is not a cursor. */
export async function loadBackfillCursor(
  store: Pick<MetaStore, 'getMeta'>,
  setName: string,
  workspaceId: string | null | undefined,
): Promise<BackfillCursor | null> {
  const raw = await store.getMeta(backfillCursorKey(setName, workspaceId));
  if (raw === null) return null;
  const c = JSON.parse(raw) as BackfillCursor;
  if (c?.v !== 1 || !Array.isArray(c.pending))
    throw new SyntaxError(`backfill cursor ${backfillCursorKey(setName, workspaceId)} is not a version-1 cursor`);
  return c;
}

/** Where a backfill stands, reported after every owe and every poll. */
export interface BackfillProgress {
  phase: 'owing' | 'draining' | 'finished' | 'interrupted';
  /** Eligible items in all: owed by earlier runs plus those found after the cursor at start. */
  total: number;
  /** Items owed so far, across runs. */
  owed: number;
  /** Items whose chunk has drained, across runs. */
  drained: number;
  /** The chunk being owed or drained (1-based, across runs). */
  chunk: number;
  /** The current chunk's job counts, while draining. */
  current: ChunkJobCounts | null;
}

/** What one run did. */
export interface BackfillReport {
  set: string;
  workspaceId: string | null;
  /** The cursor this run resumed from, or null when it started afresh. */
  resumedAfter: { afterId: string | null; owedItems: number; pending: number } | null;
  /** Eligible items in all (see BackfillProgress.total). */
  total: number;
  /** Items owed by this run. */
  owedThisRun: number;
  /** Job rows inserted by this run (an item that already had a job row of this set is owed without an insert). */
  insertedThisRun: number;
  /** Chunks this run owed, and chunks it saw drain (a resumed pending chunk counts as drained, not owed). */
  chunksOwed: number;
  chunksDrained: number;
  /** Counted as each chunk drained: jobs parked, and jobs waiting (backoff, debounce, deferral, held). */
  parked: number;
  waiting: number;
  /** Every eligible item was owed and its chunk drained; the cursor is gone. */
  finished: boolean;
  /** The signal stopped it; rerun the same command to resume from the cursor. */
  interrupted: boolean;
  /** Wall time of this run, ms. */
  durationMs: number;
}

export interface BackfillOptions {
  store: Pick<
    Store,
    | 'countChunkJobs'
    | 'deleteMeta'
    | 'getMeta'
    | 'getWorkspace'
    | 'listCollections'
    | 'listItems'
    | 'listWorkspaces'
    | 'now'
    | 'oweJobs'
  >;
  set: QuestionSet;
  /** One workspace; all when omitted. */
  workspaceId?: string;
  /** Items per chunk. DESIGN §11 default: the per-pass limit, 20. */
  chunkSize: number;
  /** Poll interval while a chunk drains, ms (the tick). */
  tickMs: number;
  logger: Logger;
  /** Stops the backfill (Ctrl-C). */
  signal?: AbortSignal;
  /** Forget a stored cursor and start from the first item. */
  restart?: boolean;
  onProgress?: (p: BackfillProgress) => void;
  /** Called right after a chunk is owed (a runner in the same process can wake up). */
  onChunkOwed?: () => void;
}

/** Wait between "still waiting" log lines while a chunk will not drain, ms. */
const WAITING_LOG_EVERY_MS = 60_000;

/** One backfill run. `notify()` makes a waiting poll happen now (a runner in this process finished a job). */
export class Backfill {
  /** Aborted by notify() to end the current (or the next) pause early; replaced after each use. */
  private nudge = new AbortController();

  constructor(private readonly o: BackfillOptions) {
    if (!Number.isInteger(o.chunkSize) || o.chunkSize < 1)
      throw new TypeError(`chunkSize must be an integer ≥ 1, got ${String(o.chunkSize)}`);
  }

  /** Re-polls the draining chunk now instead of at the next tick. */
  notify(): void {
    this.nudge.abort();
  }

  /**
   * Runs until every eligible item is owed and drained, or until the signal stops it.
   * @throws what the store throws (nothing owed is lost: the cursor commits with each chunk).
   */
  async run(): Promise<BackfillReport> {
    const { store, set, logger } = this.o;
    const started = Date.now();
    const wsId = this.o.workspaceId ?? null;
    const key = backfillCursorKey(set.name, wsId);
    if (this.o.restart) await store.deleteMeta(key);
    const stored = await loadBackfillCursor(store, set.name, wsId);
    let cursor: BackfillCursor = stored ?? {
      v: 1,
      set: set.name,
      workspaceId: wsId,
      afterId: null,
      pending: [],
      chunks: 0,
      owedItems: 0,
      startedAt: await store.now(),
    };
    let remaining = 0;
    for await (const _ of eligibleItems(store, set, { workspaceId: this.o.workspaceId, afterId: cursor.afterId }))
      remaining++;
    const report: BackfillReport = {
      set: set.name,
      workspaceId: wsId,
      resumedAfter: stored
        ? { afterId: stored.afterId, owedItems: stored.owedItems, pending: stored.pending.length }
        : null,
      total: cursor.owedItems + remaining,
      owedThisRun: 0,
      insertedThisRun: 0,
      chunksOwed: 0,
      chunksDrained: 0,
      parked: 0,
      waiting: 0,
      finished: false,
      interrupted: false,
      durationMs: 0,
    };
    let drained = cursor.owedItems - cursor.pending.length;
    const progress = (phase: BackfillProgress['phase'], current: ChunkJobCounts | null) =>
      this.o.onProgress?.({
        phase,
        total: report.total,
        owed: cursor.owedItems,
        drained,
        chunk: cursor.chunks,
        current,
      });
    logger.info(
      {
        set: set.name,
        workspaceId: wsId,
        total: report.total,
        resumed: stored !== null,
        owedBefore: cursor.owedItems,
        pending: cursor.pending.length,
        chunkSize: this.o.chunkSize,
      },
      stored ? 'backfill resuming from its cursor' : 'backfill starting',
    );

    const scan = eligibleItems(store, set, { workspaceId: this.o.workspaceId, afterId: cursor.afterId });
    try {
      for (;;) {
        if (cursor.pending.length) {
          const counts = await this.waitDrained(cursor, (c) => progress('draining', c));
          if (!counts) break;
          drained += cursor.pending.length;
          report.chunksDrained++;
          report.parked += counts.parked;
          report.waiting += counts.waiting;
          logger.info(
            {
              set: set.name,
              chunk: cursor.chunks,
              items: cursor.pending.length,
              drained,
              total: report.total,
              parked: counts.parked,
              waiting: counts.waiting,
              done: counts.gone,
            },
            'backfill chunk drained',
          );
          progress('draining', counts);
        }
        if (this.o.signal?.aborted) break;
        const ids: string[] = [];
        while (ids.length < this.o.chunkSize) {
          const next = await scan.next();
          if (next.done) break;
          ids.push(next.value.item.id);
        }
        if (ids.length === 0) {
          await store.deleteMeta(key);
          report.finished = true;
          break;
        }
        const nextCursor: BackfillCursor = {
          ...cursor,
          afterId: ids[ids.length - 1],
          pending: ids,
          chunks: cursor.chunks + 1,
          owedItems: cursor.owedItems + ids.length,
        };
        // No re-ask debounce: an item already answered at its current state completes at once
        // without a call, instead of holding its job (and `status`) for an hour.
        const inserted = await store.oweJobs(
          ids.map((itemId) => ({ itemId, questionSet: set.name })),
          {
            priority: PRIORITY_BACKFILL,
            quietPeriod: false,
            reaskDebounce: false,
            insertOnly: true,
            meta: { key, value: JSON.stringify(nextCursor) },
          },
        );
        cursor = nextCursor;
        report.insertedThisRun += inserted;
        report.chunksOwed++;
        report.owedThisRun += ids.length;
        progress('owing', null);
        this.o.onChunkOwed?.();
      }
    } finally {
      await scan.return(undefined);
    }
    report.interrupted = !report.finished;
    report.durationMs = Date.now() - started;
    progress(report.finished ? 'finished' : 'interrupted', null);
    logger.info(
      {
        set: set.name,
        workspaceId: wsId,
        owedThisRun: report.owedThisRun,
        inserted: report.insertedThisRun,
        chunks: report.chunksOwed,
        parked: report.parked,
        waiting: report.waiting,
        ms: report.durationMs,
      },
      report.finished ? 'backfill finished' : 'backfill stopped; rerun to resume from the cursor',
    );
    return report;
  }

  /** Polls the pending chunk every tick (or on notify) until drained; null when the signal stopped it. */
  private async waitDrained(
    cursor: BackfillCursor,
    onPoll: (c: ChunkJobCounts) => void,
  ): Promise<ChunkJobCounts | null> {
    let lastLog = Date.now();
    for (;;) {
      const c = await this.o.store.countChunkJobs(this.o.set.name, cursor.pending);
      if (c.claimable + c.inFlight === 0) return c;
      if (this.o.signal?.aborted) return null;
      onPoll(c);
      if (Date.now() - lastLog >= WAITING_LOG_EVERY_MS) {
        lastLog = Date.now();
        this.o.logger.info(
          { set: this.o.set.name, chunk: cursor.chunks, claimable: c.claimable, inFlight: c.inFlight },
          'backfill waiting for its chunk to drain (is a worker running?)',
        );
      }
      await this.pause(this.o.tickMs);
    }
  }

  /** Sleeps `ms`, or less when notified or aborted. */
  private async pause(ms: number): Promise<void> {
    const nudge = this.nudge.signal;
    const signal = this.o.signal ? AbortSignal.any([this.o.signal, nudge]) : nudge;
    await systemClock.wait(ms, signal);
    if (nudge.aborted) this.nudge = new AbortController();
  }
}
