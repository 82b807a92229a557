import { resolveConventions } from './conventions.js';
import { noul, score } from './questions.js';
import { defineQuestionSet, type QuestionSet } from './registry.js';

/**
 * The production sets of DESIGN §6. The wording of every question is part of its fingerprint:
 * rewording one re-asks every item it covers. A test pins these fingerprints.
 */

/** `attention`: three nouls over the title, body and trail. Threshold 0.7. */
export const attentionSet: QuestionSet = defineQuestionSet({
  name: 'attention',
  questions: {
    needs_human_decision: noul(
      'The next step of this item needs a judgment, approval, credential, money or access that only a human owner can give.',
    ),
    blocked: noul('The text says the work on this item is blocked by something outside the item.'),
    waiting_on_external: noul('The next step of this item is an action by someone outside the workspace.'),
  },
  eligible: ['notSystem', 'tracksWork', 'notTerminal'],
  threshold: 0.7,
});

/** `effort`: one score over five levels; unsurfaced, stored for later readers and backfilled. */
export const effortSet: QuestionSet = defineQuestionSet({
  name: 'effort',
  questions: {
    effort: score('How much work remains to finish this item, judged from its title, body and comments.', [
      'trivial',
      'small',
      'medium',
      'large',
      'epic',
    ]),
  },
  eligible: ['notSystem', 'tracksWork', 'notTerminal'],
  threshold: 0.7,
  unsurfaced: ['effort'],
});

/**
 * `conventions`: one noul per active convention of the workspace, key `conv:<ref>`, resolved at
 * evaluation time (see `./conventions.ts`). WithLinks and NoTrail: a convention judges the item
 * itself and what it links to; comments are judged one by one by `conventions_comments`.
 * Covers every collection; eligibility (notSystem) leaves out the conventions collection itself.
 */
export const conventionsSet: QuestionSet = defineQuestionSet({
  name: 'conventions',
  resolve: resolveConventions,
  eligible: ['notSystem'],
  withLinks: true,
  noTrail: true,
  maxPerCall: 12,
  threshold: 0.9,
});

/**
 * `conventions_comments`: the same questions, asked per comment (DESIGN §7b) over the comment
 * state `{title, collection, comment}`. That state has no links, so this set is not built
 * WithLinks: declaring it would only make every link write owe a job that can never change an
 * answer. NoTrail: the comment is the whole subject.
 */
export const conventionsCommentsSet: QuestionSet = defineQuestionSet({
  name: 'conventions_comments',
  resolve: resolveConventions,
  eligible: ['notSystem'],
  withLinks: false,
  noTrail: true,
  perComment: true,
  maxPerCall: 12,
  threshold: 0.9,
});

/** The sets built into Verdict, in name order. */
export function productionSets(): QuestionSet[] {
  return [attentionSet, conventionsSet, conventionsCommentsSet, effortSet];
}
