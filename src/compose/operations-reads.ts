import type { DecisionReader, DecisionView, HistoryEntry, StaleReason } from '../reads/reads.js';
import { InvalidInput } from '../errors.js';
import type { JobFilter, JobRow } from '../store/queue-store.js';
import type { ItemRow, WorkspaceRow } from '../store/tracker-reads.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';

/**
 * The reads and job controls behind `VerdictReader.surfaced` and `Verdict.jobs` (DESIGN §3, §8,
 * §12): the surfaced keys of a set as a filtered, sorted, paged list, and the owed-job queue of one
 * workspace, listed, retried and dropped. The dashboard and the CLI are thin users of these.
 */

/** One surfaced key in `VerdictReader.surfaced`. Probabilities are in [0, 1]; times epoch ms. */
export interface SurfacedRow {
  itemId: string;
  ref: string;
  /** The item's title: tracker text, for display only (never put it in a URL or a log). */
  title: string;
  /** The item's collection slug. */
  collection: string;
  /** The stored key (`<key>@<commentId>` for per-comment sets). */
  questionKey: string;
  /** The set's question key. */
  key: string;
  /** The probability in force: a person's value when `source` is `human`, else the model's. */
  p: number;
  threshold: number;
  /** Asked about the state as it is now, under the model configured now. */
  current: boolean;
  /** Why it is not current (it still surfaces: an edit awaiting its re-ask, or an expired answer); null when current. */
  staleReason: StaleReason | null;
  changedParts: string[];
  source: 'model' | 'human';
  /** A newer model answer that disagrees with the person's value in force (DESIGN §8.1), as a probability; null otherwise. */
  proposed: number | null;
  provider: string;
  model: string;
  evaluatedAt: number;
}

/** What `surfaced` filters and pages by. */
export interface SurfacedQuery {
  workspace: string;
  /** Only items of this collection (slug). */
  collection?: string;
  /** Only this question key (the set's key; per-comment keys match their base key). */
  key?: string;
  /** `current`: only answers asked about the state now; `stale`: only those still surfacing while their re-ask is owed or due. @defaultValue all */
  currency?: 'current' | 'stale' | 'all';
  /** Overrides the set's threshold (0 to 1). */
  threshold?: number;
  /** Rows skipped, for paging. @defaultValue 0 */
  offset?: number;
  /** Rows returned, 1 to `SURFACED_MAX_LIMIT`. @defaultValue 50 */
  limit?: number;
}

/** Most rows one `surfaced` call returns. */
const SURFACED_MAX_LIMIT = 500;

/** A page of `surfaced`: rows sorted by probability, highest first (then ref, then key). */
export interface SurfacedPage {
  rows: SurfacedRow[];
  /** Rows matching the filters, over every page. */
  total: number;
  /** A job of the set in the workspace is parked or failing (as `flags`). */
  failing: boolean;
  /** Keys and collections that surface at all in the set (before the filters), sorted: what a filter can pick. */
  keys: string[];
  collections: string[];
}

/**
 * Reads the surfaced keys of `set` in `ws` (see `SurfacedPage`).
 * @throws InvalidInput for a bad offset, limit, threshold or currency.
 */
export async function surfacedPage(
  store: Pick<TrackerReads, 'listCollections'>,
  reader: DecisionReader,
  ws: WorkspaceRow,
  set: string,
  q: SurfacedQuery,
): Promise<SurfacedPage> {
  const offset = q.offset ?? 0;
  const limit = q.limit ?? 50;
  if (!Number.isInteger(offset) || offset < 0)
    throw new InvalidInput(`offset must be a whole number, 0 or more; got ${offset}`);
  if (!Number.isInteger(limit) || limit < 1 || limit > SURFACED_MAX_LIMIT)
    throw new InvalidInput(`limit must be a whole number from 1 to ${SURFACED_MAX_LIMIT}; got ${limit}`);
  if (q.threshold !== undefined && !(q.threshold >= 0 && q.threshold <= 1))
    throw new InvalidInput(`threshold must be from 0 to 1; got ${q.threshold}`);
  const currency = q.currency ?? 'all';
  if (!['current', 'stale', 'all'].includes(currency))
    throw new InvalidInput(`currency must be current, stale or all; got ${String(currency)}`);
  const slugs = new Map((await store.listCollections(ws.id)).map((c) => [c.id, c.slug]));
  const read = await reader.surfacedViews(ws.id, set, q.threshold);
  const all: SurfacedRow[] = [];
  for (const { item, views } of read.items) {
    for (const v of views) {
      if (v.answer.type !== 'noul') continue;
      all.push(rowOf(item, slugs.get(item.collectionId) ?? '', v.answer.noul, v));
    }
  }
  const keys = [...new Set(all.map((r) => r.key))].sort();
  const collections = [...new Set(all.map((r) => r.collection))].sort();
  const matching = all.filter(
    (r) =>
      (q.collection === undefined || r.collection === q.collection) &&
      (q.key === undefined || r.key === q.key) &&
      (currency === 'all' || (currency === 'current') === r.current),
  );
  matching.sort(
    (a, b) =>
      b.p - a.p ||
      (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0) ||
      (a.questionKey < b.questionKey ? -1 : a.questionKey > b.questionKey ? 1 : 0),
  );
  return {
    rows: matching.slice(offset, offset + limit),
    total: matching.length,
    failing: read.failing,
    keys,
    collections,
  };
}

function rowOf(item: ItemRow, collection: string, p: number, v: DecisionView): SurfacedRow {
  return {
    itemId: item.id,
    ref: item.ref,
    title: item.title,
    collection,
    questionKey: v.questionKey,
    key: v.key,
    p,
    threshold: v.threshold,
    current: v.current,
    staleReason: v.staleReason,
    changedParts: v.changedParts,
    source: v.source,
    proposed: v.proposed?.type === 'noul' ? v.proposed.noul : null,
    provider: v.provider,
    model: v.model,
    evaluatedAt: v.evaluatedAt,
  };
}

/** One item's history (`VerdictReader.history`). */
export interface ItemHistory {
  itemId: string;
  ref: string;
  /** Evaluations, newest first (see `HistoryEntry`). */
  entries: HistoryEntry[];
}

// ---------------------------------------------------------------- jobs

/** Which jobs of a workspace `Verdict.jobs` acts on. Every field narrows. */
export interface JobQuery {
  workspace: string;
  set?: string;
  state?: 'owed' | 'parked' | 'batched';
  /** One item, by ref. */
  ref?: string;
}

/** A job as `Verdict.jobs.list` shows it: the row, its item's ref, and derived timing (ms). */
export interface JobView extends JobRow {
  ref: string | null;
  /** The job is under a live lease. */
  inFlight: boolean;
  /** Milliseconds until the job is due (0 when due). */
  dueInMs: number;
}

/** Jobs matching a store filter (at most `f.limit`, default 50) with their item refs and timing: `Verdict.jobs.list` and `verdict jobs list`. */
export async function listJobViews(
  store: Pick<TrackerStore, 'getItem' | 'now'> & Pick<QueueStore, 'listJobs'>,
  f: JobFilter,
): Promise<JobView[]> {
  const now = await store.now();
  const out: JobView[] = [];
  for (const j of await store.listJobs({ ...f, limit: f.limit ?? JOBS_LIST_DEFAULT_LIMIT })) {
    const item = await store.getItem(j.itemId);
    out.push({
      ...j,
      ref: item?.ref ?? null,
      inFlight: j.leaseExpiresAt !== null && j.leaseExpiresAt > now,
      dueInMs: Math.max(0, j.notBefore - now),
    });
  }
  return out;
}

/** Jobs `list` returns by default, and at most. */
export const JOBS_LIST_DEFAULT_LIMIT = 50;
const JOBS_LIST_MAX_LIMIT = 10_000;

/** `Verdict.jobs`: one workspace's owed-job queue (DESIGN §3, §12), as `verdict jobs` does it. */
export interface VerdictJobs {
  /**
   * Jobs, lowest priority and oldest first, at most `limit` (default 50, at most 10,000).
   * [] for an unknown workspace or ref. @throws InvalidInput for a bad state or limit.
   */
  list(q: JobQuery & { limit?: number }): Promise<JobView[]>;
  /**
   * Re-owes jobs now (attempts, refusals, abandons and defers reset): the parked ones unless
   * `state: 'owed'` is given (then waiting jobs become due now); `state: 'batched'` takes jobs out
   * of their provider batch and owes them now (DESIGN §7.4: a result that comes later for them is
   * discarded). @returns how many changed (0 for an unknown workspace or ref).
   * @throws InvalidInput for an unknown state.
   */
  retry(q: JobQuery): Promise<number>;
  /**
   * Deletes jobs not in flight (batched ones too: a result that comes later for them is discarded);
   * the next write owes the item again. Needs `set`,
   * `state` or `ref`: a whole workspace's queue is dropped only by naming a state.
   * @returns how many were dropped. @throws InvalidInput with no narrowing filter or a bad state.
   */
  drop(q: JobQuery): Promise<number>;
}

const STATES = ['owed', 'parked', 'batched'];

/** The jobs API over a store (compose/verdict.ts wires it). */
export function jobsOn(
  store: Pick<TrackerStore, 'getItem' | 'getItemByRef' | 'getWorkspaceBySlug' | 'now'> &
    Pick<QueueStore, 'dropJobs' | 'listJobs' | 'retryJobs'>,
): VerdictJobs {
  /** The store filter of a query, or null when its workspace or ref does not exist. */
  const filterOf = async (q: JobQuery, defaultState?: 'parked') => {
    if (q.state !== undefined && !STATES.includes(q.state))
      throw new InvalidInput(`state must be owed, parked or batched; got ${String(q.state)}`);
    const ws = await store.getWorkspaceBySlug(q.workspace);
    if (!ws || ws.deletedAt !== null) return null;
    let itemId: string | undefined;
    if (q.ref !== undefined) {
      const item = await store.getItemByRef(ws.id, q.ref);
      if (!item) return null;
      itemId = item.id;
    }
    return { workspaceId: ws.id, questionSet: q.set, itemId, state: q.state ?? defaultState };
  };
  return {
    async list(q) {
      const limit = q.limit ?? JOBS_LIST_DEFAULT_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > JOBS_LIST_MAX_LIMIT)
        throw new InvalidInput(`limit must be a whole number from 1 to ${JOBS_LIST_MAX_LIMIT}; got ${limit}`);
      const f = await filterOf(q);
      return f ? listJobViews(store, { ...f, limit }) : [];
    },
    async retry(q) {
      const f = await filterOf(q, 'parked');
      return f ? store.retryJobs(f) : 0;
    },
    async drop(q) {
      if (q.set === undefined && q.state === undefined && q.ref === undefined)
        throw new InvalidInput('drop needs set, state or ref: name a state to drop a whole workspace\u2019s jobs');
      const f = await filterOf(q);
      return f ? store.dropJobs(f) : 0;
    },
  };
}
