import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import type { Claim, JobFinish, NewDecision } from '../../src/store/store.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import {
  pgliteBackend,
  postgresBackend,
  sqliteBackend,
  TEST_PG_URL,
  type StoreBackend,
} from './conformance-backends.js';

/**
 * `Store.finishJobs` (group commit's store side, DESIGN §10.6) on SQLite, PGlite and, with
 * VERDICT_TEST_PG_URL, a real PostgreSQL: on SQLite and PGlite every entry's finish in one
 * transaction, each in its own savepoint, on PostgreSQL each entry its own statement, so one
 * entry's failing statement is that entry's error alone.
 */
const backends: StoreBackend[] = [
  sqliteBackend(),
  ...(TEST_PG_URL ? [postgresBackend(TEST_PG_URL)] : [pgliteBackend()]),
];

for (const backend of backends) {
  describe(`finishJobs on ${backend.name}`, () => {
    beforeAll(() => backend.setup(), 180_000);
    afterAll(() => backend.teardown(), 60_000);

    it("one entry's statement fails: that entry writes nothing and reports its error; the others commit, claims distinct", async () => {
      let n = 0;
      const opened = await backend.open(new Registry([attentionSet]), () => `id-${(++n).toString().padStart(6, '0')}`);
      const store = opened.store;
      try {
        const ws = await store.createWorkspace({ slug: 'acme' });
        const tasks = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
        for (let i = 1; i <= 6; i++) {
          await store.createItem({
            workspaceId: ws.id,
            collectionId: tasks.id,
            ref: `T-${i}`,
            title: `title ${i}`,
            content: 'body',
            fields: { status: 'open' },
          });
        }
        opened.advance(30_000);
        const claims: Claim[] = [];
        for (let i = 0; i < 3; i++) claims.push((await store.claimNextJob(`slot-${i}`, 60_000, 8))!);
        const decision = (itemId: string): NewDecision => ({
          workspaceId: ws.id,
          itemId,
          questionSet: 'attention',
          questionKey: 'blocked',
          kind: 'noul',
          answer: 'true',
          confidence: 0.9,
          provider: 'fake',
          model: 'fake-model-1',
          stateHash: `sh-${itemId}`,
          questionHash: 'qh',
          stateVersion: 1,
          stateParts: '{}',
          inputTokens: 10,
          outputTokens: 5,
          itemSeq: 1,
          stateTruncated: false,
        });
        const spend = {
          questionSet: 'attention',
          provider: 'fake',
          model: 'fake-model-1',
          outcome: 'ok',
          calls: 1,
          usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
        };
        const finish = (claim: Claim, i: number, broken = false): JobFinish => ({
          // A NULL workspace breaks the answer insert (NOT NULL) on every backend.
          answers: {
            decisions: [
              broken ? { ...decision(claim.itemId), workspaceId: null as unknown as string } : decision(claim.itemId),
            ],
            spend,
            reservationId: null,
          },
          claimNext: { workerId: `slot-${i}`, leaseMs: 60_000, abandonLimit: 8, skipSets: [] },
        });
        const results = await store.finishJobs(
          claims.map((claim, i) => ({ claim, finish: finish(claim, i, i === 1) })),
        );
        expect(results.map((r) => r.ok)).toEqual([true, false, true]);
        const ok = results.flatMap((r) => (r.ok ? [r.finished] : []));
        expect(ok.map((f) => [f.result, f.answersStored])).toEqual([
          ['applied', 1],
          ['applied', 1],
        ]);
        expect(new Set(ok.map((f) => f.next!.itemId)).size).toBe(2);
        // The failed entry: its job keeps its claim, no answer, no spend, no next claim taken for it.
        expect(await store.getJob(claims[1].itemId, 'attention')).toMatchObject({ claimToken: claims[1].claimToken });
        expect(await store.countDecisions()).toBe(2);
        expect((await store.spendSince(3_600_000)).calls).toBe(2);
        const claimed = (await store.listJobs({}))
          .filter((j) => j.claimToken !== null)
          .map((j) => j.claimedBy)
          .sort();
        expect(claimed).toEqual(['slot-0', 'slot-1', 'slot-2']); // slot-1's first claim, the two next claims
      } finally {
        await opened.cleanup();
      }
    }, 120_000);
  });
}
