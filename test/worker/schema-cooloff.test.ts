import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { formatStatus, statusReport } from '../../src/cli/status.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { SET_COOLOFF_META_PREFIX } from '../../src/runner/set-cooloff.js';
import { Worker } from '../../src/worker/worker.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import type { RecordedRequest } from '../../src/testing/fake-server-core.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * DESIGN §3.8: a 400 that rejects one set's answer schema cools off *that set*: its jobs are
 * released without an attempt and not claimed for the cooling-off period, `status` lists the set
 * under failing sets with the reason, and the other sets keep running. Real worker, real
 * AnthropicProvider and SDK against the fake Anthropic server, real SQLite file, manual clock.
 */

const alpha = defineQuestionSet({
  name: 'alpha',
  collections: ['task'],
  questions: { a: noul('Alpha marker: the item needs a review.') },
});
const beta = defineQuestionSet({
  name: 'beta',
  collections: ['task'],
  questions: { b: noul('Beta: the item is blocked.') },
});

let server: FakeAnthropicServer;
let fx: Fixture;
const isAlpha = (r: RecordedRequest) => r.rawBody.includes('Alpha marker');
const rejectAlpha = (req: RecordedRequest) =>
  isAlpha(req)
    ? FakeAnthropicServer.error(
        400,
        'invalid_request_error',
        'output_config.format.schema: Invalid schema: unsupported keyword',
      )
    : FakeAnthropicServer.autoReply(req, {});

beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => server.close());
beforeEach(async () => {
  server.reset();
  fx = await makeFixture([alpha, beta]);
});
afterEach(async () => {
  server.setFallback((req) => server.defaultReply(req));
  await fx.cleanup();
});

/** A worker asking each set on its own (`coAsk: false`) unless told otherwise. */
function worker(coAsk = false): Worker {
  const provider = new AnthropicProvider({
    apiKey: 'sk-ant-test',
    baseURL: server.url,
    minBackoffMs: 1,
    maxBackoffMs: 4,
  });
  return new Worker({
    store: fx.store,
    registry: fx.registry,
    provider,
    logger: silentLogger,
    workerId: 'w',
    concurrency: 1,
    tickMs: 10,
    leaseMs: 600_000,
    passLimit: 20,
    abandonLimit: 8,
    untilIdle: true,
    coAsk,
  });
}

describe('a rejected schema in a co-asked call (DESIGN §7.2)', () => {
  it('re-asks set by set: only the set whose own schema is refused cools off, the other is answered', async () => {
    const id = (
      await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: 'T-1',
          title: 't1',
          content: 'b',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      )
    ).row.id;
    server.setFallback(rejectAlpha);
    const summary = await worker(true).run();
    expect(summary.schemaRejected).toEqual({ alpha: 'schema_rejected 400' });
    // The joint call (both sets), then alpha alone (refused), then beta alone (answered).
    const bodies = server.messages.map((r) => [isAlpha(r), r.rawBody.includes('Beta: the item is blocked')]);
    expect(bodies).toEqual([
      [true, true],
      [true, false],
      [false, true],
    ]);
    expect(await fx.store.getJob(id, 'beta')).toBeNull();
    expect(await fx.store.getJob(id, 'alpha')).toMatchObject({
      state: 'owed',
      attempts: 0,
      lastError: 'schema_rejected 400',
    });
    expect((await fx.store.listDecisions(id)).map((d) => d.questionSet)).toEqual(['beta']);
  });
});

describe('a rejected schema cools off its set only', () => {
  it('one request for the rejected set, its jobs held without an attempt; the other set answered; status says why', async () => {
    const ids: string[] = [];
    for (let i = 1; i <= 3; i++) {
      ids.push(
        (
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
          )
        ).row.id,
      );
    }
    server.setFallback(rejectAlpha);
    const summary = await worker().run();
    expect(summary.misconfigured).toBeNull(); // not provider-wide: the worker was not stopped
    expect(summary.schemaRejected).toEqual({ alpha: 'schema_rejected 400' });
    expect(summary.outcomes).toEqual({ schema_rejected: 1, complete: 3 });
    expect(server.messages.filter(isAlpha)).toHaveLength(1); // the others were not claimed during the period
    expect(server.messages.filter((r) => !isAlpha(r))).toHaveLength(3);
    for (const id of ids) {
      expect(await fx.store.getJob(id, 'beta')).toBeNull(); // answered
      const j = (await fx.store.getJob(id, 'alpha'))!;
      expect(j).toMatchObject({ state: 'owed', attempts: 0, claimToken: null });
    }
    const held = (await fx.store.listJobs({ questionSet: 'alpha' })).filter(
      (j) => j.lastError === 'schema_rejected 400',
    );
    expect(held).toHaveLength(1);
    expect(held[0].notBefore - fx.clock.now()).toBe(30_000);

    const s = await statusReport(fx.store);
    expect(s.failingSets).toEqual([
      {
        set: 'alpha',
        jobs: 0,
        lastErrorAt: null,
        schemaRejected: { reason: 'schema_rejected 400', at: fx.clock.now(), coolingOffUntil: fx.clock.now() + 30_000 },
      },
    ]);
    expect(formatStatus(s)).toContain(
      'failing sets: alpha (answer schema rejected: schema_rejected 400, 0ms ago; not claimed for another 30s)',
    );

    // The schema is fixed and the period is over: the set runs, and status no longer lists it.
    server.setFallback((req) => FakeAnthropicServer.autoReply(req, {}));
    fx.clock.advance(30_000);
    const again = await worker().run();
    expect(again.outcomes).toEqual({ complete: 3 });
    expect(await fx.store.listMeta(SET_COOLOFF_META_PREFIX)).toEqual([]);
    expect((await statusReport(fx.store)).failingSets).toEqual([]);
  });

  it("a rejection that repeats doubles the set's period within one worker", async () => {
    for (let i = 1; i <= 2; i++) {
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
    server.setFallback(rejectAlpha);
    const w = worker();
    await w.run();
    const t0 = fx.clock.now();
    expect(w.setCooloffs.active(t0)).toEqual(['alpha']);
    expect(w.setCooloffs.active(t0 + 30_000)).toEqual([]);
    // A second worker pass after the period: the next alpha job is rejected again, for 60 s.
    fx.clock.advance(30_000);
    const summary = await w.run();
    expect(summary.outcomes.schema_rejected).toBe(2);
    expect(w.setCooloffs.active(fx.clock.now() + 59_999)).toEqual(['alpha']);
    expect(w.setCooloffs.active(fx.clock.now() + 60_000)).toEqual([]);
  });
});
