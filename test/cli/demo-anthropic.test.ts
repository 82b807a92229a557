import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledSamplePath } from '../../src/importers/beads.js';
import { spawnCli } from '../harness/cli-process.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * `verdict demo --provider anthropic` end to end through the CLI, the real SDK and the fake
 * Anthropic server: it refuses to spend without --yes after printing an estimate, and with --yes it
 * imports and drains a small sample. A canary in the API key (and one in an item's title) never
 * appears in any line the process writes, with logs at debug level and provider faults on the way.
 */

const KEY = 'sk-ant-api03-DEMOKEYCANARY-9f3';
const TITLE = 'TITLECANARY';
let server: FakeAnthropicServer;
let dir: { dir: string; cleanup: () => void };
let sample: string;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
  dir = tempDir();
  sample = join(dir.dir, 'sample.jsonl');
  // Eight open rows of the bundled sample; the first gets the title canary.
  const rows = readFileSync(bundledSamplePath(), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"status":"open"'))
    .slice(0, 8)
    .map((l) => JSON.parse(l));
  rows[0].title = `${TITLE} ${rows[0].title}`;
  writeFileSync(sample, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);
});
afterAll(async () => {
  await server.close();
  dir.cleanup();
});

function demo(db: string, extra: string[]) {
  return spawnCli(
    ['demo', '--provider', 'anthropic', '--sample', sample, '--database-url', db, '--log-level', 'debug', ...extra],
    {
      ANTHROPIC_API_KEY: KEY,
      ANTHROPIC_BASE_URL: server.url,
    },
  );
}

describe('verdict demo --provider anthropic', () => {
  it('without --yes: prints the estimate, sends nothing, exits 2', async () => {
    server.reset();
    const p = demo(join(dir.dir, 'refused.db'), []);
    const { code } = await p.exited;
    expect(code).toBe(2);
    expect(p.stdout()).toMatch(
      /estimate: \d+ jobs owed, about \d+ calls to anthropic claude-haiku-5-5, about \d+ input tokens/,
    );
    expect(p.stderr()).toMatch(/nothing was sent and .* was not touched\. Rerun with --yes/);
    expect(server.messages).toHaveLength(0);
    expect(existsSync(join(dir.dir, 'refused.db'))).toBe(false); // the estimate used a scratch database
  }, 30_000);

  it('with --yes: imports and drains the sample against the fake server; the key canary is in no line', async () => {
    server.reset();
    // A 529 (retried), then a 400 (one job refused): failure paths log too.
    server.script(
      FakeAnthropicServer.overloaded(),
      FakeAnthropicServer.error(400, 'invalid_request_error', `bad key ${KEY} for ${TITLE}`),
    );
    const db = join(dir.dir, 'demo.db');
    const p = demo(db, ['--yes']);
    const { code } = await p.exited;
    const out = p.stdout();
    const err = p.stderr();
    expect(code).toBe(0);
    const m = /worker: (\d+) jobs run \(([^)]*)\); (\d+) provider calls to anthropic, (\d+) answers stored/.exec(out);
    expect(m).not.toBeNull();
    expect(Number(m![3])).toBe(server.messages.length - 1); // the 529 was retried inside one call
    expect(m![2]).toMatch(/refuse 2/); // the refused call asked attention and effort together (DESIGN §7.2)
    const d = new Database(db, { readonly: true });
    const answers = d.prepare('SELECT count(*) AS n, min(provider) AS p FROM item_decisions').get() as {
      n: number;
      p: string;
    };
    d.close();
    expect(answers.n).toBe(Number(m![4]));
    expect(answers.n).toBeGreaterThan(0);
    expect(answers.p).toBe('anthropic');
    // The key really went out, and the title really was sent: the scan below can see a leak.
    const h = server.messages[0].headers;
    expect(String(h['x-api-key'] ?? h.authorization)).toContain(KEY);
    expect(server.messages.some((q) => q.rawBody.includes(TITLE))).toBe(true);
    const lines = `${out}\n${err}`.split('\n').filter(Boolean);
    expect(lines.filter((l) => l.startsWith('{')).length).toBeGreaterThan(10); // debug logs were written
    expect(err).toMatch(/provider attempt failed/);
    for (const l of lines) {
      expect(l).not.toContain('DEMOKEYCANARY');
      expect(l).not.toContain(TITLE);
    }
  }, 60_000);
});
