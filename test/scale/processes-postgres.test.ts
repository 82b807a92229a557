import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  BUILT_CLI,
  checkDrain,
  JOBS_PER_ITEM,
  runWorkerProcesses,
  seedJobs,
  troubleLines,
} from '../../scripts/bench-drain.js';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { spawnCli, waitFor } from '../harness/cli-process.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from '../store/conformance-backends.js';
import { SCALE_ITEMS } from './scale-size.js';

/**
 * Real worker processes on a real PostgreSQL server (VERDICT_TEST_PG_URL; .ci/run starts one),
 * with the database's clock: leases here are real time, so they are kept short.
 */

let db: { url: string; drop(): Promise<void> };
beforeEach(async () => {
  if (TEST_PG_URL) db = await createTestDatabase(TEST_PG_URL);
});
afterEach(async () => {
  if (TEST_PG_URL) await db.drop();
});

async function q<T>(text: string, ...values: unknown[]): Promise<T[]> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    return (await c.query(text, values)).rows as T[];
  } finally {
    await c.end();
  }
}

const common = (latency: number, lease: number) => [
  '--database-url',
  db.url,
  '--provider',
  'fake',
  '--fake-latency-ms',
  String(latency),
  '--lease-ms',
  String(lease),
  '--tick-ms',
  '50',
  '--concurrency',
  '1',
];

describe.skipIf(!TEST_PG_URL)(
  `worker processes on PostgreSQL${TEST_PG_URL ? '' : ` (skipped: ${PG_SKIP_REASON})`}`,
  () => {
    it('a worker killed with SIGKILL mid-evaluation: after the lease another completes the job, one answer per key', async () => {
      const store = PgStore.connect(db.url, { registry: new Registry(productionSets()), poolSize: 2 });
      const ws = await store.createWorkspace({ slug: 'acme' });
      const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
      const itemId = (
        await store.createItem(
          {
            workspaceId: ws.id,
            collectionId: col.id,
            ref: 'T-1',
            title: 'only item',
            content: 'body',
            fields: { status: 'open' },
          },
          { quietPeriod: false },
        )
      ).row.id;
      await store.close();

      const a = spawnCli(['worker', ...common(1_500, 2_600)]);
      await waitFor(
        async () =>
          (
            await q<{ t: string | null }>(
              'SELECT claim_token AS t FROM decision_jobs WHERE item_id = $1 AND question_set = $2',
              itemId,
              'attention',
            )
          )[0]?.t,
        30_000,
      );
      await new Promise((r) => setTimeout(r, 300));
      a.child.kill('SIGKILL');
      expect((await a.exited).signal).toBe('SIGKILL');
      expect(await q('SELECT 1 FROM item_decisions WHERE question_set = $1', 'attention')).toHaveLength(0);
      const b = spawnCli(['worker', ...common(0, 2_600)]);
      await waitFor(async () => (await q('SELECT 1 FROM decision_jobs')).length === 0, 30_000);
      b.child.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
      const rows = await q<{ k: string; n: number }>(
        'SELECT question_key AS k, count(*)::int AS n FROM item_decisions WHERE item_id = $1 GROUP BY question_set, question_key, state_hash',
        itemId,
      );
      expect(rows).toHaveLength(4); // three attention keys and one effort key
      expect(rows.every((r) => r.n === 1)).toBe(true);
      // One recorded call: the killed worker's call never completed; the survivor asked attention
      // and effort together (co-asking, DESIGN §7.2).
      expect(await q<{ n: number }>('SELECT sum(calls)::int AS n FROM decision_spend')).toEqual([{ n: 1 }]);
    }, 90_000);

    it(`four worker processes drain ${SCALE_ITEMS * JOBS_PER_ITEM} jobs, each completed exactly once`, async () => {
      const owed = await seedJobs(db.url, SCALE_ITEMS);
      expect(owed).toBe(SCALE_ITEMS * JOBS_PER_ITEM);
      const { runs } = await runWorkerProcesses(db.url, 4, ['--concurrency', '4'], BUILT_CLI);
      expect(runs.map((r) => r.code)).toEqual([0, 0, 0, 0]);
      expect(runs.every((r) => r.claimed > 0)).toBe(true);
      expect(runs.reduce((a, r) => a + r.claimed, 0)).toBe(owed);
      expect(troubleLines(runs)).toEqual([]);
      // Co-asked items take one call, others two (see processes-sqlite.test.ts).
      const check = await checkDrain(db.url);
      expect(check).toMatchObject({ jobsLeft: 0, answers: SCALE_ITEMS * 4, duplicateKeys: 0 });
      expect(check.calls).toBeGreaterThanOrEqual(SCALE_ITEMS);
      expect(check.calls).toBeLessThanOrEqual(owed);
    }, 240_000);
  },
);
