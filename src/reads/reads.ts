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
import { changedParts, isClipped, NO_CLIPS, type BuiltState, type StateClips } from '../decision/state.js';
import { continuationKey, parseContinuation, pendingSets } from '../store/collection-owe.js';
import type { DecisionRow, ItemForEvaluation, Store } from '../store/store.js';
import { appliesNow, whyNotApplies } from '../decision/eligibility.js';
import { silentLogger, type Logger } from '../log.js';

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
  | 'comment_gone';

/**
 * How a surfacing read classes a row:
 * - `surfaced`: a noul at or above the threshold that is current, or `state_changed` with its job owed;
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
}

/**
 * Splits a per-comment key `<key>@<commentId>` at its first `@` (DESIGN §16.2: question keys never
 * contain `@`, comment ids may); null when malformed (then never current).
 */
export function splitCommentKey(storedKey: string): { key: string; commentId: string } | null {
  const at = storedKey.indexOf('@');
  if (at <= 0 || at === storedKey.length - 1) return null;
  return { key: storedKey.slice(0, at), commentId: storedKey.slice(at + 1) };
}

/**
 * The one surfacing rule (DESIGN §8), shared by every read: only nouls surface; a current noul
 * surfaces at or above the threshold; a `state_changed` noul whose job is owed (not parked) still
 * surfaces, marked not current, so a flag does not blink off during the debounce after an edit;
 * every other stale row does not.
 */
export function surfacingOf(r: {
  answer: Answer;
  current: boolean;
  staleReason: StaleReason | null;
  jobOwed: boolean;
  threshold: number;
  unsurfacedKey: boolean;
}): Surfacing {
  if (r.unsurfacedKey || r.answer.type !== 'noul') return 'not_surfaced';
  if (!r.current && !(r.staleReason === 'state_changed' && r.jobOwed)) return 'stale';
  return r.answer.noul >= r.threshold ? 'surfaced' : 'below_threshold';
}

/** What one (set, item) looks like now, as far as currency is concerned. */
export interface SetNow {
  /** Null when the set is not registered here. */
  set: QuestionSet | null;
  /** The item is live and the set applies to it now. */
  applies: boolean;
  /** The set's questions in the item's workspace; null when they could not be read. */
  questions: QuestionMap | null;
  /** The item state as this set sees it (item-level sets); null when not built or unreadable. */
  state: BuiltState | null;
  /** Per-comment sets: comment id → its state, for every live comment. */
  commentStates: ReadonlyMap<string, BuiltState>;
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
 */
export function judgeRows(rows: readonly DecisionRow[], now: SetNow, ctx: FingerprintContext & { name: string }): Judgement {
  const latest = rows[rows.length - 1];
  const stale = (staleReason: StaleReason, parts: string[] = []): Judgement => ({ row: latest, current: false, staleReason, changedParts: parts });
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
  const q: Question | undefined = Object.prototype.hasOwnProperty.call(now.questions, key) ? now.questions[key] : undefined;
  if (!q) return stale('question_removed');
  if (!state) return stale('not_compared');
  const fp = questionFingerprint(q, ctx);
  for (let i = rows.length - 1; i >= 0; i--) {
    const r = rows[i];
    if (r.stateHash === state.hash && r.questionHash === fp && r.stateVersion === state.version) {
      return { row: r, current: true, staleReason: null, changedParts: [] };
    }
  }
  // A row of another shape version cannot answer the comparison (DESIGN §5, §16.11): the item
  // state is version 2 since omitted_comments, the per-comment state still version 1.
  if (latest.stateVersion !== state.version) return stale('not_compared');
  if (latest.questionHash !== fp) {
    const asked = parseFingerprintContext(latest.fingerprintContext);
    if (asked) return stale(questionFingerprint(q, asked) === latest.questionHash ? 'model_changed' : 'question_changed');
    return stale(latest.provider === ctx.name ? 'question_changed' : 'model_changed');
  }
  return stale('state_changed', changedParts(parseParts(latest.stateParts), state.parts));
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
    private readonly store: Store,
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
    const owed = new Set(jobs.filter((j) => j.state === 'owed').map((j) => j.questionSet));
    if (loaded) for (const s of await this.pendingCollectionSets(loaded.item.collectionId)) owed.add(s);
    const bySet = groupBy(rows, (r) => r.questionSet);
    const out: DecisionView[] = [];
    for (const [setName, setRows] of bySet) {
      const set = this.registry.get(setName) ?? null;
      const now = await this.setNow(set, loaded);
      for (const keyRows of groupBy(setRows, (r) => r.questionKey).values()) {
        out.push(this.view(judgeRows(keyRows, now, this.ctx), set, owed.has(setName), set?.threshold ?? 1));
      }
    }
    return out.sort((a, b) => cmp(a.questionSet, b.questionSet) || cmp(a.questionKey, b.questionKey));
  }

  /**
   * How the states the item's sets read now were clipped (DESIGN §16.11): one entry per set that
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
  async setApplicability(itemId: string): Promise<Array<{ questionSet: string; applies: boolean; reason: string | null }>> {
    if (!this.ctx) return [];
    const loaded = await this.store.loadItemForEvaluation(itemId);
    if (!loaded) return [];
    const gone = loaded.item.deletedAt !== null ? 'item is deleted' : loaded.collection.deletedAt !== null ? `collection "${loaded.collection.slug}" is deleted` : null;
    return this.registry
      .setsFor(loaded.collection.slug)
      .map((set) => {
        const reason = gone ?? whyNotApplies(set, loaded.item, loaded.collection);
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
  async staleWatch(workspaceId: string, itemId: string): Promise<{ madeStale(): Promise<{ itemAnswers: number; questionAnswers: number; changedQuestions: string[] }> }> {
    const ctx = this.ctx;
    if (!ctx) return { madeStale: async () => ({ itemAnswers: 0, questionAnswers: 0, changedQuestions: [] }) };
    const fingerprints = async (): Promise<Map<string, Map<string, string> | null>> => {
      const out = new Map<string, Map<string, string> | null>();
      for (const set of this.registry.all()) {
        const qs = await this.questions(set, workspaceId);
        out.set(set.name, qs === null ? null : new Map(Object.entries(qs).map(([k, q]) => [k, questionFingerprint(q, ctx)])));
      }
      return out;
    };
    const currentKeys = async () => new Set((await this.decisions(itemId)).filter((d) => d.current).map((d) => `${d.questionSet}\u0000${d.questionKey}`));
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
  async surfacedDecisions(itemId: string): Promise<{ surfaced: DecisionView[]; belowThreshold: number; stale: number }> {
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
  ): Promise<{ flags: Record<string, { ref: string; keys: Record<string, number> }>; failing: boolean }> {
    const flags: Record<string, { ref: string; keys: Record<string, number> }> = {};
    if (!this.ctx) return { flags, failing: false };
    const set = this.registry.get(setName);
    const failing = await this.failing(workspaceId, setName);
    if (!set) return { flags, failing };
    const cut = threshold ?? set.threshold;
    const rows = await this.store.listWorkspaceDecisions(workspaceId, setName);
    const byItem = groupBy(rows, (r) => r.itemId);
    let questions: QuestionMap | null | undefined;
    for (const itemId of [...byItem.keys()].sort()) {
      const itemRows = byItem.get(itemId)!;
      const candidate = itemRows.some((r) => {
        if (r.kind !== 'noul') return false;
        const base = set.perComment ? (splitCommentKey(r.questionKey)?.key ?? r.questionKey) : r.questionKey;
        return !set.unsurfaced.includes(base) && (JSON.parse(r.answer) as { noul: number }).noul >= cut;
      });
      if (!candidate) continue;
      if (questions === undefined) questions = await this.questions(set, workspaceId);
      const loaded = await this.store.loadItemForEvaluation(itemId);
      const now = this.setNowWith(set, loaded, questions);
      const job = await this.store.getJob(itemId, setName);
      const owed = job?.state === 'owed' || (loaded !== null && (await this.pendingCollectionSets(loaded.item.collectionId)).includes(setName));
      for (const keyRows of groupBy(itemRows, (r) => r.questionKey).values()) {
        const v = this.view(judgeRows(keyRows, now, this.ctx), set, owed, cut);
        if (v.surfacing !== 'surfaced' || v.answer.type !== 'noul') continue;
        flags[itemId] ??= { ref: loaded?.item.ref ?? itemId, keys: {} };
        flags[itemId].keys[v.questionKey] = v.answer.noul;
      }
    }
    return { flags, failing };
  }

  /**
   * Sets a pending collection change still owes the collection's items (DESIGN §16.12): their
   * jobs count as owed for surfacing even before the worker writes their chunk, so a flag does
   * not blink off during the walk. (Currency needs nothing: it compares the live state.)
   */
  private async pendingCollectionSets(collectionId: string): Promise<string[]> {
    return pendingSets(parseContinuation(await this.store.getMeta(continuationKey(collectionId)), []));
  }

  private async failing(workspaceId: string, setName: string): Promise<boolean> {
    if ((await this.store.listJobs({ workspaceId, questionSet: setName, state: 'parked', limit: 1 })).length > 0) return true;
    const owed = await this.store.listJobs({ workspaceId, questionSet: setName, state: 'owed', errorWithinMs: FAILING_WINDOW_MS, limit: 1_000 });
    return owed.some((j) => j.attempts > 0 || j.refusals > 0);
  }

  private async questions(set: QuestionSet, workspaceId: string): Promise<QuestionMap | null> {
    try {
      return await questionsOf(set, { workspaceId, store: this.store, logger: this.logger });
    } catch (err) {
      // Unknown is not absent: with the questions unreadable, nothing of this set reads current.
      this.logger.warn({ set: set.name, workspaceId, err: (err as { code?: string }).code ?? (err as Error).name }, 'questions could not be read');
      return null;
    }
  }

  private async setNow(set: QuestionSet | null, loaded: ItemForEvaluation | null): Promise<SetNow> {
    if (!set) return { set: null, applies: false, questions: null, state: null, commentStates: new Map() };
    const questions = loaded ? await this.questions(set, loaded.item.workspaceId) : null;
    return this.setNowWith(set, loaded, questions);
  }

  private setNowWith(set: QuestionSet, loaded: ItemForEvaluation | null, questions: QuestionMap | null): SetNow {
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
    return { set, applies, questions, state, commentStates };
  }

  private view(j: Judgement, set: QuestionSet | null, jobOwed: boolean, threshold: number): DecisionView {
    const r = j.row;
    const answer = JSON.parse(r.answer) as Answer;
    const split = set?.perComment ? splitCommentKey(r.questionKey) : null;
    const key = split?.key ?? r.questionKey;
    const unsurfacedKey = set?.unsurfaced.includes(key) ?? false;
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
      surfacing: surfacingOf({ answer, current: j.current, staleReason: j.staleReason, jobOwed, threshold, unsurfacedKey }),
      unsurfaced: unsurfacedKey,
      threshold,
      rationale: r.rationale ?? null,
      rowId: r.id,
    };
  }
}

/** A job that failed within this window (milliseconds) makes `failing` true: one hour, so a fixed outage clears the flag. */
export const FAILING_WINDOW_MS = 3_600_000;

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
 * lossless-json's `stringify`, never `JSON.stringify` (DESIGN §16.10). {} when unreadable.
 */
export function fieldsForDisplay(text: string): Record<string, LosslessValue> {
  try {
    const v = parseLossless(text);
    return v && typeof v === 'object' && !Array.isArray(v) && !isLosslessNumber(v) ? (v as Record<string, LosslessValue>) : {};
  } catch {
    return {};
  }
}
