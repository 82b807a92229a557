import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from './conformance-backends.js';

/**
 * The batch claim (`claimBatchJobs`, DESIGN §7.3) on PostgreSQL takes at most `limit` jobs
 * whatever plan the server picks. The plan forced here (a nested loop that re-runs the candidate
 * sub-select for each job row, no hash or merge join, no materialised inner side) is one the
 * planner chooses on its own from some statistics: tables emptied with DELETE after holding rows
 * gave it (6 claims for a limit of 4). Each re-run skips the rows the statement itself has just
 * claimed and returns the next ones, so the sub-select must run once, whatever the plan.
 */
let db: { url: string; drop(): Promise<void> };
let store: PgStore;
let admin: pg.Client;
beforeEach(async () => {
  if (!TEST_PG_URL) return;
  db = await createTestDatabase(TEST_PG_URL);
  const name = new URL(db.url).pathname.slice(1);
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  for (const setting of ['enable_hashjoin', 'enable_mergejoin', 'enable_material', 'enable_hashagg', 'enable_sort'])
    await admin.query(`ALTER DATABASE ${name} SET ${setting} = off`);
  store = PgStore.connect(db.url, { registry: new Registry([attentionSet]), poolSize: 2 });
});
afterEach(async () => {
  if (!TEST_PG_URL) return;
  await admin.end();
  await store.close();
  await db.drop();
});

describe.skipIf(!TEST_PG_URL)(`claimBatchJobs on PostgreSQL${TEST_PG_URL ? '' : ` (${PG_SKIP_REASON})`}`, () => {
  it('claims at most `limit` jobs when the plan re-runs the candidate sub-select per row', async () => {
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
    const backfill = { priority: PRIORITY_BACKFILL, quietPeriod: false } as const;
    const create = (ref: string) =>
      store.createItem(
        { workspaceId: ws.id, collectionId: col.id, ref, title: ref, fields: { status: 'open' } },
        backfill,
      );
    for (let i = 1; i <= 6; i++) await create(`B-${i}`);
    store.advanceClockForTests(60_000);

    const claims = await store.claimBatchJobs('w', { leaseMs: 60_000, limit: 4, abandonLimit: 8 });
    const claimedRows = Number(
      (await admin.query('SELECT count(*) AS n FROM decision_jobs WHERE claim_token IS NOT NULL')).rows[0].n,
    );
    expect([claims.length, claimedRows]).toEqual([4, 4]);
  }, 120_000);
});
