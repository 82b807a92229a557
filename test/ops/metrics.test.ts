import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { judgeHealth, serveMetrics, WorkerMetrics, type Health, type MetricsServer } from '../../src/worker/metrics.js';
import { Worker } from '../../src/worker/worker.js';
import { parsePromText, sampleValue } from '../harness/prom-text.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * /metrics and /healthz over HTTP from a real worker on a real SQLite file (DESIGN §10): the text
 * is parsed with a strict exposition-format parser, and the counters are checked to move by the
 * jobs the worker ran and the spend rows it recorded.
 */

let fx: Fixture;
let server: MetricsServer | null = null;
beforeEach(async () => {
  fx = await makeFixture([attentionSet, effortSet]);
});
afterEach(async () => {
  await server?.close();
  server = null;
  await fx.cleanup();
});

async function seed(n: number, status = 'open') {
  for (let i = 0; i < n; i++) {
    await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: `${status}-${i + 1}`,
        title: `item ${i}`,
        content: 'body',
        fields: { status },
      },
      { quietPeriod: false },
    );
  }
}

function worker(provider: FakeProvider, metrics: WorkerMetrics) {
  return new Worker({
    store: fx.store,
    onSpend: (r) => metrics.countSpend(r),
    registry: fx.registry,
    provider,
    logger: silentLogger,
    workerId: 'w',
    concurrency: 1,
    tickMs: 10,
    leaseMs: 60_000,
    passLimit: 20,
    abandonLimit: 8,
    untilIdle: true,
    // Each set asked on its own, so every count below is per job; co-asked calls are counted in
    // test/runner/co-ask.test.ts and the spend split in test/ops/status.test.ts.
    coAsk: false,
    onOutcome: (r) => metrics.observe(r),
  });
}

async function get(path: string): Promise<{ status: number; text: string; type: string | null }> {
  const res = await fetch(`http://127.0.0.1:${server!.port}${path}`);
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') };
}

describe('metrics', () => {
  it('serves parseable metrics whose counters move with the jobs run and match the spend table', async () => {
    await seed(3);
    await seed(1, 'closed'); // its jobs drop
    const metrics = new WorkerMetrics({ store: fx.store });
    // The first call is refused once (a 400): one refuse outcome, one call under the same word.
    const w = worker(new FakeProvider({ faults: [{ status: 400 }] }), metrics);
    let health: Health = { healthy: true, status: 'ok', reasons: [], lastLoopAgeMs: 0 };
    metrics.setHealth(() => health);
    server = await serveMetrics({ metrics, health: () => health, port: 0, host: '127.0.0.1' });

    const before = await get('/metrics');
    expect(before.status).toBe(200);
    expect(before.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const b = parsePromText(before.text);
    expect(b.get('verdict_jobs_claimed_total')?.type).toBe('counter');
    expect(b.get('verdict_evaluation_duration_seconds')?.type).toBe('histogram');
    expect(sampleValue(b, 'verdict_queue_jobs', { state: 'due' })).toBe(8);
    expect(sampleValue(b, 'verdict_jobs_claimed_total', { set: 'attention' })).toBeUndefined();

    await w.run();

    const after = parsePromText((await get('/metrics')).text);
    const v = (name: string, labels: Record<string, string>) => sampleValue(after, name, labels) ?? 0;
    const outcomes = await fx.store.jobCountsBySet();
    // 4 attention jobs and 4 effort jobs claimed: 3 + 3 answered, 1 + 1 dropped (closed), one refusal retried later.
    expect(
      v('verdict_jobs_claimed_total', { set: 'attention' }) + v('verdict_jobs_claimed_total', { set: 'effort' }),
    ).toBe(8);
    expect(v('verdict_job_outcomes_total', { set: 'attention', outcome: 'drop' })).toBe(1);
    expect(v('verdict_job_outcomes_total', { set: 'effort', outcome: 'drop' })).toBe(1);
    const refused =
      v('verdict_job_outcomes_total', { set: 'attention', outcome: 'refuse' }) +
      v('verdict_job_outcomes_total', { set: 'effort', outcome: 'refuse' });
    expect(refused).toBe(1);
    const complete =
      v('verdict_job_outcomes_total', { set: 'attention', outcome: 'complete' }) +
      v('verdict_job_outcomes_total', { set: 'effort', outcome: 'complete' });
    expect(complete).toBe(5);
    // The refused job backs off: the queue gauge says so.
    expect(v('verdict_queue_jobs', { state: 'waiting' })).toBe(1);
    expect(v('verdict_queue_jobs', { state: 'due' })).toBe(0);
    expect(outcomes.reduce((a, s) => a + s.waiting, 0)).toBe(1);
    // Provider counters are the spend table's rows, call for call and token for token.
    const { rows } = await fx.store.spendRowsSince(86_400_000);
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      const l = { set: r.questionSet, outcome: r.outcome };
      expect(v('verdict_provider_calls_total', l)).toBe(r.calls);
      expect(v('verdict_provider_tokens_total', { ...l, type: 'input' })).toBe(r.inputTokens);
      expect(v('verdict_provider_tokens_total', { ...l, type: 'output' })).toBe(r.outputTokens);
    }
    expect(rows.find((r) => r.outcome === 'refuse')?.calls).toBe(1);
    expect(
      v('verdict_provider_calls_total', { set: 'attention', outcome: 'ok' }) +
        v('verdict_provider_calls_total', { set: 'effort', outcome: 'ok' }),
    ).toBe(5);
    // Every job observed once in the latency histogram.
    const counted = ['attention', 'effort'].flatMap((set) =>
      ['complete', 'drop', 'refuse'].map((outcome) => v('verdict_evaluation_duration_seconds_count', { set, outcome })),
    );
    expect(counted.reduce((a, n) => a + n, 0)).toBe(8);
    // Labels are set names, outcomes, token types, states and histogram bounds only: never an item id or ref.
    const ids = (await fx.store.listItems({ includeDeleted: true })).flatMap((i) => [i.id, i.ref]);
    for (const f of after.values())
      for (const s of f.samples)
        for (const [k, val] of Object.entries(s.labels)) {
          expect([
            'set',
            'outcome',
            'type',
            'state',
            'le',
            'version',
            'major',
            'minor',
            'patch',
            'kind',
            'space',
          ]).toContain(k);
          expect(ids).not.toContain(val);
        }

    health = {
      healthy: false,
      status: 'unhealthy',
      reasons: ['loop stalled: no turn for 99999 ms (limit 1000 ms)'],
      lastLoopAgeMs: 99_999,
    };
    expect(sampleValue(parsePromText((await get('/metrics')).text), 'verdict_worker_healthy')).toBe(0);
  });

  it('/healthz is 200 while the loop turns, 503 when it stalls or the provider is misconfigured', async () => {
    await seed(1);
    const metrics = new WorkerMetrics({ store: fx.store });
    const w = worker(new FakeProvider({ faults: [{ status: 401 }] }), metrics);
    let stallAfterMs = 60_000;
    server = await serveMetrics({ metrics, health: () => judgeHealth(w, stallAfterMs), port: 0, host: '127.0.0.1' });
    const ok = await get('/healthz');
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toMatchObject({ status: 'ok', reasons: [] });

    // A loop that has not turned for longer than the limit is a stall.
    stallAfterMs = -1;
    const stalled = await get('/healthz');
    expect(stalled.status).toBe(503);
    expect(JSON.parse(stalled.text).reasons[0]).toMatch(/^loop stalled/);
    stallAfterMs = 60_000;

    // A 401 is provider-wide: the worker cools off and /healthz names the code.
    await w.run();
    expect(w.providerProblem).toBe('provider_misconfigured 401');
    const bad = await get('/healthz');
    expect(bad.status).toBe(503);
    expect(JSON.parse(bad.text)).toEqual({
      status: 'unhealthy',
      reasons: ['provider misconfigured: provider_misconfigured 401'],
      lastLoopAgeMs: expect.any(Number),
    });
    expect((await get('/nope')).status).toBe(404);
  });

  it('judges a stall by the loop age against the limit', () => {
    const now = 1_000_000;
    expect(judgeHealth({ lastLoopAt: now - 500, providerProblem: null }, 1_000, now)).toEqual({
      healthy: true,
      status: 'ok',
      reasons: [],
      lastLoopAgeMs: 500,
    });
    expect(judgeHealth({ lastLoopAt: now - 1_001, providerProblem: null }, 1_000, now).healthy).toBe(false);
  });

  it('the parser used above rejects malformed expositions', () => {
    const good = '# HELP a_total x\n# TYPE a_total counter\na_total{set="s"} 1\n';
    expect(sampleValue(parsePromText(good), 'a_total', { set: 's' })).toBe(1);
    for (const bad of [
      'a_total 1\n', // no TYPE
      '# TYPE a_total counter\na_total{set=s} 1\n', // unquoted label value
      '# TYPE a_total counter\na_total{set="s} 1\n', // unterminated
      '# TYPE a_total counter\na_total one\n', // bad value
      '# TYPE a_total counter\na_total 1', // no final newline
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', // not cumulative
      '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n', // count differs
      '# TYPE a counter\na 1\n# TYPE b gauge\nb 1\na 2\n', // not contiguous
    ]) {
      expect(() => parsePromText(bad), bad).toThrow();
    }
  });
});
