import { z } from 'zod';
import { parseRfc3339 } from '../../importers/beads-format.js';

/**
 * GitHub's REST shapes as Verdict reads them: the issue and issue-comment objects of the REST API
 * (`GET /repos/{owner}/{repo}/issues`, `GET /repos/{owner}/{repo}/issues/comments`, API version
 * 2022-11-28) and the webhook payloads of the `issues` and `issue_comment` events, which carry the
 * same objects. Only the members Verdict reads are declared; every other member is allowed and
 * dropped by the parse (GitHub adds members without notice). Times are ISO 8601 UTC
 * (`2011-04-22T13:33:48Z`).
 *
 * Sources: https://docs.github.com/en/rest/issues/issues#list-repository-issues,
 * https://docs.github.com/en/rest/issues/comments#list-issue-comments-for-a-repository,
 * https://docs.github.com/en/webhooks/webhook-events-and-payloads#issues and #issue_comment.
 */

/** An ISO 8601 / RFC 3339 time with an offset or `Z`, as GitHub writes them. */
const githubTime = z.string().refine((s) => parseRfc3339(s) !== null, { message: 'not an ISO 8601 time with offset' });

/** A GitHub account as issues and comments name it (`user`); null for a deleted account ("ghost"). */
const githubUserSchema = z.object({ login: z.string().min(1) });

/** A label: REST lists give objects (`{name, color, …}`); GitHub also accepts and may return plain names. */
const githubLabelSchema = z.union([z.string(), z.object({ name: z.string() })]);

/** A milestone (`{title, number, …}`) or null. */
const githubMilestoneSchema = z.object({ title: z.string(), number: z.number().int().optional() });

/**
 * One REST issue object. A pull request is an issue too: the issues endpoints return it with a
 * `pull_request` member, which is how the importer leaves it out.
 * `state_reason` (`completed`, `not_planned`, `duplicate`, `reopened`, or null) exists since
 * API version 2022-11-28; older servers leave it out.
 */
export const githubIssueSchema = z.object({
  number: z.number().int().positive(),
  title: z.string(),
  body: z.string().nullish(),
  state: z.enum(['open', 'closed']),
  state_reason: z.string().nullish(),
  labels: z.array(githubLabelSchema).nullish(),
  user: githubUserSchema.nullish(),
  milestone: githubMilestoneSchema.nullish(),
  created_at: githubTime,
  updated_at: githubTime,
  closed_at: githubTime.nullish(),
  /** The issue's page on GitHub (`https://github.com/o/r/issues/12`), kept as the item's source URL. */
  html_url: z.string().nullish(),
  pull_request: z.unknown().optional(),
});
export type GitHubIssue = z.infer<typeof githubIssueSchema>;

/** Matches the issue number at the end of a comment's `issue_url` (`…/repos/o/r/issues/12`). */
const ISSUE_URL_NUMBER = /\/issues\/(\d+)$/;

/**
 * One REST issue comment. `issue_url` ends in `/issues/<number>`, the number of the issue (or
 * pull request) it belongs to; the repository-wide comments list has no other owner member.
 */
export const githubCommentSchema = z.object({
  id: z.number().int().positive(),
  body: z.string().nullish(),
  user: githubUserSchema.nullish(),
  created_at: githubTime,
  updated_at: githubTime,
  issue_url: z.string().regex(ISSUE_URL_NUMBER, 'expected a URL ending in /issues/<number>'),
});
export type GitHubComment = z.infer<typeof githubCommentSchema>;

/** The issue number a comment belongs to, read from its `issue_url`. */
export function commentIssueNumber(c: Pick<GitHubComment, 'issue_url'>): number {
  return Number(ISSUE_URL_NUMBER.exec(c.issue_url)![1]);
}

/** The repository member of a webhook payload: only `full_name` (`owner/name`) is read. */
const githubRepositoryRefSchema = z.object({
  full_name: z.string().regex(/^[^/\s]+\/[^/\s]+$/, 'expected owner/name'),
});

/** `issues` event actions Verdict acts on. Other actions (assigned, milestoned, pinned, locked …) fail the parse: acknowledge and ignore them. */
export const GITHUB_ISSUES_ACTIONS = [
  'opened',
  'edited',
  'closed',
  'reopened',
  'deleted',
  'transferred',
  'labeled',
  'unlabeled',
  'milestoned',
  'demilestoned',
] as const;

/** `issue_comment` event actions. */
export const GITHUB_ISSUE_COMMENT_ACTIONS = ['created', 'edited', 'deleted'] as const;

/** Who caused a webhook event (`sender`): the login, and `type` (`User`, `Bot`, `Organization`). */
const githubSenderSchema = z.object({ login: z.string().min(1), type: z.string().optional() });

/**
 * The webhook payload of an `issues` event (`X-GitHub-Event: issues`):
 * `{action, issue, repository: {full_name}, changes?, label?, sender?}`; `label` (`{name, …}`) is
 * the label added or removed by `labeled` / `unlabeled`. `changes` (on `edited` and `transferred`)
 * is kept as an opaque object. A `deleted` or `transferred` issue leaves the repository: the
 * route soft-deletes its item (see `deleteGitHubIssue`).
 */
export const githubIssuesEventSchema = z.object({
  action: z.enum(GITHUB_ISSUES_ACTIONS),
  issue: githubIssueSchema,
  repository: githubRepositoryRefSchema,
  changes: z.record(z.string(), z.unknown()).optional(),
  label: z.object({ name: z.string().min(1) }).optional(),
  sender: githubSenderSchema.optional(),
});
export type GitHubIssuesEvent = z.infer<typeof githubIssuesEventSchema>;

/**
 * The webhook payload of an `issue_comment` event (`X-GitHub-Event: issue_comment`):
 * `{action, issue, comment, repository: {full_name}, changes?}`. It fires for pull-request
 * conversation comments too (then `issue.pull_request` is present): the route ignores those.
 */
export const githubIssueCommentEventSchema = z.object({
  action: z.enum(GITHUB_ISSUE_COMMENT_ACTIONS),
  issue: githubIssueSchema,
  comment: githubCommentSchema,
  repository: githubRepositoryRefSchema,
  changes: z.record(z.string(), z.unknown()).optional(),
  sender: githubSenderSchema.optional(),
});
export type GitHubIssueCommentEvent = z.infer<typeof githubIssueCommentEventSchema>;

/** True for a pull request listed by an issues endpoint (it carries `pull_request`). */
export function isPullRequest(issue: { pull_request?: unknown }): boolean {
  return issue.pull_request !== undefined && issue.pull_request !== null;
}

/** `owner/name` as GitHub spells repositories: one slash, no blanks. */
export const REPO_NAME = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;
