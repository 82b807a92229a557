import { errCode } from '../errors.js';
import { isLosslessNumber } from 'lossless-json';
import { parseLossless, type LosslessValue } from '../decision/canonical-json.js';
import {
  parseFingerprintContext,
  questionFingerprint,
  type Answer,
  type FingerprintContext,
  type Question,
} from '../decision/questions.js';
import type { QuestionMap, QuestionSet, Registry } from '../decision/registry.js';
import { questionsOf } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import { isClipped, NO_CLIPS, type BuiltState, type StateClips } from '../decision/state.js';
import { currentAnswer, movedParts, onlyExpired } from '../decision/as-of.js';
import { continuationKey, parseContinuation, pendingSets } from '../store/collection-owe.js';
import type { ItemForEvaluation } from '../store/store.js';
import type { ItemRow } from '../store/tracker-reads.js';
import type { DecisionRow } from '../store/decision-store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { Store } from '../store/whole-store.js';
import type { CollectionRow } from '../tracker-rows.js';
import type { JobRow } from '../store/queue-store.js';
import type { ItemViewRows } from '../store/item-view-store.js';
import { appliesNow, whyNotApplies } from '../decision/eligibility.js';
import { silentLogger, type Logger } from '../log.js';
import {
  answersAgree,
  FLAPPING_MIN_FLIPS,
  FLAPPING_WINDOW_MS,
  overrideValue,
  surfacesWithHysteresis,
  type HumanVerdictRow,
  type SurfacingChangeRow,
  type VerdictKind,
} from '../store/verdicts.js';

/**
 * Reads: which answers are current, and which are worth showing (DESIGN §8).
 *
 * For each (set, key) a read shows the row that matches the current state hash, question
 * fingerprint and state version when one exists (so S1 → S2 → S1 reads current without a new
 * call), otherwise the latest row, with a `staleReason`. Every read returns an empty list (or
 * empty map) when there is nothing, never null.
 */

/** Why a shown row is not current (DESIGN §8). */
export type StaleReason =
  /** The state moved; `changedParts` names the parts (title, collection, fields, body, trail, links, comment). */
  | 'state_changed'
  /** The question was reworded (for conventions: the convention was edited). */
  | 'question_changed'
  /** Another model, prompt template or effort is configured than the one the answer was asked under. */
  | 'model_changed'
  /** The set no longer asks that key (for conventions: switched off, retired or deleted). A malformed per-comment key reads so too. */
  | 'question_removed'
  /** The set no longer applies to the item (ineligible, moved out of the set's collections, deleted). */
  | 'not_applicable'
  /** The set is not registered in this process. */
  | 'set_unknown'
  /** Not compared: the row has another state version, or the current state or questions could not be read. Never "unchanged". */
  | 'not_compared'
  /** The comment a per-comment answer is about was deleted. */
  | 'comment_gone'
  /**
   * The set declares `maxAgeMs` and the answer, asked about the state as it still is, is older than
   * that (from its `evaluated_at`; DESIGN §5.2). The worker's expiry sweep owes it again.
   */
  | 'expired';

/**
 * How a surfacing read classes a row:
 * - `surfaced`: a noul at or above the threshold that is current, `expired`, or `state_changed` with its job owed;
 * - `below_threshold`: the same, below the threshold;
 * - `stale`: any other non-current noul;
 * - `not_surfaced`: never surfaces (a choice or score answer, or a key the set lists as unsurfaced).
 */
export type Surfacing = 'surfaced' | 'below_threshold' | 'stale' | 'not_surfaced';

export interface DecisionView {
  questionSet: string;
  /** The stored key (`<key>@<commentId>` for per-comment sets). */
  questionKey: string;
  /** The set's question key (the stored key before its first `@` for per-comment sets). */
  key: string;
  /** For per-comment sets: the comment the answer is about; null otherwise or when the key is malformed. */
  commentId: string | null;
  kind: DecisionRow['kind'];
  answer: Answer;
  /** Null for nouls. */
  confidence: number | null;
  provider: string;
  model: string;
  /** Epoch milliseconds. */
  evaluatedAt: number;
  current: boolean;
  /** Null exactly when `current`. */
  staleReason: StaleReason | null;
  /** For `state_changed`: the parts that moved, sorted; [] otherwise. */
  changedParts: string[];
  surfacing: Surfacing;
  /** The key is listed in the set's `unsurfaced`: asked and stored, never shown by surfacing reads. */
  unsurfaced: boolean;
  /** The threshold the row was surfaced against (the set's, or the read's override). */
  threshold: number;
  rationale: string | null;
  rowId: number;
  /**
   * Who decides what this read shows (DESIGN §8.1): `human` when a person's value is in force
   * (then `answer` is the person's value, `surfacing` follows it, and the model's own answer is in
   * `modelAnswer`), else `model`.
   */
  source: 'model' | 'human';
  /** The model's answer of the row shown, whatever a person said. `verdict eval` scores this one. */
  modelAnswer: Answer;
  /**
   * With a person's value in force: the model's current answer when it was asked after the verdict
   * and disagrees with it (another side of the threshold, choice or score level). Shown beside the
   * override, never applied. Null otherwise.
   */
  proposed: Answer | null;
  /** The latest verdict a person recorded on this key, or null. */
  verdict: VerdictView | null;
  /**
   * Times the model's answers flipped the key's surfacing in the last 30 days (DESIGN §8.2): a
   * key's first answer sets its side and is not a flip, and a person's verdicts are not counted.
   * `flags --flapping` lists keys with 3 or more.
   */
  flips: number;
}

/** A person's latest verdict on one key, as reads show it (DESIGN §8.1). Times are epoch ms. */
export interface VerdictView {
  id: number;
  verdict: VerdictKind;
  /** The value it stands for, or null (withdrawn; a disagree on a choice or score). */
  value: Answer | null;
  /** The value overrides the model (every verdict with a value, until a later one withdraws it). */
  inForce: boolean;
  author: string;
  note: string | null;
  createdAt: number;
  /** The state hash the person judged. */
  stateHash: string;
  /**
   * `override_stale` when the item (or comment) changed since the person judged it, or its state
   * cannot be read now: the override stays in force and wants a person to look again. Null when
   * the state is the one judged.
   */
  staleReason: 'override_stale' | null;
  /** For `override_stale`: the parts that moved since the verdict, sorted. */
  changedParts: string[];
}

/**
 * Splits a per-comment key `<key>@<commentId>` at its first `@` (DESIGN §7.1: question keys never
 * contain `@`, comment ids may); null when malformed (then never current).
 */
export function splitCommentKey(storedKey: string): { key: string; commentId: string } | null {
  const at = storedKey.indexOf('@');
  if (at <= 0 || at === storedKey.length - 1) return null;
  return { key: storedKey.slice(0, at), commentId: storedKey.slice(at + 1) };
}

/**
 * The one surfacing rule of the reads (DESIGN §8, §8.1, §8.2): only nouls surface; a person's
 * value in force surfaces at or above the threshold; a current noul surfaces at or above the
 * threshold, or down to `threshold − hysteresis` when the key surfaced at its previous state; a
 * `state_changed` noul whose job is owed (not parked) still surfaces, marked not current, so a flag
 * does not blink off during the debounce after an edit; an `expired` one (the state it answered is
 * the state now, only older than maxAge, DESIGN §5.2) surfaces until its re-ask; every other
 * stale row does not, a person's value included when the key is gone (not applicable, comment or
 * question gone, set unknown). The
 * store's write paths apply the same rule (store/verdicts.ts `surfacingNow`).
 */
export function surfacingOf(r: {
  answer: Answer;
  current: boolean;
  staleReason: StaleReason | null;
  jobOwed: boolean;
  threshold: number;
  unsurfacedKey: boolean;
  /** The key surfaced at its previous state (its latest surfacing change, DESIGN §8.2). @defaultValue false */
  wasSurfaced?: boolean;
  /** The band a surfaced key keeps surfacing in below the threshold. @defaultValue 0 */
  hysteresis?: number;
  /** A person's value is in force (DESIGN §8.1): it surfaces at the threshold, whatever the row's currency. */
  human?: boolean;
}): Surfacing {
  if (r.unsurfacedKey || r.answer.type !== 'noul') return 'not_surfaced';
  // A person's value outlives edits and re-asks, not the key itself: an item deleted or out of the
  // set, a comment or question gone, a set unknown here surface nothing, whoever decided.
  if (r.staleReason !== null && GONE.has(r.staleReason)) return 'stale';
  if (r.human) return r.answer.noul >= r.threshold ? 'surfaced' : 'below_threshold';
  if (!r.current && !(r.staleReason === 'expired' || (r.staleReason === 'state_changed' && r.jobOwed))) return 'stale';
  return surfacesWithHysteresis(r.answer.noul, r.wasSurfaced ?? false, r.threshold, r.hysteresis ?? 0)
    ? 'surfaced'
    : 'below_threshold';
}

/** Stale reasons that mean the key itself is gone for now: nothing of it surfaces. */
const GONE: ReadonlySet<StaleReason> = new Set<StaleReason>([
  'not_applicable',
  'comment_gone',
  'question_removed',
  'set_unknown',
]);

/** What one (set, item) looks like now, as far as currency is concerned. */
export interface SetNow {
  /** Null when the set is not registered here. */
  set: QuestionSet | null;
  /** The item is live and the set applies to it now. */
  applies: boolean;
  /** The set's questions in the item's workspace; null when they could not be read. */
  questions: QuestionMap | null;
  /**
   * The item state as this set sees it (item-level sets), without `as_of` (a set with `maxAgeMs`
   * dates it per answer, decision/as-of.ts); null when not built or unreadable.
   */
  state: BuiltState | null;
  /** Per-comment sets: comment id → its state (without `as_of`), for every live comment. */
  commentStates: ReadonlyMap<string, BuiltState>;
  /**
   * The store's now (epoch ms), read only for a set with `maxAgeMs`: an answer's age decides its
   * currency (DESIGN §5.2). Absent or null otherwise; a set with `maxAgeMs` judged without it
   * reads `not_compared` (unknown is not "unchanged").
   */
  nowMs?: number | null;
}

/** The verdict on one (set, key): which row to show, and why it is not current. */
export interface Judgement {
  row: DecisionRow;
  current: boolean;
  staleReason: StaleReason | null;
  changedParts: string[];
}

/**
 * Decides currency for the rows of one (item, set, stored key), oldest first (pure; DESIGN §1
 * principle 3 and §8). `ctx` is the fingerprint context configured now.
 *
 * question_changed versus model_changed: each row stores the fingerprint context it was asked
 * under. Recomputing the current question's fingerprint under that stored context tells whether
 * the question moved (question_changed, which wins when both moved) or only the model, template
 * or effort did (model_changed). Rows stored before that column existed fall back to comparing
 * provider names.
 *
 * Time-dependent sets (`maxAgeMs`, DESIGN §5.2): a row is current when it matches the state
 * dated with the row's own as_of and is not older than `maxAgeMs` at `now.nowMs` (the rule is
 * decision/as-of.ts `answerIsCurrent`, the same one the runner skips answered keys by). A row that
 * matches all but its age reads `expired`; `changedParts` never lists as_of of a dated row.
 */
export function judgeRows(
  rows: readonly DecisionRow[],
  now: SetNow,
  ctx: FingerprintContext & { name: string },
): Judgement {
  const latest = rows[rows.length - 1];
  const stale = (staleReason: StaleReason, parts: string[] = []): Judgement => ({
    row: latest,
    current: false,
    staleReason,
    changedParts: parts,
  });
  if (!now.set) return stale('set_unknown');
  let key = latest.questionKey;
  let state = now.state;
  if (now.set.perComment) {
    const split = splitCommentKey(latest.questionKey);
    if (!split) return stale('question_removed');
    if (!now.applies) return stale('not_applicable');
    key = split.key;
    state = now.commentStates.get(split.commentId) ?? null;
    if (!state) return stale('comment_gone');
  } else if (!now.applies) {
    return stale('not_applicable');
  }
  if (!now.questions) return stale('not_compared');
  const q: Question | undefined = Object.prototype.hasOwnProperty.call(now.questions, key)
    ? now.questions[key]
    : undefined;
  if (!q) return stale('question_removed');
  if (!state) return stale('not_compared');
  const set = now.set;
  if (set.maxAgeMs !== null && (now.nowMs ?? null) === null) return stale('not_compared');
  const nowMs = now.nowMs ?? 0; // read by the as_of rule only for a set with maxAgeMs
  const fp = questionFingerprint(q, ctx);
  // The one currency rule of the runner and the reads (decision/as-of.ts): the exact match of
  // DESIGN §8, and for a set with maxAgeMs the state dated with each answer's own as_of, unexpired.
  const match = currentAnswer(rows, state, fp, set, nowMs);
  if (match) return { row: match, current: true, staleReason: null, changedParts: [] };
  // A row of another shape version cannot answer the comparison (DESIGN §5, §5.1): the item
  // state is version 2 since omitted_comments, the per-comment state still version 1.
  if (latest.stateVersion !== state.version) return stale('not_compared');
  if (latest.questionHash !== fp) {
    const asked = parseFingerprintContext(latest.fingerprintContext);
    if (asked)
      return stale(questionFingerprint(q, asked) === latest.questionHash ? 'model_changed' : 'question_changed');
    return stale(latest.provider === ctx.name ? 'question_changed' : 'model_changed');
  }
  // Asked about the state as it still is, only older than maxAge (DESIGN §5.2); an item edit
  // still reads state_changed, and as_of is never listed as a moved part of a dated answer.
  if (onlyExpired(latest, state, set, nowMs)) return stale('expired');
  return stale('state_changed', movedParts(parseParts(latest.stateParts), state.parts, set));
}

function parseParts(text: string): Record<string, string> {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/**
 * The fingerprint context a reader judges against (the provider configured now), plus the
 * provider's name for rows stored before fingerprint contexts were.
 */
export type ReaderContext = FingerprintContext & { name: string };

/**
 * The reader. `ctx` is the configured provider's fingerprint context; null means decisions are
 * off (provider `none`), and then every read is empty (DESIGN §9 "none").
 */
export class DecisionReader {
  constructor(
    private readonly store: Pick<TrackerStore, 'getItem' | 'listCollections' | 'listItems' | 'now'> &
      Pick<QueueStore, 'getJob' | 'listJobs'> &
      Pick<MetaStore, 'getMeta'> &
      Pick<DecisionStore, 'listDecisions' | 'listWorkspaceDecisions'> &
      HumanVerdictStore &
      Pick<Store, 'loadItemForEvaluation'>,
    private readonly registry: Registry,
    private readonly ctx: ReaderContext | null,
    private readonly logger: Logger = silentLogger,
  ) {}

  /** False for a decisions-off reader (provider `none`), whose reads are all empty. */
  get enabled(): boolean {
    return this.ctx !== null;
  }

  /** Every key's row with `current` and `staleReason`, sorted by set then key. Never null: [] when there is nothing. */
  async decisions(itemId: string): Promise<DecisionView[]> {
    if (!this.ctx) return [];
    const rows = await this.store.listDecisions(itemId);
    if (rows.length === 0) return [];
    const loaded = await this.store.loadItemForEvaluation(itemId);
    const jobs = await this.store.listJobs({ itemId, limit: 1_000 });
    const people = await this.peopleOf({ itemId, workspaceId: rows[0].workspaceId });
    return this.judgeItem(itemId, rows, loaded, jobs, people);
  }

  /**
   * An item view from its rows, read at once (`Store.readItemView`): `decisions` as `decisions`
   * returns them and `sets` as `setApplicability` does, without reading any of those rows again.
   * Reads only what the rows do not hold: a pending collection change's sets and the store's clock
   * (both only when the item has answers), and each answered set's questions. Empty when decisions
   * are off.
   */
  async itemView(v: ItemViewRows): Promise<{
    decisions: DecisionView[];
    sets: Array<{ questionSet: string; applies: boolean; reason: string | null }>;
  }> {
    if (!this.ctx) return { decisions: [], sets: [] };
    const sets = this.applicability(v.item, v.collection);
    if (!v.judging) return { decisions: [], sets };
    const loaded: ItemForEvaluation = {
      item: v.item,
      collection: v.collection,
      workspace: v.workspace,
      comments: v.judging.comments,
      links: v.judging.links,
    };
    const changes = v.judging.surfacingChanges;
    const people = peopleIndex(v.verdicts, changes, changes.length ? (await this.store.now()) - FLAPPING_WINDOW_MS : 0);
    return { decisions: await this.judgeItem(v.item.id, v.decisions, loaded, v.jobs, people), sets };
  }

  /** `decisions` from the item's rows (oldest first), its evaluation read, its jobs and what people said. */
  private async judgeItem(
    itemId: string,
    rows: DecisionRow[],
    loaded: ItemForEvaluation | null,
    jobs: JobRow[],
    people: PeopleIndex,
  ): Promise<DecisionView[]> {
    if (!this.ctx) return [];
    const owed = new Set(jobs.filter((j) => j.state === 'owed').map((j) => j.questionSet));
    if (loaded) for (const s of await this.pendingCollectionSets(loaded.item.collectionId)) owed.add(s);
    const bySet = groupBy(rows, (r) => r.questionSet);
    const out: DecisionView[] = [];
    for (const [setName, setRows] of bySet) {
      const set = this.registry.get(setName) ?? null;
      const now = await this.setNow(set, loaded);
      for (const keyRows of groupBy(setRows, (r) => r.questionKey).values()) {
        out.push(
          this.view(
            judgeRows(keyRows, now, this.ctx),
            set,
            owed.has(setName),
            set?.threshold ?? 1,
            people.of(itemId, setName, keyRows[0].questionKey, now),
          ),
        );
      }
    }
    return out.sort((a, b) => cmp(a.questionSet, b.questionSet) || cmp(a.questionKey, b.questionKey));
  }

  /**
   * How the states the item's sets read now were clipped (DESIGN §5.1): one entry per set that
   * applies to the item and whose state is clipped, sorted by set name; [] when nothing is. For a
   * per-comment set the clips of the comments it asks (the newest 10) are added up. A state that
   * cannot be built is left out (the decisions read already says `not_compared`). Empty when
   * decisions are off, like every read.
   */
  async stateClips(itemId: string): Promise<Array<{ questionSet: string; clips: StateClips }>> {
    if (!this.ctx) return [];
    const loaded = await this.store.loadItemForEvaluation(itemId);
    if (!loaded || loaded.item.deletedAt !== null || loaded.collection.deletedAt !== null) return [];
    const out: Array<{ questionSet: string; clips: StateClips }> = [];
    for (const set of this.registry.setsFor(loaded.collection.slug)) {
      if (!appliesNow(set, loaded.item, loaded.collection)) continue;
      let targets;
      try {
        targets = setTargets(set, loaded);
      } catch {
        continue;
      }
      const clips = targets.map((t) => t.state.clips).reduce(addClips, NO_CLIPS);
      if (isClipped(clips)) out.push({ questionSet: set.name, clips });
    }
    return out.sort((a, b) => cmp(a.questionSet, b.questionSet));
  }

  /**
   * Every set registered for the item's collection, sorted by name, with whether it applies to
   * the item now and, when it does not, why in words (`item is terminal (status: closed)`,
   * `item is deleted`; eligibility.ts whyNotApplies, DESIGN §7 step 3). A set that does not apply
   * is never asked, so `show` can say so instead of "none yet". [] when decisions are off or the
   * item does not exist.
   */
  async setApplicability(
    itemId: string,
  ): Promise<Array<{ questionSet: string; applies: boolean; reason: string | null }>> {
    if (!this.ctx) return [];
    const loaded = await this.store.loadItemForEvaluation(itemId);
    if (!loaded) return [];
    return this.applicability(loaded.item, loaded.collection);
  }

  /** `setApplicability` of an item already read with its collection. */
  private applicability(
    item: ItemRow,
    collection: CollectionRow,
  ): Array<{ questionSet: string; applies: boolean; reason: string | null }> {
    const gone =
      item.deletedAt !== null
        ? 'item is deleted'
        : collection.deletedAt !== null
          ? `collection "${collection.slug}" is deleted`
          : null;
    return this.registry
      .setsFor(collection.slug)
      .map((set) => {
        const reason = gone ?? whyNotApplies(set, item, collection);
        return { questionSet: set.name, applies: reason === null, reason };
      })
      .sort((a, b) => cmp(a.questionSet, b.questionSet));
  }

  /**
   * Takes a snapshot before a write to `itemId` (in `workspaceId`) so that `madeStale()`, called
   * after the write, can say which stored answers the write made stale, truthfully and without
   * re-judging the whole workspace:
   * - `itemAnswers`: answers about the item itself that were current before and are not after
   *   (its own state moved); the write's owed jobs re-ask them;
   * - `questionAnswers`: answers about any other item of the workspace whose question changed
   *   under the write (a convention edit rewords `conv:<ref>`, DESIGN §6): the latest answer of
   *   each (item, set, key) that was asked the old wording now reads `question_changed` (or
   *   `question_removed` when the write retired the question), and the drift sweep re-asks it
   *   (DESIGN §8). `changedQuestions` lists those keys as `set/key`.
   * Costs the questions of each registered set resolved twice, the item's decisions read twice,
   * and, only when a question changed, one read of that set's rows in the workspace.
   * All counts are 0 when decisions are off (provider `none`).
   */
  async staleWatch(
    workspaceId: string,
    itemId: string,
  ): Promise<{ madeStale(): Promise<{ itemAnswers: number; questionAnswers: number; changedQuestions: string[] }> }> {
    const ctx = this.ctx;
    if (!ctx) return { madeStale: async () => ({ itemAnswers: 0, questionAnswers: 0, changedQuestions: [] }) };
    const fingerprints = async (): Promise<Map<string, Map<string, string> | null>> => {
      const out = new Map<string, Map<string, string> | null>();
      for (const set of this.registry.all()) {
        const qs = await this.questions(set, workspaceId);
        out.set(
          set.name,
          qs === null ? null : new Map(Object.entries(qs).map(([k, q]) => [k, questionFingerprint(q, ctx)])),
        );
      }
      return out;
    };
    const currentKeys = async () =>
      new Set(
        (await this.decisions(itemId)).filter((d) => d.current).map((d) => `${d.questionSet}\u0000${d.questionKey}`),
      );
    const before = await fingerprints();
    const currentBefore = await currentKeys();
    return {
      madeStale: async () => {
        const after = await fingerprints();
        const currentAfter = await currentKeys();
        const itemAnswers = [...currentBefore].filter((k) => !currentAfter.has(k)).length;
        let questionAnswers = 0;
        const changedQuestions: string[] = [];
        for (const set of this.registry.all()) {
          const old = before.get(set.name);
          const now = after.get(set.name);
          if (!old || now === null || now === undefined) continue; // unreadable either side: nothing claimed
          const changed = new Map([...old].filter(([k, fp]) => now.get(k) !== fp));
          if (changed.size === 0) continue;
          changedQuestions.push(...[...changed.keys()].map((k) => `${set.name}/${k}`));
          const latest = new Map<string, DecisionRow>();
          for (const r of await this.store.listWorkspaceDecisions(workspaceId, set.name)) {
            if (r.itemId !== itemId) latest.set(`${r.itemId}\u0000${r.questionKey}`, r); // oldest first: the last one wins
          }
          for (const r of latest.values()) {
            const key = set.perComment ? splitCommentKey(r.questionKey)?.key : r.questionKey;
            if (key !== undefined && changed.get(key) === r.questionHash) questionAnswers++;
          }
        }
        return { itemAnswers, questionAnswers, changedQuestions: changedQuestions.sort() };
      },
    };
  }

  /** The same as `decisions`, without the keys a set lists as unsurfaced. */
  async itemReadDecisions(itemId: string): Promise<DecisionView[]> {
    return (await this.decisions(itemId)).filter((d) => !d.unsurfaced);
  }

  /** Surfaced rows, plus counts of below-threshold and stale rows (of surfaceable keys). */
  async surfacedDecisions(
    itemId: string,
  ): Promise<{ surfaced: DecisionView[]; belowThreshold: number; stale: number }> {
    const all = await this.decisions(itemId);
    return {
      surfaced: all.filter((d) => d.surfacing === 'surfaced'),
      belowThreshold: all.filter((d) => d.surfacing === 'below_threshold').length,
      stale: all.filter((d) => d.surfacing === 'stale').length,
    };
  }

  /**
   * item id → {ref, key → probability} for the surfaced nouls of one set in a workspace, plus
   * `failing` (a job of that set in that workspace is parked, or has failed since it was last
   * owed within the last `FAILING_WINDOW_MS`). Costs one batch query of the set's rows in the
   * workspace, the questions resolved once, and one state read (plus one job read) per candidate
   * item, a candidate being an item with a noul row at or above the threshold.
   * @param threshold overrides the set's threshold (0 to 1).
   */
  async workspaceFlags(
    workspaceId: string,
    setName: string,
    threshold?: number,
  ): Promise<{ flags: Record<string, WorkspaceFlag>; failing: boolean }> {
    const flags: Record<string, WorkspaceFlag> = {};
    const read = await this.surfacedViews(workspaceId, setName, threshold);
    for (const s of read.items) {
      for (const v of s.views) {
        if (v.answer.type !== 'noul') continue;
        flags[s.item.id] ??= { ref: s.item.ref, keys: {} };
        flags[s.item.id].keys[v.questionKey] = v.answer.noul;
        if (v.source === 'human') (flags[s.item.id].human ??= []).push(v.questionKey);
      }
    }
    return { flags, failing: read.failing };
  }

  /**
   * The surfaced keys of one set in a workspace with their whole decision views (current or
   * stale, a person's value or the model's), item by item in id order; `failing` as in
   * `workspaceFlags`, which is this read reduced to probabilities. Items deleted since their answer
   * surface nothing (their views read `not_applicable`).
   */
  async surfacedViews(
    workspaceId: string,
    setName: string,
    threshold?: number,
  ): Promise<{ items: Array<{ item: ItemRow; views: DecisionView[] }>; failing: boolean }> {
    const items: Array<{ item: ItemRow; views: DecisionView[] }> = [];
    if (!this.ctx) return { items, failing: false };
    const set = this.registry.get(setName);
    const failing = await this.failing(workspaceId, setName);
    if (!set) return { items, failing };
    const cut = threshold ?? set.threshold;
    // The hysteresis' memory is kept at the set's own threshold; a read at another one uses the plain cut.
    const band = cut === set.threshold ? set.hysteresis : 0;
    const rows = await this.store.listWorkspaceDecisions(workspaceId, setName);
    const people = await this.peopleOf({ workspaceId, questionSet: setName });
    const byItem = groupBy(rows, (r) => r.itemId);
    let questions: QuestionMap | null | undefined;
    // The store's clock, read once for the whole read (only a set with maxAge needs it).
    let clock: number | null | undefined;
    for (const itemId of [...byItem.keys()].sort()) {
      const itemRows = byItem.get(itemId)!;
      const candidate =
        people.hasValueInForce(itemId) ||
        itemRows.some((r) => {
          if (r.kind !== 'noul') return false;
          const base = set.perComment ? (splitCommentKey(r.questionKey)?.key ?? r.questionKey) : r.questionKey;
          return !set.unsurfaced.includes(base) && (JSON.parse(r.answer) as { noul: number }).noul >= cut - band;
        });
      if (!candidate) continue;
      if (questions === undefined) questions = await this.questions(set, workspaceId);
      const loaded = await this.store.loadItemForEvaluation(itemId);
      if (!loaded) continue;
      if (clock === undefined) clock = await this.clockFor(set);
      const now = this.setNowWith(set, loaded, questions, clock);
      const job = await this.store.getJob(itemId, setName);
      const owed =
        job?.state === 'owed' || (await this.pendingCollectionSets(loaded.item.collectionId)).includes(setName);
      const views: DecisionView[] = [];
      for (const keyRows of groupBy(itemRows, (r) => r.questionKey).values()) {
        const v = this.view(
          judgeRows(keyRows, now, this.ctx),
          set,
          owed,
          cut,
          people.of(itemId, setName, keyRows[0].questionKey, now),
        );
        if (v.surfacing === 'surfaced' && v.answer.type === 'noul') views.push(v);
      }
      if (views.length) items.push({ item: loaded.item, views });
    }
    return { items, failing };
  }

  /**
   * The item's answers over time, newest first (`VerdictReader.history`): one entry per evaluation,
   * i.e. consecutive stored rows of one set at one state from one model, with the parts of the
   * state that moved since the set's previous entry about the same target (the item, or the
   * comment of a per-comment key). Reads every row the store still keeps: retention prunes
   * superseded rows after its window (DESIGN §2). Empty when decisions are off.
   */
  async history(itemId: string): Promise<HistoryEntry[]> {
    if (!this.ctx) return [];
    const rows = [...(await this.store.listDecisions(itemId))].sort(
      (a, b) => a.evaluatedAt - b.evaluatedAt || a.id - b.id,
    );
    const entries: HistoryEntry[] = [];
    const open = new Map<string, { entry: HistoryEntry; parts: Record<string, string> }>();
    const lastOfTarget = new Map<string, Record<string, string>>();
    for (const r of rows) {
      const set = this.registry.get(r.questionSet) ?? null;
      const commentId = set?.perComment ? (splitCommentKey(r.questionKey)?.commentId ?? null) : null;
      const target = `${r.questionSet}\u0000${commentId ?? ''}`;
      const cur = open.get(target);
      const answer = {
        questionKey: r.questionKey,
        kind: r.kind,
        answer: JSON.parse(r.answer) as Answer,
        confidence: r.confidence,
        rationale: r.rationale ?? null,
      };
      if (
        cur &&
        cur.entry.stateHash === r.stateHash &&
        cur.entry.provider === r.provider &&
        cur.entry.model === r.model
      ) {
        cur.entry.answers.push(answer);
        continue;
      }
      const parts = parseParts(r.stateParts);
      const before = cur?.parts ?? lastOfTarget.get(target) ?? null;
      const entry: HistoryEntry = {
        questionSet: r.questionSet,
        commentId,
        stateHash: r.stateHash,
        stateVersion: r.stateVersion,
        stateTruncated: r.stateTruncated,
        provider: r.provider,
        model: r.model,
        evaluatedAt: r.evaluatedAt,
        changedParts:
          before === null
            ? null
            : [...new Set([...Object.keys(before), ...Object.keys(parts)])]
                .filter((n) => before[n] !== parts[n])
                .sort(),
        answers: [answer],
      };
      entries.push(entry);
      open.set(target, { entry, parts });
      lastOfTarget.set(target, parts);
    }
    for (const e of entries) e.answers.sort((a, b) => cmp(a.questionKey, b.questionKey));
    return entries.reverse();
  }

  /**
   * Sets a pending collection change still owes the collection's items (DESIGN §3.3): their
   * jobs count as owed for surfacing even before the worker writes their chunk, so a flag does
   * not blink off during the walk. (Currency needs nothing: it compares the live state.)
   */
  private async pendingCollectionSets(collectionId: string): Promise<string[]> {
    return pendingSets(parseContinuation(await this.store.getMeta(continuationKey(collectionId)), []));
  }

  private async failing(workspaceId: string, setName: string): Promise<boolean> {
    if ((await this.store.listJobs({ workspaceId, questionSet: setName, state: 'parked', limit: 1 })).length > 0)
      return true;
    const owed = await this.store.listJobs({
      workspaceId,
      questionSet: setName,
      state: 'owed',
      errorWithinMs: FAILING_WINDOW_MS,
      limit: 1_000,
    });
    return owed.some((j) => j.attempts > 0 || j.refusals > 0);
  }

  private async questions(set: QuestionSet, workspaceId: string): Promise<QuestionMap | null> {
    try {
      return await questionsOf(set, { workspaceId, store: this.store, logger: this.logger });
    } catch (err) {
      // Unknown is not absent: with the questions unreadable, nothing of this set reads current.
      this.logger.warn({ set: set.name, workspaceId, err: errCode(err) }, 'questions could not be read');
      return null;
    }
  }

  private async setNow(set: QuestionSet | null, loaded: ItemForEvaluation | null): Promise<SetNow> {
    if (!set) return { set: null, applies: false, questions: null, state: null, commentStates: new Map() };
    const questions = loaded ? await this.questions(set, loaded.item.workspaceId) : null;
    return this.setNowWith(set, loaded, questions, await this.clockFor(set));
  }

  /** The store's now (ms) when the set's currency depends on time (`maxAgeMs`, DESIGN §5.2), else null: no read. */
  private async clockFor(set: QuestionSet): Promise<number | null> {
    return set.maxAgeMs === null ? null : this.store.now();
  }

  /** @param nowMs the store's now for a set with `maxAgeMs` (`clockFor`), else null. */
  private setNowWith(
    set: QuestionSet,
    loaded: ItemForEvaluation | null,
    questions: QuestionMap | null,
    nowMs: number | null,
  ): SetNow {
    const live = loaded !== null && loaded.item.deletedAt === null && loaded.collection.deletedAt === null;
    const applies = live && appliesNow(set, loaded.item, loaded.collection);
    const commentStates = new Map<string, BuiltState>();
    let state: BuiltState | null = null;
    if (applies) {
      try {
        // Every live comment, not only the newest 10: an answer about an older comment stays
        // comparable, and an edit to it reads state_changed (DESIGN §7b's documented limit).
        for (const t of setTargets(set, loaded, { allComments: true })) {
          if (t.commentId === null) state = t.state;
          else commentStates.set(t.commentId, t.state);
        }
      } catch {
        state = null; // an unreadable state is not compared, never "unchanged"
      }
    }
    return { set, applies, questions, state, commentStates, nowMs };
  }

  /**
   * Where one stored key of an item stands now, for recording a person's verdict on it
   * (compose/record-verdict.ts): whether its set applies, its question in the item's workspace, the
   * state the key is about (its comment's for a per-comment set), and the key's decision view (null
   * when the model never answered it). Null when decisions are off, the set is not registered, or
   * the item does not exist.
   */
  async keyNow(
    itemId: string,
    setName: string,
    questionKey: string,
  ): Promise<{
    set: QuestionSet;
    applies: boolean;
    question: Question | null;
    target: BuiltState | null;
    view: DecisionView | null;
  } | null> {
    const set = this.registry.get(setName);
    if (!this.ctx || !set) return null;
    const loaded = await this.store.loadItemForEvaluation(itemId);
    if (!loaded) return null;
    const now = await this.setNow(set, loaded);
    const base = set.perComment ? (splitCommentKey(questionKey)?.key ?? null) : questionKey;
    const question =
      base !== null && now.questions && Object.prototype.hasOwnProperty.call(now.questions, base)
        ? now.questions[base]
        : null;
    const view =
      (await this.decisions(itemId)).find((d) => d.questionSet === setName && d.questionKey === questionKey) ?? null;
    return { set, applies: now.applies, question, target: targetState(now, questionKey), view };
  }

  /** Whether the registered set of that name asks per comment (false for an unknown set). */
  isPerComment(setName: string): boolean {
    return this.registry.get(setName)?.perComment ?? false;
  }

  /** The registered sets of the item's collection that ask `key` (a set's question key, before any `@`) in its workspace, sorted. */
  async setsAsking(itemId: string, key: string): Promise<string[]> {
    if (!this.ctx) return [];
    const loaded = await this.store.loadItemForEvaluation(itemId);
    if (!loaded) return [];
    const out: string[] = [];
    for (const set of this.registry.setsFor(loaded.collection.slug)) {
      const qs = await this.questions(set, loaded.item.workspaceId);
      if (qs && Object.prototype.hasOwnProperty.call(qs, key)) out.push(set.name);
    }
    return out.sort();
  }

  /**
   * The question keys the registered sets of the item's collection ask of it, as a verdict names
   * them (`<key>@<commentId>` written `<key>@…` for a per-comment set), sorted and without
   * repeats; for the error that lists the valid keys. [] when decisions are off or the item is unknown.
   */
  async keysAsked(itemId: string): Promise<string[]> {
    if (!this.ctx) return [];
    const loaded = await this.store.loadItemForEvaluation(itemId);
    if (!loaded) return [];
    const out = new Set<string>();
    for (const set of this.registry.setsFor(loaded.collection.slug)) {
      for (const key of Object.keys((await this.questions(set, loaded.item.workspaceId)) ?? {}))
        out.add(set.perComment ? `${key}@…` : key);
    }
    return [...out].sort();
  }

  /** The question keys a registered set asks in a workspace (its conventions included), sorted; null for an unknown set or unreadable questions. */
  async setKeys(setName: string, workspaceId: string): Promise<string[] | null> {
    const set = this.registry.get(setName);
    if (!set) return null;
    const qs = await this.questions(set, workspaceId);
    return qs ? Object.keys(qs).sort() : null;
  }

  /**
   * Flapping keys of one set in a workspace (DESIGN §8.2): every (item, key) whose surfacing the
   * model's answers flipped at least `minFlips` times within `windowMs` before now, most flips first
   * (then ref, key). A key's first answer is not a flip, nor is a person's verdict. [] when decisions are off.
   * @param opts.minFlips @defaultValue 3 @param opts.windowMs @defaultValue 30 days (ms)
   */
  async flapping(
    workspaceId: string,
    setName: string,
    opts: { minFlips?: number; windowMs?: number } = {},
  ): Promise<FlappingKey[]> {
    if (!this.ctx) return [];
    const minFlips = opts.minFlips ?? FLAPPING_MIN_FLIPS;
    const since = (await this.store.now()) - (opts.windowMs ?? FLAPPING_WINDOW_MS);
    const changes = (
      await this.store.listSurfacingChanges({ workspaceId, questionSet: setName, sinceMs: since })
    ).filter((c) => c.cause === 'model' && c.flip);
    const out: FlappingKey[] = [];
    for (const keyChanges of groupBy(changes, (c) => `${c.itemId}\u0000${c.questionKey}`).values()) {
      if (keyChanges.length < minFlips) continue;
      const last = keyChanges[keyChanges.length - 1];
      const item = await this.store.getItem(last.itemId);
      out.push({
        itemId: last.itemId,
        ref: item?.ref ?? last.itemId,
        questionSet: setName,
        questionKey: last.questionKey,
        flips: keyChanges.length,
        lastFlipAt: last.changedAt,
        surfaced: last.surfaced,
      });
    }
    return out.sort((a, b) => b.flips - a.flips || cmp(a.ref, b.ref) || cmp(a.questionKey, b.questionKey));
  }

  /**
   * What people and the surfacing memory say about the keys of one item (every set) or one
   * (workspace, set): the latest verdict of each key, its latest surfacing change, and its flips in
   * the last 30 days. Two reads (verdicts, changes) and the store's clock.
   */
  private async peopleOf(
    q: { itemId: string; workspaceId: string } | { workspaceId: string; questionSet: string },
  ): Promise<PeopleIndex> {
    const verdicts = await this.store.listVerdicts(q);
    const changes = await this.store.listSurfacingChanges('itemId' in q ? { itemId: q.itemId } : q);
    return peopleIndex(verdicts, changes, changes.length ? (await this.store.now()) - FLAPPING_WINDOW_MS : 0);
  }

  private view(
    j: Judgement,
    set: QuestionSet | null,
    jobOwed: boolean,
    threshold: number,
    people: KeyPeople = NO_PEOPLE,
  ): DecisionView {
    const r = j.row;
    const modelAnswer = JSON.parse(r.answer) as Answer;
    const split = set?.perComment ? splitCommentKey(r.questionKey) : null;
    const key = split?.key ?? r.questionKey;
    const unsurfacedKey = set?.unsurfaced.includes(key) ?? false;
    const verdict = people.verdict ? verdictView(people.verdict, people.target, set) : null;
    const human = verdict?.inForce === true && verdict.value !== null;
    const answer = human ? verdict.value! : modelAnswer;
    const proposed =
      human && j.current && r.evaluatedAt > verdict.createdAt && !answersAgree(modelAnswer, answer, threshold)
        ? modelAnswer
        : null;
    // The hysteresis' memory is kept at the set's own threshold; a read at another one uses the plain cut.
    const atSetThreshold = set !== null && threshold === set.threshold;
    return {
      questionSet: r.questionSet,
      questionKey: r.questionKey,
      key,
      commentId: split?.commentId ?? null,
      kind: r.kind,
      answer,
      confidence: r.confidence,
      provider: r.provider,
      model: r.model,
      evaluatedAt: r.evaluatedAt,
      current: j.current,
      staleReason: j.staleReason,
      changedParts: j.changedParts,
      surfacing: surfacingOf({
        answer,
        current: j.current,
        staleReason: j.staleReason,
        jobOwed,
        threshold,
        unsurfacedKey,
        human,
        wasSurfaced: atSetThreshold ? (people.wasSurfaced ?? false) : false,
        hysteresis: atSetThreshold ? set.hysteresis : 0,
      }),
      unsurfaced: unsurfacedKey,
      threshold,
      rationale: r.rationale ?? null,
      rowId: r.id,
      source: human ? 'human' : 'model',
      modelAnswer,
      proposed,
      verdict,
      flips: people.flips,
    };
  }
}

/**
 * One evaluation in an item's history (`DecisionReader.history`): the answers one model gave one
 * set about one state. `evaluatedAt` is epoch ms.
 */
export interface HistoryEntry {
  questionSet: string;
  /** Per-comment sets: the comment asked about; null otherwise. */
  commentId: string | null;
  stateHash: string;
  stateVersion: number;
  /** The state was clipped to its budget when asked (DESIGN §5.1). */
  stateTruncated: boolean;
  provider: string;
  model: string;
  evaluatedAt: number;
  /** State parts whose hash moved since the previous entry about the same target, sorted; [] when only the model or question moved; null for the first entry. */
  changedParts: string[] | null;
  /** The stored answers, by key. `confidence` is null for nouls. */
  answers: Array<{
    questionKey: string;
    kind: DecisionRow['kind'];
    answer: Answer;
    confidence: number | null;
    rationale: string | null;
  }>;
}

/** One item's surfaced keys in a `workspaceFlags` read: key → probability in force. */
export interface WorkspaceFlag {
  ref: string;
  keys: Record<string, number>;
  /** The keys whose probability is a person's value (DESIGN §8.1); absent when none is. */
  human?: string[];
}

/** A key whose surfacing flips (`flapping`). `lastFlipAt` is epoch ms; `surfaced` is its side since then. */
export interface FlappingKey {
  itemId: string;
  ref: string;
  questionSet: string;
  questionKey: string;
  flips: number;
  lastFlipAt: number;
  surfaced: boolean;
}

/** What `peopleOf` knows of one key. */
interface KeyPeople {
  verdict: HumanVerdictRow | null;
  /** Its latest surfacing change's side, or null when it has none. */
  wasSurfaced: boolean | null;
  flips: number;
  /** The state the key is about now (the item's, or its comment's), or null when not built. */
  target: BuiltState | null;
}

interface PeopleIndex {
  /** Some key of the item has a person's value in force. */
  hasValueInForce(itemId: string): boolean;
  of(itemId: string, set: string, questionKey: string, now: SetNow): KeyPeople;
}

const NO_PEOPLE: KeyPeople = { verdict: null, wasSurfaced: null, flips: 0, target: null };

/**
 * What people and the surfacing memory say, from their rows (oldest first): the latest verdict of
 * each key, its latest surfacing change, and its model flips since `since` (epoch ms).
 */
function peopleIndex(
  verdicts: readonly HumanVerdictRow[],
  changes: readonly SurfacingChangeRow[],
  since: number,
): PeopleIndex {
  const k = (itemId: string, set: string, key: string) => `${itemId}\u0000${set}\u0000${key}`;
  const latestVerdict = new Map<string, HumanVerdictRow>();
  const inForce = new Set<string>();
  for (const v of verdicts) latestVerdict.set(k(v.itemId, v.questionSet, v.questionKey), v); // oldest first: the last one wins
  for (const v of latestVerdict.values()) if (overrideValue(v) !== null) inForce.add(v.itemId);
  const latestChange = new Map<string, SurfacingChangeRow>();
  const flips = new Map<string, number>();
  for (const c of changes) {
    const key = k(c.itemId, c.questionSet, c.questionKey);
    latestChange.set(key, c);
    if (c.cause === 'model' && c.flip && c.changedAt >= since) flips.set(key, (flips.get(key) ?? 0) + 1);
  }
  return {
    hasValueInForce: (itemId) => inForce.has(itemId),
    of: (itemId, set, questionKey, now) => {
      const key = k(itemId, set, questionKey);
      return {
        verdict: latestVerdict.get(key) ?? null,
        wasSurfaced: latestChange.get(key)?.surfaced ?? null,
        flips: flips.get(key) ?? 0,
        target: targetState(now, questionKey),
      };
    },
  };
}

/** The state a stored key is about now: its comment's for a per-comment set, else the item's. */
function targetState(now: SetNow, questionKey: string): BuiltState | null {
  if (!now.set || !now.applies) return null;
  if (!now.set.perComment) return now.state;
  const split = splitCommentKey(questionKey);
  return split ? (now.commentStates.get(split.commentId) ?? null) : null;
}

/**
 * A verdict as reads show it. Its state is compared by parts (`movedParts`, which never counts
 * `as_of`, DESIGN §5.2): judged at a state whose parts all equal the current ones, it is not
 * stale; a state that cannot be built now reads `override_stale` with no parts (unknown is not
 * "unchanged").
 */
function verdictView(v: HumanVerdictRow, target: BuiltState | null, set: QuestionSet | null): VerdictView {
  let staleReason: VerdictView['staleReason'] = null;
  let parts: string[] = [];
  if (!target || !set) staleReason = 'override_stale';
  else if (v.stateHash !== target.hash) {
    parts = movedParts(parseParts(v.stateParts), target.parts, set);
    if (parts.length > 0 || v.stateVersion !== target.version) staleReason = 'override_stale';
  }
  let value: Answer | null;
  try {
    value = v.value === null ? null : (JSON.parse(v.value) as Answer);
  } catch {
    value = null;
  }
  return {
    id: v.id,
    verdict: v.verdict,
    value,
    inForce: overrideValue(v) !== null && value !== null,
    author: v.author,
    note: v.note,
    createdAt: v.createdAt,
    stateHash: v.stateHash,
    staleReason,
    changedParts: parts,
  };
}

/** A job that failed within this window (milliseconds) makes `failing` true: one hour, so a fixed outage clears the flag. */
const FAILING_WINDOW_MS = 3_600_000;

function groupBy<T>(xs: readonly T[], by: (x: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const x of xs) {
    const k = by(x);
    const list = m.get(k);
    if (list) list.push(x);
    else m.set(k, [x]);
  }
  return m;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function addClips(a: StateClips, b: StateClips): StateClips {
  return {
    omittedComments: a.omittedComments + b.omittedComments,
    commentsCut: a.commentsCut + b.commentsCut,
    titleCut: a.titleCut || b.titleCut,
    bodyCut: a.bodyCut || b.bodyCut,
    fieldsCut: a.fieldsCut || b.fieldsCut,
    linksDropped: a.linksDropped + b.linksDropped,
    linkTitlesCut: a.linkTitlesCut + b.linkTitlesCut,
  };
}

/**
 * Parses a stored fields text for display, losslessly: numbers stay lossless-json
 * `LosslessNumber`s holding their literal (`3.0`, integers beyond 2^53), so print the result with
 * lossless-json's `stringify`, never `JSON.stringify` (DESIGN §3.2). {} when unreadable.
 */
export function fieldsForDisplay(text: string): Record<string, LosslessValue> {
  try {
    const v = parseLossless(text);
    return v && typeof v === 'object' && !Array.isArray(v) && !isLosslessNumber(v)
      ? (v as Record<string, LosslessValue>)
      : {};
  } catch {
    return {};
  }
}
