import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { ROOT } from '../harness/cli-process.js';
import { requireBuiltCli, runBuiltCli } from '../harness/built-cli.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * The README's commands are true (issue 11): they use `npx verdict` (the package's own `bin`,
 * built by `prepare` at `npm ci`) or `npm run -s`, whose stdout carries no npm banner, so
 * `--json` pipes to `jq`; and every `npx verdict SUBCOMMAND` names a real subcommand.
 */

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const exec = promisify(execFile);
const env = { ...process.env, NO_COLOR: '1', CI: '1', ANTHROPIC_API_KEY: '', VERDICT_PROVIDER: 'fake', VERDICT_LOG_LEVEL: 'warn' };

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

  it('`npx verdict status --json` prints JSON and nothing else on stdout', async () => {
    // npx runs the project's own bin by linking the checkout into its cache, once per checkout path;
    // that link runs `prepare` (a full `npm run build`, 20-30 s in a clean clone) again, though npm ci
    // built dist/ just before (the README's order). Without lifecycle scripts the link is the same and
    // the same bin (dist/cli/main.js) runs with the same stdout; only that second build is skipped.
    const { stdout } = await exec('npx', ['--no', '--', 'verdict', 'status', '--json', '--database-url', db], { cwd: ROOT, env: { ...env, npm_config_ignore_scripts: 'true' } });
    expect(JSON.parse(stdout)).toMatchObject({ queue: { due: 0 } });
  }, 60_000);

  it('`npm run -s verdict -- status --json` prints JSON and nothing else on stdout', async () => {
    const { stdout } = await exec('npm', ['run', '-s', 'verdict', '--', 'status', '--json', '--database-url', db], { cwd: ROOT, env });
    expect(JSON.parse(stdout)).toMatchObject({ queue: { due: 0 } });
  }, 60_000);
});
