import { stateToAsk } from '../decision/as-of.js';
import type { Answer, Question } from '../decision/questions.js';
import { questionsOf, type QuestionSet, type Registry } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import { buildSystemPrompt } from '../providers/prompt.js';
import { silentLogger } from '../log.js';
import type { Store } from '../store/whole-store.js';
import type { DecisionReader, StaleReason } from '../reads/reads.js';

/**
 * "Why did it say that": for each set of an item, the exact prompt Verdict would send for the
 * item's current state (the system prompt of the Messages request and its one user message, the
 * state bytes as hashed), the state hash, and the stored answers beside it, whether each was asked
 * about that state, with its rationale when the set asks for one.
 *
 * Everything here is item text and question text: it is returned to the one caller who asked
 * (`verdict explain`, `GET /v1/items/{ref}/explain` with an admin token, the item page) and never
 * logged; this module logs nothing at all.
 */

/** One stored answer of a target, as `explain` shows it. */
export interface ExplainedAnswer {
  /** The stored key (`<key>@<commentId>` for per-comment sets). */
  questionKey: string;
  /** The model's stored answer (a person's value is not the model's: see `verdict show`). */
  answer: Answer;
  /** The answer's confidence (null for nouls). */
  confidence: number | null;
  /** The model's one-sentence reason, when the set asks for one (`explain`) and the answer has it. */
  rationale: string | null;
  /** The state hash the answer was asked about. */
  stateHash: string;
  /** The answer was asked about the state shown (`stateHash` equals the target's). */
  matchesState: boolean;
  /** Current as reads judge it (the state, the question and the model configured now); else why not. */
  current: boolean;
  staleReason: StaleReason | null;
  provider: string;
  model: string;
  /** Epoch ms. */
  evaluatedAt: number;
}

/** One prompt: the item's state, or one comment's for a per-comment set. */
export interface ExplainedTarget {
  /** The comment asked about, or null for the item itself. */
  commentId: string | null;
  /** sha256 hex of `user`: the hash stored with every answer asked about it. */
  stateHash: string;
  /** The system prompt (answering rules, then every question of the set, sorted by key). */
  system: string;
  /** The one user message: the state bytes, exactly as hashed and sent. */
  user: string;
  /** The set's question keys the prompt asks, sorted. */
  questionKeys: string[];
  /** The stored answers about this target, any state, sorted by key. */
  stored: ExplainedAnswer[];
}

/** One set's part of `explain`. */
export interface ExplainedSet {
  questionSet: string;
  /** The set applies to the item now; when not, `reason` says why and there are no targets. */
  applies: boolean;
  reason: string | null;
  /** The set asks for a rationale per answer (its `explain`). */
  rationale: boolean;
  /**
   * The questions a call carries at most (the set's `maxPerCall`): a set with more keys is sent in
   * several calls, each with the system prompt of its own keys; shown here as one.
   */
  maxPerCall: number;
  targets: ExplainedTarget[];
}

/** What `Verdict.explain` returns. */
export interface ExplainReport {
  itemId: string;
  ref: string;
  sets: ExplainedSet[];
}

/**
 * Builds the report for one loaded item (see the file comment). The prompt is the Anthropic and
 * OpenAI-compatible (json_schema) providers' own: `buildSystemPrompt` with the set's `explain`,
 * and the state `setTargets` builds (dated for a set with `maxAgeMs`), as the runner plans a call.
 * @param setName only this set. @returns null when the item does not exist.
 */
export async function explainItem(
  store: Pick<Store, 'listCollections' | 'listDecisions' | 'listItems' | 'loadItemForEvaluation' | 'now'>,
  registry: Registry,
  reader: DecisionReader,
  itemId: string,
  setName?: string,
): Promise<ExplainReport | null> {
  const loaded = await store.loadItemForEvaluation(itemId);
  if (!loaded) return null;
  const applicability = new Map((await reader.setApplicability(itemId)).map((a) => [a.questionSet, a]));
  const views = await reader.decisions(itemId);
  const sets: ExplainedSet[] = [];
  for (const set of registry.setsFor(loaded.collection.slug)) {
    if (setName !== undefined && set.name !== setName) continue;
    const a = applicability.get(set.name);
    const applies = a?.applies ?? false;
    const out: ExplainedSet = {
      questionSet: set.name,
      applies,
      reason: a?.reason ?? null,
      rationale: set.explain,
      maxPerCall: set.maxPerCall,
      targets: [],
    };
    sets.push(out);
    if (!applies) continue;
    const questions = await questionsOf(set, { workspaceId: loaded.item.workspaceId, store, logger: silentLogger });
    const keys = Object.keys(questions).sort();
    const asked = new Map<string, Question>(keys.map((k) => [k, questions[k]]));
    const rows = new Map((await store.listDecisions(itemId, set.name)).map((r) => [r.id, r]));
    const nowMs = set.maxAgeMs === null ? 0 : await store.now();
    for (const target of setTargets(set, loaded)) {
      const state = stateToAsk(target.state, set as QuestionSet, nowMs);
      const stored = views
        .filter((v) => v.questionSet === set.name && v.commentId === target.commentId)
        .map((v): ExplainedAnswer => {
          const stateHash = rows.get(v.rowId)?.stateHash ?? '';
          return {
            questionKey: v.questionKey,
            answer: v.modelAnswer,
            confidence: v.confidence,
            rationale: set.explain ? v.rationale : null,
            stateHash,
            matchesState: stateHash === state.hash,
            current: v.current,
            staleReason: v.staleReason,
            provider: v.provider,
            model: v.model,
            evaluatedAt: v.evaluatedAt,
          };
        })
        .sort((x, y) => (x.questionKey < y.questionKey ? -1 : x.questionKey > y.questionKey ? 1 : 0));
      out.targets.push({
        commentId: target.commentId,
        stateHash: state.hash,
        system: buildSystemPrompt(asked, { explain: set.explain }),
        user: state.bytes,
        questionKeys: keys,
        stored,
      });
    }
  }
  return { itemId, ref: loaded.item.ref, sets };
}
