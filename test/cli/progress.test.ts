import { execFile, execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../harness/cli-process.js';
import { BUILT_MAIN, requireBuiltCli, runBuiltCli } from '../harness/built-cli.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * `worker --until-idle` on a terminal (issue 11): per-job lines are at debug, a progress bar is
 * drawn on stdout only when stdout is a TTY, and the summary is printed last. The terminal is a
 * real pseudo-terminal (util-linux `script`), the CLI the built one (`npm run build` first), the
 * data the first 40 items of the bundled beads sample.
 */

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

let cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

async function seeded(): Promise<string> {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const sample = join(t.dir, 'sample.jsonl');
  writeFileSync(
    sample,
    readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8').split('\n').slice(0, 40).join('\n') + '\n',
  );
  const db = join(t.dir, 'verdict.db');
  await runBuiltCli(['import', 'beads', sample, '--workspace', 'beads', '--database-url', db]);
  return db;
}

describe('worker --until-idle output', () => {
  beforeAll(requireBuiltCli);

  it.skipIf(!hasScript)(
    'on a TTY: the start line, then a progress bar, then the summary last; no per-job lines',
    async () => {
      const db = await seeded();
      const cmd = `${process.execPath} ${BUILT_MAIN} worker --until-idle --provider fake --log-level info --database-url ${db}`;
      const env = { ...process.env, NO_COLOR: '1', ANTHROPIC_API_KEY: '' } as NodeJS.ProcessEnv;
      delete env.CI;
      delete env.VERDICT_LOG_LEVEL;
      const { stdout } = await promisify(execFile)('script', ['-qec', cmd, '/dev/null'], {
        cwd: ROOT,
        env,
        maxBuffer: 16 * 1024 * 1024,
      });
      const text = stdout.replace(/\r/g, '');
      const started = text.indexOf('worker started');
      const bar = text.indexOf('draining [');
      const summary = text.indexOf('drained: ');
      expect(started).toBeGreaterThanOrEqual(0);
      expect(bar).toBeGreaterThan(started);
      expect(summary).toBeGreaterThan(bar);
      expect(text).toMatch(/draining \[[^\]]*\] (\d+)\/\1 jobs/);
      expect(text.trimEnd()).toMatch(/\nleft: 0 due, 0 waiting \(backoff or debounce\), 0 parked; next due none$/);
      expect(text).not.toMatch(/job outcome|\bspend\b/);
    },
    60_000,
  );

  it('not on a TTY: no bar on stdout, only the summary; no per-job lines at info', async () => {
    const db = await seeded();
    const { stdout, stderr } = await runBuiltCli([
      'worker',
      '--until-idle',
      '--provider',
      'fake',
      '--log-level',
      'info',
      '--database-url',
      db,
    ]);
    expect(stdout).toMatch(
      /^drained: \d+ jobs claimed, \d+ provider calls \(fake\), 0 batch results, \d+ answers stored\nleft: 0 due, 0 waiting \(backoff or debounce\), 0 parked; next due none\n$/,
    );
    const msgs = stderr
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs[0]).toBe('worker started');
    expect(msgs).not.toContain('job outcome');
    expect(msgs).not.toContain('spend');
    expect(msgs[msgs.length - 1]).toBe('worker stopped');
  }, 60_000);
});
