import { isExpired } from '../decision/as-of.js';
import { appliesNow } from '../decision/eligibility.js';
import type { QuestionSet } from '../decision/registry.js';
import type { CollectionRow } from '../store/tracker-reads.js';
import type { DriftScanItem } from '../store/decision-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { DecisionStore } from '../store/decision-store.js';

/**
 * Expiry (DESIGN §5.2): the answers of a set with `maxAgeMs` go stale with time alone, with no
 * item write and no question change, so neither the write doors nor the drift sweep owe them.
 *
 * An item has expired for a set when the set applies to it now and, for some key the set asks now,
 * the latest stored row of that key (per comment, for the newest 10 live comments of per-comment
 * sets) is older than `maxAgeMs` (from its `evaluated_at`, decision/as-of.ts `isExpired`). The
 * latest row, not any: an older row is older still, so when the latest has expired no row of the
 * key can be current. A key with no row at all is the drift sweep's (it counts as drifted); a
 * latest row that is young but no longer matches (an edit, a reworded question) was owed by the
 * write or is the drift sweep's.
 *
 * It is owed as drift work is (maintenance/drift-plan.ts `DRIFT_OWE`: backfill priority, due at once,
 * insert-only); the runner then asks only the keys not current, at the state dated today, so the
 * re-ask is keyed to a new state hash.
 */

/** What a set asks in one workspace now: its keys, sorted (fingerprints are not needed: age alone decides). */
export interface ExpiryPlan {
  set: QuestionSet & { readonly maxAgeMs: number };
  workspaceId: string;
  keys: readonly string[];
}

/**
 * Keys of one scanned item whose latest row has expired at `nowMs`, as stored keys
 * (`<key>@<commentId>` for per-comment sets); [] when the set does not apply. Pure.
 */
function expiredKeys(
  plan: ExpiryPlan,
  scanned: DriftScanItem,
  collection: CollectionRow | undefined,
  nowMs: number,
): string[] {
  const { set, keys } = plan;
  if (keys.length === 0 || !collection || collection.deletedAt !== null) return [];
  if (!appliesNow(set, scanned.item, collection)) return [];
  const latest = new Map(scanned.latest.map((l) => [l.questionKey, l]));
  const groups = set.perComment ? scanned.commentIds.map((id) => `@${id}`) : [''];
  const out: string[] = [];
  for (const suffix of groups) {
    for (const k of keys) {
      const l = latest.get(k + suffix);
      if (l && isExpired(l.evaluatedAt, set.maxAgeMs, nowMs)) out.push(k + suffix);
    }
  }
  return out;
}

/** One expired item found by a scan. */
export interface ExpiryCandidate {
  itemId: string;
  /** How many of its stored keys have expired. */
  expired: number;
  /** Its job of this set, if one exists (then nothing is owed). */
  job: 'owed' | 'parked' | null;
}

/** One batch of an expiry scan (`DriftBatch`'s walk fields). */
export interface ExpiryBatch {
  candidates: ExpiryCandidate[];
  scanned: number;
  itemIds: string[];
  lastItemId: string | null;
  exhausted: boolean;
}

/** Reads one batch of a workspace's live items after `afterItemId` (the drift sweep's read) and keeps the expired ones. */
export async function scanExpiryBatch(
  store: Pick<DecisionStore, 'scanItemsForDrift'>,
  plan: ExpiryPlan,
  collections: ReadonlyMap<string, CollectionRow>,
  afterItemId: string | null,
  limit: number,
  nowMs: number,
): Promise<ExpiryBatch> {
  const rows = await store.scanItemsForDrift({
    workspaceId: plan.workspaceId,
    questionSet: plan.set.name,
    afterItemId,
    limit,
    withComments: plan.set.perComment,
  });
  const candidates: ExpiryCandidate[] = [];
  for (const r of rows) {
    const expired = expiredKeys(plan, r, collections.get(r.item.collectionId), nowMs).length;
    if (expired > 0) candidates.push({ itemId: r.item.id, expired, job: r.job });
  }
  return {
    candidates,
    scanned: rows.length,
    itemIds: rows.map((r) => r.item.id),
    lastItemId: rows.length ? rows[rows.length - 1].item.id : afterItemId,
    exhausted: rows.length < limit,
  };
}

/** What a whole-workspace expiry scan found (`verdict reask`): expired items by what their job is. */
export interface ExpirySurvey {
  scanned: number;
  /** Expired items without a job (these get owed), each with its estimated calls: ceil(expired keys / maxPerCall). */
  toOwe: Array<{ itemId: string; calls: number }>;
  alreadyOwed: number;
  parked: number;
}

/** Scans every live item of one workspace for answers of `plan.set` expired at `nowMs` (no writes). */
export async function surveyExpiry(
  store: Pick<TrackerReads, 'listCollections'> & Pick<DecisionStore, 'scanItemsForDrift'>,
  plan: ExpiryPlan,
  nowMs: number,
  batchSize = 500,
): Promise<ExpirySurvey> {
  const collections = new Map((await store.listCollections(plan.workspaceId)).map((c) => [c.id, c]));
  const survey: ExpirySurvey = { scanned: 0, toOwe: [], alreadyOwed: 0, parked: 0 };
  let cursor: string | null = null;
  for (;;) {
    const b = await scanExpiryBatch(store, plan, collections, cursor, batchSize, nowMs);
    survey.scanned += b.scanned;
    for (const c of b.candidates) {
      if (c.job === 'owed') survey.alreadyOwed++;
      else if (c.job === 'parked') survey.parked++;
      else survey.toOwe.push({ itemId: c.itemId, calls: Math.ceil(c.expired / plan.set.maxPerCall) });
    }
    cursor = b.lastItemId;
    if (b.exhausted) return survey;
  }
}

/** The expiry sweep's progress for one (set, workspace), in `verdict_meta`. */
export interface ExpiryMarker {
  /** The last item id the walk in progress has handled; null between walks. */
  cursor: string | null;
  /** When the last walk reached the end (epoch ms, the store's clock); null before the first. */
  walkedAt: number | null;
}

/** The `verdict_meta` key of a (set, workspace) expiry marker. */
function expiryMarkerKey(setName: string, workspaceId: string): string {
  return `expiry:${setName}:${workspaceId}`;
}

/** Reads a marker; an absent or unreadable one means "never walked", so the next pass walks. */
export async function readExpiryMarker(
  store: Pick<MetaStore, 'getMeta'>,
  setName: string,
  workspaceId: string,
): Promise<ExpiryMarker> {
  const text = await store.getMeta(expiryMarkerKey(setName, workspaceId));
  if (text !== null) {
    try {
      const m = JSON.parse(text) as Partial<ExpiryMarker>;
      return {
        cursor: typeof m.cursor === 'string' ? m.cursor : null,
        walkedAt: typeof m.walkedAt === 'number' ? m.walkedAt : null,
      };
    } catch {
      /* fall through */
    }
  }
  return { cursor: null, walkedAt: null };
}

/** Stores a (set, workspace) expiry marker. */
export async function writeExpiryMarker(
  store: Pick<MetaStore, 'setMeta'>,
  setName: string,
  workspaceId: string,
  m: ExpiryMarker,
): Promise<void> {
  await store.setMeta(expiryMarkerKey(setName, workspaceId), JSON.stringify(m));
}
