import { describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { Worker, type WorkerOptions } from '../../src/worker/worker.js';
import { waitFor } from '../harness/cli-process.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * The worker works off collection-change continuations (DESIGN §3.3): the door owes the first
 * 1,000 items; the worker owes the rest, a chunk per transaction. The claim gate holds every claim
 * here, so the tests watch the owing alone.
 */

async function collectionOf(n: number): Promise<Fixture> {
  const fx = await makeFixture([attentionSet]);
  fx.store.setRegistry(new Registry([]));
  for (let i = 0; i < n; i++) {
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: `T-${i}`,
      title: `t${i}`,
      fields: { status: 'open' },
    });
  }
  fx.store.setRegistry(fx.registry);
  return fx;
}

function worker(fx: Fixture, over: Partial<WorkerOptions> = {}): Worker {
  return new Worker({
    store: fx.store,
    registry: fx.registry,
    provider: new FakeProvider(),
    logger: silentLogger,
    workerId: 'w',
    concurrency: 2,
    tickMs: 10,
    leaseMs: 60_000,
    passLimit: 20,
    abandonLimit: 8,
    claimGate: async () => 60_000,
    ...over,
  });
}

describe('worker: collection changes owed in chunks', () => {
  it('a drain (--until-idle) owes every pending chunk before it claims', async () => {
    const fx = await collectionOf(2_345);
    try {
      expect((await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' })).owed).toBe(1_000);
      await worker(fx, { untilIdle: true }).run();
      expect(await fx.store.listJobs({ limit: 10_000 })).toHaveLength(2_345);
      expect(await fx.store.listMeta('collection-owe:')).toEqual([]);
    } finally {
      await fx.cleanup();
    }
  }, 60_000);

  it('a long-running worker owes the rest beside its slots, and a restarted one resumes a continuation left behind', async () => {
    const fx = await collectionOf(2_345);
    try {
      await fx.store.softDeleteCollection(fx.tasks.id);
      expect(await fx.store.advanceCollectionOwes()).toMatchObject({ items: 1_000, pending: 1 }); // then the process dies
      const w = worker(fx);
      const running = w.run();
      await waitFor(async () => (await fx.store.listMeta('collection-owe:')).length === 0, 10_000, 5);
      w.stop();
      await running;
      const jobs = await fx.store.listJobs({ limit: 10_000 });
      expect(jobs).toHaveLength(2_345);
      expect(jobs.every((j) => j.generation === 1)).toBe(true);
    } finally {
      await fx.cleanup();
    }
  }, 60_000);
});
