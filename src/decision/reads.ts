import { parseLossless } from './canonical-json.js';
import { questionFingerprint, type Answer, type FingerprintContext, type Question } from './questions.js';
import type { QuestionSet, Registry } from './registry.js';
import { validateQuestions } from './registry.js';
import { buildCommentState, buildItemState, changedParts, STATE_VERSION, type BuiltState } from './state.js';
import type { DecisionRow, ItemForEvaluation, Store } from '../store/store.js';
import { appliesNow } from '../runner/eligibility.js';

/**
 * Reads: which answers are current, and which are worth showing (DESIGN §8).
 *
 * For each (set, key) a read shows the row that matches the current state hash, fingerprint and
 * state version when one exists (so S1 → S2 → S1 reads current without a new call), otherwise the
 * latest row, with a `staleReason`.
 */

export type StaleReason =
  | 'state_changed'
  | 'question_changed'
  | 'model_changed'
  | 'question_removed'
  | 'not_applicable'
  | 'set_unknown'
  | 'not_compared'
  | 'comment_gone';

/** How a surfacing read classes a row. */
export type Surfacing = 'surfaced' | 'below_threshold' | 'stale' | 'unsurfaced';

export interface DecisionView {
  questionSet: string;
  /** The stored key (`<key>@<commentId>` for per-comment sets). */
  questionKey: string;
  kind: DecisionRow['kind'];
  answer: Answer;
  /** Null for nouls. */
  confidence: number | null;
  provider: string;
  model: string;
  evaluatedAt: number;
  current: boolean;
  staleReason: StaleReason | null;
  /** For `state_changed`: the parts that moved (title, collection, fields, body, trail, links, comment). */
  changedParts: string[];
  surfacing: Surfacing;
  rationale: string | null;
  rowId: number;
}

/** Splits a per-comment key at its last `@`; null when malformed (then never current). */
export function splitCommentKey(storedKey: string): { key: string; commentId: string } | null {
  const at = storedKey.lastIndexOf('@');
  if (at <= 0 || at === storedKey.length - 1) return null;
  return { key: storedKey.slice(0, at), commentId: storedKey.slice(at + 1) };
}

interface SetView {
  set: QuestionSet;
  applies: boolean;
  questions: Record<string, Question> | null;
  state: BuiltState | null;
  commentStates: Map<string, BuiltState>;
  jobOwed: boolean;
}

/**
 * The reader. `ctx` is the fingerprint context (model, prompt version, effort) of the provider
 * configured now: answers asked under another one read `model_changed`.
 */
export class DecisionReader {
  constructor(
    private readonly store: Store,
    private readonly registry: Registry,
    private readonly ctx: FingerprintContext & { name: string },
  ) {}

  /** Every key's row with `current` and `staleReason`. Never null: [] when there is nothing. */
  async decisions(itemId: string): Promise<DecisionView[]> {
    const rows = await this.store.listDecisions(itemId);
    if (rows.length === 0) return [];
    const loaded = await this.store.loadItemForEvaluation(itemId);
    const views = new Map<string, SetView | null>();
    const bySetKey = new Map<string, DecisionRow[]>();
    for (const r of rows) {
      const k = `${r.questionSet}\u0000${r.questionKey}`;
      const list = bySetKey.get(k) ?? [];
      list.push(r);
      bySetKey.set(k, list);
    }
    const out: DecisionView[] = [];
    for (const list of bySetKey.values()) {
      const setName = list[0].questionSet;
      if (!views.has(setName)) views.set(setName, await this.setView(setName, itemId, loaded));
      out.push(this.pick(list, views.get(setName)!));
    }
    return out.sort((a, b) => (a.questionSet + '\u0000' + a.questionKey < b.questionSet + '\u0000' + b.questionKey ? -1 : 1));
  }

  /** The same as `decisions`, without keys a set marks unsurfaced. */
  async itemReadDecisions(itemId: string): Promise<DecisionView[]> {
    return (await this.decisions(itemId)).filter((d) => d.surfacing !== 'unsurfaced');
  }

  /** Surfaced rows, plus counts of below-threshold and stale rows. */
  async surfacedDecisions(itemId: string): Promise<{ surfaced: DecisionView[]; belowThreshold: number; stale: number }> {
    const all = await this.decisions(itemId);
    return {
      surfaced: all.filter((d) => d.surfacing === 'surfaced'),
      belowThreshold: all.filter((d) => d.surfacing === 'below_threshold').length,
      stale: all.filter((d) => d.surfacing === 'stale').length,
    };
  }

  /**
   * item id → key → probability for the surfaced nouls of one set in a workspace, plus `failing`
   * (a job of that set in that workspace has a recent error). One batch query plus one state read
   * per candidate item.
   */
  async workspaceFlags(
    workspaceId: string,
    setName: string,
    threshold?: number,
  ): Promise<{ flags: Record<string, { ref: string; keys: Record<string, number> }>; failing: boolean }> {
    const rows = await this.store.listWorkspaceDecisions(workspaceId, setName);
    const set = this.registry.get(setName);
    const cut = threshold ?? set?.threshold ?? 0.5;
    const candidates = new Set(rows.filter((r) => r.kind === 'noul' && (JSON.parse(r.answer) as { noul: number }).noul >= cut).map((r) => r.itemId));
    const flags: Record<string, { ref: string; keys: Record<string, number> }> = {};
    for (const itemId of [...candidates].sort()) {
      for (const d of await this.decisions(itemId)) {
        if (d.questionSet !== setName || d.surfacing === 'unsurfaced' || d.kind !== 'noul') continue;
        const p = (d.answer as { noul: number }).noul;
        const shows = d.current || (d.staleReason === 'state_changed' && d.surfacing === 'surfaced');
        if (!shows || p < cut) continue;
        const item = await this.store.getItem(itemId);
        flags[itemId] ??= { ref: item?.ref ?? itemId, keys: {} };
        flags[itemId].keys[d.questionKey] = p;
      }
    }
    const jobs = await this.store.listJobs({ workspaceId, questionSet: setName, limit: 10_000 });
    const failing = jobs.some((j) => j.lastError !== null && (j.state === 'parked' || j.attempts > 0 || j.refusals > 0));
    return { flags, failing };
  }

  private async setView(setName: string, itemId: string, loaded: ItemForEvaluation | null): Promise<SetView | null> {
    const set = this.registry.get(setName);
    if (!set) return null;
    const live = loaded !== null && loaded.item.deletedAt === null && loaded.collection.deletedAt === null;
    const applies = live && appliesNow(set, loaded!.item, loaded!.collection);
    let questions: Record<string, Question> | null = null;
    try {
      questions = set.questions ? { ...set.questions } : { ...validateQuestions(await set.resolve!({ workspaceId: loaded?.item.workspaceId ?? '' })) };
    } catch {
      questions = null; // unknown is not absent: nothing reads current
    }
    let state: BuiltState | null = null;
    const commentStates = new Map<string, BuiltState>();
    if (applies && loaded) {
      try {
        if (set.perComment) {
          for (const c of loaded.comments) {
            commentStates.set(c.id, buildCommentState({ title: loaded.item.title, collectionSlug: loaded.collection.slug, comment: c }));
          }
        } else {
          state = buildItemState(
            { title: loaded.item.title, collectionSlug: loaded.collection.slug, fieldsText: loaded.item.fields, content: loaded.item.content, comments: loaded.comments, links: loaded.links },
            { withLinks: set.withLinks, noTrail: set.noTrail },
          );
        }
      } catch {
        state = null;
      }
    }
    const job = await this.store.getJob(itemId, setName);
    return { set, applies, questions, state, commentStates, jobOwed: job !== null && job.state === 'owed' };
  }

  private pick(rows: DecisionRow[], view: SetView | null): DecisionView {
    const latest = rows[rows.length - 1];
    if (!view) return this.toView(latest, false, 'set_unknown', [], null);
    const storedKey = latest.questionKey;
    let key = storedKey;
    let state = view.state;
    if (view.set.perComment) {
      const split = splitCommentKey(storedKey);
      if (!split) return this.toView(latest, false, 'question_removed', [], view);
      key = split.key;
      state = view.commentStates.get(split.commentId) ?? null;
      if (view.applies && !state) return this.toView(latest, false, 'comment_gone', [], view);
    }
    if (!view.applies) return this.toView(latest, false, 'not_applicable', [], view);
    const q = view.questions?.[key];
    if (!view.questions || !q || !state) return this.toView(latest, false, view.questions && !q ? 'question_removed' : 'not_compared', [], view);
    const fp = questionFingerprint(q, this.ctx);
    const match = rows.find((r) => r.stateHash === state!.hash && r.questionHash === fp && r.stateVersion === STATE_VERSION);
    if (match) return this.toView(match, true, null, [], view);
    if (latest.stateVersion !== STATE_VERSION) return this.toView(latest, false, 'not_compared', [], view);
    if (latest.questionHash !== fp) {
      const sameAnswerer = latest.provider === this.ctx.name;
      return this.toView(latest, false, sameAnswerer ? 'question_changed' : 'model_changed', [], view);
    }
    const parts = changedParts(JSON.parse(latest.stateParts) as Record<string, string>, state.parts);
    return this.toView(latest, false, 'state_changed', parts, view);
  }

  private toView(r: DecisionRow, current: boolean, staleReason: StaleReason | null, parts: string[], view: SetView | null): DecisionView {
    const answer = JSON.parse(r.answer) as Answer;
    const set = view?.set;
    const baseKey = set?.perComment ? (splitCommentKey(r.questionKey)?.key ?? r.questionKey) : r.questionKey;
    let surfacing: Surfacing;
    if (set?.unsurfaced.includes(baseKey)) surfacing = 'unsurfaced';
    else if (answer.type !== 'noul') surfacing = 'unsurfaced'; // only nouls surface
    else if (!current && !(staleReason === 'state_changed' && view?.jobOwed)) surfacing = 'stale';
    else surfacing = answer.noul >= (set?.threshold ?? 1) ? 'surfaced' : 'below_threshold';
    return {
      questionSet: r.questionSet,
      questionKey: r.questionKey,
      kind: r.kind,
      answer,
      confidence: r.confidence,
      provider: r.provider,
      model: r.model,
      evaluatedAt: r.evaluatedAt,
      current,
      staleReason,
      changedParts: parts,
      surfacing,
      rationale: r.rationale ?? null,
      rowId: r.id,
    };
  }
}

/** Parses a stored fields text for display; {} when unreadable. */
export function fieldsForDisplay(text: string): Record<string, unknown> {
  try {
    const v = parseLossless(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? JSON.parse(JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && 'isLosslessNumber' in x ? Number(String(x)) : x))) : {};
  } catch {
    return {};
  }
}
