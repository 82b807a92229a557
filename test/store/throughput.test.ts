import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import type { Claim, JobFinish } from '../../src/store/store.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import {
  pgliteBackend,
  postgresBackend,
  sqliteBackend,
  TEST_PG_URL,
  type StoreBackend,
} from './conformance-backends.js';

/**
 * The job_throughput count (DESIGN §2): every outcome adds to its minute's row in its own
 * transaction, a group commit once per outcome it holds; superseded and lost outcomes and a failed
 * entry count nothing; retention deletes past minutes. SQLite, PGlite and, with
 * VERDICT_TEST_PG_URL, a real PostgreSQL.
 */
const backends: StoreBackend[] = [
  sqliteBackend(),
  ...(TEST_PG_URL ? [postgresBackend(TEST_PG_URL)] : [pgliteBackend()]),
];

const byOutcome = (rows: Array<{ minute: number; outcome: string; jobs: number }>) =>
  Object.fromEntries(rows.map((r) => [r.outcome, r.jobs]));

for (const backend of backends) {
  describe(`job throughput on ${backend.name}`, () => {
    beforeAll(() => backend.setup(), 180_000);
    afterAll(() => backend.teardown(), 60_000);

    it('counts each recorded outcome in its minute, a group commit as one row per outcome; prunes past minutes', async () => {
      let n = 0;
      const opened = await backend.open(new Registry([attentionSet]), () => `id-${(++n).toString().padStart(6, '0')}`);
      const store = opened.store;
      try {
        const ws = await store.createWorkspace({ slug: 'acme' });
        const tasks = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
        const items = [];
        for (let i = 1; i <= 12; i++) {
          items.push(
            await store.createItem({
              workspaceId: ws.id,
              collectionId: tasks.id,
              ref: `T-${i}`,
              title: `title ${i}`,
              content: 'body',
              fields: { status: 'open' },
            }),
          );
        }
        opened.advance(30_000);
        const claim = async (): Promise<Claim> => (await store.claimNextJob('w', 60_000, 8))!;
        const broken: JobFinish = {
          // A NULL workspace breaks the answer insert (NOT NULL) on every backend: the entry writes nothing.
          answers: {
            decisions: [
              {
                workspaceId: null as unknown as string,
                itemId: 'x',
                questionSet: 'attention',
                questionKey: 'blocked',
                kind: 'noul',
                answer: 'true',
                confidence: 0.9,
                provider: 'fake',
                model: 'm',
                stateHash: 'sh',
                questionHash: 'qh',
                stateVersion: 1,
                stateParts: '{}',
                inputTokens: 1,
                outputTokens: 1,
                itemSeq: 1,
                stateTruncated: false,
              },
            ],
            spend: {
              questionSet: 'attention',
              provider: 'fake',
              model: 'm',
              outcome: 'ok',
              calls: 1,
              usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
            },
            reservationId: null,
          },
        };
        // A group commit: two completions, a drop, a failing entry; and one completion superseded by a write.
        const group = [await claim(), await claim(), await claim(), await claim(), await claim()];
        await store.updateItem(group[4].itemId, { title: 'edited while asked' });
        const results = await store.finishJobs([
          { claim: group[0], finish: {} },
          { claim: group[1], finish: { outcome: 'complete' } },
          { claim: group[2], finish: { outcome: 'drop' } },
          { claim: group[3], finish: broken },
          { claim: group[4], finish: {} },
        ]);
        expect(results.map((r) => (r.ok ? r.finished.result : 'error'))).toEqual([
          'applied',
          'applied',
          'applied',
          'error',
          'superseded',
        ]);
        let t = await store.throughputSince(0);
        expect(t.rows).toHaveLength(2);
        expect(byOutcome(t.rows)).toEqual({ complete: 2, drop: 1 });
        expect(t.rows.every((r) => r.minute === t.sinceMinute && r.minute % 60_000 === 0)).toBe(true);

        // One of each other outcome, each in its own transaction; a lost one counts nothing.
        await store.finishJob(await claim(), { outcome: 'drop' });
        await store.parkJob(await claim(), 'needs a person');
        await store.refuseJob(await claim(), { backoffMs: 1_000, error: 'refused', refusalLimit: 5 });
        await store.failJob(await claim(), { backoffMs: 1_000, error: 'provider_error' });
        await store.deferJob(await claim(), {
          delayMs: 1_000,
          reason: 'rate_limited',
          deferLimit: 5,
          failBackoffMs: 1_000,
        });
        await store.releaseJob(await claim());
        const lost = await claim();
        expect(await store.completeJob({ ...lost, claimToken: 'not-the-token' })).toBe('lost');
        t = await store.throughputSince(0);
        expect(byOutcome(t.rows)).toEqual({ complete: 2, drop: 2, park: 1, refuse: 1, fail: 1, defer: 1, release: 1 });

        // The next minute has rows of its own; a window of one minute reads the current minute only.
        opened.advance(60_000);
        expect(await store.completeJob(lost)).toBe('applied');
        t = await store.throughputSince(0);
        expect(t.rows).toEqual([{ minute: t.sinceMinute, outcome: 'complete', jobs: 1 }]);
        expect((await store.throughputSince(60_000)).rows).toHaveLength(8);

        // Retention: minutes that started more than the window ago go; the current one (started under a minute ago) stays.
        // Rows, not minutes: on PostgreSQL each backend that counted an outcome in a minute has its
        // own shard row of it (DESIGN §2 decision_spend), so the 7 outcomes of the past minute may be more rows.
        const pruned = await store.pruneThroughput(60_000);
        if (backend.name === 'sqlite') expect(pruned).toBe(7);
        else expect(pruned).toBeGreaterThanOrEqual(7);
        expect((await store.throughputSince(3_600_000)).rows).toEqual([
          { minute: t.sinceMinute, outcome: 'complete', jobs: 1 },
        ]);
      } finally {
        await opened.cleanup();
      }
    }, 120_000);
  });
}
