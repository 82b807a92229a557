import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatStatus, statusReport } from '../../src/cli/status.js';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { PRIORITY_LIVE } from '../../src/store/queue-store.js';
import { HEARTBEAT_PREFIX } from '../../src/worker/heartbeat.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/** `verdict status` from a real SQLite file with a manual clock (DESIGN §10–12). */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet, effortSet]);
});
afterEach(async () => fx.cleanup());

const usage = (inputTokens: number, outputTokens: number) => ({
  inputTokens,
  outputTokens,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
});

async function item(ref: string) {
  return (
    await fx.store.createItem(
      { workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref, title: ref, content: 'b', fields: { status: 'open' } },
      { quietPeriod: false },
    )
  ).row;
}

describe('status', () => {
  it('reports jobs by state and set, the oldest owed age, parked jobs with reasons and failing sets', async () => {
    const a = await item('T-1');
    const b = await item('T-2');
    await item('T-3');
    fx.clock.advance(90_000);
    // T-1 attention parks, T-2 attention fails once and backs off; the rest stay due.
    const c1 = (await fx.store.claimNextJob('w', 60_000, 8))!;
    expect(c1).toMatchObject({ itemId: a.id, questionSet: 'attention' });
    await fx.store.parkJob(c1, 'refused 5 times: provider_refusal 400');
    const c2 = (await fx.store.claimNextJob('w', 60_000, 8))!;
    expect(c2).toMatchObject({ itemId: a.id, questionSet: 'effort' });
    await fx.store.failJob(c2, { backoffMs: 600_000, error: 'provider_unavailable 529' });
    const c3 = (await fx.store.claimNextJob('w', 60_000, 8))!; // in flight
    expect(c3).toMatchObject({ itemId: b.id, questionSet: 'attention' });

    const s = await statusReport(fx.store);
    expect(s.queue).toEqual({ due: 3, waiting: 1, inFlight: 1, parked: 1, batched: 0 });
    expect(s.oldestOwedAgeMs).toBe(90_000);
    expect(s.bySet).toEqual([
      expect.objectContaining({
        questionSet: 'attention',
        due: 1,
        waiting: 0,
        inFlight: 1,
        parked: 1,
        failing: 1,
        oldestOwedAgeMs: 90_000,
      }),
      expect.objectContaining({
        questionSet: 'effort',
        due: 2,
        waiting: 1,
        inFlight: 0,
        parked: 0,
        failing: 1,
        oldestOwedAgeMs: 90_000,
      }),
    ]);
    expect(s.parked).toEqual({
      count: 1,
      reasons: [{ reason: 'refused 5 times: provider_refusal 400', count: 1 }],
      jobs: [
        {
          ref: 'T-1',
          itemId: a.id,
          set: 'attention',
          reason: 'refused 5 times: provider_refusal 400',
          at: await fx.store.now(),
          attempts: 1,
          refusals: 0,
        },
      ],
    });
    expect(s.failingSets.map((f) => [f.set, f.jobs])).toEqual([
      ['attention', 1],
      ['effort', 1],
    ]);
    const text = formatStatus(s);
    expect(text).toContain('jobs: 3 due, 1 waiting (backoff, debounce or deferral), 1 in flight, 1 parked');
    expect(text).toContain('oldest owed: 1m 30s');
    expect(text).toContain('T-1            attention            refused 5 times: provider_refusal 400');
    expect(text).toMatch(/failing sets: attention \(1 job with errors, last 0ms ago\), effort \(1 job with errors/);
  });

  it('prices spend per model for the last hour and the last 24 hours from the spend table', async () => {
    // 2 hours ago: counted in 24 h only.
    await fx.store.recordSpend({
      questionSet: 'attention',
      provider: 'anthropic',
      model: 'claude-haiku-4-5',
      outcome: 'ok',
      calls: 10,
      usage: usage(1_000_000, 0),
    });
    fx.clock.advance(2 * 3_600_000);
    await fx.store.recordSpend({
      questionSet: 'attention',
      provider: 'anthropic',
      model: 'claude-haiku-5-5',
      outcome: 'ok',
      calls: 3,
      usage: usage(1_000_000, 1_000_000),
    });
    await fx.store.recordSpend({
      questionSet: 'effort',
      provider: 'anthropic',
      model: 'claude-haiku-5-5',
      outcome: 'fail',
      calls: 1,
      usage: usage(0, 0),
    });
    await fx.store.recordSpend({
      questionSet: 'effort',
      provider: 'fake',
      model: 'fake-model-1',
      outcome: 'ok',
      calls: 5,
      usage: usage(500, 60),
    });
    await fx.store.recordSpend({
      questionSet: 'effort',
      provider: 'openai',
      model: 'qwen3:8b',
      outcome: 'ok',
      calls: 2,
      usage: usage(100, 10),
    });

    const s = await statusReport(fx.store);
    const h = s.spend.lastHour;
    expect(h).toMatchObject({
      calls: 11,
      inputTokens: 1_000_600,
      outputTokens: 1_000_070,
      unpriced: ['openai:qwen3:8b'],
    });
    // claude-haiku-5-5: $0.10 + $0.50 per MTok (src/providers/pricing.ts); the fake costs 0.
    expect(h.costUsd).toBeCloseTo(0.6, 10);
    expect(h.byModel.find((m) => m.model === 'fake-model-1')).toMatchObject({
      costUsd: 0,
      note: expect.stringContaining('fake provider'),
    });
    expect(h.bySet.find((x) => x.set === 'effort')).toMatchObject({ calls: 8, failedCalls: 1 });
    // 24 h adds the older hour: 1 MTok of input on claude-haiku-4-5 at $1.
    expect(s.spend.last24h.calls).toBe(21);
    expect(s.spend.last24h.costUsd).toBeCloseTo(1.6, 10);
    const text = formatStatus(s);
    expect(text).toContain(
      'spend, last hour (since 2026-01-01 01:00 UTC): 11 calls, 1,000,600 input / 1,000,070 output tokens, estimated cost $0.6000 + unpriced (openai:qwen3:8b)',
    );
    expect(text).toContain('spend, last 24 h');
  });

  it('agrees with the spend the runner records, and names workers, their provider problem and backfills in progress', async () => {
    await item('T-1');
    fx.clock.advance(60_000);
    await drainNow(runnerOptions(fx, new FakeProvider()));
    const s = await statusReport(fx.store);
    expect(s.answersStored).toBe(4);
    expect(s.spend.lastHour).toMatchObject({ calls: 1, costUsd: 0 }); // attention and effort co-asked (DESIGN §7.2)
    expect(s.spend.lastHour.bySet.map((b) => [b.set, b.calls, b.inputTokens > 0]).sort()).toEqual([
      ['attention', 1, true],
      ['effort', 0, true],
    ]);
    expect(s.batches).toEqual({
      inFlight: 0,
      requests: 0,
      jobs: 0,
      unconfirmed: 0,
      oldestAgeMs: null,
      unavailable: [],
    });
    const perCall = await fx.store.listDecisions((await fx.store.listItems({}))[0].id);
    expect(s.spend.lastHour.inputTokens).toBe(perCall.reduce((a, d) => a + d.inputTokens, 0));

    const now = await fx.store.now();
    await fx.store.setMeta(
      `${HEARTBEAT_PREFIX}host:1`,
      JSON.stringify({
        workerId: 'host:1',
        provider: 'anthropic',
        model: 'claude-haiku-5-5',
        concurrency: 4,
        beatEveryMs: 5_000,
        startedAt: now,
        lastLoopAt: now,
        providerProblem: 'provider_misconfigured 401',
      }),
    );
    await fx.store.setMeta(
      'backfill:effort:*',
      JSON.stringify({
        v: 1,
        set: 'effort',
        workspaceId: null,
        afterId: 'x',
        pending: ['x'],
        chunks: 3,
        owedItems: 41,
        startedAt: now,
      }),
    );
    fx.clock.advance(4_000);
    let text = formatStatus(await statusReport(fx.store));
    expect(text).toContain(
      'worker host:1: alive (last beat 4s ago), provider anthropic:claude-haiku-5-5, PROVIDER MISCONFIGURED: provider_misconfigured 401 (cooling off)',
    );
    expect(text).toContain('backfill effort (all workspaces): 41 items owed in 3 chunks, last chunk 1 item');
    fx.clock.advance(60_000);
    text = formatStatus(await statusReport(fx.store));
    expect(text).toContain('worker host:1: not seen (last beat 1m 04s ago)');
  });

  it('counts jobs of a chunk: claimable, in flight, waiting, parked and gone', async () => {
    const ids = [];
    for (let i = 1; i <= 5; i++) ids.push((await item(`T-${i}`)).id);
    await fx.store.dropJobs({ questionSet: 'attention' });
    await fx.store.dropJobs({ itemId: ids[4] });
    const claim = async () => (await fx.store.claimNextJob('w', 60_000, 8))!;
    const c1 = await claim(); // ids[0] in flight
    const c2 = await claim();
    await fx.store.parkJob(c2, 'x'); // ids[1] parked
    const c3 = await claim();
    await fx.store.failJob(c3, { backoffMs: 60_000, error: 'y' }); // ids[2] waiting
    expect([c1.itemId, c2.itemId, c3.itemId]).toEqual(ids.slice(0, 3));
    expect(await fx.store.countChunkJobs('effort', ids)).toEqual({
      claimable: 1,
      inFlight: 1,
      waiting: 1,
      parked: 1,
      gone: 1,
    });
    // A deleted workspace holds its jobs: not claimable, so waiting.
    await fx.store.softDeleteWorkspace(fx.ws.id);
    expect(await fx.store.countChunkJobs('effort', ids)).toEqual({
      claimable: 0,
      inFlight: 1,
      waiting: 2,
      parked: 1,
      gone: 1,
    });
    expect(await fx.store.countChunkJobs('effort', [])).toEqual({
      claimable: 0,
      inFlight: 0,
      waiting: 0,
      parked: 0,
      gone: 0,
    });
    expect(PRIORITY_LIVE).toBe(0);
  });

  it('meta rows: set, replace, list by a literal prefix, delete', async () => {
    await fx.store.setMeta('a:1', 'one');
    await fx.store.setMeta('a:1', 'uno');
    await fx.store.setMeta('a%2', 'two');
    await fx.store.setMeta('b:1', 'three');
    expect(await fx.store.getMeta('a:1')).toBe('uno');
    expect((await fx.store.listMeta('a:')).map((r) => [r.key, r.value])).toEqual([['a:1', 'uno']]);
    expect((await fx.store.listMeta('a%')).map((r) => r.key)).toEqual(['a%2']); // % is literal, not LIKE's wildcard
    await fx.store.deleteMeta('a:1');
    expect(await fx.store.getMeta('a:1')).toBeNull();
  });
});
