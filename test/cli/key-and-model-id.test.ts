import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BUILT_MAIN, requireBuiltCli } from '../harness/built-cli.js';
import { checkProvider } from '../../src/cli/doctor.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderMisconfigured } from '../../src/providers/errors.js';
import { OpenAICompatibleProvider } from '../../src/providers/openai-compatible.js';
import { openSqlite } from '../../src/store/sqlite/open.js';
import { ROOT } from '../harness/cli-process.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * DESIGN §3.8: a key that cannot be sent as a header (control characters) is a configuration
 * error at start, in `worker` and in `doctor`; it used to be retried as an outage ("unexpected:
 * TypeError") for ever. And `doctor` checks the id the models endpoint answers with. Process tests
 * run the built CLI (`node dist/cli/main.js`; `npm run build` first).
 */

const CANARY = 'sk-ant-api03-KEYCANARY-7';
const CLI = BUILT_MAIN;
let server: FakeAnthropicServer;
let dir: { dir: string; cleanup: () => void };
let db: string;
beforeAll(async () => {
  requireBuiltCli();
  server = await FakeAnthropicServer.start();
});
afterAll(async () => server.close());
beforeEach(() => {
  server.reset();
  dir = tempDir();
  db = join(dir.dir, 'verdict.db');
  openSqlite(db).$client.close();
});
afterEach(() => dir.cleanup());

function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args, '--database-url', db], {
      cwd: ROOT,
      env: {
        ...process.env,
        NO_COLOR: '1',
        CI: '1',
        VERDICT_LOG_LEVEL: 'warn',
        ANTHROPIC_BASE_URL: server.url,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

describe('a key that cannot be sent as a header', () => {
  it.each([
    ['a trailing newline', `${CANARY}\n`, 'line break'],
    ['a CR LF in the middle', `sk-ant\r\n${CANARY}`, 'line break'],
    ['a tab', `${CANARY}\t`, 'control character'],
    ['a non-ASCII dash', `sk-ant—${CANARY}`, 'non-ASCII'],
    ['a space', `${CANARY} x`, 'whitespace'],
  ])('is refused by the config (%s), naming the variable, never quoting the key', (_name, key, words) => {
    const err = (() => {
      try {
        loadConfig({}, { ANTHROPIC_API_KEY: key });
        return null;
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.message).toMatch(/^ANTHROPIC_API_KEY contains /);
    expect(err!.message).toContain(words);
    expect(err!.message).not.toContain('KEYCANARY');
  });

  it('is refused only for the provider that sends it', () => {
    expect(loadConfig({ provider: 'fake' }, { ANTHROPIC_API_KEY: `${CANARY}\n` }).provider).toBe('fake');
    expect(() =>
      loadConfig(
        { provider: 'openai', model: 'm' },
        { VERDICT_OPENAI_BASE_URL: 'http://127.0.0.1:1/v1', VERDICT_OPENAI_API_KEY: `${CANARY}\n` },
      ),
    ).toThrow(/^VERDICT_OPENAI_API_KEY contains a line break/);
  });

  it('is refused by the providers themselves (library use)', () => {
    expect(() => new AnthropicProvider({ apiKey: `${CANARY}\n`, baseURL: server.url })).toThrow(ProviderMisconfigured);
    expect(() => new OpenAICompatibleProvider({ apiKey: `${CANARY}\n`, baseURL: server.url, model: 'm' })).toThrow(
      ProviderMisconfigured,
    );
    expect(() => new AnthropicProvider({ apiKey: `${CANARY}\n`, baseURL: server.url })).toThrow(
      /apiKey contains a line break/,
    );
  });

  it('worker: exit 2 at start with a clear message, no request sent, the key never printed', async () => {
    const r = await cli(['worker', '--until-idle'], { ANTHROPIC_API_KEY: `${CANARY}\n` });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/verdict: ANTHROPIC_API_KEY contains a line break or another control character/);
    expect(r.out + r.err).not.toContain('KEYCANARY');
    expect(server.requests).toHaveLength(0);
  });

  it('doctor: the config check fails and says so, exit 1', async () => {
    const r = await cli(['doctor'], { ANTHROPIC_API_KEY: `${CANARY}\n` });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/FAIL\s+config\s+ANTHROPIC_API_KEY contains a line break or another control character/);
    expect(r.out + r.err).not.toContain('KEYCANARY');
    expect(server.requests).toHaveLength(0);
  });
});

describe('doctor checks the model id the API answers with', () => {
  const noId = { kind: 'json', status: 200, body: { type: 'model', display_name: 'Something' } } as const;

  it('a 200 without an id: FAIL, never "model undefined is available"', async () => {
    server.script(noId);
    const c = await checkProvider(
      new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: server.url }),
      AbortSignal.timeout(5_000),
    );
    expect(c.ok).toBe(false);
    expect(c.detail).toBe(
      'the models endpoint answered without a model id, so model "claude-haiku-5-5" is not confirmed',
    );
    expect(c.fix).toContain('ANTHROPIC_BASE_URL');
  });

  it('as a process: exit 1 and the FAIL line', async () => {
    server.script(noId);
    const r = await cli(['doctor'], { ANTHROPIC_API_KEY: CANARY });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/FAIL\s+provider\s+the models endpoint answered without a model id/);
    expect(r.out).not.toContain('undefined');
  });

  it('an id other than the configured one is reported as the API names it', async () => {
    server.script({
      kind: 'json',
      status: 200,
      body: { type: 'model', id: 'claude-haiku-5-5-20261007', display_name: 'Claude Haiku 5.5' },
    });
    const c = await checkProvider(
      new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: server.url }),
      AbortSignal.timeout(5_000),
    );
    expect(c).toMatchObject({
      ok: true,
      detail:
        'anthropic reachable; model claude-haiku-5-5 (the API reports it as claude-haiku-5-5-20261007) (Claude Haiku 5.5) is available',
    });
  });
});
