import { errCode } from '../errors.js';
import { pickedLevel } from '../decision/questions.js';
import type { Registry } from '../decision/registry.js';
import { githubLabelNames, type GitHubTarget } from '../integrations/github/mapping.js';
import type { GitHubIssueCommentEvent, GitHubIssuesEvent } from '../integrations/github/rest-shapes.js';
import type { Logger } from '../log.js';
import type { DecisionReader } from '../reads/reads.js';
import type { Store } from '../store/whole-store.js';
import type { VerdictKind } from '../store/verdicts.js';
import { ACTIONS_IDENTITY_META_KEY } from './actions.js';
import { actionOfLabel, type ActionsConfig } from './config.js';
import { sameLabels } from './plan.js';

/**
 * People's label changes as verdicts (DESIGN §17), run inside the transaction of a GitHub webhook
 * delivery (src/integrations/github/webhooks.ts `afterIssue`), so a redelivery records nothing
 * twice and a refused delivery records nothing at all.
 *
 * - Every issue payload tells which labels of each acting key's group the issue carries: they are
 *   kept as the key's `applied` labels (what a dry run and a proposal compare against).
 * - An `issues.labeled` / `unlabeled` of a label that belongs to an acting key, by anyone but
 *   Verdict itself, is that person's verdict on the item's key, authored `github:<login>`: a noul's
 *   label added is `agree` when the model's current answer surfaces it, else the value true; removed
 *   is `disagree` when it surfaces, else the value false. A choice's or score's label added is
 *   `agree` when the model picks its option or level, else that value; removed is `disagree` when
 *   the model picks it (else nothing: it says what is wrong, not what is right).
 * - Verdict's own deliveries are recognised and ignored, by two signals: the sender is Verdict's
 *   GitHub login (the config's `identity`, or the one learnt from the token), or the change is the
 *   one Verdict itself queued for that key (for a token whose login is not known yet).
 * A change that cannot be a verdict (the key never answered, its set not applying now) is logged by
 * reason and left; the label change itself stays on GitHub.
 */

/** What the feedback step needs; `reader` and `record` are bound to the delivery's transaction by the caller. */
export interface LabelFeedbackDeps {
  config: ActionsConfig;
  registry: Registry;
  logger: Logger;
  /** A reader over `tx` (compose/reader.ts `openReader`). */
  reader: (tx: Store) => Promise<DecisionReader>;
  /** Records a verdict through `tx` (compose/record-verdict.ts `recordVerdict`). */
  record: (
    tx: Store,
    reader: DecisionReader,
    input: {
      workspace: string;
      ref: string;
      key: string;
      set: string;
      verdict: VerdictKind;
      value?: boolean | string;
      author: string;
      note?: string;
    },
  ) => Promise<unknown>;
}

/** What the step did with a delivery: `verdict` recorded, `own` (Verdict's change), `none` (no acting label), or why not. */
export type LabelFeedbackOutcome = 'verdict' | 'own' | 'none' | 'not_answered' | 'not_taken';

/** The feedback step of one delivery (see the file comment). */
export async function applyLabelFeedback(
  d: LabelFeedbackDeps,
  tx: Store,
  target: GitHubTarget,
  e: GitHubIssuesEvent | GitHubIssueCommentEvent,
  itemId: string,
): Promise<LabelFeedbackOutcome> {
  if (d.config.keys.length === 0) return 'none';
  const rows = new Map((await tx.listItemActions(itemId)).map((r) => [`${r.questionSet}/${r.questionKey}`, r]));
  const names = githubLabelNames(e.issue);
  const seen = [];
  for (const k of d.config.keys) {
    const applied = names.filter((n) => k.group.some((g) => g.toLowerCase() === n.toLowerCase())).sort();
    const before = rows.get(`${k.set}/${k.key}`)?.applied ?? null;
    if (before === null ? applied.length > 0 : !sameLabels(before, applied))
      seen.push({ questionSet: k.set, questionKey: k.key, applied });
  }
  if (seen.length) await tx.observeActionLabels(target.workspaceId, itemId, seen);

  if (!('label' in e) || !e.label || (e.action !== 'labeled' && e.action !== 'unlabeled')) return 'none';
  const action = actionOfLabel(d.config, e.label.name);
  if (!action) return 'none';
  const added = e.action === 'labeled';
  const login = e.sender?.login ?? null;
  const identity = d.config.identity ?? (await tx.getMeta(ACTIONS_IDENTITY_META_KEY));
  const queued = rows.get(`${action.set}/${action.key}`)?.queued ?? null;
  const echo = queued !== null && queued.some((q) => q.toLowerCase() === e.label!.name.toLowerCase()) === added;
  if ((identity !== null && login !== null && login.toLowerCase() === identity.toLowerCase()) || echo) return 'own';

  const item = await tx.getItem(itemId);
  const ws = await tx.getWorkspace(target.workspaceId);
  if (!item || !ws) return 'not_taken';
  const reader = await d.reader(tx);
  const at = await reader.keyNow(itemId, action.set, action.key);
  const view = at?.view ?? null;
  if (!at || !view) {
    d.logger.info(
      { ref: item.ref, set: action.set, key: action.key },
      'label change not taken as a verdict: the key has no answer yet',
    );
    return 'not_answered';
  }
  // Which option or level the label stands for, and whether the model's current answer is it.
  const meaning = Object.entries(action.labels).find(([, l]) => l.toLowerCase() === e.label!.name.toLowerCase())![0];
  const model = view.modelAnswer;
  const modelSays =
    view.current &&
    (model.type === 'noul'
      ? model.noul >= at.set.threshold
      : model.type === 'choice'
        ? model.choice === meaning
        : pickedLevel(model) === meaning);
  let verdict: VerdictKind;
  let value: boolean | string | undefined;
  if (action.kind === 'noul') {
    if (view.current) verdict = modelSays === added ? 'agree' : 'disagree';
    else [verdict, value] = ['value', added];
  } else if (added) {
    if (modelSays) verdict = 'agree';
    else [verdict, value] = ['value', meaning];
  } else if (modelSays) verdict = 'disagree';
  else return 'not_taken';
  try {
    await d.record(tx, reader, {
      workspace: ws.slug,
      ref: item.ref,
      key: action.key,
      set: action.set,
      verdict,
      value,
      author: `github:${login ?? 'unknown'}`,
      note: `GitHub label ${added ? 'added' : 'removed'}`,
    });
  } catch (err) {
    d.logger.info(
      { ref: item.ref, set: action.set, key: action.key, err: errCode(err) },
      'label change not taken as a verdict',
    );
    return 'not_taken';
  }
  d.logger.info({ ref: item.ref, set: action.set, key: action.key, verdict }, 'label change recorded as a verdict');
  return 'verdict';
}
