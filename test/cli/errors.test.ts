import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../harness/cli-in-process.js';
import { ROOT } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * One error voice (issue 11): every failure the CLI (its commander program, in process) reports is one
 * line `verdict: <what>; <how to fix>` on stderr, exit 2 for usage and missing inputs, 1 for
 * failures, and a failed command creates nothing. Each row was seen printing something else.
 */

const t = tempDir();
const db = join(t.dir, 'verdict.db');
const fresh = (name: string) => join(t.dir, name);
let closedPort = 0;

beforeAll(async () => {
  const jsonl = join(t.dir, 'tiny.jsonl');
  writeFileSync(
    jsonl,
    `${JSON.stringify({ id: 'bd-1', title: 'One', status: 'open', priority: 2, issue_type: 'task' })}\n`,
  );
  writeFileSync(join(t.dir, 'github.json'), JSON.stringify([{ number: 1, title: 'an issue', state: 'open' }]));
  writeFileSync(join(t.dir, 'a-file'), 'not a folder');
  await runCli(['import', 'beads', jsonl, '--database-url', db, '--provider', 'fake']);
  // A port nothing listens on: Postgres "down".
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  closedPort = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
}, 60_000);
afterAll(() => t.cleanup());

/** Runs the CLI and returns its exit code and stderr, whatever the exit. */
async function run(args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    const r = await runCli([...args, '--provider', 'fake']);
    return { code: 0, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

interface Row {
  name: string;
  args: () => string[];
  exit: 1 | 2;
  line: RegExp;
  /** A path the failed command must not have created. */
  creates?: () => string;
}

const TABLE: Row[] = [
  {
    name: 'show of an unknown ref',
    args: () => ['show', 'bd-nosuch', '--database-url', db],
    exit: 2,
    line: /^verdict: no item bd-nosuch in workspace beads; check the ref/,
  },
  {
    name: 'edit of an unknown ref',
    args: () => ['edit', 'bd-nosuch', '--field', 'status=open', '--database-url', db],
    exit: 2,
    line: /^verdict: no item bd-nosuch in workspace beads; check the ref/,
  },
  {
    name: 'import of a missing file',
    args: () => ['import', 'beads', '/nonexistent.jsonl', '--database-url', fresh('missing-input.db')],
    exit: 2,
    line: /^verdict: no file at \/nonexistent\.jsonl; check the path$/,
    creates: () => fresh('missing-input.db'),
  },
  {
    name: 'import of a README',
    args: () => ['import', 'beads', join(ROOT, 'README.md'), '--database-url', fresh('readme.db')],
    exit: 1,
    line: /^verdict: not beads JSONL: 0 of \d+ lines parsed; first error at line 1: not JSON; nothing was imported/,
    creates: () => fresh('readme.db'),
  },
  {
    name: 'import of raw GitHub JSON',
    args: () => ['import', 'beads', join(t.dir, 'github.json'), '--database-url', fresh('github.db')],
    exit: 1,
    line: /^verdict: not beads JSONL: 0 of 1 lines parsed; first error at line 1: a JSON array, not one object per line; /,
    creates: () => fresh('github.db'),
  },
  {
    name: 'import of an unknown format',
    args: () => ['import', 'jira', join(t.dir, 'github.json'), '--database-url', db],
    exit: 2,
    line: /^verdict: unknown format "jira"; known: beads, conventions, github$/,
  },
  {
    name: 'Postgres down',
    args: () => ['status', '--database-url', `postgres://verdict:s3cret@127.0.0.1:${closedPort}/verdict`],
    exit: 1,
    line: /^verdict: cannot reach the database at postgres:\/\/127\.0\.0\.1:\d+\/verdict \(ECONNREFUSED\); check that the server is running/,
  },
  {
    name: 'a path SQLite cannot open',
    args: () => ['import', 'beads', join(t.dir, 'tiny.jsonl'), '--database-url', '/proc/self/verdict.db'],
    exit: 1,
    line: /^verdict: cannot open the database at \/proc\/self\/verdict\.db \(SQLITE_CANTOPEN\); check that its folder exists/,
  },
  {
    name: 'a database path under a file',
    args: () => ['import', 'beads', join(t.dir, 'tiny.jsonl'), '--database-url', join(t.dir, 'a-file', 'sub', 'v.db')],
    exit: 1,
    line: /^verdict: cannot open the database at .*a-file\/sub\/v\.db \(ENOTDIR\); /,
  },
  {
    name: 'a worker on a database that does not exist',
    args: () => ['worker', '--until-idle', '--database-url', fresh('nonexistent-dir/sub/verdict.db')],
    exit: 2,
    line: /^verdict: no database at .*nonexistent-dir\/sub\/verdict\.db; .*or --create to start a new one$/,
    creates: () => fresh('nonexistent-dir'),
  },
  {
    name: 'a read of a database that does not exist',
    args: () => ['status', '--database-url', fresh('typo.db')],
    exit: 2,
    line: /^verdict: no database at .*typo\.db \(.* holds .*\); /,
    creates: () => fresh('typo.db'),
  },
  {
    name: 'backfill with no worker running',
    args: () => ['backfill', '--set', 'effort', '--yes', '--database-url', db],
    exit: 1,
    line: /^verdict: no worker is running \(no live heartbeat; `verdict status` lists workers\), so nothing would drain the backfill; nothing was owed \(\d+ jobs owed already wait\); start `verdict worker` and rerun, or rerun with --drain/,
  },
  {
    name: 'flags of an unknown set',
    args: () => ['flags', '--set', 'nosuch', '--database-url', db],
    exit: 2,
    line: /^verdict: --set: no question set "nosuch"; known: /,
  },
  {
    name: 'flags with a bad --limit',
    args: () => ['flags', '--set', 'attention', '--limit', '0', '--database-url', db],
    exit: 2,
    line: /^verdict: --limit: got "0"; expected a whole number/,
  },
];

// The rows are independent processes (each reads the shared database or writes only its own
// fresh path, and asserts on its own exit and stderr), so they run a few at a time: the spawns are
// most of this file's time, and the machine's cores take them side by side.
describe.concurrent('the CLI has one error voice (CLI in process)', () => {
  it.each(TABLE)(
    '$name: exit $exit, one line `verdict: <what>; <how to fix>`',
    async (row) => {
      const r = await run(row.args());
      expect(r.code).toBe(row.exit);
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(row.line);
      expect(lines[0]).toMatch(/^verdict: [^;]+; /);
      expect(r.stderr).not.toContain('s3cret');
      if (row.creates) expect(existsSync(row.creates())).toBe(false);
    },
    30_000,
  );
});
