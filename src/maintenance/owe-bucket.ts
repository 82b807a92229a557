import { DRIFT_OWE } from './drift-plan.js';
import type { CollectionRow } from '../store/tracker-reads.js';
import type { QueueStore } from '../store/queue-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { MetaStore } from '../store/meta-store.js';

/**
 * The sweeps' rate (DESIGN §8 "Drift sweep", §5.2): a token bucket on the store's clock, one
 * token per (item, set) owed, `perMinute` tokens a minute, holding at most `perMinute`. The drift
 * sweep and the expiry sweep of one worker share one bucket, so `--drift-sweep-per-minute` bounds
 * the work the two owe together, not each.
 */
export class OweBucket {
  private available: number;
  private lastRefill: number | null = null;

  /** @param perMinute items owed per minute at most; 0 owes nothing. */
  constructor(
    private readonly store: Pick<TrackerStore, 'now'>,
    readonly perMinute: number,
  ) {
    this.available = perMinute;
  }

  /** Tokens left now (fractional between refills). */
  get tokens(): number {
    return this.available;
  }

  /** Adds the tokens earned since the last refill (`perMinute` per 60 000 ms of the store's clock). */
  async refill(): Promise<void> {
    const now = await this.store.now();
    if (this.lastRefill !== null && now > this.lastRefill) {
      this.available = Math.min(this.perMinute, this.available + ((now - this.lastRefill) * this.perMinute) / 60_000);
    }
    this.lastRefill = now;
  }

  /** Takes one token when a whole one is left. */
  take(): boolean {
    if (this.available < 1) return false;
    this.available -= 1;
    return true;
  }
}

/**
 * A scanned batch of a sweep: its item ids in order, the last one, the candidates to re-owe
 * (`job` null: none owed or parked), how many items were read, and whether the walk reached the end.
 */
export interface SweepBatch {
  itemIds: readonly string[];
  lastItemId: string | null;
  candidates: ReadonlyArray<{ itemId: string; job: unknown }>;
  scanned: number;
  exhausted: boolean;
}

/**
 * Walks one (set, workspace) of a sweep from `cursor`, batch after batch, owing each batch's
 * candidates while the bucket has tokens (`oweBatch`), until the walk reaches the end, the scan
 * budget (items read) runs out, or the tokens do. The walk both sweeps share; each gives its own
 * batch read (`scan(collections, cursor, limit)`).
 * @returns jobs owed, items read, the cursor to resume from, and whether the walk reached the end.
 */
export async function walkSweep(
  store: Pick<TrackerReads, 'listCollections'> & Pick<QueueStore, 'oweJobs'>,
  bucket: OweBucket,
  o: { setName: string; workspaceId: string; cursor: string | null; scanBudget: number; batchSize: number },
  scan: (collections: ReadonlyMap<string, CollectionRow>, cursor: string | null, limit: number) => Promise<SweepBatch>,
): Promise<{ owed: number; scanned: number; cursor: string | null; finished: boolean }> {
  let collections: Map<string, CollectionRow> | null = null;
  let cursor = o.cursor;
  let owed = 0;
  let scanned = 0;
  let finished = false;
  while (o.scanBudget - scanned > 0 && !finished && bucket.tokens >= 1) {
    collections ??= new Map((await store.listCollections(o.workspaceId)).map((c) => [c.id, c]));
    const batch = await scan(collections, cursor, Math.min(o.batchSize, o.scanBudget - scanned));
    // Owe the batch's candidates while tokens last; the cursor stops at the last item handled.
    const r = await oweBatch(store, bucket, o.setName, batch, cursor);
    owed += r.owed;
    scanned += batch.scanned;
    cursor = r.handledUpTo;
    finished = batch.exhausted && !r.cutShort;
    // A batch is synchronous reads on SQLite; a pass's batches back to back held the loop 160 ms
    // beside a drain of 100,000 jobs (before items_ws_id_idx). DESIGN §10.1: let timers and I/O run between.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return { owed, scanned, cursor, finished };
}

/**
 * Owes a batch's candidates of one set at backfill priority while the bucket has tokens (the one
 * step both sweeps share): a candidate with a job owed or parked is left alone; when the tokens
 * run out, the cursor stops before the first candidate not owed, so the next pass starts there.
 * @param cursor the walk's cursor before the batch. @returns jobs owed, where the walk got to, and whether tokens cut it short.
 */
async function oweBatch(
  store: Pick<QueueStore, 'oweJobs'>,
  bucket: OweBucket,
  setName: string,
  batch: SweepBatch,
  cursor: string | null,
): Promise<{ owed: number; handledUpTo: string | null; cutShort: boolean }> {
  const toOwe: string[] = [];
  let handledUpTo = batch.lastItemId;
  let cutShort = false;
  for (const c of batch.candidates) {
    if (c.job !== null) continue; // owed already, or parked on purpose
    if (!bucket.take()) {
      handledUpTo = previousId(batch, c.itemId, cursor);
      cutShort = true;
      break;
    }
    toOwe.push(c.itemId);
  }
  const owed = toOwe.length
    ? await store.oweJobs(
        toOwe.map((itemId) => ({ itemId, questionSet: setName })),
        DRIFT_OWE,
      )
    : 0;
  return { owed, handledUpTo, cutShort };
}

/** The id read just before `itemId` in this batch, or the batch's starting cursor: the next walk starts at `itemId`. */
function previousId(batch: { itemIds: readonly string[] }, itemId: string, start: string | null): string | null {
  const at = batch.itemIds.indexOf(itemId);
  return at > 0 ? batch.itemIds[at - 1] : start;
}

/**
 * A sweep pass's reads, each made at most once per pass however many (set, workspace) pairs the
 * pass looks at: the pass's markers (keys under `prefix`) in one read, not one per pair, and each
 * workspace's collections once (a resolved set's questions read them, and every set of the pass
 * reads the same rows). A pass writes each pair's marker at most once, after reading it, so the
 * pass's own writes never need reading back.
 */
export function passReads(
  store: Pick<MetaStore, 'listMeta'> & Pick<TrackerReads, 'listCollections' | 'listItems'>,
  prefix: string,
): { markers: Pick<MetaStore, 'getMeta'>; tracker: Pick<TrackerReads, 'listCollections' | 'listItems'> } {
  let markers: Promise<Map<string, string>> | null = null;
  const collections = new Map<string, ReturnType<TrackerReads['listCollections']>>();
  return {
    markers: {
      getMeta: async (key) => {
        markers ??= store.listMeta(prefix).then((rows) => new Map(rows.map((r) => [r.key, r.value])));
        return (await markers).get(key) ?? null;
      },
    },
    tracker: {
      listCollections: (workspaceId) => {
        let got = collections.get(workspaceId);
        if (!got) collections.set(workspaceId, (got = store.listCollections(workspaceId)));
        return got;
      },
      listItems: (...a) => store.listItems(...a),
    },
  };
}
