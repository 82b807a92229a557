import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { ROOT } from '../harness/cli-process.js';
import { requireBuiltCli, runBuiltCli } from '../harness/built-cli.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * The README's commands are true: they use `npx verdict` (the package's own `bin`, built by
 * `npm run build`) or `npm run -s`, whose stdout carries no npm banner, so `--json` pipes to `jq`;
 * every `npx verdict SUBCOMMAND` names a real subcommand; and running the CLI never builds.
 */

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const exec = promisify(execFile);
const env = {
  ...process.env,
  NO_COLOR: '1',
  CI: '1',
  ANTHROPIC_API_KEY: '',
  VERDICT_PROVIDER: 'fake',
  VERDICT_LOG_LEVEL: 'warn',
};

let t: { dir: string; cleanup: () => void };
let db: string;
beforeAll(async () => {
  requireBuiltCli();
  t = tempDir();
  db = join(t.dir, 'verdict.db');
  await runBuiltCli(['migrate', '--database-url', db]);
}, 60_000);
afterAll(() => t?.cleanup());

describe('README commands', () => {
  it('never runs the CLI through `npm run verdict` without -s (its banner breaks --json | jq)', () => {
    expect(README).not.toMatch(/npm run verdict\b/);
    expect(README).toMatch(/npx verdict /);
  });

  it('every `npx verdict SUBCOMMAND` is a registered subcommand', () => {
    const known = new Set(buildProgram().commands.map((c) => c.name()));
    const used = [...README.matchAll(/npx verdict ([a-z-]+)/g)].map((m) => m[1]);
    expect(used.length).toBeGreaterThan(10);
    expect(used.filter((u) => !known.has(u))).toEqual([]);
  });

  it('`npx verdict status --json` prints JSON and nothing else on stdout, and builds nothing: dist/ is the same files after', async () => {
    // npx runs the project's own bin by linking the checkout into its cache; a `prepare` script would
    // run there and rebuild dist/ (deleting it first), breaking every other process running from it.
    const main = join(ROOT, 'dist/cli/main.js');
    const before = statSync(main);
    const { stdout } = await exec('npx', ['--no', '--', 'verdict', 'status', '--json', '--database-url', db], {
      cwd: ROOT,
      env,
    });
    expect(JSON.parse(stdout)).toMatchObject({ queue: { due: 0 } });
    const after = statSync(main);
    expect({ ino: after.ino, mtimeMs: after.mtimeMs }).toEqual({ ino: before.ino, mtimeMs: before.mtimeMs });
  }, 60_000);

  it('`npm run -s verdict -- status --json` prints JSON and nothing else on stdout', async () => {
    const { stdout } = await exec('npm', ['run', '-s', 'verdict', '--', 'status', '--json', '--database-url', db], {
      cwd: ROOT,
      env,
    });
    expect(JSON.parse(stdout)).toMatchObject({ queue: { due: 0 } });
  }, 60_000);
});
