import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/program.js';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { COUNT_TOKENS_PATH } from '../../src/testing/fake-anthropic-count-tokens.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * `verdict estimate --exact` and `verdict backfill --dry-run --exact` through the real CLI entry,
 * in this process (the same `main` dist/cli/main.js runs), with the real AnthropicProvider and SDK
 * pointed at the fake server by ANTHROPIC_BASE_URL.
 */

let server: FakeAnthropicServer;
let fx: Fixture;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => server.close());
beforeEach(async () => {
  server.reset();
  fx = await makeFixture([attentionSet, effortSet]);
  for (const ref of ['T-1', 'T-2', 'T-3']) {
    await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref,
        title: ref,
        content: `The release waits on a signed contract. ${'More detail. '.repeat(40)}`,
        fields: { status: 'open' },
      },
      { quietPeriod: false },
    );
  }
  await fx.store.dropJobs({});
  vi.stubEnv('ANTHROPIC_API_KEY', 'sk-ant-test-exact');
  vi.stubEnv('ANTHROPIC_BASE_URL', server.url);
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await fx.cleanup();
});

/** Runs the CLI in this process; returns the exit code and what it printed. */
async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  try {
    process.exitCode = undefined;
    const code = await main(['node', 'verdict', ...args, '--database-url', fx.file, '--log-level', 'silent']);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
    process.exitCode = undefined;
  }
}

describe('estimate --exact', () => {
  it('counts every item with the provider, says so, and prints the heuristic error; asks nothing, spends nothing', async () => {
    const r = await cli('estimate', '--set', 'attention', '--provider', 'anthropic', '--exact');
    expect(r.code).toBe(0);
    expect(r.out).toContain('estimate for anthropic:claude-haiku-5-5');
    expect(r.out).toContain(
      'input tokens corrected by an exact count, output tokens estimated; tokens are estimates, not a bill',
    );
    expect(r.out).toMatch(
      /exact input count by anthropic: every item \(3 of 3\), 3 calls: [\d,]+ tokens; the heuristic said ~[\d,]+, (19|20)\.\d % over/,
    );
    expect(server.requestsTo(COUNT_TOKENS_PATH)).toHaveLength(3);
    expect(server.messages).toHaveLength(0);
    expect((await fx.store.spendRowsSince(86_400_000)).rows).toEqual([]);

    const plain = await cli('estimate', '--set', 'attention', '--provider', 'anthropic');
    expect(plain.out).not.toContain('exact input count');
    expect(server.requestsTo(COUNT_TOKENS_PATH)).toHaveLength(3); // no count without --exact
  });

  it('--json carries the sample, the heuristic and the corrected parts', async () => {
    const r = await cli('estimate', '--set', 'attention', '--provider', 'anthropic', '--exact', '--json');
    expect(r.code).toBe(0);
    const [e] = JSON.parse(r.out).estimates;
    expect(e.sample).toMatchObject({
      counter: 'anthropic',
      method: 'every item',
      sampledItems: 3,
      ofItems: 3,
      calls: 3,
    });
    expect(e.all.inputTokens).toBe(e.sample.exactInputTokens);
    expect(e.heuristic.all.inputTokens).toBe(e.sample.heuristicInputTokens);
    expect(e.sample.heuristicErrorPct).toBeGreaterThan(15);
  });

  it('a provider that cannot count says so plainly and exits 2; nothing is counted', async () => {
    vi.stubEnv('VERDICT_OPENAI_BASE_URL', 'http://127.0.0.1:9/v1');
    const r = await cli('estimate', '--set', 'attention', '--provider', 'openai', '--model', 'llama3', '--exact');
    expect(r.code).toBe(2);
    expect(r.err).toContain('provider openai cannot count tokens exactly');
    expect(r.err).toContain('without --exact');
    expect(r.out).toBe('');
  });

  it('without the key, --exact is a configuration error (exit 2), not a silent heuristic', async () => {
    vi.stubEnv('ANTHROPIC_API_KEY', '');
    const r = await cli('estimate', '--set', 'attention', '--provider', 'anthropic', '--exact');
    expect(r.code).toBe(2);
    expect(r.err).toContain('ANTHROPIC_API_KEY');
    expect(server.requests).toHaveLength(0);
  });
});

describe('backfill --dry-run --exact', () => {
  it('prints the corrected estimate with the sample and owes nothing', async () => {
    const r = await cli('backfill', '--set', 'attention', '--provider', 'anthropic', '--dry-run', '--exact');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/exact input count by anthropic: every item \(3 of 3\), 3 calls/);
    expect(r.out).toMatch(/unanswered now \(what a backfill or reask sends\): 3 items, 3 calls, ~[\d,]+ input/);
    expect(await fx.store.listJobs({})).toHaveLength(0);
    expect(server.messages).toHaveLength(0);

    const fake = await cli('backfill', '--set', 'attention', '--provider', 'fake', '--dry-run', '--exact', '--json');
    expect(fake.code).toBe(0);
    expect(JSON.parse(fake.out).estimate.sample).toMatchObject({ counter: 'fake', sampledItems: 3, calls: 3 });
    expect(await fx.store.listJobs({})).toHaveLength(0);
  });

  it('--exact without --dry-run is a usage error and owes nothing', async () => {
    const r = await cli('backfill', '--set', 'attention', '--provider', 'fake', '--exact');
    expect(r.code).toBe(2);
    expect(r.err).toContain('--exact corrects the estimate of --dry-run');
    expect(await fx.store.listJobs({})).toHaveLength(0);
  });
});
