import { join } from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { buildRegistry, openStore } from '../../src/cli/common.js';
import { main } from '../../src/cli/program.js';
import { openReader } from '../../src/compose/reader.js';
import { readsAgainst } from '../../src/cli/reader.js';
import { ConfigError, loadConfig, type Config } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { spawnCli } from '../harness/cli-process.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { tempDir, TASK_SCHEMA } from '../harness/store-fixture.js';

/**
 * Provider selection and configuration checks (DESIGN §9 "Configuration errors", §12): the default
 * is anthropic when a key is set; with none configured the worker refuses to start naming the
 * choices; a misconfiguration is an error at start, never a silent "off"; `none` means nothing is
 * enqueued and reads are empty.
 */

let dir: { dir: string; cleanup: () => void };
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.cleanup());

describe('loadConfig: provider selection', () => {
  it('defaults to anthropic when ANTHROPIC_API_KEY is set, and to nothing chosen otherwise', () => {
    expect(loadConfig({}, { ANTHROPIC_API_KEY: 'sk-ant-x' }).provider).toBe('anthropic');
    expect(loadConfig({}, {}).provider).toBeUndefined();
    expect(loadConfig({}, { ANTHROPIC_API_KEY: '  ' }).provider).toBeUndefined(); // blank counts as unset
    expect(loadConfig({ provider: 'fake' }, { ANTHROPIC_API_KEY: 'sk-ant-x' }).provider).toBe('fake');
  });

  it('model, base URLs and budget are flags and environment variables; flags win', () => {
    const env = {
      VERDICT_MODEL: 'm-env',
      VERDICT_OPENAI_BASE_URL: 'http://env:1/v1',
      ANTHROPIC_BASE_URL: 'http://a-env:2',
      VERDICT_INPUT_BUDGET_TOKENS: '5000',
    };
    const fromEnv = loadConfig({}, env);
    expect([fromEnv.model, fromEnv.openaiBaseUrl, fromEnv.anthropicBaseUrl, fromEnv.inputBudgetTokens]).toEqual([
      'm-env',
      'http://env:1/v1',
      'http://a-env:2',
      5000,
    ]);
    const fromFlags = loadConfig(
      {
        model: 'm-flag',
        openaiBaseUrl: 'http://flag:1/v1',
        anthropicBaseUrl: 'https://a-flag',
        inputBudgetTokens: '6000',
      },
      env,
    );
    expect([fromFlags.model, fromFlags.openaiBaseUrl, fromFlags.anthropicBaseUrl, fromFlags.inputBudgetTokens]).toEqual(
      ['m-flag', 'http://flag:1/v1', 'https://a-flag', 6000],
    );
  });

  it('a base URL that is not http(s) is refused, naming the option and the value', () => {
    expect(() => loadConfig({}, { VERDICT_OPENAI_BASE_URL: 'localhost:11434' })).toThrow(
      /VERDICT_OPENAI_BASE_URL: got "localhost:11434", expected an http\(s\) URL/,
    );
    expect(() => loadConfig({ anthropicBaseUrl: 'ftp://x' }, {})).toThrow(ConfigError);
  });

  it('an env file is laid over the environment (file wins), flags over both; keys come from it too', () => {
    const f = join(dir.dir, 'v.env');
    writeFileSync(f, '# comment\nVERDICT_MODEL=from-file\nANTHROPIC_API_KEY="sk-ant-file"\nVERDICT_TICK_MS=70\n');
    const cfg = loadConfig({ envFile: f, tickMs: '90' }, { VERDICT_MODEL: 'from-env', VERDICT_TICK_MS: '80' });
    expect(cfg.model).toBe('from-file');
    expect(cfg.tickMs).toBe(90);
    expect(cfg.anthropicApiKey).toBe('sk-ant-file');
    expect(cfg.provider).toBe('anthropic');
    expect(loadConfig({}, { VERDICT_ENV_FILE: f }).model).toBe('from-file');
    expect(() => loadConfig({ envFile: join(dir.dir, 'missing.env') }, {})).toThrow(
      /--env-vars-file: cannot read .*missing\.env.*ENOENT/,
    );
  });
});

describe('verdict worker refuses to start on a misconfiguration', () => {
  it('a real process with no provider configured exits 2 naming the choices; with none it starts nothing and exits 0', async () => {
    const db = join(dir.dir, 'verdict.db');
    const [unset, none] = [
      spawnCli(['worker', '--database-url', db]),
      spawnCli(['worker', '--database-url', db, '--provider', 'none']),
    ];
    const [a, b] = await Promise.all([unset.exited, none.exited]);
    expect(a.code).toBe(2);
    expect(unset.stderr()).toMatch(
      /verdict: no provider configured: set --provider \/ VERDICT_PROVIDER to anthropic \(set ANTHROPIC_API_KEY\), openai .*, fake .* or none \(decisions off\)/,
    );
    expect(b.code).toBe(0);
    expect(none.stderr()).toMatch(/decisions are off/);
  }, 30_000);

  it('each misconfiguration is an error at start (exit 2) with a message naming it', async () => {
    const db = join(dir.dir, 'verdict.db');
    const cases: Array<{ args: string[]; env?: Record<string, string>; says: RegExp }> = [
      { args: ['--provider', 'anthropic'], says: /--provider anthropic needs ANTHROPIC_API_KEY/ },
      {
        args: ['--provider', 'openai', '--model', 'qwen3:8b'],
        says: /--provider openai needs VERDICT_OPENAI_BASE_URL/,
      },
      {
        args: ['--provider', 'openai', '--openai-base-url', 'http://127.0.0.1:9/v1'],
        says: /--provider openai needs --model/,
      },
      {
        args: ['--provider', 'anthropic', '--model', 'claude-haiku-latest'],
        env: { ANTHROPIC_API_KEY: 'sk-ant-test' },
        says: /-latest alias/,
      },
      {
        args: ['--provider', 'openai', '--openai-base-url', 'http://127.0.0.1:9/v1', '--model', 'gpt-latest'],
        says: /-latest alias/,
      },
      { args: ['--provider', 'bogus'], says: /--provider: got "bogus", expected one of anthropic, openai, fake, none/ },
    ];
    const write = process.stderr.write.bind(process.stderr);
    let err = '';
    process.stderr.write = ((chunk: string) => ((err += chunk), true)) as typeof process.stderr.write;
    try {
      for (const c of cases) {
        err = '';
        // Set in place and put back by vi.unstubAllEnvs, never `process.env = {…}`: vitest's
        // unstub deletes from the process.env it started with, so on a replaced object a variable
        // the stub added stayed set, and a key a later file stubbed leaked to the files after it.
        const vars = { ANTHROPIC_API_KEY: '', VERDICT_PROVIDER: '', VERDICT_MODEL: '', VERDICT_OPENAI_BASE_URL: '' };
        for (const [k, v] of Object.entries({ ...vars, ...c.env })) vi.stubEnv(k, v);
        const code = await main(['node', 'verdict', 'worker', '--database-url', db, ...c.args]);
        expect({ args: c.args, code }).toEqual({ args: c.args, code: 2 });
        expect(err).toMatch(c.says);
      }
    } finally {
      process.stderr.write = write;
      vi.unstubAllEnvs();
    }
    expect(existsSync(db)).toBe(false); // refused before opening anything
  });
});

describe('provider none: decisions off', () => {
  const cfgFor = (provider: Config['provider']) =>
    loadConfig({ provider, databaseUrl: join(dir.dir, 'verdict.db') }, {});

  it('the write doors owe nothing, while another provider owes the same write (control)', async () => {
    for (const [provider, owes] of [
      ['fake', true],
      ['none', false],
    ] as const) {
      const cfg = loadConfig({ provider, databaseUrl: join(dir.dir, `${provider}.db`) }, {});
      const store = openStore(cfg, buildRegistry(cfg));
      try {
        const ws = await store.createWorkspace({ slug: 'acme' });
        const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
        const r = await store.createItem({
          workspaceId: ws.id,
          collectionId: col.id,
          ref: 'T-1',
          title: 't',
          fields: { status: 'open' },
        });
        await store.updateItem(r.row.id, { title: 't2' });
        expect({ provider, owed: r.owed > 0, jobs: (await store.listJobs({})).length > 0 }).toEqual({
          provider,
          owed: owes,
          jobs: owes,
        });
      } finally {
        await store.close();
      }
    }
  });

  it('reads return empty lists even where answers are stored', async () => {
    const fake = cfgFor('fake');
    const registry = buildRegistry(fake);
    const store = openStore(fake, registry);
    try {
      const ws = await store.createWorkspace({ slug: 'acme' });
      const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
      const r = await store.createItem(
        {
          workspaceId: ws.id,
          collectionId: col.id,
          ref: 'T-1',
          title: 'Blocked on vendor',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
      const provider = new FakeProvider({
        handler: () => ({
          needs_human_decision: { probability: 0.9 },
          blocked: { probability: 0.9 },
          waiting_on_external: { probability: 0.9 },
          effort: { probabilities: { 0: 0.2, 1: 0.2, 2: 0.2, 3: 0.2, 4: 0.2 } },
        }),
      });
      await drainNow(runnerOptions({ store, registry } as never, provider));
      const on = await openReader(store, registry, readsAgainst(fake, silentLogger), silentLogger);
      expect((await on.decisions(r.row.id)).length).toBe(4); // control: the answers are there
      expect(Object.keys((await on.workspaceFlags(ws.id, 'attention')).flags)).toEqual([r.row.id]);
      const off = await openReader(store, registry, readsAgainst(cfgFor('none'), silentLogger), silentLogger);
      expect(await off.decisions(r.row.id)).toEqual([]);
      expect(await off.itemReadDecisions(r.row.id)).toEqual([]);
      expect(await off.surfacedDecisions(r.row.id)).toEqual({ surfaced: [], belowThreshold: 0, stale: 0 });
      expect(await off.workspaceFlags(ws.id, 'attention')).toEqual({ flags: {}, failing: false });
    } finally {
      await store.close();
    }
  });
});
