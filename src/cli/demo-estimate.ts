import type { Question } from '../decision/questions.js';
import { questionsOf, type QuestionMap, type QuestionSet, type Registry } from '../decision/registry.js';
import { setTargets } from '../decision/set-states.js';
import { buildAnswerSchema, buildSystemPrompt, maxTokensFor } from '../providers/prompt.js';
import { estimateTokens } from '../providers/provider.js';
import { appliesNow } from '../decision/eligibility.js';
import type { Store } from '../store/whole-store.js';
import { coAskCalls } from '../runner/evaluate.js';

/** What draining the owed jobs would send, estimated before any call. Tokens. */
export interface DrainEstimate {
  /** Owed jobs. */
  jobs: number;
  /** Provider calls: one per chunk of `maxPerCall` questions of every job whose set applies, chunks of one item's sets on byte-identical state sharing a call (DESIGN §7.2). */
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
 * per-comment sets count one call chunk per comment the runner would ask about (the newest 10);
 * an item's sets reading byte-identical state count one call, as the worker co-asks them.
 */
export async function estimateDrain(
  store: Pick<Store, 'listCollections' | 'listItems' | 'listJobs' | 'loadItemForEvaluation'>,
  registry: Registry,
): Promise<DrainEstimate> {
  const out: DrainEstimate = { jobs: 0, calls: 0, inputTokens: 0, maxOutputTokens: 0, notEstimated: 0 };
  const resolved = new Map<string, QuestionMap | null>();
  const byItem = new Map<string, Array<{ set: QuestionSet; questions: QuestionMap }>>();
  for (const job of await store.listJobs({ state: 'owed', limit: 1_000_000 })) {
    out.jobs++;
    const set = registry.get(job.questionSet);
    if (!set) continue;
    const key = `${set.name}\u0000${job.workspaceId}`;
    if (!resolved.has(key))
      resolved.set(key, await questionsOf(set, { workspaceId: job.workspaceId, store }).catch(() => null));
    const questions = resolved.get(key) ?? null;
    if (!questions) {
      out.notEstimated++;
      continue;
    }
    let sets = byItem.get(job.itemId);
    if (!sets) byItem.set(job.itemId, (sets = []));
    sets.push({ set, questions });
  }
  for (const [itemId, sets] of byItem) {
    const loaded = await store.loadItemForEvaluation(itemId);
    if (!loaded || loaded.item.deletedAt !== null || loaded.collection.deletedAt !== null) continue;
    const chunksOf = sets
      .filter(({ set }) => appliesNow(set, loaded.item, loaded.collection))
      .map(({ set, questions }, claim) => {
        const keys = Object.keys(questions).sort();
        const chunks: Array<{ state: { bytes: string }; questions: Map<string, Question> }> = [];
        for (const { state } of setTargets(set, loaded)) {
          for (let i = 0; i < keys.length; i += set.maxPerCall) {
            chunks.push({
              state,
              questions: new Map<string, Question>(keys.slice(i, i + set.maxPerCall).map((k) => [k, questions[k]])),
            });
          }
        }
        return { claim, set, chunks };
      });
    // The worker asks an item's sets whose states are byte-identical in one call (DESIGN §7.2):
    // the same packing rule counts the calls here.
    for (const call of coAskCalls(chunksOf)) {
      const questions = new Map<string, Question>();
      for (const p of call.parts) for (const [k, q] of p.chunk.questions) questions.set(k, q);
      out.calls++;
      out.inputTokens +=
        estimateTokens(buildSystemPrompt(questions, { explain: call.explain })) +
        estimateTokens(JSON.stringify(buildAnswerSchema(questions, { explain: call.explain }))) +
        estimateTokens(call.state.bytes);
      out.maxOutputTokens += maxTokensFor(questions, call.explain);
    }
  }
  return out;
}
