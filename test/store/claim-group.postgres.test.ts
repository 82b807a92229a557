import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { waitFor } from '../harness/cli-process.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from './conformance-backends.js';

/**
 * Claims on PostgreSQL with co-asking (DESIGN §7.2): a claim never waits on a row another
 * transaction locks, and a co-asked group is only claimed from its first set. Another claimer's
 * claim in progress is played by a raw connection holding the first set's row lock, as the claim
 * statement's `FOR UPDATE` does until its transaction commits.
 */

const CO_ASK = { attention: ['effort'], effort: ['attention'] };
let db: { url: string; drop(): Promise<void> };
let store: PgStore;
let holder: pg.Client;
beforeEach(async () => {
  if (!TEST_PG_URL) return;
  db = await createTestDatabase(TEST_PG_URL);
  store = PgStore.connect(db.url, { registry: new Registry([attentionSet, effortSet]), poolSize: 2 });
  holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
});
afterEach(async () => {
  if (!TEST_PG_URL) return;
  await holder.end();
  await store.close();
  await db.drop();
});

async function item(ref: string): Promise<string> {
  const ws = (await store.getWorkspaceBySlug('acme')) ?? (await store.createWorkspace({ slug: 'acme' }));
  const cols = await store.listCollections(ws.id);
  const col = cols[0] ?? (await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA }));
  return (
    await store.createItem(
      { workspaceId: ws.id, collectionId: col.id, ref, title: ref, content: 'body', fields: { status: 'open' } },
      { quietPeriod: false },
    )
  ).row.id;
}

/** Backends of this database waiting on a lock (a claim queueing behind the holder). */
async function lockWaiters(): Promise<number> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const r = await c.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    return r.rows[0].n as number;
  } finally {
    await c.end();
  }
}

describe.skipIf(!TEST_PG_URL)(
  `claims with co-asking on PostgreSQL${TEST_PG_URL ? '' : ` (skipped: ${PG_SKIP_REASON})`}`,
  () => {
    it("while another claimer holds an item's first set, a claim neither waits on it nor takes the item's other set", async () => {
      const held = await item('T-1');
      const free = await item('T-2');
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM decision_jobs WHERE item_id = $1 AND question_set = 'attention' FOR UPDATE`, [
        held,
      ]);
      const claiming = store.claimNextJob('w-b', 60_000, 8, [], { coAsk: CO_ASK });
      // Either the claim returns, or it queues behind the held row (the deadlock's first half).
      // The watcher stops once the race is decided, and is awaited, so no probe connection is still
      // open when afterEach drops the database (its termination was an uncaught error).
      let decided = false;
      const watcher = waitFor(
        async () => (decided ? ('stopped' as const) : (await lockWaiters()) > 0 && ('waited' as const)),
        20_000,
      );
      const first = await Promise.race([claiming.then(() => 'claimed' as const), watcher]);
      decided = true;
      await watcher;
      await holder.query('ROLLBACK');
      const claim = await claiming;
      expect(first).toBe('claimed');
      // The other item's group, from its first set, with its sibling: not T-1's effort on its own.
      expect(claim).toMatchObject({ itemId: free, questionSet: 'attention' });
      expect(claim!.coAsked?.map((c) => [c.itemId, c.questionSet])).toEqual([[free, 'effort']]);
      expect((await store.getJob(held, 'effort'))!.claimToken).toBeNull();
    });

    it('with the first set taken and committed, the rest of the group is claimable again', async () => {
      const only = await item('T-1');
      const a = (await store.claimNextJob('w-a', 60_000, 8, [], { coAsk: { attention: [], effort: [] } }))!;
      expect(a.questionSet).toBe('attention');
      const b = (await store.claimNextJob('w-b', 60_000, 8, [], { coAsk: CO_ASK }))!;
      expect(b).toMatchObject({ itemId: only, questionSet: 'effort' });
    });
  },
);
