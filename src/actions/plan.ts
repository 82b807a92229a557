import { pickedLevel, type Answer } from '../decision/questions.js';
import type { DecisionView } from '../reads/reads.js';
import type { PlannedAction, ProposalReason } from '../store/actions.js';
import type { ActionMode, KeyAction } from './config.js';

/**
 * The planning rule of one (item, key) that acts (DESIGN §17), pure: from the key's decision as
 * the reads show it, what Verdict writes and what it only proposes.
 *
 * - The labels a decision asks for: a noul's label while it surfaces (DESIGN §8.2's hysteresis
 *   included), none while it does not; a choice's or score's label of the option or level it picks
 *   (none when that one has no label). A decision that is stale for any other reason than a
 *   pending re-ask asks for nothing: the labels stay as they are.
 * - A person's verdict in force holds the key (Sentry's rule for a hand-set priority): Verdict
 *   writes the person's value (a `disagree` without a value leaves the labels alone) and the
 *   model's answers that differ are proposals, never applied. Withdrawing the verdict hands the
 *   key back to the model.
 * - Otherwise the model's labels are written only in `apply` mode with the key past the gate;
 *   else they are a proposal (reason `mode` or `gate`) unless the issue already shows them.
 * - A proposal is resolved by a person's verdict on the very answer it stands for (apply = agree,
 *   dismiss = disagree): it is not proposed again until the model answers anew.
 * - A closed or deleted item gets nothing.
 */

/** The labels one answer of the key puts on an issue. @param surfaced for a noul: whether it surfaces. */
export function labelsOf(action: Pick<KeyAction, 'labels'>, answer: Answer, surfaced: boolean): string[] {
  let label: string | undefined;
  if (answer.type === 'noul') label = surfaced ? action.labels.true : undefined;
  else if (answer.type === 'choice') label = action.labels[answer.choice];
  else label = action.labels[pickedLevel(answer)];
  return label === undefined ? [] : [label];
}

/** Same labels, whatever the order or case (GitHub compares label names case-insensitively). */
export function sameLabels(a: readonly string[], b: readonly string[]): boolean {
  const x = a.map((l) => l.toLowerCase()).sort();
  const y = b.map((l) => l.toLowerCase()).sort();
  return x.length === y.length && x.every((l, i) => l === y[i]);
}

/** What the model's own answer asks for now, or null when it asks nothing (no answer, or stale). */
function modelLabels(action: KeyAction, view: DecisionView | undefined, threshold: number): string[] | null {
  if (!view) return null;
  if (view.source === 'model' && action.kind === 'noul' && view.surfacing !== 'not_surfaced') {
    if (view.surfacing === 'stale') return null;
    return labelsOf(action, view.modelAnswer, view.surfacing === 'surfaced');
  }
  // A person's value shows in the read: the model's side is its own current answer at the threshold.
  if (!view.current) return null;
  const a = view.modelAnswer;
  return labelsOf(action, a, a.type === 'noul' && a.noul >= threshold);
}

/** Everything the rule reads about one (item, key). */
export interface PlanInput {
  action: KeyAction;
  workspaceId: string;
  itemId: string;
  /** The key's decision (reads.ts), or undefined when the model never answered it. */
  view: DecisionView | undefined;
  /** The set's threshold (a person's noul value surfaces at it). */
  threshold: number;
  /** The mode in force: the set's, capped by the worker's. */
  mode: ActionMode;
  /** The key is past the calibration gate in this workspace. */
  gatePasses: boolean;
  /** Answer rows a person gave a verdict on (a proposal of one of them is resolved). */
  judgedRows: ReadonlySet<number>;
  /** The group's labels on the issue as last seen, or null when unknown. */
  applied: readonly string[] | null;
  /** The item is closed (terminal) or deleted. */
  closedOrGone: boolean;
}

/** The plan of one (item, key): see the file comment. */
export function planKey(p: PlanInput): PlannedAction {
  const base = { workspaceId: p.workspaceId, itemId: p.itemId, questionSet: p.action.set, questionKey: p.action.key };
  const none: PlannedAction = {
    ...base,
    want: null,
    source: null,
    decisionId: null,
    proposal: null,
    proposalReason: null,
    proposalDecisionId: null,
  };
  if (p.closedOrGone || p.mode === 'off' || !p.view) return none;
  const view = p.view;
  const model = modelLabels(p.action, view, p.threshold);
  const held = view.verdict !== null && view.verdict.verdict !== 'withdrawn';
  const propose = (
    reason: ProposalReason,
    against: readonly string[] | null,
  ): Pick<PlannedAction, 'proposal' | 'proposalReason' | 'proposalDecisionId'> =>
    model !== null && !sameLabels(model, against ?? []) && !p.judgedRows.has(view.rowId)
      ? { proposal: model, proposalReason: reason, proposalDecisionId: view.rowId }
      : { proposal: null, proposalReason: null, proposalDecisionId: null };
  if (held) {
    const value = view.verdict!.value;
    const human = value === null ? null : labelsOf(p.action, value, value.type === 'noul' && value.noul >= p.threshold);
    return {
      ...base,
      want: human,
      source: human === null ? null : 'human',
      decisionId: human === null ? null : view.rowId,
      ...propose('person', human ?? p.applied),
    };
  }
  if (model === null) return none;
  if (p.mode === 'apply' && p.gatePasses) {
    return {
      ...base,
      want: model,
      source: 'model',
      decisionId: view.rowId,
      proposal: null,
      proposalReason: null,
      proposalDecisionId: null,
    };
  }
  return { ...none, ...propose(p.mode === 'apply' ? 'gate' : 'mode', p.applied) };
}
