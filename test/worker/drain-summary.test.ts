import { afterEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import { Worker } from '../../src/worker/worker.js';
import { printLeftover } from '../../src/cli/worker.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * What a one-shot drain says and does (DESIGN §7.4): it asks directly unless given `batch: 'on'`,
 * its summary counts batch results and their answers, and what it leaves names the jobs held under
 * other (here dead) workers' leases and when those leases end. Real SQLite files, a manual clock.
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

async function backfillItems(fx: Fixture, n: number): Promise<void> {
  for (let i = 1; i <= n; i++) {
    await fx.store.createItem(
      {
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: `T-${i}`,
        title: `Item ${i}`,
        content: 'refactor the parser',
        fields: { status: 'open' },
      },
      { priority: PRIORITY_BACKFILL, quietPeriod: false },
    );
  }
}

const drain = (fx: Fixture, provider: FakeProvider, batch: 'auto' | 'on' | 'off') =>
  new Worker({
    store: fx.store,
    registry: fx.registry,
    provider,
    logger: silentLogger,
    workerId: 'w',
    concurrency: 2,
    tickMs: 10,
    leaseMs: 600_000,
    passLimit: 20,
    abandonLimit: 8,
    untilIdle: true,
    batch,
  });

describe('a one-shot drain', () => {
  it('with batch auto asks directly: a paid provider with a batch API gets calls, no batch', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    const server = await FakeAnthropicServer.start();
    try {
      // Anthropic is paid, so `auto` batches in a long-running worker; a drain asks directly.
      const provider = new AnthropicProvider({
        apiKey: 'sk-ant-test',
        baseURL: server.url,
        minBackoffMs: 1,
        maxBackoffMs: 4,
      });
      const long = new Worker({
        store: fx.store,
        registry: fx.registry,
        provider,
        logger: silentLogger,
        workerId: 'l',
        concurrency: 1,
        tickMs: 10,
        leaseMs: 600_000,
        passLimit: 20,
        abandonLimit: 8,
        batch: 'auto',
      });
      expect(long.batching()).toBe(true);
      const w = new Worker({
        store: fx.store,
        registry: fx.registry,
        provider,
        logger: silentLogger,
        workerId: 'w',
        concurrency: 2,
        tickMs: 10,
        leaseMs: 600_000,
        passLimit: 20,
        abandonLimit: 8,
        untilIdle: true,
        batch: 'auto',
      });
      expect(w.batching()).toBe(false);
      const summary = await w.run();
      expect(server.requestsTo('/v1/messages/batches')).toHaveLength(0);
      expect(summary.calls).toBe(3);
      expect(summary.answersStored).toBe(await fx.store.countDecisions());
      expect(await fx.store.listJobs({})).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it('with batch off asks the fake provider directly too', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const summary = await drain(fx, fake, 'off').run();
    expect(fake.batch!.submitted).toHaveLength(0);
    expect(summary.calls).toBe(3);
    expect(summary.answersStored).toBe(await fx.store.countDecisions());
    expect(await fx.store.listJobs({})).toEqual([]);
  });

  it('with batch on batches, and its summary counts the batch results and their answers', async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    const fake = new FakeProvider({ now: () => fx.clock.now() });
    const summary = await drain(fx, fake, 'on').run();
    expect(fake.batch!.submitted).toHaveLength(1);
    expect(summary).toMatchObject({ calls: 0, batchResults: 3 });
    expect(summary.answersStored).toBe(await fx.store.countDecisions());
    expect(summary.answersStored).toBeGreaterThan(0);
  });

  it("left: names the jobs held under a dead worker's leases and when the last lease ends", async () => {
    const fx = await fixture();
    await backfillItems(fx, 3);
    // A worker claimed 5 jobs and died (no heartbeat): its leases hold them for 10 minutes.
    const claims = await fx.store.claimBatchJobs('dead-worker/0', { leaseMs: 600_000, limit: 5, abandonLimit: 8 });
    expect(claims).toHaveLength(5);
    fx.clock.advance(60_000);
    const lines: string[] = [];
    await printLeftover(fx.store, (s) => lines.push(s));
    expect(lines).toEqual([
      "left: 1 due, 0 waiting (backoff or debounce), 0 parked, 5 held under other workers' leases (no worker is alive: a dead worker's, claimable once the lease ends; the last lease ends in 9m 00s); next due none",
    ]);
  });
});
