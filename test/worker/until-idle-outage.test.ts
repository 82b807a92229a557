import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BUILT_MAIN, requireBuiltCli } from '../harness/built-cli.js';
import { ROOT } from '../harness/cli-process.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * A retry storm (DESIGN §3.7) as real processes (`node dist/cli/main.js`; `npm run build` first): one open item
 * of the bundled beads sample, the fake Anthropic server answering every request 529 with
 * `retry-after: 1`. `worker --until-idle` must exit on its own once nothing is due: each job fails
 * after the provider's 4 attempts and backs off 30 s (it used to defer by 1 s for ever, so the
 * drain never ended), and `status` lists the sets as failing (it used to say none).
 */

const CLI = BUILT_MAIN;
let server: FakeAnthropicServer;
let dir: { dir: string; cleanup: () => void };
let env: Record<string, string>;

beforeAll(async () => {
  requireBuiltCli();
  server = await FakeAnthropicServer.start();
});
afterAll(async () => server.close());
beforeEach(() => {
  server.reset();
  server.setFallback((req) =>
    req.method === 'GET' ? server.defaultReply(req) : FakeAnthropicServer.overloaded({ 'retry-after': '1' }),
  );
  dir = tempDir();
  env = {
    NO_COLOR: '1',
    CI: '1',
    VERDICT_LOG_LEVEL: 'warn',
    VERDICT_DATABASE_URL: join(dir.dir, 'verdict.db'),
    VERDICT_PROVIDER: 'anthropic',
    ANTHROPIC_API_KEY: 'sk-ant-test',
    ANTHROPIC_BASE_URL: server.url,
  };
});
afterEach(() => {
  server.setFallback((req) => server.defaultReply(req));
  dir.cleanup();
});

function cli(
  args: string[],
  timeoutMs: number,
): Promise<{ code: number | null; out: string; err: string; killed: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err, killed });
    });
  });
}

describe('worker --until-idle during a 529 outage with retry-after: 1', () => {
  it('exits once nothing is due: the co-asked call failed once (4 requests), both jobs back off; status lists the failing sets', async () => {
    const row = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .find((l) => {
        const r = JSON.parse(l) as { status?: string; issue_type?: string; dependencies?: unknown[] };
        return r.status === 'open' && r.issue_type === 'task' && !(r.dependencies ?? []).length;
      })!;
    const file = join(dir.dir, 'one.jsonl');
    writeFileSync(file, `${row}\n`);
    expect((await cli(['import', 'beads', file], 30_000)).code).toBe(0);

    // Call by call: this is the outage of the Messages endpoint (batches: test/worker/batches.test.ts).
    const drain = await cli(['worker', '--until-idle', '--batch', 'off'], 40_000);
    expect(drain.killed).toBe(false);
    expect(drain.code).toBe(0);
    // attention and effort ask (conventions has no conventions to ask about), co-asked in one
    // call (DESIGN §7.2): 4 requests for the two jobs, each of which fails once.
    expect(server.messages).toHaveLength(4);
    expect(drain.out).toMatch(
      /^left: 0 due, 2 waiting \(backoff or debounce\), 0 parked; next due in (2[7-9]|3[0-3])s$/m,
    );

    const status = await cli(['status'], 30_000);
    expect(status.code).toBe(0);
    expect(status.out).toMatch(
      /^failing sets: attention \(1 job with errors, last \d+m?s ago\), effort \(1 job with errors, last \d+m?s ago\)$/m,
    );
  }, 60_000);
});
