import Database from 'better-sqlite3';
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS, OPTIONS } from '../../src/config.js';
import { OPTION_HELP } from '../../src/cli/options-help.js';
import { openStoreOn } from '../../src/compose/open.js';
import { Registry } from '../../src/decision/registry.js';
import { databaseLabel } from '../../src/store/database-errors.js';
import { BUILT_MAIN, requireBuiltCli, runBuiltCli } from '../harness/built-cli.js';
import { loadCli, runCli } from '../harness/cli-in-process.js';
import { ROOT } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * The CLI a newcomer meets (issue 11) on real SQLite files: what import prints as owed, the
 * worker's start line, help that lists global options once, reads that need no write access, and
 * no lock file left beside a database. The commands run in process (test/harness/cli-in-process.ts);
 * the read-only check spawns the built CLI (as another user, four processes side by side), and so
 * does `help options`.
 */

const t = tempDir();
const jsonl = join(t.dir, 'two.jsonl');
beforeAll(async () => {
  requireBuiltCli();
  await loadCli();
  writeFileSync(
    jsonl,
    [
      {
        id: 'bd-1',
        title: 'One',
        status: 'open',
        priority: 2,
        issue_type: 'task',
        comments: [
          { id: 1, author: 'a', text: 'x' },
          { id: 2, author: 'b', text: 'y' },
        ],
      },
      {
        id: 'bd-2',
        title: 'Two',
        status: 'open',
        priority: 1,
        issue_type: 'task',
        dependencies: [{ issue_id: 'bd-2', depends_on_id: 'bd-1', type: 'blocks' }],
      },
    ]
      .map((r) => JSON.stringify(r))
      .join('\n'),
  );
});
afterAll(() => t.cleanup());

const countJobs = (file: string) => {
  const d = new Database(file, { readonly: true });
  try {
    return (d.prepare('SELECT count(*) AS n FROM decision_jobs').get() as { n: number }).n;
  } finally {
    d.close();
  }
};

describe('import and worker (built CLI)', () => {
  it('import prints the job rows owed, not the upserts, and leaves no lock file beside the database', async () => {
    const file = join(t.dir, 'import.db');
    const { stdout } = await runCli(['import', 'beads', jsonl, '--database-url', file, '--provider', 'fake']);
    expect(stdout).toContain(`  jobs owed: ${countJobs(file)} (item, question set) rows`);
    expect(readdirSync(t.dir).filter((f) => f.includes('migrate-lock'))).toEqual([]);
  }, 30_000);

  it('a worker creates a missing database only with --create, and its start line names the database', async () => {
    const file = join(t.dir, 'new', 'worker.db');
    const { stderr } = await runCli([
      'worker',
      '--until-idle',
      '--create',
      '--database-url',
      file,
      '--provider',
      'fake',
      '--log-level',
      'info',
    ]);
    expect(existsSync(file)).toBe(true);
    const started = stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; database?: string })
      .find((l) => l.msg === 'worker started');
    expect(started?.database).toBe(file);
  }, 30_000);

  it('a Postgres database is named by host and database, never by user or password', () => {
    expect(databaseLabel('postgres://verdict:s3cret@db.example:5433/verdict?sslmode=require')).toBe(
      'postgres://db.example:5433/verdict',
    );
    expect(databaseLabel('postgresql://u@localhost/v')).toBe('postgres://localhost/v');
    expect(databaseLabel('./data/verdict.db')).toBe('./data/verdict.db');
  });
});

describe('reads open read-only', () => {
  it('a read store refuses a missing file and holds a read-only connection', async () => {
    const file = join(t.dir, 'ro.db');
    expect(() => openStoreOn(file, new Registry([]), { access: 'read' })).toThrow(/^no database at /);
    expect(existsSync(file)).toBe(false);
    await openStoreOn(file, new Registry([])).close();
    const store = openStoreOn(file, new Registry([]), { access: 'read' }) as unknown as {
      ctx: { db: { $client: Database.Database } };
      close(): Promise<void>;
    };
    expect(store.ctx.db.$client.readonly).toBe(true);
    await store.close();
  });

  it('status, show, flags and jobs list work on a database in a folder this user may not write', async () => {
    const dir = join(t.dir, 'locked');
    const file = join(dir, 'verdict.db');
    await runCli(['import', 'beads', jsonl, '--database-url', file, '--provider', 'fake']);
    chmodSync(dir, 0o555);
    chmodSync(file, 0o644);
    chmodSync(t.dir, 0o755);
    try {
      // As root every folder is writable: run as `nobody` then, which may read but not write.
      const asUser =
        process.getuid?.() === 0 ? ['runuser', '-u', 'nobody', '--', process.execPath] : [process.execPath];
      // Four readers side by side (each a process of its own): any of them writing would fail the same.
      const [cmd, ...pre] = asUser;
      const runs = await Promise.all(
        [['status'], ['show', 'bd-1'], ['flags', '--set', 'attention'], ['jobs', 'list']].map((args) =>
          promisify(execFile)(cmd, [...pre, BUILT_MAIN, ...args, '--database-url', file, '--provider', 'fake'], {
            cwd: ROOT,
            env: { ...process.env, CI: '1', NO_COLOR: '1' },
          }),
        ),
      );
      for (const r of runs) expect(r.stderr).toBe('');
      expect(readdirSync(dir)).toEqual(['verdict.db']);
    } finally {
      chmodSync(dir, 0o755);
    }
  }, 60_000);
});

describe('help lists the global options once', () => {
  it("a command's help shows its own options and points at `verdict help options`", async () => {
    const cmds = ['show', 'worker', 'import', 'jobs list'];
    const outs = await Promise.all(cmds.map((cmd) => runCli([...cmd.split(' '), '--help'])));
    for (const { stdout } of outs) {
      expect(stdout).not.toContain('--database-url <value>');
      expect(stdout).toContain('`verdict help options`');
    }
  }, 30_000);

  it('`verdict help options` lists each global option once with its variable, meaning and default', async () => {
    // The built CLI: in process, commander's `help options` exits the process (the `options`
    // command is added before the program's exitOverride, so it does not inherit it).
    const { stdout } = await runBuiltCli(['help', 'options']);
    for (const [key, spec] of Object.entries(OPTIONS)) {
      expect(stdout.split(`  ${spec.flag} `).length - 1, spec.flag).toBe(1);
      expect(stdout).toContain(`(env ${spec.env})`);
      expect(stdout).toContain(OPTION_HELP[key as keyof typeof OPTIONS].meaning);
    }
    expect(stdout.match(/default: /g)).toHaveLength(Object.keys(OPTIONS).length);
  }, 30_000);

  it('the help table agrees with .env.example: every variable is there, and the defaults match', () => {
    const example = readFileSync(join(ROOT, '.env.example'), 'utf8');
    for (const [key, spec] of Object.entries(OPTIONS)) {
      expect(example, spec.env).toContain(`${spec.env}=`);
      const def = (DEFAULTS as Record<string, unknown>)[key];
      if (def !== undefined) {
        expect(OPTION_HELP[key as keyof typeof OPTIONS].default, key).toContain(String(def));
        expect(example, key).toMatch(
          new RegExp(
            `Default:? ${String(def).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}|${spec.env}=${String(def).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`,
          ),
        );
      }
    }
  });
});
