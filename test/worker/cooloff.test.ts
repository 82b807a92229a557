import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { createLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { Worker } from '../../src/worker/worker.js';
import { waitFor } from '../harness/cli-process.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
});
afterEach(async () => fx.cleanup());

describe('cooling-off after a provider-wide error', () => {
  it('several slots hitting a 401 at once start one 30 s period, logged once', async () => {
    for (let i = 1; i <= 4; i++) {
      await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: `T-${i}`,
          title: `t${i}`,
          content: 'b',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
    }
    const lines: Array<{ msg: string; cooloffMs?: number }> = [];
    const sink = new Writable({ write: (c, _e, cb) => (lines.push(JSON.parse(String(c))), cb()) });
    const fake = new FakeProvider({ latencyMs: 30, faults: Array(8).fill({ status: 401 }) });
    const worker = new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: fake,
      logger: createLogger('debug', sink),
      workerId: 'w',
      concurrency: 4,
      tickMs: 20,
      leaseMs: 60_000,
      passLimit: 20,
      abandonLimit: 8,
    });
    const run = worker.run();
    await waitFor(
      () => fake.requests.length >= 4 && lines.filter((l) => l.msg?.startsWith('job outcome')).length >= 4,
      10_000,
      5,
    );
    worker.stop();
    await run;
    const periods = lines.filter((l) => l.msg.startsWith('provider misconfigured'));
    expect(periods.map((l) => l.cooloffMs)).toEqual([30_000]);
    expect(fake.requests).toHaveLength(4); // each slot sent once, then none claimed during the period
  });
});
