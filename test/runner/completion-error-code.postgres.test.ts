import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { runOnce } from '../../src/runner/job-life.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { captureLog } from '../harness/log-capture.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from '../store/conformance-backends.js';

/**
 * A failed completion on PostgreSQL logs the driver's SQLSTATE: the ORM wraps the driver's error
 * in one of its own without a code (drizzle's `DrizzleQueryError`, the driver's error as `cause`),
 * so a line naming only the wrapper's class cannot tell a deadlock from a full disk.
 */

let db: { url: string; drop(): Promise<void> };
let store: PgStore;
beforeEach(async () => {
  if (!TEST_PG_URL) return;
  db = await createTestDatabase(TEST_PG_URL);
  store = PgStore.connect(db.url, { registry: new Registry([attentionSet]), poolSize: 2 });
});
afterEach(async () => {
  if (!TEST_PG_URL) return;
  await store.close();
  await db.drop();
});

describe.skipIf(!TEST_PG_URL)(
  `failed completion on PostgreSQL${TEST_PG_URL ? '' : ` (skipped: ${PG_SKIP_REASON})`}`,
  () => {
    it("the log line carries the driver's SQLSTATE (40P01, a deadlock), not the wrapper's class", async () => {
      const ws = await store.createWorkspace({ slug: 'acme' });
      const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
      await store.createItem(
        {
          workspaceId: ws.id,
          collectionId: col.id,
          ref: 'T-1',
          title: 'Item 1',
          content: 'body',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
      // The database fails every answer insert as the losing side of a deadlock does.
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      await c.query(
        `CREATE FUNCTION refuse_answers() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '40P01'; END $$`,
      );
      await c.query(
        `CREATE TRIGGER refuse_answers BEFORE INSERT ON item_decisions FOR EACH ROW EXECUTE FUNCTION refuse_answers()`,
      );
      await c.end();
      const log = captureLog('warn');
      const registry = new Registry([attentionSet]);
      const r = (await runOnce(
        {
          store,
          registry,
          provider: new FakeProvider(),
          logger: log.logger,
          workerId: 'runner-a',
          leaseMs: 60_000,
          random: () => 0.5,
          claimNext: true,
        },
        new AbortController().signal,
      ))!;
      expect(r.outcome).toEqual({ kind: 'fail', reason: 'answer insert failed: 40P01' });
      const line = log.records().find((l) => l.msg === 'completion with answers failed: storing them on their own');
      expect(line).toMatchObject({ err: '40P01', set: 'attention' });
    });
  },
);
