import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import type { z } from 'zod';
import { IMPORT_OWE } from '../../importers/beads.js';
import { parseRfc3339 } from '../../importers/beads-format.js';
import { InputNotFound, InvalidInput, ownCode, VerdictError } from '../../errors.js';
import { silentLogger, type Logger } from '../../log.js';
import type { QueueStore } from '../../store/queue-store.js';
import type { TrackerStore } from '../../store/tracker-store.js';
import type { MetaStore } from '../../store/meta-store.js';
import {
  applyGitHubComment,
  applyGitHubIssue,
  applyGitHubIssueLinks,
  findGitHubTarget,
  githubIssueLinks,
  resolveGitHubTarget,
  type GitHubTarget,
} from './mapping.js';
import type { LabelRule } from './managed-labels.js';
import {
  commentIssueNumber,
  githubCommentSchema,
  githubIssueSchema,
  isPullRequest,
  REPO_NAME,
  type GitHubComment,
  type GitHubIssue,
} from './rest-shapes.js';

/**
 * Imports a repository's GitHub issues and their comments into a workspace (DESIGN §3.1 for its input rules), through
 * the mapping of `./mapping.ts`, from the REST API (`importGitHubRepo`) or from JSON saved with
 * `gh api --paginate` (`importGitHubFiles`). Both owe at backfill priority with no quiet period
 * (`IMPORT_OWE`, as the beads importer), both skip pull requests (the issues endpoint returns
 * them too, marked `pull_request`), both write links only after every issue of the run is in (a
 * task list may point at a later issue), and a re-run over unchanged data changes nothing and
 * owes nothing.
 *
 * The REST run is incremental: the sync state (`verdict_meta` `github:sync:<owner/name>`, see
 * `GitHubSyncState`) keeps, per list (issues, comments), the high-water mark (the greatest
 * `updated_at` seen) and the ETag of the list's first page. The next run sends `since` = the
 * mark and `If-None-Match` = the ETag; a 304 means the list is unchanged and nothing is written
 * (conditional requests that answer 304 do not count against the primary rate limit, per
 * GitHub's "Best practices for using the REST API"). `since` is treated as inclusive (issues
 * updated at exactly the mark come back and are re-applied as no-ops), so a run that advanced the
 * mark lists once more from the new mark until the listing is stable (at most
 * `MAX_LIST_PASSES`): that last listing is what the next run asks about, so an unchanged
 * repository answers the next run with a 304. An ETag is kept only for a one-page listing: a
 * later change is appended at the end of an `updated`-ascending listing, where a longer listing's
 * first page would not show it. The state is written only after every write of the run
 * succeeded: a run that fails re-reads from the old mark next time, which the no-op doors make
 * free.
 */

/** Why an input row was rejected (it was not written). */
export type GitHubRejectReason =
  /** Not a JSON object. */
  | 'not_an_object'
  /** An object that fails the REST shape (`githubIssueSchema`, `githubCommentSchema`). */
  | 'invalid_row'
  /** Another item of the workspace (not this issue's) holds the ref `#<number>`. */
  | 'ref_taken';

/** One rejected row. `detail` names members and rules, never row text. */
export interface GitHubRejectedRow {
  /** `issues` or `comments`: the list (file or endpoint) it came from. */
  list: 'issues' | 'comments';
  /** 0-based index in that list (files: across all pages, in file order; REST: in this run's pages). */
  index: number;
  reason: GitHubRejectReason;
  detail?: string;
}

/** What a GitHub import did. Counts are of this run only. */
export interface GitHubImportReport {
  repo: string;
  workspaceId: string;
  workspaceSlug: string;
  /** `api` (REST) or `files` (`gh api` JSON). */
  source: 'api' | 'files';
  /** Rows of the issues list read (pull requests and rejected rows included; a REST re-listing's rows count again, but are applied once). */
  issuesRead: number;
  items: { created: number; updated: number; unchanged: number };
  /** Rows of the issues list that are pull requests: left out. */
  pullRequestsSkipped: number;
  /** Comments written (created or changed), found unchanged, or skipped (their issue is a pull request or not imported). */
  comments: { read: number; written: number; unchanged: number; skipped: number };
  /** Links from task lists and "Duplicate of #N" (see mapping.ts): new, already there, dropped (the other end is no item). */
  links: { created: number; unchanged: number; dropped: number };
  /** Rejected rows: the total and the first 100. */
  rejected: { count: number; rows: GitHubRejectedRow[] };
  /** Job-row upserts owed by this run's writes. */
  jobsOwed: number;
  /** Distinct (item, question set) job rows of the workspace owed since this run began. */
  jobRowsOwed: number;
  /** HTTP requests sent to GitHub (304s and rate-limited ones included); 0 for files. */
  requests: number;
  /** Responses 304 Not Modified (an unchanged list). */
  notModified: number;
  /** Waits for a rate limit (primary or secondary), and their total in milliseconds. */
  rateLimitWaits: number;
  waitedMs: number;
  /** REST: the `since` this run sent for issues (null on the first run), and the mark it stored. */
  since: string | null;
  highWaterMark: string | null;
}

/** How many rejected rows a report lists (all are counted). */
const MAX_REJECTED_LISTED = 100;

// ------------------------------------------------------------------ sync state

/** `verdict_meta` key of a repository's sync state: `github:sync:<owner/name in lower case>` → JSON GitHubSyncState. */
export function githubSyncMetaKey(repo: string): string {
  return `github:sync:${repo.toLowerCase()}`;
}

/** Where one list (issues or comments) stands after a run. */
export interface GitHubListState {
  /** The greatest `updated_at` seen (ISO 8601, as GitHub wrote it), sent as `since` next time; null before the first run. */
  since: string | null;
  /** ETag of the first page of the listing `since` asks for, sent as `If-None-Match`; null when unknown or the listing had several pages. */
  etag: string | null;
}

/** The `github:sync:<repo>` value. */
export interface GitHubSyncState {
  issues: GitHubListState;
  comments: GitHubListState;
}

function parseSyncState(text: string | null): GitHubSyncState {
  const empty: GitHubSyncState = { issues: { since: null, etag: null }, comments: { since: null, etag: null } };
  if (text === null) return empty;
  try {
    const v = JSON.parse(text) as Partial<GitHubSyncState>;
    const list = (l: unknown): GitHubListState => {
      const o = (l ?? {}) as Partial<GitHubListState>;
      return {
        since: typeof o.since === 'string' && parseRfc3339(o.since) !== null ? o.since : null,
        etag: typeof o.etag === 'string' ? o.etag : null,
      };
    };
    return { issues: list(v.issues), comments: list(v.comments) };
  } catch {
    return empty; // unreadable: a full re-read, which the no-op doors make harmless
  }
}

// ------------------------------------------------------------------ errors

/**
 * GitHub answered with an error Verdict does not wait out (401, 404, a 403 that is no rate
 * limit, 5xx, a transport error), or the rate limit outlasted the waits allowed. The message
 * names the status and what to check, never GitHub's error body. Nothing of the sync state moved.
 */
export class GitHubRequestFailed extends VerdictError {
  readonly code = 'github_request_failed';
  constructor(
    message: string,
    /** The HTTP status, or null for a transport error. */
    readonly status: number | null,
  ) {
    super(message);
  }
}

// ------------------------------------------------------------------ rate limits

/**
 * The wait for a secondary rate limit that names no time, ms: GitHub's docs ("Rate limits for
 * the REST API", Exceeding the rate limit): "Otherwise, wait for at least one minute before
 * retrying. If your request continues to fail due to a secondary rate limit, wait for an
 * exponentially increasing amount of time between retries".
 */
const SECONDARY_LIMIT_DEFAULT_WAIT_MS = 60_000;

/** Margin added to a primary limit's reset time, ms: `x-ratelimit-reset` is whole seconds, and clocks differ. */
const RESET_MARGIN_MS = 1_000;

/**
 * How long to wait before retrying a failed request, ms, or null when it is no rate limit
 * (GitHub's docs, "Exceeding the rate limit"): a 403 or 429 with `retry-after` waits that many
 * seconds; with `x-ratelimit-remaining: 0` until `x-ratelimit-reset` (epoch seconds) plus a
 * second; a 429, or a 403 whose message says "rate limit", waits at least a minute, doubling
 * with each consecutive wait (`attempt` counts from 1). A 403 without any of these is a
 * permission error: null.
 */
export function rateLimitWaitMs(
  status: number,
  headers: Record<string, string | number | undefined>,
  message: string,
  nowMs: number,
  attempt: number,
): number | null {
  if (status !== 403 && status !== 429) return null;
  const retryAfter = Number(headers['retry-after']);
  if (headers['retry-after'] !== undefined && Number.isFinite(retryAfter) && retryAfter >= 0)
    return Math.max(1, retryAfter) * 1000;
  if (String(headers['x-ratelimit-remaining']) === '0') {
    const reset = Number(headers['x-ratelimit-reset']);
    if (Number.isFinite(reset)) return Math.max(RESET_MARGIN_MS, reset * 1000 - nowMs + RESET_MARGIN_MS);
  }
  if (status === 429 || /rate limit/i.test(message))
    return SECONDARY_LIMIT_DEFAULT_WAIT_MS * 2 ** Math.max(0, attempt - 1);
  return null;
}

// ------------------------------------------------------------------ the REST run

/** Options of `importGitHubRepo`. */
export interface ImportGitHubRepoOptions {
  /** `owner/name`. */
  repo: string;
  /** Workspace to import into (created when absent). @defaultValue 'github' */
  workspaceSlug?: string;
  /** A GitHub token (`GITHUB_TOKEN`): fine-grained with Issues read, or classic with `repo`/`public_repo`. Never logged. */
  token: string;
  /** REST base URL. @defaultValue 'https://api.github.com' */
  baseUrl?: string;
  /** Receives the repository, counts, statuses and waits only. @defaultValue silent */
  logger?: Logger;
  /** Waits out a rate limit (tests observe it without sleeping). @defaultValue node's timers/promises setTimeout */
  sleep?: (ms: number) => Promise<void>;
  /** Epoch ms, for the primary limit's reset time. @defaultValue Date.now */
  now?: () => number;
  /** Rate-limit waits allowed in one run before it fails. @defaultValue 5 */
  maxRateLimitWaits?: number;
  /** The longest single wait accepted, ms; a reset further away fails the run at once. @defaultValue 3,900,000 (65 min: the primary window is an hour) */
  maxWaitMs?: number;
  /** Issues per page (GitHub's maximum is 100). @defaultValue 100 */
  perPage?: number;
  /** Verdict-managed labels, left out of the items' fields (DESIGN §17). @defaultValue the `verdict:` prefix */
  labelRule?: LabelRule;
}

/** Listings per list and run: the full or incremental one, then re-listings from the advanced mark until one is stable. */
const MAX_LIST_PASSES = 3;

/** The REST API version asked for; it returns `state_reason`. */
const GITHUB_API_VERSION = '2022-11-28';

/**
 * Imports `repo`'s issues and comments from the GitHub REST API (see the file comment): every
 * page of `GET /repos/{owner}/{repo}/issues?state=all&sort=updated&direction=asc&per_page=100`
 * and of `GET /repos/{owner}/{repo}/issues/comments?sort=updated&direction=asc`, incremental on
 * later runs, with conditional requests and rate limits honoured.
 * The workspace, collection and mapping are created at the first page GitHub answers, so a
 * refused first run leaves none behind.
 * @throws TypeError for a repo that is not `owner/name` or an empty token.
 * @throws GitHubRequestFailed for an error response (401, 403 that is no rate limit, 404, 5xx,
 *   transport) or when the rate-limit waits run out; what was written before stays, the sync
 *   state does not move.
 * @throws InvalidInput / InvalidWrite from `resolveGitHubTarget`; store errors.
 */
export async function importGitHubRepo(
  store: TrackerStore & MetaStore & Pick<QueueStore, 'listJobs'>,
  o: ImportGitHubRepoOptions,
): Promise<GitHubImportReport> {
  if (!REPO_NAME.test(o.repo)) throw new TypeError(`repo must be owner/name, got ${JSON.stringify(o.repo)}`);
  if (typeof o.token !== 'string' || o.token.trim() === '')
    throw new TypeError('token must be a non-empty string (GITHUB_TOKEN)');
  const log = o.logger ?? silentLogger;
  const sleep = o.sleep ?? ((ms: number) => delay(ms).then(() => undefined));
  const now = o.now ?? Date.now;
  const maxWaits = o.maxRateLimitWaits ?? 5;
  const maxWaitMs = o.maxWaitMs ?? 65 * 60_000;
  const [owner, name] = o.repo.split('/');
  const startedAt = await store.now();
  const slug = o.workspaceSlug ?? 'github';
  // Resolved (and so created) at the first page GitHub answers, or at the end: a refused token or
  // a mistyped repository leaves no empty workspace behind. A mapping that conflicts fails here,
  // before any request.
  const known = await findGitHubTarget(store, o.repo);
  if (known) await resolveGitHubTarget(store, { repo: o.repo, workspaceSlug: slug });
  let resolved: GitHubTarget | null = known;
  const report = emptyReport({ repo: o.repo, workspaceId: known?.workspaceId ?? '' }, slug, 'api');
  const ensureTarget = async (): Promise<GitHubTarget> => {
    resolved ??= await resolveGitHubTarget(store, { repo: o.repo, workspaceSlug: slug });
    report.workspaceId = resolved.workspaceId;
    return resolved;
  };
  const syncKey = githubSyncMetaKey(o.repo);
  const sync = parseSyncState(await store.getMeta(syncKey));
  report.since = sync.issues.since;

  // Loaded here: every CLI command and library user imports this module, and @octokit/rest costs about 50 ms to load.
  const { Octokit } = await import('@octokit/rest');
  const octokit = new Octokit({
    auth: o.token,
    baseUrl: o.baseUrl ?? 'https://api.github.com',
    userAgent: 'verdict-github-import',
    // Octokit's default log is the console; its deprecation notices name URLs only, but the CLI's stdout is the report.
    log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
  });

  // The ETag to send with the next request only (the first page of a listing); later pages and
  // other lists never carry it.
  let pendingEtag: string | null = null;
  // A primary limit seen on a successful response: the next request waits for the reset.
  let blockedUntil = 0;
  const wait = async (ms: number, why: string, status: number | null) => {
    if (report.rateLimitWaits >= maxWaits) {
      throw new GitHubRequestFailed(
        `GitHub's rate limit held after ${maxWaits} waits (${Math.round(report.waitedMs / 1000)} s in all); run the import again later`,
        status,
      );
    }
    if (ms > maxWaitMs)
      throw new GitHubRequestFailed(
        `GitHub's rate limit resets in ${Math.ceil(ms / 60_000)} min, past the ${Math.round(maxWaitMs / 60_000)} min allowed; run the import again later`,
        status,
      );
    report.rateLimitWaits++;
    report.waitedMs += ms;
    log.warn(
      { repo: o.repo, status, waitMs: ms, waits: report.rateLimitWaits, limit: why },
      'github rate limit: waiting',
    );
    await sleep(ms);
  };
  octokit.hook.wrap('request', async (request, options) => {
    const etag = pendingEtag;
    pendingEtag = null;
    // before-after-hook binds `options` into the inner hooks (auth, then the fetch): the argument
    // passed to `request` is ignored, so the header goes on the shared object, as a new headers
    // object (the paginate iterator reuses one headers object for every page).
    if (etag) options.headers = { ...options.headers, 'if-none-match': etag };
    for (let attempt = 1; ; attempt++) {
      if (blockedUntil > now()) await wait(blockedUntil - now() + RESET_MARGIN_MS, 'primary', null);
      blockedUntil = 0;
      report.requests++;
      try {
        const res = await request(options);
        const h = res.headers as Record<string, string | undefined>;
        if (String(h['x-ratelimit-remaining']) === '0' && Number.isFinite(Number(h['x-ratelimit-reset'])))
          blockedUntil = Number(h['x-ratelimit-reset']) * 1000;
        return res;
      } catch (err) {
        const e = err as {
          status?: number;
          message?: string;
          response?: { headers?: Record<string, string | undefined> };
        };
        const status = typeof e.status === 'number' ? e.status : null;
        if (status === 304) throw err; // the caller's "not modified"
        const h = e.response?.headers ?? {};
        const ms = status === null ? null : rateLimitWaitMs(status, h, e.message ?? '', now(), attempt);
        // Octokit reports a request that got no response (refused, reset, DNS) as status 500 with no `response`.
        if (ms === null) throw requestFailed(e.response === undefined ? null : status, o.repo);
        await wait(
          ms,
          h['retry-after'] === undefined && String(h['x-ratelimit-remaining']) === '0' ? 'primary' : 'secondary',
          status,
        );
      }
    }
  });

  const applied = new Map<number, GitHubIssue>();
  const seenPrs = new Set<number>();
  const seenComments = new Map<number, string>();
  const commentsByIssue = new Map<number, string[]>();
  const tally = (owed: number) => (report.jobsOwed += owed);

  /**
   * Lists one endpoint from `state.since` on, applying each page's rows, until the listing is
   * stable (see the file comment). @returns the list's new state.
   */
  const listAll = async (
    list: 'issues' | 'comments',
    state: GitHubListState,
    page: (rows: unknown[], offset: number) => Promise<string | null>,
  ): Promise<GitHubListState> => {
    let since = state.since;
    let etag = state.etag;
    let offset = 0;
    for (let pass = 1; ; pass++) {
      const params = {
        owner,
        repo: name,
        per_page: o.perPage ?? 100,
        sort: 'updated' as const,
        direction: 'asc' as const,
        ...(since ? { since } : {}),
        headers: { 'x-github-api-version': GITHUB_API_VERSION },
      };
      const route = list === 'issues' ? octokit.rest.issues.listForRepo : octokit.rest.issues.listCommentsForRepo;
      const it = octokit.paginate.iterator(
        route as typeof octokit.rest.issues.listForRepo,
        list === 'issues' ? { ...params, state: 'all' as const } : params,
      );
      let pages = 0;
      let firstEtag: string | null = null;
      let mark = since;
      pendingEtag = etag;
      try {
        for await (const res of it) {
          pages++;
          if (pages === 1) firstEtag = (res.headers as Record<string, string | undefined>).etag ?? null;
          const rows = res.data as unknown[];
          const top = await page(rows, offset);
          offset += rows.length;
          if (top !== null && (mark === null || parseRfc3339(top)! > parseRfc3339(mark)!)) mark = top;
        }
      } catch (err) {
        if ((err as { status?: number }).status === 304 && pages === 0) {
          report.notModified++;
          log.info({ repo: o.repo, list, since }, 'github list not modified');
          return { since, etag };
        }
        throw err;
      } finally {
        pendingEtag = null;
      }
      const stable = mark === since;
      if (stable || pass >= MAX_LIST_PASSES) return { since: mark, etag: stable && pages === 1 ? firstEtag : null };
      since = mark;
      etag = null;
    }
  };

  const issuesState = await listAll('issues', sync.issues, async (rows, offset) => {
    const target = await ensureTarget();
    let top: string | null = null;
    for (const [i, raw] of rows.entries()) {
      report.issuesRead++;
      const issue = parseRow(githubIssueSchema, raw, 'issues', offset + i, report, log);
      if (!issue) continue;
      if (top === null || parseRfc3339(issue.updated_at)! > parseRfc3339(top)!) top = issue.updated_at;
      if (isPullRequest(issue)) {
        if (!seenPrs.has(issue.number)) report.pullRequestsSkipped++;
        seenPrs.add(issue.number);
        continue;
      }
      // A re-listing from the advanced mark returns the issues at the mark again: applied already.
      if (applied.get(issue.number)?.updated_at === issue.updated_at) continue;
      if (await applyIssue(store, target, issue, report, log, offset + i, tally, o.labelRule))
        applied.set(issue.number, issue);
    }
    return top;
  });
  const commentsState = await listAll('comments', sync.comments, async (rows, offset) => {
    const target = await ensureTarget();
    let top: string | null = null;
    for (const [i, raw] of rows.entries()) {
      report.comments.read++;
      const c = parseRow(githubCommentSchema, raw, 'comments', offset + i, report, log);
      if (!c) continue;
      if (top === null || parseRfc3339(c.updated_at)! > parseRfc3339(top)!) top = c.updated_at;
      if (seenComments.get(c.id) === c.updated_at) continue; // re-listed at the mark: applied already
      seenComments.set(c.id, c.updated_at);
      await applyComment(store, target, c, report, tally, commentsByIssue);
    }
    return top;
  });
  const target = await ensureTarget();
  await applyLinks(store, target, applied, commentsByIssue, report, tally);

  // Only now, with every write of the run in: a failed run re-reads from the old mark.
  const next: GitHubSyncState = { issues: issuesState, comments: commentsState };
  if (JSON.stringify(next) !== JSON.stringify(sync)) await store.setMeta(syncKey, JSON.stringify(next));
  report.highWaterMark = issuesState.since;
  report.jobRowsOwed = report.jobsOwed === 0 ? 0 : await countRowsOwedSince(store, target.workspaceId, startedAt);
  logFinished(log, report);
  return report;
}

/** The error for a response that is no rate limit: status and what to check, never GitHub's body. */
function requestFailed(status: number | null, repo: string): GitHubRequestFailed {
  if (status === null)
    return new GitHubRequestFailed(
      'could not reach GitHub (no response); check the network and the API URL (baseUrl; VERDICT_GITHUB_API_URL for the CLI)',
      status,
    );
  if (status === 401) return new GitHubRequestFailed('GitHub refused the token (401); check GITHUB_TOKEN', status);
  if (status === 403)
    return new GitHubRequestFailed(
      `GitHub denied access to ${repo} (403); the token needs read access to its issues`,
      status,
    );
  if (status === 404)
    return new GitHubRequestFailed(
      `GitHub has no repository ${repo} the token can see (404); check the name and the token's access`,
      status,
    );
  return new GitHubRequestFailed(`GitHub answered ${status} for ${repo}; try again later`, status);
}

// ------------------------------------------------------------------ saved files

/** Options of `importGitHubFiles`. */
export interface ImportGitHubFilesOptions {
  /** JSON from `gh api --paginate repos/O/R/issues?state=all` (pages back to back, `--slurp`'s array of pages, or one array). */
  issuesFile: string;
  /** JSON from `gh api --paginate repos/O/R/issues/comments`, same forms. */
  commentsFile?: string;
  /** `owner/name`; when absent, read from the rows' `repository_url` (`…/repos/O/R`). */
  repo?: string;
  /** @defaultValue 'github' */
  workspaceSlug?: string;
  /** @defaultValue silent */
  logger?: Logger;
  /** Verdict-managed labels, left out of the items' fields (DESIGN §17). @defaultValue the `verdict:` prefix */
  labelRule?: LabelRule;
}

/**
 * Imports issues (and comments) saved with `gh api --paginate` (the REST shapes), with the same
 * mapping as `importGitHubRepo`. A row that fails the shape is reported with its index and
 * skipped, never half-written. An issue listed twice (pages shifted while `gh` paginated) is
 * applied once, its latest `updated_at` copy. No sync state is read or written.
 * @throws InputNotFound when a file is missing; InvalidInput when a file is not JSON of that
 *   form, or no repository can be told; errors of `resolveGitHubTarget`; store errors.
 */
export async function importGitHubFiles(
  store: TrackerStore & MetaStore & Pick<QueueStore, 'listJobs'>,
  o: ImportGitHubFilesOptions,
): Promise<GitHubImportReport> {
  const log = o.logger ?? silentLogger;
  const issueRows = await readGhJson(o.issuesFile);
  const commentRows = o.commentsFile ? await readGhJson(o.commentsFile) : [];
  const repo = o.repo ?? repoFromRows(issueRows);
  if (!repo)
    throw new InvalidInput(
      `cannot tell the repository of ${o.issuesFile} (no repository_url in its rows); pass --repo OWNER/NAME`,
    );
  if (!REPO_NAME.test(repo)) throw new InvalidInput(`repository must be owner/name, got ${JSON.stringify(repo)}`);
  const slug = o.workspaceSlug ?? 'github';
  const startedAt = await store.now();
  const target = await resolveGitHubTarget(store, { repo, workspaceSlug: slug });
  const report = emptyReport(target, slug, 'files');
  const tally = (owed: number) => (report.jobsOwed += owed);

  const latest = new Map<number, { issue: GitHubIssue; index: number }>();
  for (const [i, raw] of issueRows.entries()) {
    report.issuesRead++;
    const issue = parseRow(githubIssueSchema, raw, 'issues', i, report, log);
    if (!issue) continue;
    if (isPullRequest(issue)) {
      report.pullRequestsSkipped++;
      continue;
    }
    const seen = latest.get(issue.number);
    if (!seen || parseRfc3339(issue.updated_at)! >= parseRfc3339(seen.issue.updated_at)!)
      latest.set(issue.number, { issue, index: i });
  }
  const applied = new Map<number, GitHubIssue>();
  for (const { issue, index } of latest.values()) {
    if (await applyIssue(store, target, issue, report, log, index, tally, o.labelRule))
      applied.set(issue.number, issue);
  }
  const commentsByIssue = new Map<number, string[]>();
  for (const [i, raw] of commentRows.entries()) {
    report.comments.read++;
    const c = parseRow(githubCommentSchema, raw, 'comments', i, report, log);
    if (c) await applyComment(store, target, c, report, tally, commentsByIssue);
  }
  await applyLinks(store, target, applied, commentsByIssue, report, tally);
  report.jobRowsOwed = report.jobsOwed === 0 ? 0 : await countRowsOwedSince(store, target.workspaceId, startedAt);
  logFinished(log, report);
  return report;
}

/**
 * Checks `gh api` JSON files before the CLI opens (and so creates) a database.
 * @throws InputNotFound / InvalidInput as `importGitHubFiles` would.
 */
export async function assertGitHubFiles(issuesFile: string, commentsFile?: string): Promise<void> {
  await readGhJson(issuesFile);
  if (commentsFile) await readGhJson(commentsFile);
}

/**
 * The rows of a `gh api` JSON file: `--paginate` without `--slurp` writes each page's array back
 * to back (`[…][…]`), `--slurp` an array of those arrays, and a single page is one array; all
 * three give the rows in file order.
 * @throws InputNotFound when there is no file; InvalidInput when it is not JSON of those forms.
 */
async function readGhJson(path: string): Promise<unknown[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = ownCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new InputNotFound(`no file at ${path}; check the path`);
    if (code === 'EISDIR')
      throw new InputNotFound(`${path} is a folder; pass the JSON file saved with gh api --paginate`);
    throw new InvalidInput(`cannot read ${path} (${code ?? 'error'}); check its permissions`);
  }
  const values = splitJsonValues(text.replace(/^\uFEFF/, ''));
  if (values === null)
    throw new InvalidInput(
      `${path} is not JSON saved with gh api --paginate (expected arrays of issues or comments, back to back or slurped)`,
    );
  const rows: unknown[] = [];
  for (const v of values) {
    if (!Array.isArray(v))
      throw new InvalidInput(
        `${path} holds a JSON ${v === null ? 'null' : typeof v} where a page (an array) was expected; save the list endpoint with gh api --paginate`,
      );
    for (const e of v) {
      if (Array.isArray(e))
        rows.push(...e); // --slurp: an array of pages
      else rows.push(e);
    }
  }
  return rows;
}

/**
 * Splits text holding JSON values back to back (whitespace between them allowed) into the
 * parsed values, or null when any part is not JSON. The parser's message quotes the input, so it
 * is never kept.
 */
function splitJsonValues(text: string): unknown[] | null {
  const out: unknown[] = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    while (i < n && /\s/.test(text[i])) i++;
    if (i >= n) break;
    const start = i;
    if (text[i] !== '[' && text[i] !== '{') return null;
    let depth = 0;
    let inString = false;
    for (; i < n; i++) {
      const ch = text[i];
      if (inString) {
        if (ch === '\\') i++;
        else if (ch === '"') inString = false;
        continue;
      }
      if (ch === '"') inString = true;
      else if (ch === '[' || ch === '{') depth++;
      else if (ch === ']' || ch === '}') {
        depth--;
        if (depth === 0) {
          i++;
          break;
        }
      }
    }
    if (depth !== 0) return null;
    try {
      out.push(JSON.parse(text.slice(start, i)));
    } catch {
      return null;
    }
  }
  return out.length ? out : null;
}

/** `owner/name` from the first row's `repository_url` (`https://api.github.com/repos/O/R`), or null. */
function repoFromRows(rows: unknown[]): string | null {
  for (const r of rows) {
    const url = (r as { repository_url?: unknown } | null)?.repository_url;
    if (typeof url !== 'string') continue;
    const m = /\/repos\/([^/]+\/[^/]+)\/?$/.exec(url);
    if (m) return m[1];
  }
  return null;
}

// ------------------------------------------------------------------ shared steps

function emptyReport(
  target: Pick<GitHubTarget, 'repo' | 'workspaceId'>,
  slug: string,
  source: 'api' | 'files',
): GitHubImportReport {
  return {
    repo: target.repo,
    workspaceId: target.workspaceId,
    workspaceSlug: slug,
    source,
    issuesRead: 0,
    items: { created: 0, updated: 0, unchanged: 0 },
    pullRequestsSkipped: 0,
    comments: { read: 0, written: 0, unchanged: 0, skipped: 0 },
    links: { created: 0, unchanged: 0, dropped: 0 },
    rejected: { count: 0, rows: [] },
    jobsOwed: 0,
    jobRowsOwed: 0,
    requests: 0,
    notModified: 0,
    rateLimitWaits: 0,
    waitedMs: 0,
    since: null,
    highWaterMark: null,
  };
}

function reject(report: GitHubImportReport, log: Logger, row: GitHubRejectedRow): void {
  report.rejected.count++;
  if (report.rejected.rows.length < MAX_REJECTED_LISTED) report.rejected.rows.push(row);
  if (report.rejected.count <= MAX_REJECTED_LISTED)
    log.warn(
      { repo: report.repo, list: row.list, index: row.index, reason: row.reason, detail: row.detail },
      'github row rejected',
    );
}

/** One row validated whole before anything of it is written; null (and reported) when it fails. */
function parseRow<S extends z.ZodType>(
  schema: S,
  raw: unknown,
  list: 'issues' | 'comments',
  index: number,
  report: GitHubImportReport,
  log: Logger,
): z.infer<S> | null {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    reject(report, log, { list, index, reason: 'not_an_object' });
    return null;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    reject(report, log, { list, index, reason: 'invalid_row', detail: describeIssues(parsed.error.issues) });
    return null;
  }
  return parsed.data;
}

/** `member: rule` for the first three issues; zod's messages name types and options, never values. */
function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  const shown = issues.slice(0, 3).map((i) => {
    const missing = i.code === 'invalid_type' && / received undefined$/.test(i.message);
    return `${i.path.length ? i.path.join('.') : '(row)'}: ${missing ? 'missing' : i.message.replace(/^Invalid input: /, '')}`;
  });
  return issues.length > 3 ? `${shown.join(', ')}, +${issues.length - 3} more` : shown.join(', ');
}

/** @returns true when the issue's item is in (written or unchanged). */
async function applyIssue(
  store: TrackerStore,
  target: GitHubTarget,
  issue: GitHubIssue,
  report: GitHubImportReport,
  log: Logger,
  index: number,
  tally: (owed: number) => void,
  labelRule: LabelRule | undefined,
): Promise<boolean> {
  const r = await applyGitHubIssue(store, target, issue, IMPORT_OWE, labelRule);
  if (r.outcome === 'ref_taken') {
    reject(report, log, {
      list: 'issues',
      index,
      reason: 'ref_taken',
      detail: `#${issue.number} belongs to another item`,
    });
    return false;
  }
  tally(r.write.owed);
  report.items[r.outcome]++;
  return true;
}

async function applyComment(
  store: TrackerStore,
  target: GitHubTarget,
  c: GitHubComment,
  report: GitHubImportReport,
  tally: (owed: number) => void,
  bodies: Map<number, string[]>,
): Promise<void> {
  const number = commentIssueNumber(c);
  const r = await applyGitHubComment(store, target, number, c, IMPORT_OWE);
  if (r.outcome === 'no_issue') {
    report.comments.skipped++;
    return;
  }
  tally(r.write.owed);
  if (r.outcome === 'written') report.comments.written++;
  else report.comments.unchanged++;
  const list = bodies.get(number) ?? [];
  list.push(c.body ?? '');
  bodies.set(number, list);
}

/** Links of every issue applied this run, once all of them (and their comments) are in. */
async function applyLinks(
  store: TrackerStore,
  target: GitHubTarget,
  applied: Map<number, GitHubIssue>,
  bodies: Map<number, string[]>,
  report: GitHubImportReport,
  tally: (owed: number) => void,
): Promise<void> {
  for (const issue of applied.values()) {
    const links = githubIssueLinks(issue, bodies.get(issue.number) ?? []);
    if (!links.length) continue;
    const r = await applyGitHubIssueLinks(store, target, links, IMPORT_OWE);
    tally(r.owed);
    report.links.created += r.created;
    report.links.unchanged += r.unchanged;
    report.links.dropped += r.dropped.target_not_found;
  }
}

/** Owed job rows of the workspace whose latest enqueue is at or after `since` (epoch ms). */
async function countRowsOwedSince(
  store: Pick<QueueStore, 'listJobs'>,
  workspaceId: string,
  since: number,
): Promise<number> {
  const rows = await store.listJobs({ workspaceId, state: 'owed', limit: Number.MAX_SAFE_INTEGER });
  return rows.filter((j) => j.owedAt >= since).length;
}

function logFinished(log: Logger, r: GitHubImportReport): void {
  log.info(
    {
      repo: r.repo,
      workspaceId: r.workspaceId,
      source: r.source,
      issuesRead: r.issuesRead,
      items: r.items,
      pullRequestsSkipped: r.pullRequestsSkipped,
      comments: r.comments,
      links: r.links,
      rejected: r.rejected.count,
      jobsOwed: r.jobsOwed,
      jobRowsOwed: r.jobRowsOwed,
      requests: r.requests,
      notModified: r.notModified,
      rateLimitWaits: r.rateLimitWaits,
    },
    'github import finished',
  );
}
