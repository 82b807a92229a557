import { createHash } from 'node:crypto';
import type { Logger } from '../log.js';
import { appliesNow } from '../decision/eligibility.js';
import { PRIORITY_BACKFILL, type OweOptions } from '../store/queue-store.js';
import type { CollectionRow } from '../store/tracker-reads.js';
import type { DriftScanItem } from '../store/decision-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import { questionFingerprint, type FingerprintContext } from '../decision/questions.js';
import { questionsOf, type QuestionSet } from '../decision/registry.js';
import { COMMENT_STATE_VERSION, STATE_VERSION } from '../decision/state.js';

/**
 * Question drift (DESIGN §8 "Drift sweep"): changes that make answers stale with no item write,
 * so nothing is owed: a reworded question, an edited, added or switched-off convention, another
 * model, prompt template or effort. They all show as a key whose latest stored row was asked
 * under another fingerprint than the current one (or has no row yet).
 *
 * An item has drifted for a set when the set applies to it now and, for some key the set asks
 * now, the latest row of that key (per comment, for the newest 10 live comments of per-comment
 * sets) has another question hash, or there is none. The latest row, not any row: after a
 * model goes A → B → A, an old row at A's fingerprint may be of an older state.
 *
 * A key with no row at all counts as drifted too: a newly added convention (or a new key of a
 * config set) is asked of the existing items by the sweep, at the sweep's rate, rather than
 * waiting for each item's next write.
 *
 * A key whose latest row is of another state shape version (DESIGN §5; the item state moved to
 * version 2 with §5.1's omitted_comments) has drifted too: such an answer reads `not_compared`
 * until re-asked, so the sweep re-asks it at its bounded rate rather than leaving every flag
 * dark until the item's next write. The version is part of the signature, so a build that bumps
 * it sweeps again.
 *
 * A key the set no longer asks (a switched-off convention) needs no call: it already reads
 * `question_removed`. A state change needs no sweep: every write that changes a state owes its
 * job. Not detected here: a config set whose state shape changed (withLinks, noTrail); use a
 * backfill for that.
 *
 * The sweep owes at backfill priority, insert-only (an owed or parked job is left alone) and
 * without the re-ask debounce; the runner then asks only the keys not current, so a re-owed
 * item whose other keys are answered costs calls for its drifted keys only.
 */

/** How drift work is owed: backfill priority, due at once, never resetting or un-parking a job. */
export const DRIFT_OWE: Readonly<OweOptions & { insertOnly: boolean }> = Object.freeze({
  priority: PRIORITY_BACKFILL,
  quietPeriod: false,
  reaskDebounce: false,
  insertOnly: true,
});

/** What a set asks in one workspace now, fingerprinted. */
export interface DriftPlan {
  set: QuestionSet;
  workspaceId: string;
  /** key → question fingerprint under the configured context, keys sorted. */
  fingerprints: ReadonlyMap<string, string>;
  /**
   * Hash of everything that decides which items have drifted: the fingerprints, the collections
   * and eligibility rules, and whether the set asks per comment. The sweep's marker stores it:
   * while it is unchanged there is nothing new to sweep.
   */
  signature: string;
}

/** The shape version of the states a set reads: the per-comment state's or the item state's (DESIGN §5). */
function stateVersionOf(set: Pick<QuestionSet, 'perComment'>): number {
  return set.perComment ? COMMENT_STATE_VERSION : STATE_VERSION;
}

/**
 * Fingerprints a set's questions in one workspace (resolving them for resolved sets).
 * @throws whatever the set's `resolve` throws, or InvalidQuestion.
 */
export async function planDrift(
  store: Pick<TrackerReads, 'listCollections' | 'listItems'>,
  set: QuestionSet,
  workspaceId: string,
  ctx: FingerprintContext,
  logger?: Logger,
): Promise<DriftPlan> {
  const questions = await questionsOf(set, { workspaceId, store, logger });
  const keys = Object.keys(questions).sort();
  const fingerprints = new Map(keys.map((k) => [k, questionFingerprint(questions[k], ctx)]));
  const signature = createHash('sha256')
    .update(JSON.stringify([set.collections, set.eligible, set.perComment, [...fingerprints], stateVersionOf(set)]))
    .digest('hex');
  return { set, workspaceId, fingerprints, signature };
}

/**
 * Calls it would take to re-ask what drifted on one scanned item: 0 when nothing did. Per key
 * group (the item, or each of its newest 10 comments), ceil(drifted keys / maxPerCall). Pure.
 */
function driftedCalls(plan: DriftPlan, scanned: DriftScanItem, collection: CollectionRow | undefined): number {
  const { set, fingerprints } = plan;
  if (fingerprints.size === 0 || !collection || collection.deletedAt !== null) return 0;
  if (!appliesNow(set, scanned.item, collection)) return 0;
  const latest = new Map(scanned.latest.map((l) => [l.questionKey, l]));
  const version = stateVersionOf(set);
  const groups = set.perComment ? scanned.commentIds.map((id) => `@${id}`) : [''];
  let calls = 0;
  for (const suffix of groups) {
    let drifted = 0;
    for (const [k, fp] of fingerprints) {
      const l = latest.get(k + suffix);
      if (l?.questionHash !== fp || l.stateVersion !== version) drifted++;
    }
    calls += Math.ceil(drifted / set.maxPerCall);
  }
  return calls;
}

/** One drifted item found by a scan. */
export interface DriftCandidate {
  itemId: string;
  ref: string;
  /** Estimated provider calls to re-ask its drifted keys. */
  calls: number;
  /** Its job of this set, if one exists (then nothing is owed: it is owed already, or parked on purpose). */
  job: 'owed' | 'parked' | null;
}

/** One batch of a scan. */
export interface DriftBatch {
  candidates: DriftCandidate[];
  /** Items read. */
  scanned: number;
  /** Ids of the items read, in walk order. */
  itemIds: string[];
  /** The id of the last item read (the next cursor), or the cursor given when none was read. */
  lastItemId: string | null;
  /** The walk reached the workspace's last item. */
  exhausted: boolean;
}

/**
 * Reads one batch of a workspace's items after `afterItemId` and keeps the drifted ones.
 * `collections` maps collection id → row, for eligibility.
 */
export async function scanDriftBatch(
  store: Pick<DecisionStore, 'scanItemsForDrift'>,
  plan: DriftPlan,
  collections: ReadonlyMap<string, CollectionRow>,
  afterItemId: string | null,
  limit: number,
): Promise<DriftBatch> {
  const rows = await store.scanItemsForDrift({
    workspaceId: plan.workspaceId,
    questionSet: plan.set.name,
    afterItemId,
    limit,
    withComments: plan.set.perComment,
  });
  const candidates: DriftCandidate[] = [];
  for (const r of rows) {
    const calls = driftedCalls(plan, r, collections.get(r.item.collectionId));
    if (calls > 0) candidates.push({ itemId: r.item.id, ref: r.item.ref, calls, job: r.job });
  }
  return {
    candidates,
    scanned: rows.length,
    itemIds: rows.map((r) => r.item.id),
    lastItemId: rows.length ? rows[rows.length - 1].item.id : afterItemId,
    exhausted: rows.length < limit,
  };
}

/** The stored progress of the sweep for one (set, workspace), in `verdict_meta`. */
export interface DriftMarker {
  /** The signature last swept to the end; null before the first complete pass. */
  swept: string | null;
  /** The signature of the pass in progress, or null. */
  target: string | null;
  /** The last item id the pass in progress has handled, or null. */
  cursor: string | null;
}

/** The `verdict_meta` key of a (set, workspace) marker. */
function driftMarkerKey(setName: string, workspaceId: string): string {
  return `drift:${setName}:${workspaceId}`;
}

/** Reads a marker; an absent or unreadable one means "never swept", so the first pass scans (unknown is not absent). */
export async function readDriftMarker(
  store: Pick<MetaStore, 'getMeta'>,
  setName: string,
  workspaceId: string,
): Promise<DriftMarker> {
  const text = await store.getMeta(driftMarkerKey(setName, workspaceId));
  if (text !== null) {
    try {
      const m = JSON.parse(text) as Partial<DriftMarker>;
      return { swept: m.swept ?? null, target: m.target ?? null, cursor: m.cursor ?? null };
    } catch {
      /* fall through */
    }
  }
  return { swept: null, target: null, cursor: null };
}

/** Stores a (set, workspace) marker (see `DriftMarker`). */
export async function writeDriftMarker(
  store: Pick<MetaStore, 'setMeta'>,
  setName: string,
  workspaceId: string,
  m: DriftMarker,
): Promise<void> {
  await store.setMeta(driftMarkerKey(setName, workspaceId), JSON.stringify(m));
}

/** What a whole-workspace drift scan found (`verdict reask`). */
export interface DriftSurvey {
  plan: DriftPlan;
  scanned: number;
  /** Drifted items without a job: these get owed. */
  toOwe: DriftCandidate[];
  /** Drifted items whose job is owed already. */
  alreadyOwed: number;
  /** Drifted items whose job is parked (left parked: `verdict jobs retry` re-owes them). */
  parked: number;
  /** Estimated provider calls of `toOwe`: Σ ceil(drifted keys / maxPerCall) per key group. */
  calls: number;
}

/** Scans every live item of one workspace for drift of one set (no writes). */
export async function surveyDrift(
  store: Pick<TrackerReads, 'listCollections'> & Pick<DecisionStore, 'scanItemsForDrift'>,
  plan: DriftPlan,
  batchSize = 500,
): Promise<DriftSurvey> {
  const collections = new Map((await store.listCollections(plan.workspaceId)).map((c) => [c.id, c]));
  const survey: DriftSurvey = { plan, scanned: 0, toOwe: [], alreadyOwed: 0, parked: 0, calls: 0 };
  let cursor: string | null = null;
  for (;;) {
    const b = await scanDriftBatch(store, plan, collections, cursor, batchSize);
    survey.scanned += b.scanned;
    for (const c of b.candidates) {
      if (c.job === 'owed') survey.alreadyOwed++;
      else if (c.job === 'parked') survey.parked++;
      else {
        survey.toOwe.push(c);
        survey.calls += c.calls;
      }
    }
    cursor = b.lastItemId;
    if (b.exhausted) return survey;
  }
}
