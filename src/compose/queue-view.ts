import type { Heartbeat } from '../worker/heartbeat.js';
import { listBatchUnavailable } from '../worker/batch-availability.js';
import { HEARTBEAT_PREFIX, heartbeatAlive, parseHeartbeats } from '../worker/heartbeat.js';
import { parseSetCooloffs, SET_COOLOFF_META_PREFIX } from '../runner/set-cooloff.js';
import type { JobRow, SetJobCounts } from '../store/queue-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { MetaStore } from '../store/meta-store.js';
import type { BatchStore } from '../store/batch-store.js';
import type { Store } from '../store/whole-store.js';

/**
 * The queue as its readers see it (DESIGN §3, §10, §7.3): jobs by set, failing sets, parked jobs
 * with their reasons, the workers' heartbeats and the provider batches in flight. Written once for
 * `verdict status` and the dashboard's queue page (`VerdictReader.queue`). Ids, refs, counts, error
 * codes and times only: never item text, question text or provider text.
 */

/** A worker as its heartbeat shows it. Times are epoch ms; ages ms. */
export interface WorkerView {
  workerId: string;
  provider: string;
  model: string;
  /** Milliseconds since its last beat. */
  lastSeenAgoMs: number;
  /** Its last beat is younger than three beat intervals (worker/heartbeat.ts `heartbeatAlive`). */
  alive: boolean;
  /** The provider-wide error code it is cooling off after, or null. */
  providerProblem: string | null;
  /** The daily token cap it runs under (DESIGN §10.3), or null for none or a worker from before it was reported. */
  dailyTokenCap: number | null;
}

/** Provider batches not yet done (DESIGN §7.3). `oldestAgeMs` is how long ago the oldest was created. */
export interface BatchesView {
  inFlight: number;
  requests: number;
  jobs: number;
  /** Batches whose submit was not confirmed (the sweep looks for them in the provider's list). */
  unconfirmed: number;
  oldestAgeMs: number | null;
  /** Endpoints found to have no batch API (DESIGN §7.4): workers ask their jobs directly. */
  unavailable: Array<{ provider: string; host: string; status: number }>;
}

/**
 * A failing set: jobs with errors (parked, or retried after an attempt or refusal: a provider outage
 * counts), and, after a rejected answer schema (DESIGN §3.8), the reason and, while the cooling-off
 * period runs, its end (epoch ms).
 */
export interface FailingSet {
  set: string;
  jobs: number;
  lastErrorAt: number | null;
  schemaRejected?: { reason: string; at: number; coolingOffUntil: number | null };
}

/** The workers that wrote a heartbeat (alive or not), in the store's order. */
export async function workerViews(store: Pick<MetaStore, 'listMeta'>, now: number): Promise<WorkerView[]> {
  return parseHeartbeats(await store.listMeta(HEARTBEAT_PREFIX)).map((h: Heartbeat & { updatedAt: number }) => ({
    workerId: h.workerId,
    provider: h.provider,
    model: h.model,
    lastSeenAgoMs: now - h.updatedAt,
    alive: heartbeatAlive(h, now),
    providerProblem: h.providerProblem,
    dailyTokenCap: typeof h.dailyTokenCap === 'number' ? h.dailyTokenCap : null,
  }));
}

/** Provider batches submitting, in progress or ended but not yet swept. */
export async function batchesInFlight(
  store: Pick<BatchStore, 'batchJobCounts' | 'listProviderBatches'> & Pick<MetaStore, 'listMeta'>,
  now: number,
): Promise<BatchesView> {
  const open = await store.listProviderBatches(['submitting', 'in_progress', 'ended']);
  let jobs = 0;
  for (const b of open) jobs += (await store.batchJobCounts(b.id)).batched;
  return {
    inFlight: open.length,
    requests: open.reduce((n, b) => n + b.requestCount, 0),
    jobs,
    unconfirmed: open.filter((b) => b.status === 'submitting').length,
    oldestAgeMs: open.length ? now - Math.min(...open.map((b) => b.createdAt)) : null,
    unavailable: (await listBatchUnavailable(store)).map((u) => ({
      provider: u.provider,
      host: u.host,
      status: u.status,
    })),
  };
}

/** Failing sets: those with failing jobs, merged with those whose schema was rejected (one entry per set, by name). */
export async function failingSets(
  store: Pick<MetaStore, 'listMeta'>,
  bySet: readonly SetJobCounts[],
  now: number,
): Promise<FailingSet[]> {
  const cooloffs = parseSetCooloffs(await store.listMeta(SET_COOLOFF_META_PREFIX));
  const out = new Map<string, FailingSet>();
  for (const s of bySet)
    if (s.failing > 0) out.set(s.questionSet, { set: s.questionSet, jobs: s.failing, lastErrorAt: s.lastErrorAt });
  for (const c of cooloffs) {
    const e = out.get(c.set) ?? { set: c.set, jobs: 0, lastErrorAt: null };
    e.schemaRejected = { reason: c.reason, at: c.since, coolingOffUntil: c.until > now ? c.until : null };
    out.set(c.set, e);
  }
  return [...out.values()].sort((a, b) => (a.set < b.set ? -1 : a.set > b.set ? 1 : 0));
}

/** Parked jobs counted by reason (the job's last error code), most first. */
export function parkedReasons(parked: readonly JobRow[]): Array<{ reason: string; count: number }> {
  const reasons = new Map<string, number>();
  for (const j of parked)
    reasons.set(j.lastError ?? 'no reason recorded', (reasons.get(j.lastError ?? 'no reason recorded') ?? 0) + 1);
  return [...reasons]
    .map(([reason, count]) => ({ reason, count }))
    .sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : 1));
}

/** A parked job as the queue reads show it. `at` is when its last error was recorded (epoch ms). */
export interface ParkedJobView {
  ref: string | null;
  itemId: string;
  set: string;
  reason: string | null;
  at: number | null;
  attempts: number;
  refusals: number;
}

/** Parked jobs read at most: the count and the reasons are over these. */
export const PARKED_READ_LIMIT = 10_000;

/** The first `shown` parked jobs with their item refs. */
export async function parkedJobViews(
  store: Pick<TrackerReads, 'getItem'>,
  parked: readonly JobRow[],
  shown: number,
): Promise<ParkedJobView[]> {
  const out: ParkedJobView[] = [];
  for (const j of parked.slice(0, shown)) {
    const item = await store.getItem(j.itemId);
    out.push({
      ref: item?.ref ?? null,
      itemId: j.itemId,
      set: j.questionSet,
      reason: j.lastError,
      at: j.lastErrorAt,
      attempts: j.attempts,
      refusals: j.refusals,
    });
  }
  return out;
}

/**
 * One workspace's queue (`VerdictReader.queue`): its jobs by set with the oldest owed age, its
 * parked jobs (the first `parkedShown`, with the count and reasons over all of them), its failing
 * sets, and the server's workers and batches (those are shared by every workspace of the database
 * and name no item). Times are epoch ms; ages ms.
 */
export interface QueueView {
  now: number;
  bySet: Array<SetJobCounts & { oldestOwedAgeMs: number | null; batched: number }>;
  oldestOwedAgeMs: number | null;
  parked: { count: number; reasons: Array<{ reason: string; count: number }>; jobs: ParkedJobView[] };
  failingSets: FailingSet[];
  workers: WorkerView[];
  batches: BatchesView;
}

/** Reads one workspace's queue (see `QueueView`). */
export async function queueView(
  store: Pick<
    Store,
    'batchJobCounts' | 'getItem' | 'jobCountsBySet' | 'listJobs' | 'listMeta' | 'listProviderBatches' | 'now'
  >,
  workspaceId: string,
  parkedShown: number,
): Promise<QueueView> {
  const now = await store.now();
  const batched = new Map<string, number>();
  for (const j of await store.listJobs({ workspaceId, state: 'batched', limit: PARKED_READ_LIMIT }))
    batched.set(j.questionSet, (batched.get(j.questionSet) ?? 0) + 1);
  const counts = await store.jobCountsBySet(workspaceId);
  const bySet = counts.map((s) => ({
    ...s,
    oldestOwedAgeMs: s.oldestOwedAt === null ? null : now - s.oldestOwedAt,
    batched: batched.get(s.questionSet) ?? 0,
  }));
  const ages = bySet.map((s) => s.oldestOwedAgeMs).filter((a): a is number => a !== null);
  const parked = await store.listJobs({ workspaceId, state: 'parked', limit: PARKED_READ_LIMIT });
  // A set cooling off after a rejected schema is the server's, not the workspace's: it is shown
  // only beside a set this workspace has jobs of.
  const mine = new Set(counts.map((s) => s.questionSet));
  return {
    now,
    bySet,
    oldestOwedAgeMs: ages.length ? Math.max(...ages) : null,
    parked: {
      count: parked.length,
      reasons: parkedReasons(parked),
      jobs: await parkedJobViews(store, parked, parkedShown),
    },
    failingSets: (await failingSets(store, counts, now)).filter((f) => mine.has(f.set)),
    workers: await workerViews(store, now),
    batches: await batchesInFlight(store, now),
  };
}
