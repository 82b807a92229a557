import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { BatchApi, Provider } from '../../src/providers/provider.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import type { Store } from '../../src/store/whole-store.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import {
  BATCH_GIVE_UP_AFTER_EXPIRY_MS,
  BatchPipeline,
  batchingActive,
  closeStrandedBatches,
  SPEND_BATCH,
  SUBMIT_LOST_AFTER_MS,
} from '../../src/worker/batches.js';
import { Worker } from '../../src/worker/worker.js';
import { batchedBackfillCost } from '../../src/cli/estimate.js';
import { loadConfig } from '../../src/config.js';
import { estimateTarget } from '../../src/backfill/estimate.js';
import { batchCostOf, costOf, pricingFor } from '../../src/providers/pricing.js';
import { formatStatus, statusReport } from '../../src/cli/status.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Message Batches on the job queue (DESIGN §7.3): backfill-priority jobs go to the provider's
 * batch API, `batched` until their result is stored; liveness at assembly; a result for a deleted
 * item discarded, for a changed state stored at the state asked with the job left owed; expiry
 * re-owes; a batch submitted before a crash is found again and never re-submitted. Real SQLite
 * files; the real SDK against the fake Anthropic server where the wire matters.
 */

const fixtures: Fixture[] = [];
afterEach(async () => {
  for (const fx of fixtures.splice(0)) await fx.cleanup();
});

async function fixture(): Promise<Fixture> {
  const fx = await makeFixture([attentionSet, effortSet]);
  fixtures.push(fx);
  return fx;
}

/** `n` open items, their jobs owed at backfill priority (as `verdict backfill` owes them). */
async function backfillItems(fx: Fixture, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 1; i <= n; i++) {
    const r = await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: `T-${i}`,
        title: `Item ${i}`,
        content: i % 2 ? 'waiting for legal sign-off' : 'refactor the parser',
        fields: { status: 'open' },
      },
      { priority: PRIORITY_BACKFILL, quietPeriod: false },
    );
    ids.push(r.row.id);
  }
  return ids;
}

function pipeline(
  fx: Fixture,
  provider: Provider & { batch: BatchApi },
  store: Store = fx.store,
  dailyTokenCap?: number,
): BatchPipeline {
  return new BatchPipeline({
    store,
    registry: fx.registry,
    provider,
    logger: silentLogger,
    workerId: 'w',
    leaseMs: 600_000,
    abandonLimit: 8,
    random: () => 0.5,
    ...(dailyTokenCap ? { dailyTokenCap } : {}),
  });
}

const signal = new AbortController().signal;

async function answersOf(fx: Fixture): Promise<string[]> {
  const out: string[] = [];
  for (const item of await fx.store.listItems({ workspaceId: fx.ws.id })) {
    for (const d of await fx.store.listDecisions(item.id))
      out.push([item.ref, d.questionSet, d.questionKey, d.answer, d.confidence, d.stateHash, d.questionHash].join('|'));
  }
  return out.sort();
}

describe('batches with the fake provider', () => {
  it('batching is on for a paid provider with a batch API, off for a free one unless forced, off when told', () => {
    const fake = new FakeProvider();
    expect(batchingActive(fake, 'auto')).toBe(false);
    expect(batchingActive(fake, 'on')).toBe(true);
    expect(batchingActive(fake, 'off')).toBe(false);
    expect(batchingActive(new FakeProvider({ batch: false }), 'on')).toBe(false);
    const anthropic = new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: 'http://127.0.0.1:9' });
    expect(batchingActive(anthropic, 'auto')).toBe(true);
  });

  it('backfill --dry-run prices the batched path at half when a worker would batch it, and only then', () => {
    const work = {
      set: 'effort',
      eligibleItems: 10,
      unanswered: { items: 10, calls: 10, questions: 10, inputTokens: 100_000, outputTokens: 10_000, costUsd: 0 },
    } as never;
    const anthropic = estimateTarget('anthropic', 'claude-haiku-5-5');
    const full = costOf(anthropic.pricing, { inputTokens: 100_000, outputTokens: 10_000 })!;
    const cfg = (batch: string) => loadConfig({ provider: 'anthropic', batch }, { ANTHROPIC_API_KEY: 'sk-ant-test' });
    expect(batchedBackfillCost(cfg('auto'), silentLogger, anthropic, work)).toBeCloseTo(full / 2, 12);
    expect(batchedBackfillCost(cfg('off'), silentLogger, anthropic, work)).toBeNull();
    expect(
      batchedBackfillCost(
        loadConfig({ provider: 'fake' }, {}),
        silentLogger,
        estimateTarget('fake', 'fake-model-1'),
        work,
      ),
    ).toBeNull();
    // No key here: the line is left out rather than guessed.
    expect(batchedBackfillCost(loadConfig({ provider: 'anthropic' }, {}), silentLogger, anthropic, work)).toBeNull();
  });

  it('one batch asks every backfill job, co-asked per item; answers byte-identical to calls; spend marked batch', async () => {
    const fx = await fixture();
    const twin = await fixture();
    await backfillItems(fx, 4);
    await backfillItems(twin, 4);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const p = pipeline(fx, fake as never);
    const a = await p.assemble(signal);
    expect(a).toMatchObject({ batches: 1, requests: 4, jobs: 8 });
    expect(fake.requests).toHaveLength(0); // no call: the batch API only
    const jobs = await fx.store.listJobs({});
    expect(jobs.every((j) => j.state === 'batched' && j.claimToken === null)).toBe(true);
    // A batched job is not claimable.
    expect(await fx.store.claimNextJob('other', 60_000, 8)).toBeNull();
    const s = await p.sweep(signal);
    expect(s).toMatchObject({ finished: 1, results: 4, answersStored: 16, reowed: 0, inFlight: 0 });
    expect(await fx.store.listJobs({})).toEqual([]);
    await drainNow(runnerOptions(twin, new FakeProvider()));
    expect(await answersOf(fx)).toEqual(await answersOf(twin));
    const { rows } = await fx.store.spendRowsSince(3_600_000);
    expect(rows.every((r) => r.outcome === SPEND_BATCH)).toBe(true);
    expect(rows.reduce((n, r) => n + r.calls, 0)).toBe(4);
    expect((await fx.store.listProviderBatches())[0]).toMatchObject({
      status: 'done',
      outcome: 'results',
      requestCount: 4,
    });
  });

  it('an item deleted between assembly and results leaves no answer; its jobs drop', async () => {
    const fx = await fixture();
    const [gone, kept] = await backfillItems(fx, 2);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const p = pipeline(fx, fake as never);
    await p.assemble(signal);
    await fx.store.softDeleteItem(gone);
    await p.sweep(signal);
    expect(await fx.store.listDecisions(gone)).toEqual([]);
    expect((await fx.store.listDecisions(kept)).length).toBe(4);
    // The delete owed the deleted item's jobs again (a write); they drop without a call.
    fx.clock.advance(3_600_000);
    const after = new FakeProvider();
    await drainNow(runnerOptions(fx, after));
    expect(after.requests).toHaveLength(0);
    expect(await fx.store.listDecisions(gone)).toEqual([]);
  });

  it('a write during the batch: the answer is stored for the state asked, and the job stays owed at its new state', async () => {
    const fx = await fixture();
    const [id] = await backfillItems(fx, 1);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const p = pipeline(fx, fake as never);
    await p.assemble(signal);
    const asked = (await fx.store.listJobs({}))[0];
    await fx.store.updateItem(id, { content: 'now blocked on the vendor' });
    await p.sweep(signal);
    const rows = await fx.store.listDecisions(id);
    expect(rows).toHaveLength(4);
    const jobs = await fx.store.listJobs({});
    expect(jobs.map((j) => [j.questionSet, j.state, j.batchId === null || j.batchId === asked.batchId])).toEqual([
      ['attention', 'owed', true],
      ['effort', 'owed', true],
    ]);
    fx.clock.advance(3_600_000);
    const later = new FakeProvider();
    await drainNow(runnerOptions(fx, later));
    expect(later.requests).toHaveLength(1); // the new state, co-asked
    expect(new Set((await fx.store.listDecisions(id)).map((d) => d.stateHash)).size).toBe(2);
  });

  it('an expired batch re-owes its jobs without counting the attempt; a canceled one too', async () => {
    for (const fault of ['expired', 'canceled'] as const) {
      const fx = await fixture();
      await backfillItems(fx, 2);
      const fake = new FakeProvider({ now: () => fx.clock.now(), batchFaults: [fault] });
      const p = pipeline(fx, fake as never);
      await p.assemble(signal);
      if (fault === 'canceled') await fake.batch!.cancel(fake.batch!.submitted[0].id, { signal });
      fx.clock.advance(25 * 3_600_000);
      const s = await p.sweep(signal);
      // Each request's result (expired or canceled) gives its jobs back, or the closing batch does.
      expect(s.finished).toBe(1);
      const jobs = await fx.store.listJobs({});
      expect(jobs.map((j) => [j.state, j.attempts, j.batchId])).toEqual(Array(4).fill(['owed', 0, null]));
      expect(await fx.store.countDecisions()).toBe(0);
      expect((await fx.store.listProviderBatches())[0].outcome).toBe(fault);
    }
  });

  it('a partially errored batch: answered requests stored, errored ones fail with a backoff', async () => {
    const fx = await fixture();
    await backfillItems(fx, 4);
    const fake = new FakeProvider({ now: () => fx.clock.now(), batchFaults: ['partial'] });
    const p = pipeline(fx, fake as never);
    await p.assemble(signal);
    const s = await p.sweep(signal);
    expect(s.results).toBe(4);
    const jobs = await fx.store.listJobs({});
    expect(jobs.length).toBeGreaterThan(0);
    expect(
      jobs.every((j) => j.state === 'owed' && j.attempts === 1 && j.notBefore > fx.clock.now() && j.lastError !== null),
    ).toBe(true);
    const answered = new Set((await answersOf(fx)).map((a) => a.split('|')[0]));
    expect(answered.size + new Set(jobs.map((j) => j.itemId)).size).toBe(4);
  });

  it('a job whose claim was lost before the batch was recorded: nothing is batched, every claim given back', async () => {
    const fx = await fixture();
    await backfillItems(fx, 2);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const store = new Proxy(fx.store, {
      get(target, key, receiver) {
        if (key === 'recordBatch')
          return async () => Promise.reject(Object.assign(new Error('lost'), { code: 'batch_claim_lost' }));
        const v = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const r = await pipeline(fx, fake as never, store).assemble(signal);
    expect(r.batches).toBe(0);
    expect(fake.batch!.submitted).toHaveLength(0);
    expect((await fx.store.listJobs({})).map((j) => [j.state, j.claimToken, j.attempts])).toEqual(
      Array(4).fill(['owed', null, 0]),
    );
  });

  it('the daily token cap holds for batches: requests reserve their estimate; what does not fit stays owed; results settle', async () => {
    const fx = await fixture();
    await backfillItems(fx, 6);
    const fake = new FakeProvider({ now: () => fx.clock.now(), usage: 'prompt' });
    // Find one item's reservation size, then allow room for two items only.
    const probe = await fixture();
    await backfillItems(probe, 1);
    await pipeline(
      probe,
      new FakeProvider({ now: () => probe.clock.now(), usage: 'prompt' }) as never,
      probe.store,
      1_000_000,
    ).assemble(signal);
    const perItem = (await probe.store.listBatchRequests((await probe.store.listProviderBatches())[0].id))[0].plan
      .estimate;
    const cap = 2 * (perItem.inputTokens + perItem.maxOutputTokens) + 1;
    const p = pipeline(fx, fake as never, fx.store, cap);
    const a = await p.assemble(signal);
    expect(a).toMatchObject({ batches: 1, requests: 2, jobs: 4 });
    const jobs = await fx.store.listJobs({});
    expect(jobs.filter((j) => j.state === 'batched')).toHaveLength(4);
    expect(jobs.filter((j) => j.state === 'owed').map((j) => [j.attempts, j.claimToken])).toEqual(
      Array(8).fill([0, null]),
    );
    // A second assembly finds no room either (the reservations hold), so nothing more is sent.
    expect((await p.assemble(signal)).batches).toBe(0);
    await p.sweep(signal);
    // The results settled the reservations with their real usage: billed tokens are within the cap.
    const spent = await fx.store.spendSince(86_400_000);
    expect(spent.inputTokens + spent.outputTokens).toBeLessThanOrEqual(cap);
    expect(fake.batch!.submitted).toHaveLength(1);
  });

  it('status counts the batches in flight and their jobs, and prices batch spend at the batch rate', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    await pipeline(fx, fake as never).assemble(signal);
    fx.clock.advance(120_000);
    const s = await statusReport(fx.store);
    expect(s.batches).toEqual({
      inFlight: 1,
      requests: 3,
      jobs: 6,
      unconfirmed: 0,
      oldestAgeMs: 120_000,
      unavailable: [],
    });
    expect(s.queue.batched).toBe(6);
    const text = formatStatus(s);
    expect(text).toContain(
      'batches in flight: 1 (3 requests, 6 jobs batched; oldest created 2m 00s ago); results within 24 h',
    );
    expect(text).toMatch(/^jobs: 0 due, .* 0 parked, 6 batched$/m);
    // The same tokens cost half under outcome `batch` as under `ok`.
    const usage = { inputTokens: 1_000_000, outputTokens: 100_000, cacheReadTokens: 0, cacheWriteTokens: 0 };
    await fx.store.recordSpend({
      questionSet: 'attention',
      provider: 'anthropic',
      model: 'claude-haiku-5-5',
      outcome: SPEND_BATCH,
      calls: 1,
      usage,
    });
    const priced = (await statusReport(fx.store)).spend.lastHour;
    const pricing = pricingFor('anthropic', 'claude-haiku-5-5');
    expect(priced.costUsd).toBeCloseTo(batchCostOf(pricing, usage)!, 12);
    expect(priced.costUsd).toBeCloseTo(costOf(pricing, usage)! / 2, 12);
    expect(priced.bySet.find((b) => b.set === 'attention')!.failedCalls).toBe(0); // a batch result is no failure
  });

  it('jobs retry and jobs drop work on batched jobs; the result that comes later stores nothing for them, once', async () => {
    const fx = await fixture();
    const [a, b] = await backfillItems(fx, 3);
    const fake = new FakeProvider({ now: () => fx.clock.now(), batchLatencyMs: 60_000 });
    const p = pipeline(fx, fake as never);
    await p.assemble(signal);
    // Only --state batched (or a filter that names no state, for drop) reaches them.
    expect(await fx.store.retryJobs({ state: 'parked' })).toBe(0);
    expect(await fx.store.retryJobs({ state: 'batched', itemId: a })).toBe(2);
    expect(await fx.store.dropJobs({ itemId: b })).toBe(2);
    expect(
      (await fx.store.listJobs({})).map((j) => [j.itemId === a ? 'a' : 'c', j.state, j.batchId === null]).sort(),
    ).toEqual([
      ['a', 'owed', true],
      ['a', 'owed', true],
      ['c', 'batched', false],
      ['c', 'batched', false],
    ]);
    // The retried item is asked directly; then the batch ends and its results come.
    await drainNow(runnerOptions(fx, fake));
    const direct = await answersOf(fx);
    const spendBefore = (await fx.store.spendRowsSince(86_400_000)).rows
      .filter((r) => r.outcome === SPEND_BATCH)
      .reduce((n, r) => n + r.calls, 0);
    expect(spendBefore).toBe(0);
    fx.clock.advance(60_000);
    expect(await p.sweep(signal)).toMatchObject({ finished: 1, results: 3 });
    const after = await answersOf(fx);
    // Item a keeps its direct answers only, item b (dropped) has none, item c got the batch's.
    expect(after.filter((x) => x.startsWith('T-1|'))).toEqual(direct.filter((x) => x.startsWith('T-1|')));
    expect(after.filter((x) => x.startsWith('T-2|'))).toEqual([]);
    expect(after.filter((x) => x.startsWith('T-3|')).length).toBeGreaterThan(0);
    // The three results were billed once each: spend counts each batch request once.
    expect(
      (await fx.store.spendRowsSince(86_400_000)).rows
        .filter((r) => r.outcome === SPEND_BATCH)
        .reduce((n, r) => n + r.calls, 0),
    ).toBe(3);
    // A second sweep stores nothing again.
    expect(await p.sweep(signal)).toMatchObject({ finished: 0, results: 0 });
    expect(await answersOf(fx)).toEqual(after);
    expect(await fx.store.listJobs({})).toEqual([]);
  });

  it('a result that lacks a key it asked is refused on its own; the rest of the batch is stored', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const p = pipeline(fx, fake as never);
    await p.assemble(signal);
    const results = fake.batch!.results.bind(fake.batch!);
    let first = true;
    fake.batch!.results = async function* (...args: Parameters<typeof results>) {
      for await (const r of results(...args)) {
        if (first && r.type === 'succeeded') {
          first = false;
          const answers = new Map(r.result.answers);
          answers.delete([...answers.keys()][0]);
          yield { ...r, result: { ...r.result, answers } };
        } else yield r;
      }
    } as never;
    const s = await p.sweep(signal);
    expect(s).toMatchObject({ finished: 1, results: 3, answersStored: 8 });
    const jobs = await fx.store.listJobs({});
    expect(jobs.map((j) => [j.state, j.refusals, j.lastError?.startsWith('batch: result unreadable')])).toEqual([
      ['owed', 1, true],
      ['owed', 1, true],
    ]);
    expect((await fx.store.spendRowsSince(3_600_000)).rows.some((r) => r.outcome === 'defect')).toBe(true);
  });

  it('batches no worker can collect (another provider, or none with a batch API) are given up past their expiry, jobs re-owed', async () => {
    const fx = await fixture();
    await backfillItems(fx, 1);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    await pipeline(fx, fake as never).assemble(signal);
    expect(await closeStrandedBatches(fx.store, 'anthropic', true)).toEqual({ fake: 1 });
    expect(await closeStrandedBatches(fx.store, 'fake', true)).toEqual({}); // its own provider collects it
    fx.clock.advance(24 * 3_600_000 + BATCH_GIVE_UP_AFTER_EXPIRY_MS + 1);
    expect(await closeStrandedBatches(fx.store, 'anthropic', true)).toEqual({});
    expect((await fx.store.listJobs({})).map((j) => [j.state, j.attempts])).toEqual([
      ['owed', 0],
      ['owed', 0],
    ]);
    expect((await fx.store.listProviderBatches())[0]).toMatchObject({ status: 'done', outcome: 'lost' });
  });

  it('a worker with --batch off still collects the batches in flight of its provider', async () => {
    const fx = await fixture();
    await backfillItems(fx, 2);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    await pipeline(fx, fake as never).assemble(signal);
    const w = new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: fake,
      logger: silentLogger,
      workerId: 'w',
      concurrency: 1,
      tickMs: 10,
      leaseMs: 600_000,
      passLimit: 20,
      abandonLimit: 8,
      untilIdle: true,
      batch: 'off',
    });
    const summary = await w.run();
    expect(summary.batchResults).toBe(2);
    expect(await fx.store.listJobs({})).toEqual([]);
    expect(fake.requests).toHaveLength(0);
  });

  it('a worker drain sends backfill work to a batch and live work to calls', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'L-1',
        title: 'live',
        content: 'x',
        fields: { status: 'open' },
      },
      { quietPeriod: false },
    );
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const w = new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: fake,
      logger: silentLogger,
      workerId: 'w',
      concurrency: 2,
      tickMs: 10,
      leaseMs: 600_000,
      passLimit: 20,
      abandonLimit: 8,
      untilIdle: true,
      batch: 'on',
    });
    const summary = await w.run();
    expect(summary.batched).toBe(6);
    expect(summary.batchResults).toBe(3);
    expect(fake.requests).toHaveLength(1); // the live item, co-asked
    expect(fake.batch!.submitted).toHaveLength(1);
    expect(await fx.store.listJobs({})).toEqual([]);
  });
});

describe('batches through the real SDK and the fake Anthropic server', () => {
  let server: FakeAnthropicServer;
  beforeAll(async () => {
    server = await FakeAnthropicServer.start();
  });
  afterAll(async () => server.close());
  afterEach(() => {
    server.reset();
    server.batches.clear();
  });

  const anthropic = () =>
    new AnthropicProvider({
      apiKey: 'sk-ant-test',
      baseURL: server.url,
      minBackoffMs: 1,
      maxBackoffMs: 4,
    }) as AnthropicProvider & { batch: BatchApi };

  it('life of a batch, with a crash between submit and storing the results: found again by its id, submitted once', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    server.batches.plan({ endAfterRetrieves: 2 });
    // Process 1 assembles and submits, then dies (its pipeline object is dropped).
    expect(await pipeline(fx, anthropic()).assemble(signal)).toMatchObject({ batches: 1, requests: 3, jobs: 6 });
    expect(server.requestsTo('/v1/messages/batches')).toHaveLength(1);
    expect(server.messages).toHaveLength(0);
    const row = (await fx.store.listProviderBatches())[0];
    expect(row).toMatchObject({ status: 'in_progress', providerBatchId: server.batches.batches[0].id });
    // Process 2 sweeps: still processing, then ended; results stored; nothing re-submitted.
    const p2 = pipeline(fx, anthropic());
    expect(await p2.sweep(signal)).toMatchObject({ finished: 0, inFlight: 1 });
    expect(await p2.sweep(signal)).toMatchObject({ finished: 1, results: 3, answersStored: 12 });
    expect(server.requestsTo('/v1/messages/batches').filter((r) => r.method === 'POST')).toHaveLength(1);
    expect(server.batches.batches).toHaveLength(1);
    expect(await fx.store.listJobs({})).toEqual([]);
    expect(await fx.store.countDecisions()).toBe(12);
    // A third sweep finds nothing to do and asks nothing.
    const before = server.requests.length;
    expect(await p2.sweep(signal)).toMatchObject({ finished: 0, inFlight: 0 });
    expect(server.requests.length).toBe(before);
  });

  it('a crash after the submit and before its id was recorded: the sweep finds the batch in the list, never submits again', async () => {
    const fx = await fixture();
    await backfillItems(fx, 2);
    // The process dies after the create returned and before it recorded the id.
    const dying = new Proxy(fx.store, {
      get(target, key, receiver) {
        if (key === 'updateProviderBatch')
          return async () => Promise.reject(Object.assign(new Error('killed'), { code: 'SIGKILL' }));
        const v = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    await pipeline(fx, anthropic(), dying).assemble(signal);
    expect((await fx.store.listProviderBatches())[0]).toMatchObject({ status: 'submitting', providerBatchId: null });
    expect((await fx.store.listJobs({})).every((j) => j.state === 'batched')).toBe(true);
    const s = await pipeline(fx, anthropic()).sweep(signal);
    expect(s).toMatchObject({ finished: 1, results: 2 });
    expect(server.batches.batches).toHaveLength(1);
    expect(server.requestsTo('/v1/messages/batches').filter((r) => r.method === 'POST')).toHaveLength(1);
    expect(await fx.store.countDecisions()).toBe(8);
  });

  it('jobs retry / jobs drop that leave a batch without jobs cancel it at the provider; a batch with other jobs is left', async () => {
    const fx = await fixture();
    const [a, b] = await backfillItems(fx, 2);
    server.batches.plan({ endAfterRetrieves: 100 });
    const p = pipeline(fx, anthropic());
    expect(await p.assemble(signal)).toMatchObject({ batches: 1, requests: 2, jobs: 4 });
    const batch = server.batches.batches[0];
    const cancels = () =>
      server.requestsTo(`/v1/messages/batches/${batch.id}/cancel`).filter((r) => r.method === 'POST');
    // One item retried: the other still waits for the batch, which is left running.
    expect(await fx.store.retryJobs({ state: 'batched', itemId: a })).toBe(2);
    expect(await p.sweep(signal)).toMatchObject({ finished: 0, inFlight: 1 });
    expect(cancels()).toHaveLength(0);
    expect(batch.status).toBe('in_progress');
    // The last item dropped: nobody waits for the batch, so the next sweep cancels it, once.
    expect(await fx.store.dropJobs({ itemId: b })).toBe(2);
    expect(await p.sweep(signal)).toMatchObject({ finished: 1, reowed: 0 });
    expect(cancels()).toHaveLength(1);
    expect(batch.status).toBe('canceling');
    expect((await fx.store.listProviderBatches())[0]).toMatchObject({ status: 'done', outcome: 'canceled' });
    const before = server.requests.length;
    expect(await p.sweep(signal)).toMatchObject({ finished: 0, inFlight: 0 });
    expect(server.requests.length).toBe(before);
    // The retried item is asked directly; the dropped one is not asked at all.
    await drainNow(runnerOptions(fx, anthropic()));
    expect(await fx.store.listJobs({})).toEqual([]);
    expect((await answersOf(fx)).filter((x) => x.startsWith('T-1|')).length).toBeGreaterThan(0);
    expect((await answersOf(fx)).filter((x) => x.startsWith('T-2|'))).toEqual([]);
    expect(server.messages.every((m) => !JSON.stringify(m.body).includes('Item 2'))).toBe(true);
  });

  it('a submit that never reached the provider: re-owed once the grace period passes, not before', async () => {
    const fx = await fixture();
    await backfillItems(fx, 1);
    // The create dies on the wire before the server saw it (as far as we can tell: it throws).
    const failing = anthropic();
    Object.assign(failing.batch, {
      submit: async () => Promise.reject(Object.assign(new Error('socket hang up'), { code: 'provider_unavailable' })),
    });
    await pipeline(fx, failing).assemble(signal);
    const p = pipeline(fx, anthropic());
    expect(await p.sweep(signal)).toMatchObject({ finished: 0, inFlight: 1 });
    expect((await fx.store.listJobs({})).every((j) => j.state === 'batched')).toBe(true);
    fx.clock.advance(SUBMIT_LOST_AFTER_MS);
    expect(await p.sweep(signal)).toMatchObject({ finished: 1, reowed: 2 });
    expect((await fx.store.listJobs({})).map((j) => [j.state, j.attempts])).toEqual([
      ['owed', 0],
      ['owed', 0],
    ]);
    expect(server.requestsTo('/v1/messages/batches').filter((r) => r.method === 'POST')).toHaveLength(0);
  });
});
