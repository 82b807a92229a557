import type { Question } from '../decision/questions.js';
import { questionsOf, type QuestionMap, type Registry } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import { buildAnswerSchema, buildSystemPrompt, maxTokensFor } from '../providers/prompt.js';
import { estimateTokens } from '../providers/provider.js';
import { appliesNow } from '../decision/eligibility.js';
import type { Store } from '../store/store.js';

/** What draining the owed jobs would send, estimated before any call. Tokens. */
export interface DrainEstimate {
  /** Owed jobs. */
  jobs: number;
  /** Provider calls: one per chunk of `maxPerCall` questions of every job whose set applies. */
  calls: number;
  /** Estimated input tokens (system prompt, schema and state), as the input budget counts them. */
  inputTokens: number;
  /** The most output tokens those calls may produce (their summed `max_tokens`). */
  maxOutputTokens: number;
  /** Jobs left out of the estimate: resolved sets whose questions could not be read (counted, not priced). */
  notEstimated: number;
}

/**
 * Estimates what draining every owed job would send (the demo prints it before spending with a
 * paid provider, DESIGN §12). It reads the store only; jobs whose set no longer applies cost
 * nothing. Resolved sets (conventions) are resolved once per workspace, as the runner would;
 * per-comment sets count one call chunk per comment the runner would ask about (the newest 10).
 */
export async function estimateDrain(store: Store, registry: Registry): Promise<DrainEstimate> {
  const out: DrainEstimate = { jobs: 0, calls: 0, inputTokens: 0, maxOutputTokens: 0, notEstimated: 0 };
  const resolved = new Map<string, QuestionMap | null>();
  for (const job of await store.listJobs({ state: 'owed', limit: 1_000_000 })) {
    out.jobs++;
    const set = registry.get(job.questionSet);
    if (!set) continue;
    const key = `${set.name}\u0000${job.workspaceId}`;
    if (!resolved.has(key)) resolved.set(key, await questionsOf(set, { workspaceId: job.workspaceId, store }).catch(() => null));
    const questions = resolved.get(key) ?? null;
    if (!questions) {
      out.notEstimated++;
      continue;
    }
    const loaded = await store.loadItemForEvaluation(job.itemId);
    if (!loaded || loaded.item.deletedAt !== null || loaded.collection.deletedAt !== null) continue;
    if (!appliesNow(set, loaded.item, loaded.collection)) continue;
    const targets = setTargets(set, loaded);
    const keys = Object.keys(questions).sort();
    for (const { state } of targets) {
      for (let i = 0; i < keys.length; i += set.maxPerCall) {
        const chunk = new Map<string, Question>(keys.slice(i, i + set.maxPerCall).map((k) => [k, questions[k]]));
        const system = buildSystemPrompt(chunk, { explain: set.explain });
        const schema = JSON.stringify(buildAnswerSchema(chunk, { explain: set.explain }));
        out.calls++;
        out.inputTokens += estimateTokens(system) + estimateTokens(schema) + estimateTokens(state.bytes);
        out.maxOutputTokens += maxTokensFor(chunk, set.explain);
      }
    }
  }
  return out;
}
