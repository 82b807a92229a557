import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkDatabase, checkProvider } from '../../src/cli/doctor.js';
import { OpenAICompatibleProvider } from '../../src/providers/openai-compatible.js';
import { FakeOpenAIServer } from '../../src/testing/fake-openai-server.js';
import { loadConfig } from '../../src/config.js';
import { openSqlite } from '../../src/store/sqlite/open.js';
import { loadCli, runCliExit } from '../harness/cli-in-process.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { tempDir } from '../harness/store-fixture.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from '../store/conformance-backends.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { Registry } from '../../src/decision/registry.js';

/**
 * `verdict doctor` through the CLI (in process: test/harness/cli-in-process.ts, the exit code and
 * both streams as a process would have them), against the fake Anthropic server through
 * ANTHROPIC_BASE_URL.
 */

const KEY = 'sk-ant-api03-DOCTORCANARY-1';
let server: FakeAnthropicServer;
let dir: { dir: string; cleanup: () => void };
let db: string;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
  await loadCli();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.reset();
  dir = tempDir();
  db = join(dir.dir, 'verdict.db');
  openSqlite(db).$client.close(); // a migrated database
});
afterEach(() => dir.cleanup());

async function doctor(args: string[] = [], env: Record<string, string> = {}) {
  const r = await runCliExit(['doctor', '--database-url', db, ...args], {
    VERDICT_LOG_LEVEL: 'info',
    ANTHROPIC_API_KEY: KEY,
    ANTHROPIC_BASE_URL: server.url,
    ...env,
  });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

describe('verdict doctor', () => {
  it('a good key and a known model: every check ok, exit 0', async () => {
    const r = await doctor();
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/ok\s+config\s+provider anthropic, model claude-haiku-5-5/);
    expect(r.out).toMatch(/ok\s+database\s+.*\d+ migrations applied, queue readable \(0 owed, 0 parked\)/);
    expect(r.out).toMatch(/ok\s+provider\s+anthropic reachable; model claude-haiku-5-5/);
    expect(server.requests.map((q) => `${q.method} ${q.path}`)).toEqual(['GET /v1/models/claude-haiku-5-5']);
    expect(r.out + r.err).not.toContain('DOCTORCANARY');
  });

  it('a rejected key (401): says the key is wrong and how to fix it, exit 1', async () => {
    server.script(FakeAnthropicServer.error(401, 'authentication_error', `invalid x-api-key ${KEY}`));
    const r = await doctor();
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/FAIL\s+provider\s+the API key was rejected \(anthropic: HTTP 401 authentication_error/);
    expect(r.out).toMatch(/fix: set ANTHROPIC_API_KEY to a valid key/);
    expect(r.out + r.err).not.toContain('DOCTORCANARY'); // the server echoed it; doctor must not
  });

  it('an unknown model: says the model is unknown, exit 1', async () => {
    const r = await doctor(['--model', 'claude-nonesuch-9']);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      /FAIL\s+provider\s+model "claude-nonesuch-9" is unknown to the API \(anthropic: HTTP 404 not_found_error/,
    );
    expect(r.out).toMatch(/fix: set --model \/ VERDICT_MODEL/);
  });

  it('an unreachable server, and a config that cannot work, each fail with a fix; --json carries the same', async () => {
    const [down, none, lease] = await Promise.all([
      doctor(['--json'], { ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' }),
      doctor([], { ANTHROPIC_API_KEY: '' }),
      doctor(['--lease-ms', '1000']),
    ]);
    expect(down.code).toBe(1);
    const report = JSON.parse(down.out);
    expect(report.ok).toBe(false);
    expect(report.checks.find((c: any) => c.name === 'provider')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/unreachable/),
      fix: expect.stringMatching(/ANTHROPIC_BASE_URL/),
    });
    expect(none.code).toBe(1);
    expect(none.out).toMatch(/FAIL\s+config\s+no provider configured/);
    expect(lease.code).toBe(1);
    expect(lease.out).toMatch(/FAIL\s+config\s+--lease-ms 1000 is shorter than one anthropic call's worst case/);
  }, 30_000);
});

describe('doctor database check', () => {
  const cfg = (databaseUrl: string) => loadConfig({ databaseUrl, provider: 'fake' }, {});

  it('a migrated file is ok; a missing file is not an error (created at first use)', async () => {
    expect(await checkDatabase(cfg(db))).toMatchObject({ ok: true, detail: expect.stringMatching(/queue readable/) });
    expect(await checkDatabase(cfg(join(dir.dir, 'new.db')))).toMatchObject({
      ok: true,
      detail: expect.stringMatching(/does not exist yet/),
    });
  });

  it('an unmigrated file and a file that is not a database each fail with a fix', async () => {
    const bare = join(dir.dir, 'bare.db');
    openSqlite(bare, { migrate: false }).$client.close();
    expect(await checkDatabase(cfg(bare))).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/(\d+) of \1 migrations not applied/),
      fix: expect.stringMatching(/migrations apply at open/),
    });
    const junk = join(dir.dir, 'junk.db');
    writeFileSync(junk, 'this is not a database file, just text long enough to have a header'.repeat(10));
    expect(await checkDatabase(cfg(junk))).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/cannot be read \(SQLITE_NOTADB\)/),
    });
  });
});

describe('doctor provider check, OpenAI-compatible', () => {
  it('a listed model is ok; an unlisted one fails with how to load it; a 401 names the key variable', async () => {
    const srv = await FakeOpenAIServer.start();
    try {
      const check = (model: string) =>
        checkProvider(new OpenAICompatibleProvider({ baseURL: `${srv.url}/v1`, model }), AbortSignal.timeout(5_000));
      expect(await check('qwen3:8b')).toMatchObject({
        ok: true,
        detail: expect.stringMatching(/model qwen3:8b is listed/),
      });
      expect(await check('mistral:7b')).toMatchObject({
        ok: false,
        detail: expect.stringMatching(/model "mistral:7b" is not among the 2 it lists/),
        fix: expect.stringMatching(/ollama pull/),
      });
      srv.script({ kind: 'json', status: 401, body: { error: { type: 'invalid_request_error', message: 'bad key' } } });
      expect(await check('qwen3:8b')).toMatchObject({
        ok: false,
        detail: expect.stringMatching(/API key was rejected/),
        fix: expect.stringMatching(/VERDICT_OPENAI_API_KEY/),
      });
    } finally {
      await srv.close();
    }
  });
});

describe.skipIf(!TEST_PG_URL)(
  `doctor database check on Postgres (real server)${TEST_PG_URL ? '' : ` ${PG_SKIP_REASON}`}`,
  () => {
    const cfg = (databaseUrl: string) => loadConfig({ databaseUrl, provider: 'fake' }, {});
    let pgdb: { url: string; drop(): Promise<void> };
    beforeAll(async () => {
      pgdb = await createTestDatabase(TEST_PG_URL!);
    });
    afterAll(async () => pgdb?.drop());

    it('an unmigrated database fails with the count and a fix; a migrated one reads its queue and workers', async () => {
      expect(await checkDatabase(cfg(pgdb.url))).toMatchObject({
        ok: false,
        detail: expect.stringMatching(/(\d+) of \1 migrations not applied/),
        fix: expect.stringMatching(/verdict migrate/),
      });
      const store = PgStore.connect(pgdb.url, { registry: new Registry([]) });
      await store.opened();
      await store.setMeta(
        'worker:w1',
        JSON.stringify({
          workerId: 'w1',
          provider: 'fake',
          model: 'm',
          concurrency: 1,
          beatEveryMs: 60_000,
          startedAt: 0,
          lastLoopAt: 0,
          providerProblem: null,
        }),
      );
      await store.close();
      const c = await checkDatabase(cfg(pgdb.url));
      expect(c).toMatchObject({
        ok: true,
        detail: expect.stringMatching(
          /^postgres:\/\/[^@]+: reachable, \d+ migrations applied, queue readable \(0 owed, 0 parked\), 1 worker alive$/,
        ),
      });
    }, 60_000);

    it('a server that is down fails with the code and a fix, never the password', async () => {
      const c = await checkDatabase(cfg('postgres://verdict:s3cret@127.0.0.1:1/verdict'));
      expect(c).toMatchObject({
        ok: false,
        detail: 'cannot reach the database at postgres://127.0.0.1:1/verdict (ECONNREFUSED)',
        fix: expect.stringMatching(/server is running/),
      });
      expect(JSON.stringify(c)).not.toContain('s3cret');
    });
  },
);
