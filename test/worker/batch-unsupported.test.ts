import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import type { BatchApi } from '../../src/providers/provider.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import type { FakeServerBatchRoute } from '../../src/testing/fake-anthropic-batches.js';
import { BatchPipeline } from '../../src/worker/batches.js';
import { isBatchUnavailable, listBatchUnavailable } from '../../src/worker/batch-availability.js';
import { Worker } from '../../src/worker/worker.js';
import { formatStatus, statusReport } from '../../src/cli/status.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { waitFor } from '../harness/cli-process.js';

/**
 * An Anthropic-compatible endpoint without Message Batches (DESIGN §7.4): its batch routes
 * answer 404, 405, 400 or a 200 that is no batch object. Nothing may strand: the jobs go back to
 * owed at once without an attempt, batching is switched off for that provider and base URL (one
 * log line; `status` says so), and the same run asks every job directly. The real SDK against the
 * fake Anthropic server; real SQLite files.
 */

const fixtures: Fixture[] = [];
let server: FakeAnthropicServer;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => server.close());
afterEach(async () => {
  server.reset();
  server.batches.clear();
  server.batches.routeMode = 'batches';
  for (const fx of fixtures.splice(0)) await fx.cleanup();
});

async function fixture(): Promise<Fixture> {
  const fx = await makeFixture([attentionSet, effortSet]);
  fixtures.push(fx);
  return fx;
}

/** `n` open items with their jobs owed at backfill priority, as `verdict import` and `backfill` owe them. */
async function backfillItems(fx: Fixture, n: number): Promise<void> {
  for (let i = 1; i <= n; i++) {
    await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: `T-${i}`,
        title: `Item ${i}`,
        content: 'waiting for legal sign-off',
        fields: { status: 'open' },
      },
      { priority: PRIORITY_BACKFILL, quietPeriod: false },
    );
  }
}

const anthropic = () =>
  new AnthropicProvider({
    apiKey: 'sk-ant-test',
    baseURL: server.url,
    minBackoffMs: 1,
    maxBackoffMs: 4,
  }) as AnthropicProvider & { batch: BatchApi };

function pipeline(
  fx: Fixture,
  provider = anthropic(),
  onUnsupported?: (status: number) => Promise<void>,
): BatchPipeline {
  return new BatchPipeline({
    store: fx.store,
    registry: fx.registry,
    provider,
    logger: silentLogger,
    workerId: 'w',
    leaseMs: 600_000,
    abandonLimit: 8,
    random: () => 0.5,
    ...(onUnsupported ? { onUnsupported } : {}),
  });
}

const signal = new AbortController().signal;
const batchPosts = () => server.requestsTo('/v1/messages/batches').filter((r) => r.method === 'POST');

/** A logger that keeps its lines' messages and fields. */
function recordingLogger(lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }>) {
  const at = (level: string) => (fields: unknown, msg?: string) => {
    if (typeof fields === 'string') lines.push({ level, msg: fields, fields: {} });
    else lines.push({ level, msg: msg ?? '', fields: (fields ?? {}) as Record<string, unknown> });
  };
  const logger: any = {
    trace: at('trace'),
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    fatal: at('fatal'),
    level: 'info',
    // pino's: the worker builds its per-job debug lines only when debug is on (job-life.ts logReport).
    isLevelEnabled: (level: string) => level !== 'trace' && level !== 'debug',
  };
  logger.child = () => logger;
  return logger;
}

const MODES: Array<{ mode: Exclude<FakeServerBatchRoute, 'batches'>; status: number }> = [
  { mode: 404, status: 404 },
  { mode: 405, status: 405 },
  { mode: 400, status: 400 },
  { mode: 'not_a_batch', status: 200 },
];

describe.each(MODES)('an endpoint whose batch route answers $mode', ({ mode, status }) => {
  it('the batch goes back to owed at once without an attempt, and nothing more is submitted', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    server.batches.routeMode = mode;
    const seen: number[] = [];
    // Counts the batch claims: a claim given back at once leaves the rows as they were, so the
    // rows alone cannot show that the next assembly claimed nothing.
    let batchClaims = 0;
    const store = new Proxy(fx.store, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          if (key === 'claimBatchJobs') batchClaims++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const p = pipeline({ ...fx, store }, anthropic(), async (s) => void seen.push(s));
    expect(await p.assemble(signal)).toMatchObject({ batches: 0, jobs: 0 });
    expect(batchClaims).toBe(1);
    expect(seen).toEqual([status]);
    expect(p.unsupported).toBe(true);
    const now = fx.clock.now();
    const jobs = await fx.store.listJobs({});
    expect(jobs).toHaveLength(6);
    expect(jobs.map((j) => [j.state, j.attempts, j.notBefore <= now])).toEqual(jobs.map(() => ['owed', 0, true]));
    expect((await fx.store.listProviderBatches()).map((b) => [b.status, b.outcome])).toEqual([
      ['done', 'not_submitted'],
    ]);
    // One create was tried, and no second one: not in this assembly, not in the next.
    expect(await p.assemble(signal)).toMatchObject({ batches: 0, jobs: 0 });
    expect(batchClaims).toBe(1); // no job was claimed by the next assembly
    expect((await fx.store.listJobs({})).map((j) => [j.state, j.attempts, j.abandons, j.claimToken])).toEqual(
      jobs.map(() => ['owed', 0, 0, null]),
    );
    expect(batchPosts()).toHaveLength(1);
    expect(server.messages).toHaveLength(0);
  });

  it('a drain answers every job directly in the same run; batching is switched off for that endpoint, said once, and in status', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    server.batches.routeMode = mode;
    const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
    const provider = anthropic();
    const w = new Worker({
      store: fx.store,
      registry: fx.registry,
      provider,
      logger: recordingLogger(lines),
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
    const host = new URL(server.url).host;
    expect(summary).toMatchObject({ batchUnavailableAt: host, answersStored: 12 });
    expect(summary.calls).toBe(3); // one co-asked call per item
    expect(await fx.store.listJobs({})).toEqual([]);
    expect(await fx.store.countDecisions()).toBe(12);
    expect(batchPosts()).toHaveLength(1);
    expect(lines.filter((l) => l.msg.startsWith('batching unavailable'))).toEqual([
      {
        level: 'warn',
        msg: 'batching unavailable at this endpoint: asking directly',
        fields: { provider: 'anthropic', host, status },
      },
    ]);
    expect(await isBatchUnavailable(fx.store, 'anthropic', server.url)).toBe(true);
    expect(await listBatchUnavailable(fx.store)).toMatchObject([{ provider: 'anthropic', host, status }]);
    const text = formatStatus(await statusReport(fx.store));
    expect(text).toContain(`batching unavailable at ${host}: asking directly`);
    expect(text).not.toContain('results within 24 h');
  });

  it('a long-running worker with --batch auto asks a marked endpoint directly, trying no batch', async () => {
    const fx = await fixture();
    await backfillItems(fx, 2);
    server.batches.routeMode = mode;
    // The first worker finds out and marks the endpoint ...
    await new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: anthropic(),
      logger: silentLogger,
      workerId: 'w1',
      concurrency: 1,
      tickMs: 10,
      leaseMs: 600_000,
      passLimit: 20,
      abandonLimit: 8,
      untilIdle: true,
      batch: 'on',
    }).run();
    expect(batchPosts()).toHaveLength(1);
    // ... a later long-running worker (auto) with new backfill work never tries a batch there.
    await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-9',
        title: 'Item 9',
        content: 'later',
        fields: { status: 'open' },
      },
      { priority: PRIORITY_BACKFILL, quietPeriod: false },
    );
    const w = new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: anthropic(),
      logger: silentLogger,
      workerId: 'w2',
      concurrency: 1,
      tickMs: 10,
      leaseMs: 600_000,
      passLimit: 20,
      abandonLimit: 8,
      batch: 'auto',
    });
    const run = w.run();
    await waitFor(async () => (await fx.store.listJobs({})).length === 0);
    w.stop();
    await run;
    expect(batchPosts()).toHaveLength(1);
    expect(await fx.store.countDecisions()).toBe(12);
  });

  it('a submit left unconfirmed by an earlier version is closed at the first sweep, its jobs owed at once', async () => {
    const fx = await fixture();
    await backfillItems(fx, 1);
    // An earlier run recorded the batch, and its create never confirmed (the row stays `submitting`).
    const failing = anthropic();
    Object.assign(failing.batch, {
      submit: async () => Promise.reject(Object.assign(new Error('socket hang up'), { code: 'provider_unavailable' })),
    });
    await pipeline(fx, failing).assemble(signal);
    expect((await fx.store.listJobs({})).every((j) => j.state === 'batched')).toBe(true);
    server.batches.routeMode = mode;
    const seen: number[] = [];
    const r = await pipeline(fx, anthropic(), async (s) => void seen.push(s)).sweep(signal);
    if (mode === 'not_a_batch') {
      // A 200 list page without batches: the row is closed after the grace period as before
      // (SUBMIT_LOST_AFTER_MS); nothing here is unknown for longer than that.
      expect(r).toMatchObject({ finished: 0, inFlight: 1 });
      return;
    }
    expect(r).toMatchObject({ finished: 1, reowed: 2 });
    expect(seen).toEqual([status]);
    expect((await fx.store.listJobs({})).map((j) => [j.state, j.attempts])).toEqual([
      ['owed', 0],
      ['owed', 0],
    ]);
  });
});

describe('an endpoint with batches', () => {
  it('--batch on clears a mark once a batch is created there', async () => {
    const fx = await fixture();
    await backfillItems(fx, 1);
    server.batches.routeMode = 404;
    await new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: anthropic(),
      logger: silentLogger,
      workerId: 'w1',
      concurrency: 1,
      tickMs: 10,
      leaseMs: 600_000,
      passLimit: 20,
      abandonLimit: 8,
      untilIdle: true,
      batch: 'on',
    }).run();
    expect(await isBatchUnavailable(fx.store, 'anthropic', server.url)).toBe(true);
    server.batches.routeMode = 'batches';
    await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-2',
        title: 'Item 2',
        content: 'later',
        fields: { status: 'open' },
      },
      { priority: PRIORITY_BACKFILL, quietPeriod: false },
    );
    const summary = await new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: anthropic(),
      logger: silentLogger,
      workerId: 'w2',
      concurrency: 1,
      tickMs: 10,
      leaseMs: 600_000,
      passLimit: 20,
      abandonLimit: 8,
      untilIdle: true,
      batch: 'on',
    }).run();
    expect(summary).toMatchObject({ batched: 2, batchResults: 1 });
    expect(await isBatchUnavailable(fx.store, 'anthropic', server.url)).toBe(false);
  });
});
