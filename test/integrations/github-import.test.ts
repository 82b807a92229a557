import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { appliesNow } from '../../src/decision/eligibility.js';
import { attentionSet } from '../../src/decision/production-sets.js';
import { IMPORT_OWE } from '../../src/importers/beads.js';
import {
  GitHubRequestFailed,
  githubSyncMetaKey,
  importGitHubFiles,
  importGitHubRepo,
  rateLimitWaitMs,
  type GitHubImportReport,
} from '../../src/integrations/github/import.js';
import {
  applyGitHubIssue,
  findGitHubTarget,
  githubIssueFields,
  githubIssueLinks,
  githubItemId,
  githubRepoMetaKey,
  resolveGitHubTarget,
  type GitHubTarget,
} from '../../src/integrations/github/mapping.js';
import { githubIssueSchema, githubIssuesEventSchema } from '../../src/integrations/github/rest-shapes.js';
import { createLogger } from '../../src/log.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import { startFakeGitHub, type FakeGitHub } from '../harness/fake-github-server.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * The GitHub importer as a library, against our fake GitHub REST server (test/harness/
 * fake-github-server.ts) and a real SQLite file. The hand-made rows copy GitHub's REST shapes
 * (API 2022-11-28): whole-second UTC times, label objects, `user.login`, `pull_request` on PRs,
 * `issue_url` on comments.
 */

const REPO = 'acme/web';
const API = `https://api.github.com/repos/${REPO}`;
const TOKEN = 'ghp_test_token_never_logged';

/** `2026-01-0Xt…Z`: minute `m` of 2026-01-02, GitHub's format. */
const at = (m: number) => new Date(Date.UTC(2026, 0, 2, 0, m, 0)).toISOString().replace('.000Z', 'Z');

function issue(n: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 5000 + n,
    number: n,
    url: `${API}/issues/${n}`,
    repository_url: API,
    html_url: `https://github.com/${REPO}/issues/${n}`,
    title: `Issue ${n}`,
    body: `Body of ${n}`,
    state: 'open',
    state_reason: null,
    labels: [{ id: 1, name: 'bug', color: 'd73a4a' }],
    user: { login: 'octocat', id: 1, type: 'User' },
    milestone: null,
    comments: 0,
    created_at: at(n),
    updated_at: at(n),
    closed_at: null,
    author_association: 'OWNER',
    ...extra,
  };
}

function pr(n: number): Record<string, unknown> {
  return issue(n, {
    title: `PR ${n}`,
    pull_request: { url: `${API}/pulls/${n}`, html_url: `https://github.com/${REPO}/pull/${n}`, merged_at: null },
  });
}

function comment(id: number, issueNumber: number, m: number, body = `Comment ${id}`): Record<string, unknown> {
  return {
    id,
    url: `${API}/issues/comments/${id}`,
    issue_url: `${API}/issues/${issueNumber}`,
    body,
    user: { login: 'hubot', type: 'Bot' },
    created_at: at(m),
    updated_at: at(m),
  };
}

let fx: Fixture;
let gh: FakeGitHub;
/** Waits the importer asked for: ms, and the requests the server had seen before and after the wait. */
let waits: Array<{ ms: number; before: number; after: number }>;
const NOW = Date.UTC(2026, 0, 3);

beforeEach(async () => {
  fx = await makeFixture();
  waits = [];
  gh = await startFakeGitHub({
    repo: REPO,
    token: TOKEN,
    issues: [
      issue(1, { body: 'Tracks:\n- [ ] #4\n- [x] #5\n- [ ] #3\n- [ ] #99' }),
      issue(2, { labels: [{ name: 'ui' }, { name: 'bug' }], milestone: { title: 'v1', number: 1 } }),
      pr(3),
      issue(4),
      issue(5, { state: 'closed', state_reason: 'completed', closed_at: at(30) }),
      issue(6, { state: 'closed', state_reason: 'duplicate', closed_at: at(31), user: null }),
    ],
    comments: [comment(11, 1, 40), comment(12, 3, 41), comment(13, 6, 42, 'Duplicate of #2')],
  });
});
afterEach(async () => {
  await gh.close();
  await fx.cleanup();
});

/** A sleep that lets real time pass (so a request made during the wait would be seen) and records it. */
async function sleep(ms: number): Promise<void> {
  const before = gh.requests.length;
  await new Promise((r) => setTimeout(r, 30));
  waits.push({ ms, before, after: gh.requests.length });
}

function run(extra: Partial<Parameters<typeof importGitHubRepo>[1]> = {}): Promise<GitHubImportReport> {
  return importGitHubRepo(fx.store, {
    repo: REPO,
    token: TOKEN,
    baseUrl: gh.url,
    sleep,
    now: () => NOW,
    perPage: 2,
    ...extra,
  });
}

function sqlAll<T>(query: string, ...params: unknown[]): T[] {
  return fx.store.ctx.db.$client.prepare(query).all(...params) as T[];
}

function links(workspaceId: string): string[] {
  return sqlAll<{ s: string; t: string; type: string }>(
    `SELECT s.ref AS s, t.ref AS t, l.link_type AS type FROM item_links l
       JOIN items s ON s.id = l.source_id JOIN items t ON t.id = l.target_id
      WHERE l.workspace_id = ? ORDER BY 1, 2, 3`,
    workspaceId,
  ).map((r) => `${r.s} -${r.type}-> ${r.t}`);
}

const issueRequests = () => gh.requests.filter((r) => r.path === `/repos/${REPO}/issues`);
const commentRequests = () => gh.requests.filter((r) => r.path === `/repos/${REPO}/issues/comments`);

describe('importGitHubRepo: the first run', () => {
  it('reads every page, leaves the pull request out, maps issues, comments and links', async () => {
    const r = await run();
    expect(r.items).toEqual({ created: 5, updated: 0, unchanged: 0 });
    expect(r.pullRequestsSkipped).toBe(1);
    // #3's comment belongs to a PR; the re-listing from the mark reads comment 13 again (applied once)
    expect(r.comments).toEqual({ read: 4, written: 2, unchanged: 0, skipped: 1 });
    expect(r.rejected.count).toBe(0);

    // every page of the full listing (6 rows at 2 a page), then one stable re-listing from the mark
    const pages = issueRequests().map((q) => [q.query.page ?? '1', q.query.since ?? null]);
    expect(pages).toEqual([
      ['1', null],
      ['2', null],
      ['3', null],
      ['1', at(6)],
    ]);
    for (const q of issueRequests())
      expect(q.query).toMatchObject({ state: 'all', sort: 'updated', direction: 'asc', per_page: '2' });
    for (const q of gh.requests) {
      expect(q.authorization).toBe(`token ${TOKEN}`);
      expect(q.apiVersion).toBe('2022-11-28');
    }
    expect(commentRequests().map((q) => q.query.since ?? null)).toEqual([null, null, at(42)]);

    const target = (await findGitHubTarget(fx.store, REPO))!;
    const items = await fx.store.listItems({ workspaceId: target.workspaceId });
    expect(items.map((i) => i.ref).sort()).toEqual(['#1', '#2', '#4', '#5', '#6']);
    const two = (await fx.store.getItemByRef(target.workspaceId, '#2'))!;
    expect(two.id).toBe(githubItemId(target, 2));
    expect(two.title).toBe('Issue 2');
    expect(two.content).toBe('Body of 2');
    expect(two.fields).toBe('{"status":"open","labels":["bug","ui"],"author":"octocat","milestone":"v1"}');
    expect(two.createdAt).toBe(Date.parse(at(2)));
    expect((await fx.store.getItemByRef(target.workspaceId, '#6'))!.fields).toBe(
      '{"status":"closed","state_reason":"duplicate","labels":["bug"]}',
    );

    // task list of #1: #4 (a later page) and #5 are its children; #3 is a PR and #99 does not exist: dropped
    expect(links(target.workspaceId)).toEqual(['#4 -parent-> #1', '#5 -parent-> #1', '#6 -duplicates-> #2']);
    expect(r.links).toEqual({ created: 3, unchanged: 0, dropped: 2 });

    // backfill priority, due at once
    const jobs = await fx.store.listJobs({ workspaceId: target.workspaceId, limit: 1000 });
    expect(jobs.length).toBeGreaterThan(0);
    expect(r.jobRowsOwed).toBe(jobs.length);
    for (const j of jobs) expect(j.priority).toBe(PRIORITY_BACKFILL);

    const sync = JSON.parse((await fx.store.getMeta(githubSyncMetaKey(REPO)))!);
    expect(sync.issues.since).toBe(at(6));
    expect(sync.issues.etag).toMatch(/^W\/"/);
    expect(sync.comments.since).toBe(at(42));
    expect(r.highWaterMark).toBe(at(6));
    expect(r.requests).toBe(gh.requests.length);
  });

  it('open issues are eligible for the production sets, closed ones are not (status terminal at closed)', async () => {
    const r = await run();
    const cols = await fx.store.listCollections(r.workspaceId);
    expect(cols.map((c) => c.slug)).toEqual(['github']);
    const open = (await fx.store.getItemByRef(r.workspaceId, '#1'))!;
    const closed = (await fx.store.getItemByRef(r.workspaceId, '#5'))!;
    expect(appliesNow(attentionSet, open, cols[0])).toBe(true);
    expect(appliesNow(attentionSet, closed, cols[0])).toBe(false);
  });
});

describe('importGitHubRepo: later runs', () => {
  it('a second run sends since and the ETags, gets 304s, and writes and owes nothing', async () => {
    await run();
    const seqs = sqlAll<{ id: string; seq: number }>('SELECT id, seq FROM items ORDER BY id');
    await fx.store.dropJobs({});
    const before = gh.requests.length;
    const sync = JSON.parse((await fx.store.getMeta(githubSyncMetaKey(REPO)))!);

    const r = await run();
    const sent = gh.requests.slice(before);
    expect(
      sent.map((q) => [q.path.endsWith('/comments') ? 'comments' : 'issues', q.query.since, q.ifNoneMatch, q.status]),
    ).toEqual([
      ['issues', at(6), sync.issues.etag, 304],
      ['comments', at(42), sync.comments.etag, 304],
    ]);
    expect(r.notModified).toBe(2);
    expect(r.requests).toBe(2);
    expect(r.items).toEqual({ created: 0, updated: 0, unchanged: 0 });
    expect(r.jobsOwed).toBe(0);
    expect(r.jobRowsOwed).toBe(0);
    expect(await fx.store.listJobs({ limit: 1000 })).toEqual([]);
    expect(sqlAll('SELECT id, seq FROM items ORDER BY id')).toEqual(seqs);
    expect(r.since).toBe(at(6));
  });

  it('a change after the mark comes back through since: only that issue is written', async () => {
    await run();
    await fx.store.dropJobs({});
    Object.assign(gh.issues[1], { title: 'Issue 2, renamed', updated_at: at(50) });
    const before = gh.requests.length;
    const r = await run();
    expect(r.items).toEqual({ created: 0, updated: 1, unchanged: 1 }); // #6 sits at the old mark: re-read, a no-op
    expect(r.jobRowsOwed).toBeGreaterThan(0);
    const sent = gh.requests.slice(before).filter((q) => q.path.endsWith('/issues'));
    // the stored ETag no longer matches; then one stable re-listing from the new mark
    expect(sent.map((q) => [q.query.since, q.status])).toEqual([
      [at(6), 200],
      [at(50), 200],
    ]);
    expect(JSON.parse((await fx.store.getMeta(githubSyncMetaKey(REPO)))!).issues.since).toBe(at(50));
    expect((await fx.store.getItemByRef(r.workspaceId, '#2'))!.title).toBe('Issue 2, renamed');
  });

  it('If-None-Match goes on the first page only; a listing of several pages keeps no ETag', async () => {
    await run();
    // three issues at one new time: the stable re-listing from that mark spans two pages of 2
    for (const i of [0, 1, 3]) gh.issues[i].updated_at = at(50);
    const before = gh.requests.length;
    await run();
    const sent = gh.requests.slice(before).filter((q) => q.path.endsWith('/issues'));
    expect(sent.map((q) => [q.query.since, q.query.page ?? '1', q.ifNoneMatch !== null])).toEqual([
      [at(6), '1', true], // the stored ETag, first page only
      [at(6), '2', false],
      [at(50), '1', false],
      [at(50), '2', false],
    ]);
    const sync = JSON.parse((await fx.store.getMeta(githubSyncMetaKey(REPO)))!);
    expect(sync.issues).toEqual({ since: at(50), etag: null }); // a first page's 304 would not show an appended change
    const next = gh.requests.length;
    await run();
    expect(
      gh.requests
        .slice(next)
        .filter((q) => q.path.endsWith('/issues'))
        .map((q) => [q.ifNoneMatch, q.status]),
    ).toEqual([
      [null, 200],
      [null, 200],
    ]);
  });

  it('re-listing stops after MAX_LIST_PASSES while the repository keeps changing', async () => {
    let minute = 100;
    gh.onRequest = (q) => {
      if (q.path.endsWith('/issues')) gh.issues[0].updated_at = at(minute++);
    };
    await run({ perPage: 100 });
    expect(issueRequests()).toHaveLength(3);
    const sync = JSON.parse((await fx.store.getMeta(githubSyncMetaKey(REPO)))!);
    expect(sync.issues.etag).toBeNull();
    expect(sync.issues.since).toBe(at(102));
  });

  it('a run that fails keeps the old mark: nothing of the sync state moves', async () => {
    await run();
    const sync = await fx.store.getMeta(githubSyncMetaKey(REPO));
    gh.issues[1].updated_at = at(50);
    gh.faults.push({ kind: 'status', status: 502 });
    await expect(run()).rejects.toBeInstanceOf(GitHubRequestFailed);
    expect(await fx.store.getMeta(githubSyncMetaKey(REPO))).toBe(sync);
  });
});

describe('importGitHubRepo: rate limits', () => {
  it('a 403 secondary limit with retry-after waits that long, sends nothing while waiting, then retries once', async () => {
    gh.faults.push({ kind: 'secondary', retryAfterSeconds: 7 });
    const r = await run();
    expect(waits).toHaveLength(1);
    expect(waits[0].ms).toBe(7_000);
    expect(waits[0].after).toBe(waits[0].before); // no request during the wait
    expect(gh.requests[0].status).toBe(403);
    expect(gh.requests[1].query.page).toBeUndefined(); // the same first page, retried
    expect(gh.requests[1].status).toBe(200);
    expect(r.rateLimitWaits).toBe(1);
    expect(r.waitedMs).toBe(7_000);
    expect(r.items.created).toBe(5);
  });

  it('a secondary limit without retry-after waits at least a minute, doubling when it holds', async () => {
    gh.faults.push({ kind: 'secondary' }, { kind: 'secondary', status: 429 });
    await run();
    expect(waits.map((w) => w.ms)).toEqual([60_000, 120_000]);
  });

  it('a primary limit (x-ratelimit-remaining 0) waits until x-ratelimit-reset', async () => {
    gh.faults.push({ kind: 'primary', resetEpochSeconds: NOW / 1000 + 120 });
    const r = await run();
    expect(waits.map((w) => w.ms)).toEqual([121_000]); // until the reset, plus a second's margin
    expect(waits[0].after).toBe(waits[0].before);
    expect(r.items.created).toBe(5);
  });

  it('a response that spends the last request makes the next request wait for the reset first', async () => {
    gh.extraHeaders = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(NOW / 1000 + 30) };
    await run({ perPage: 100 });
    // issues page, stable re-listing, comments page, stable re-listing: each after the first waits
    expect(waits.map((w) => w.ms)).toEqual([31_000, 31_000, 31_000]);
    expect(gh.requests.every((q) => q.status === 200)).toBe(true);
  });

  it('gives up with a clear error after the allowed waits, having stored no sync state', async () => {
    for (let i = 0; i < 6; i++) gh.faults.push({ kind: 'secondary', retryAfterSeconds: 1 });
    const err = await run({ maxRateLimitWaits: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitHubRequestFailed);
    expect((err as Error).message).toMatch(/rate limit held after 5 waits/);
    expect(waits).toHaveLength(5);
    expect(gh.requests).toHaveLength(6);
    expect(await fx.store.getMeta(githubSyncMetaKey(REPO))).toBeNull();
  });

  it('a reset further away than maxWaitMs fails at once instead of sleeping', async () => {
    gh.faults.push({ kind: 'primary', resetEpochSeconds: NOW / 1000 + 7200 });
    await expect(run()).rejects.toThrow(/resets in 121 min/);
    expect(waits).toHaveLength(0);
  });

  it('a 403 that is no rate limit fails at once: no wait, no retry', async () => {
    gh.faults.push({ kind: 'status', status: 403 });
    await expect(run()).rejects.toThrow(/GitHub denied access to acme\/web \(403\)/);
    expect(waits).toHaveLength(0);
    expect(gh.requests).toHaveLength(1);
  });

  it('rateLimitWaitMs: a 403 that is no rate limit is a permission error (no wait)', () => {
    expect(rateLimitWaitMs(403, {}, 'Resource not accessible by integration', NOW, 1)).toBeNull();
    expect(rateLimitWaitMs(404, { 'retry-after': '5' }, '', NOW, 1)).toBeNull();
    expect(rateLimitWaitMs(403, { 'retry-after': '5' }, '', NOW, 1)).toBe(5_000);
  });
});

describe('importGitHubRepo: errors and secrecy', () => {
  it('a refused token is a clear error naming no GitHub text; the token and titles are never logged', async () => {
    const lines: string[] = [];
    const logger = createLogger('debug', { write: (s: string) => void lines.push(s) } as never);
    await run({ logger });
    const err = await run({ token: 'wrong', logger }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitHubRequestFailed);
    expect((err as GitHubRequestFailed).status).toBe(401);
    expect((err as Error).message).toBe('GitHub refused the token (401); check GITHUB_TOKEN');
    const log = lines.join('');
    expect(log).toContain('github import finished');
    for (const secret of [TOKEN, 'Issue 2', 'Body of', 'Comment 11', 'Bad credentials', 'Tracks:'])
      expect(log).not.toContain(secret);
  });

  it('a first run GitHub refuses leaves no workspace behind', async () => {
    await expect(run({ token: 'wrong' })).rejects.toBeInstanceOf(GitHubRequestFailed);
    expect(await fx.store.getWorkspaceBySlug('github')).toBeNull();
    expect(await findGitHubTarget(fx.store, REPO)).toBeNull();
  });

  it('refuses a repo that is not owner/name and an empty token before any request', async () => {
    await expect(run({ repo: 'acme' })).rejects.toThrow(TypeError);
    await expect(run({ token: ' ' })).rejects.toThrow(TypeError);
    expect(gh.requests).toHaveLength(0);
  });
});

describe('the mapping', () => {
  let target: GitHubTarget;
  beforeEach(async () => {
    target = await resolveGitHubTarget(fx.store, { repo: REPO, workspaceSlug: 'web' });
  });

  it('resolveGitHubTarget records the mapping once; one repository per workspace', async () => {
    expect(JSON.parse((await fx.store.getMeta(githubRepoMetaKey(REPO)))!)).toEqual(target);
    expect(await resolveGitHubTarget(fx.store, { repo: 'ACME/Web', workspaceSlug: 'web' })).toEqual(target);
    await expect(resolveGitHubTarget(fx.store, { repo: 'acme/other', workspaceSlug: 'web' })).rejects.toThrow(
      /already holds acme\/web/,
    );
    await expect(resolveGitHubTarget(fx.store, { repo: REPO, workspaceSlug: 'elsewhere' })).rejects.toThrow(
      /already imported into workspace "web"/,
    );
  });

  it('works on a transaction handle; a re-apply with labels reordered changes nothing and owes nothing', async () => {
    const row = githubIssueSchema.parse(issue(7, { labels: [{ name: 'b' }, { name: 'a' }] }));
    const first = await fx.store.transaction(async (tx) => applyGitHubIssue(tx, target, row, IMPORT_OWE));
    expect(first.outcome).toBe('created');
    const reordered = githubIssueSchema.parse(issue(7, { labels: [{ name: 'a' }, { name: 'b' }, { name: 'a' }] }));
    const again = await fx.store.transaction(async (tx) => applyGitHubIssue(tx, target, reordered, IMPORT_OWE));
    expect(again.outcome).toBe('unchanged');
    expect(again.outcome !== 'ref_taken' && again.write.owed).toBe(0);
  });

  it('keeps the issue\u2019s html_url as the item\u2019s source URL; a moved URL alone is stored and owes nothing; a non-http one is left out', async () => {
    const first = await applyGitHubIssue(fx.store, target, githubIssueSchema.parse(issue(9)), IMPORT_OWE);
    expect(first.outcome).toBe('created');
    const item = (await fx.store.getItemByRef(target.workspaceId, '#9'))!;
    expect(item.sourceUrl).toBe(`https://github.com/${REPO}/issues/9`);
    // The repository renamed: GitHub gives the new page; the state is the same, so nothing is owed.
    const moved = await applyGitHubIssue(
      fx.store,
      target,
      githubIssueSchema.parse(issue(9, { html_url: 'https://github.com/acme/site/issues/9' })),
      IMPORT_OWE,
    );
    expect(moved.outcome).toBe('updated');
    expect(moved.outcome !== 'ref_taken' && moved.write.owed).toBe(0);
    const after = (await fx.store.getItemByRef(target.workspaceId, '#9'))!;
    expect(after.sourceUrl).toBe('https://github.com/acme/site/issues/9');
    expect(after.seq).toBe(item.seq);
    await applyGitHubIssue(
      fx.store,
      target,
      githubIssueSchema.parse(issue(10, { html_url: 'javascript:alert(1)' })),
      IMPORT_OWE,
    );
    expect((await fx.store.getItemByRef(target.workspaceId, '#10'))!.sourceUrl).toBeNull();
    // The door refuses one, naming the field: every writer follows the same rule.
    await expect(
      fx.store.createItem({
        workspaceId: target.workspaceId,
        collectionId: target.collectionId,
        ref: 'x-1',
        title: 't',
        sourceUrl: 'data:text/html,hi',
      }),
    ).rejects.toThrow(/sourceUrl/);
  });

  it('an item of another origin holding the ref is never overwritten', async () => {
    await fx.store.createItem({
      workspaceId: target.workspaceId,
      collectionId: target.collectionId,
      ref: '#8',
      title: 'mine',
    });
    const r = await applyGitHubIssue(fx.store, target, githubIssueSchema.parse(issue(8)), IMPORT_OWE);
    expect(r.outcome).toBe('ref_taken');
    expect((await fx.store.getItemByRef(target.workspaceId, '#8'))!.title).toBe('mine');
  });

  it('githubIssueFields and githubIssueLinks', () => {
    expect(githubIssueFields(githubIssueSchema.parse(issue(1, { labels: ['z', { name: 'a' }] })))).toEqual({
      status: 'open',
      labels: ['a', 'z'],
      author: 'octocat',
    });
    const links = githubIssueLinks(
      {
        number: 9,
        state_reason: 'duplicate',
        body: '* [X] #3 later\n1. [ ] #4\n- [ ] see #5\n- [ ] #9\nDuplicate of #1',
      },
      ['Duplicate of #2', 'noise'],
    );
    expect(links).toEqual([
      { source: 3, target: 9, linkType: 'parent' },
      { source: 4, target: 9, linkType: 'parent' },
      { source: 9, target: 2, linkType: 'duplicates' }, // the newest comment saying it wins over the body
    ]);
    expect(githubIssueLinks({ number: 9, state_reason: 'completed', body: 'Duplicate of #1' })).toEqual([]);
  });

  it('the webhook payload schemas parse an issues event and refuse an unknown action', () => {
    const payload = {
      action: 'labeled',
      issue: issue(1),
      repository: { full_name: REPO, id: 1 },
      label: { name: 'bug' },
      sender: { login: 'x' },
    };
    expect(githubIssuesEventSchema.parse(payload).repository.full_name).toBe(REPO);
    expect(githubIssuesEventSchema.safeParse({ ...payload, action: 'pinned' }).success).toBe(false);
  });
});

describe('importGitHubFiles', () => {
  const dir = () => join(fx.file, '..');
  const write = (name: string, text: string) => {
    const p = join(dir(), name);
    writeFileSync(p, text);
    return p;
  };

  it('reads gh api --paginate output back to back, slurped, or one array; a bad row is reported by index and not written', async () => {
    const rows = [
      issue(1, { body: '- [ ] #2' }),
      issue(2),
      pr(3),
      { number: 4, title: 'no state' },
      'not an object',
      issue(5, { created_at: 'yesterday' }),
    ];
    const paged = write('paged.json', `${JSON.stringify(rows.slice(0, 2))}${JSON.stringify(rows.slice(2))}\n`);
    const comments = write(
      'comments.json',
      JSON.stringify([comment(11, 1, 40), comment(12, 3, 41), { id: 13, body: 'x' }]),
    );
    const r = await importGitHubFiles(fx.store, { issuesFile: paged, commentsFile: comments });
    expect(r.repo).toBe(REPO); // from repository_url
    expect(r.issuesRead).toBe(6);
    expect(r.items.created).toBe(2);
    expect(r.pullRequestsSkipped).toBe(1);
    expect(r.rejected.rows.map((x) => [x.list, x.index, x.reason])).toEqual([
      ['issues', 3, 'invalid_row'],
      ['issues', 4, 'not_an_object'],
      ['issues', 5, 'invalid_row'],
      ['comments', 2, 'invalid_row'],
    ]);
    expect(r.rejected.rows[0].detail).toMatch(/^state: /);
    expect(r.rejected.rows[2].detail).toBe('created_at: not an ISO 8601 time with offset');
    expect(await fx.store.getItemByRef(r.workspaceId, '#5')).toBeNull();
    expect(await fx.store.getItemByRef(r.workspaceId, '#4')).toBeNull();
    expect(r.comments).toMatchObject({ written: 1, skipped: 1 });
    expect(r.links).toEqual({ created: 1, unchanged: 0, dropped: 0 });
    expect(r.requests).toBe(0);

    const slurped = write('slurped.json', JSON.stringify([rows.slice(0, 2), rows.slice(2)]));
    const again = await importGitHubFiles(fx.store, { issuesFile: slurped, commentsFile: comments });
    expect(again.items).toEqual({ created: 0, updated: 0, unchanged: 2 });
    expect(again.links).toEqual({ created: 0, unchanged: 1, dropped: 0 });
    expect(again.jobsOwed).toBe(0);

    const plain = write('plain.json', JSON.stringify(rows.slice(0, 3)));
    expect((await importGitHubFiles(fx.store, { issuesFile: plain })).items.unchanged).toBe(2);
  });

  it('an issue listed twice (pages shifted while gh paginated) is applied once, its latest copy', async () => {
    const p = write(
      'twice.json',
      JSON.stringify([issue(1, { title: 'new', updated_at: at(9) }), issue(1, { title: 'old' })]),
    );
    const r = await importGitHubFiles(fx.store, { issuesFile: p, repo: REPO });
    expect(r.items.created).toBe(1);
    expect((await fx.store.getItemByRef(r.workspaceId, '#1'))!.title).toBe('new');
  });

  it('a file that is not gh api JSON, or a missing one, is refused before anything is written', async () => {
    await expect(importGitHubFiles(fx.store, { issuesFile: write('bad.json', '[{"a":1}] trailing') })).rejects.toThrow(
      /not JSON saved with gh api/,
    );
    await expect(
      importGitHubFiles(fx.store, { issuesFile: write('obj.json', '{"message":"Not Found"}') }),
    ).rejects.toThrow(/where a page \(an array\) was expected/);
    await expect(importGitHubFiles(fx.store, { issuesFile: join(dir(), 'nope.json') })).rejects.toThrow(/no file at/);
    await expect(
      importGitHubFiles(fx.store, {
        issuesFile: write('norepo.json', JSON.stringify([{ ...issue(1), repository_url: undefined }])),
      }),
    ).rejects.toThrow(/pass --repo/);
    expect(await fx.store.getWorkspaceBySlug('github')).toBeNull();
  });
});
