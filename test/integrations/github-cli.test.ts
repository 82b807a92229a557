import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GitHubImportReport } from '../../src/integrations/github/import.js';
import { runCli } from '../harness/cli-in-process.js';
import { ROOT } from '../harness/cli-process.js';
import { startFakeGitHub, type FakeGitHub } from '../harness/fake-github-server.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * `verdict import github` as the user runs it: the CLI's commander program (in process), a real SQLite
 * file, the fixture built from the beads tracker (test/fixtures/github/README.md), and for
 * `--repo` our fake GitHub REST server. The worker runs the fake provider (`--provider fake`), and
 * `status --json` counts its calls (decision_spend), so "zero provider calls" is read from the
 * database the worker wrote.
 */

const FIXTURE = join(ROOT, 'test/fixtures/github');
const ISSUES = join(FIXTURE, 'issues.json');
const COMMENTS = join(FIXTURE, 'comments.json');

/** The fixture's rows, read independently of the importer (pages back to back, one per line). */
const fixtureIssues = readFileSync(ISSUES, 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .flatMap((l) => JSON.parse(l) as Array<Record<string, unknown>>);
const fixtureComments = JSON.parse(readFileSync(COMMENTS, 'utf8')) as Array<Record<string, unknown>>;
const prs = fixtureIssues.filter((r) => r.pull_request);
const issues = fixtureIssues.filter((r) => !r.pull_request);
/** Task-list lines and "Duplicate of" lines in the issues' bodies: the links the fixture renders. */
const renderedLinks =
  issues.reduce((n, r) => n + (String(r.body ?? '').match(/^- \[[ x]\] #\d+$/gm)?.length ?? 0), 0) +
  issues.filter((r) => r.state_reason === 'duplicate' && /^Duplicate of #\d+$/m.test(String(r.body ?? ''))).length;

let dir: { dir: string; cleanup: () => void };
beforeAll(() => {
  dir = tempDir();
});
afterAll(() => dir.cleanup());

const fake = ['--provider', 'fake', '--fake-latency-ms', '0'];

async function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await runCli(args, { VERDICT_LOG_LEVEL: 'warn', GITHUB_TOKEN: '', VERDICT_GITHUB_API_URL: '', ...env });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

async function status(
  db: string,
): Promise<{ queue: Record<string, number>; spend: { last24h: { calls: number } }; answersStored: number }> {
  const r = await cli(['status', '--json', '--database-url', db]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout);
}

describe('verdict import github --file (the fixture from the beads tracker)', () => {
  it('imports items, comments and links and prints the counts; a second run owes nothing and the worker then calls no provider', async () => {
    expect(issues.length).toBe(297);
    expect(prs.length).toBe(3);
    expect(renderedLinks).toBe(71);
    const db = join(dir.dir, 'file.db');

    const human = await cli([
      'import',
      'github',
      '--file',
      ISSUES,
      '--comments',
      COMMENTS,
      '--database-url',
      db,
      ...fake,
    ]);
    expect(human.stderr).toBe('');
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('workspace github: verdict-fixture/beads, 300 issue rows read\n');
    expect(human.stdout).toContain('  items: 297 created, 0 updated, 0 unchanged\n');
    expect(human.stdout).toContain('  pull requests skipped: 3\n');
    expect(human.stdout).toContain(`  comments: ${fixtureComments.length} written, 0 unchanged, 0 skipped\n`);
    expect(human.stdout).toContain('  links: 71 created, 0 unchanged, 0 dropped\n');
    expect(human.stdout).toContain('  rows rejected: 0\n');
    expect(human.stdout).toMatch(/ {2}jobs owed: [1-9]\d* \(item, question set\) rows\n$/);

    const drain = await cli(['worker', '--until-idle', '--database-url', db, ...fake]);
    expect(drain.code).toBe(0);
    const drained = await status(db);
    expect(drained.queue).toMatchObject({ due: 0, waiting: 0, inFlight: 0, parked: 0 });
    expect(drained.spend.last24h.calls).toBeGreaterThan(0); // the first import's jobs asked the provider

    const again = await cli([
      'import',
      'github',
      ISSUES,
      '--comments',
      COMMENTS,
      '--database-url',
      db,
      '--json',
      ...fake,
    ]);
    expect(again.code).toBe(0);
    const r = JSON.parse(again.stdout) as GitHubImportReport;
    expect(r.items).toEqual({ created: 0, updated: 0, unchanged: 297 });
    expect(r.pullRequestsSkipped).toBe(3);
    expect(r.comments).toEqual({
      read: fixtureComments.length,
      written: 0,
      unchanged: fixtureComments.length,
      skipped: 0,
    });
    expect(r.links).toEqual({ created: 0, unchanged: 71, dropped: 0 });
    expect(r.jobsOwed).toBe(0);
    expect(r.jobRowsOwed).toBe(0);
    expect((await status(db)).queue).toMatchObject({ due: 0, waiting: 0, inFlight: 0, parked: 0 });

    expect((await cli(['worker', '--until-idle', '--database-url', db, ...fake])).code).toBe(0);
    const after = await status(db);
    expect(after.spend.last24h.calls).toBe(drained.spend.last24h.calls); // zero provider calls
    expect(after.answersStored).toBe(drained.answersStored);
  }, 120_000);
});

describe('verdict import github --repo (against the fake GitHub REST server)', () => {
  let gh: FakeGitHub;
  beforeAll(async () => {
    gh = await startFakeGitHub({
      repo: 'verdict-fixture/beads',
      token: 'ghp_cli_test',
      issues: fixtureIssues,
      comments: fixtureComments,
    });
  });
  afterAll(async () => gh.close());

  it('reads every page with GITHUB_TOKEN and VERDICT_GITHUB_API_URL; a second run gets 304s and owes nothing', async () => {
    const db = join(dir.dir, 'repo.db');
    const env = { GITHUB_TOKEN: 'ghp_cli_test', VERDICT_GITHUB_API_URL: gh.url };
    const first = await cli(
      ['import', 'github', '--repo', 'verdict-fixture/beads', '--database-url', db, '--json', ...fake],
      env,
    );
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const r1 = JSON.parse(first.stdout) as GitHubImportReport;
    expect(r1.items.created).toBe(297);
    expect(r1.pullRequestsSkipped).toBe(3);
    expect(r1.comments.written).toBe(fixtureComments.length);
    expect(r1.links).toEqual({ created: 71, unchanged: 0, dropped: 0 });
    // issues: 3 pages, then the stable re-listing; comments: 1 page, then its re-listing
    expect(r1.requests).toBe(6);
    expect(
      gh.requests.filter((q) => q.path.endsWith('/issues') && !q.query.since).map((q) => q.query.page ?? '1'),
    ).toEqual(['1', '2', '3']);

    const before = gh.requests.length;
    const second = await cli(
      ['import', 'github', '--repo', 'verdict-fixture/beads', '--database-url', db, ...fake],
      env,
    );
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('verdict-fixture/beads, 0 issue rows read (2 requests, 2 not modified)\n');
    expect(second.stdout).toContain('  jobs owed: 0 (item, question set) rows\n');
    expect(gh.requests.slice(before).map((q) => q.status)).toEqual([304, 304]);
    for (const q of gh.requests.slice(before)) expect(q.query.since).toBeTruthy();
  }, 60_000);

  it('usage errors: no token, a bad repository name, no source, a missing file (exit 2, nothing created)', async () => {
    const db = join(dir.dir, 'never.db');
    const cases: Array<[string[], Record<string, string>, RegExp]> = [
      [['--repo', 'verdict-fixture/beads'], {}, /^verdict: import github --repo needs a token in GITHUB_TOKEN/],
      [['--repo', 'not-a-repo'], { GITHUB_TOKEN: 'x' }, /^verdict: --repo must be OWNER\/NAME, got "not-a-repo"$/m],
      [[], {}, /^verdict: import github needs --repo OWNER\/NAME \(with GITHUB_TOKEN\) or --file issues.json/],
      [['--file', join(dir.dir, 'missing.json')], {}, /^verdict: no file at .*missing\.json; check the path$/m],
      [['--comments', COMMENTS, '--repo', 'a/b'], { GITHUB_TOKEN: 'x' }, /^verdict: --comments goes with --file/],
    ];
    // Independent processes, none of which may create the database: run side by side, then each
    // checked on its own output; the file is looked for once all have exited.
    const results = await Promise.all(
      cases.map(([args, env]) => cli(['import', 'github', ...args, '--database-url', db], env)),
    );
    cases.forEach(([args, , line], i) => {
      const r = results[i];
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(line);
      expect(r.stdout).toBe('');
    });
    expect(() => readFileSync(db)).toThrow(/ENOENT/);
  }, 60_000);
});
