import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { runOnce, type RunnerOptions } from '../../src/runner/job-life.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import type { Claim } from '../../src/store/store.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from './conformance-backends.js';
import { waitFor } from '../harness/cli-process.js';

/**
 * The statement budget of one evaluation on a real PostgreSQL (DESIGN §3.5 "The statement budget
 * on Postgres", target ≤ 6 per job): the production sets co-asked (attention and effort of one
 * item in one call), the slot's next claim taken by the finish, counted on the server with
 * `pg_stat_statements` (loaded by scripts/pg-test-server.sh), BEGIN and COMMIT included. Counts are
 * the difference of two snapshots of this test database's rows, so other tests on the same server
 * change nothing.
 */
let db: { url: string; drop(): Promise<void> };
let store: PgStore;
let admin: pg.Client;
beforeEach(async () => {
  if (!TEST_PG_URL) return;
  db = await createTestDatabase(TEST_PG_URL);
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  store = PgStore.connect(db.url, { registry: new Registry([attentionSet, effortSet]), poolSize: 4 });
});
afterEach(async () => {
  if (!TEST_PG_URL) return;
  await admin.end();
  await store.close();
  await db.drop();
});

/** This database's statement counts by normalised text (the snapshot's own query left out). */
async function snapshot(): Promise<Map<string, number>> {
  const preload = (await admin.query<{ v: string }>("SELECT current_setting('shared_preload_libraries') AS v")).rows[0]
    .v;
  if (!preload.includes('pg_stat_statements'))
    throw new Error(
      `pg_stat_statements is not loaded on the test server ("${preload}"): start it with scripts/pg-test-server.sh`,
    );
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const rows = (
    await admin.query<{ query: string; calls: string }>(
      `SELECT s.query, sum(s.calls)::text AS calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = current_database() AND s.query NOT LIKE '%pg_stat_statements%'
         AND s.query NOT LIKE '%current_setting%' GROUP BY s.query`,
    )
  ).rows;
  return new Map(rows.map((r) => [r.query.replace(/\s+/g, ' ').trim(), Number(r.calls)]));
}

function difference(after: Map<string, number>, before: Map<string, number>): Array<{ query: string; calls: number }> {
  return [...after]
    .map(([query, calls]) => ({ query, calls: calls - (before.get(query) ?? 0) }))
    .filter((r) => r.calls > 0)
    .sort((a, b) => b.calls - a.calls);
}

/** Workspace `acme`, collection `task` and one open item per ref, each owing its jobs at once. */
async function seedItems(on: PgStore, refs: readonly string[], title = (ref: string) => ref): Promise<void> {
  const ws = await on.createWorkspace({ slug: 'acme' });
  const col = await on.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  for (const ref of refs)
    await on.createItem(
      {
        workspaceId: ws.id,
        collectionId: col.id,
        ref,
        title: title(ref),
        content: `body of ${title(ref)}`,
        fields: { status: 'open' },
      },
      { priority: PRIORITY_BACKFILL, quietPeriod: false },
    );
}

/** A runner on `on` for the production sets with the fake provider, each finish claiming the next job. */
const runnerOn = (on: PgStore): RunnerOptions => ({
  store: on,
  registry: new Registry([attentionSet, effortSet]),
  provider: new FakeProvider(),
  logger: silentLogger,
  workerId: 'w',
  leaseMs: 60_000,
  claimNext: true,
});

describe.skipIf(!TEST_PG_URL)(
  `statements per evaluation on PostgreSQL${TEST_PG_URL ? '' : ` (${PG_SKIP_REASON})`}`,
  () => {
    it('a co-asked pair costs one state read, one idempotency read, one liveness read and a finish per job: ≤ 6 per job', async () => {
      const items = 6;
      await seedItems(
        store,
        Array.from({ length: items }, (_, i) => `T-${i + 1}`),
        (ref) => `task ${ref.slice(2)}`,
      );
      const opts = runnerOn(store);
      const signal = new AbortController().signal;
      // The first group warms the connections (the first claim is a claim of its own, and each
      // named statement is parsed once per connection); the rest is the steady state.
      let held: Claim | null = (await runOnce(opts, signal))!.next;
      expect(held).not.toBeNull();
      const before = await snapshot();
      let jobs = 0;
      let groups = 0;
      while (held) {
        const r = (await runOnce(opts, signal, held))!;
        expect(r.outcome.kind).toBe('complete');
        groups++;
        jobs += 1 + (held.coAsked?.length ?? 0);
        held = r.next;
      }
      const counted = difference(await snapshot(), before);
      const total = counted.reduce((n, r) => n + r.calls, 0);
      const calls = (pattern: RegExp) => counted.filter((r) => pattern.test(r.query)).reduce((n, r) => n + r.calls, 0);
      const breakdown = counted.map((r) => `${r.calls}  ${r.query.slice(0, 90)}`).join('\n');

      // Every item's two jobs were co-asked: one group per item after the first.
      expect(groups).toBe(items - 1);
      expect(jobs).toBe(2 * groups);
      // One of each read per group, not one per job.
      expect(calls(/^SELECT i\.id, i\.workspace_id/), breakdown).toBe(groups); // the state
      expect(calls(/FROM item_decisions d$|JOIN item_decisions d ON/), breakdown).toBe(groups); // idempotency
      expect(calls(/WITH ORDINALITY u\(item_id, question_set, ord\)/), breakdown).toBe(groups); // liveness
      // The throughput count is a CTE of a finish statement or of a surfacing transaction's last
      // statement (with the change rows and the spend), never a statement of its own.
      expect(calls(/^INSERT INTO job_throughput/), breakdown).toBe(0);
      expect(calls(/^WITH chg AS \( INSERT INTO surfacing_changes/), breakdown).toBe(calls(/^BEGIN$/));
      expect(total / jobs, breakdown).toBeLessThanOrEqual(6);
    });

    it("a surfacing finish's transaction takes the hour's spend row only in its last statement, so no other finish waits on it across the transaction's round trips", async () => {
      await seedItems(store, ['T-1', 'T-2']);
      const opts = runnerOn(store);
      const signal = new AbortController().signal;
      // The first group writes the hour's spend rows; the second is held in its surfacing transaction.
      const held = (await runOnce(opts, signal))!.next;
      expect(held).not.toBeNull();
      expect((await admin.query('SELECT count(*)::int AS n FROM decision_spend')).rows[0].n).toBeGreaterThan(0);
      // The surfacing transaction's statement that writes the change rows waits on this lock.
      const blocker = new pg.Client({ connectionString: db.url });
      await blocker.connect();
      const probe = new pg.Client({ connectionString: db.url });
      await probe.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('LOCK TABLE surfacing_changes IN EXCLUSIVE MODE');
        const running = runOnce(opts, signal, held!);
        // Settled: the transaction waits on the lock and no other statement of the group is in flight.
        await waitFor(async () => {
          const r = await probe.query<{ waiting: number; busy: number }>(
            `SELECT count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS waiting,
                    count(*) FILTER (WHERE state = 'active' AND wait_event_type IS DISTINCT FROM 'Lock')::int AS busy
             FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
          );
          return r.rows[0].waiting === 1 && r.rows[0].busy === 0;
        });
        // While it waits, every spend row is free: NOWAIT fails (55P03) on a row another transaction holds.
        const free = await probe.query('SELECT hour FROM decision_spend FOR UPDATE NOWAIT');
        expect(free.rows.length).toBeGreaterThan(0);
        await blocker.query('COMMIT');
        expect((await running)!.outcome.kind).toBe('complete');
      } finally {
        await blocker.query('ROLLBACK').catch(() => undefined);
        await blocker.end();
        await probe.end();
      }
    });

    it("a surfacing finish's first write runs the item's lock before the finish: while another transaction holds the item, the lock waits and nothing of the finish has run", async () => {
      // BEGIN, the lock and the finish are sent in one write (pg-store.ts `surfacingFinish`); the
      // server runs them in order, so the finish's snapshot (which reads the keys' surfacing memory)
      // is taken once the lock is held and sees what the holder committed.
      await seedItems(store, ['T-1', 'T-2']);
      const opts = runnerOn(store);
      const signal = new AbortController().signal;
      const held = (await runOnce(opts, signal))!.next;
      expect(held).not.toBeNull();
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT id FROM items WHERE id = $1 FOR UPDATE', [held!.itemId]);
        const running = runOnce(opts, signal, held!);
        const waiting = await waitFor(async () => {
          const r = await admin.query<{ query: string }>(
            `SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          );
          return r.rows[0]?.query ?? null;
        });
        expect(waiting.replace(/\s+/g, ' ')).toContain('locked AS (SELECT id FROM items WHERE id = $2 FOR UPDATE)');
        // The finish behind it has not run: the surfacing job's row is not yet deleted by it, so
        // taking its lock does not wait (NOWAIT fails, 55P03, on a row an open transaction holds).
        const row = `SELECT item_id FROM decision_jobs WHERE item_id = $1 AND question_set = $2 FOR UPDATE NOWAIT`;
        expect((await admin.query(row, [held!.itemId, held!.questionSet])).rows).toHaveLength(1);
        await holder.query('COMMIT');
        expect((await running)!.outcome.kind).toBe('complete');
        expect(
          (await admin.query(row.replace(' FOR UPDATE NOWAIT', ''), [held!.itemId, held!.questionSet])).rows,
        ).toHaveLength(0);
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
    });

    it("a finish adds to its own backend's shard of the hour's spend and the minute's count rows: another backend's open transaction holding those rows' other shard never stalls it, and the readers sum the shards", async () => {
      // One connection, so the finish's backend (and its shard) is known.
      const one = PgStore.connect(db.url, { registry: new Registry([attentionSet, effortSet]), poolSize: 1 });
      const holder = new pg.Client({ connectionString: db.url });
      const spare: pg.Client[] = [];
      try {
        await seedItems(one, ['T-1', 'T-2']);
        const opts = runnerOn(one);
        const signal = new AbortController().signal;
        // The first group writes this hour's spend rows and this minute's count row.
        const held = (await runOnce(opts, signal))!.next;
        expect(held).not.toBeNull();
        const pidOf = async (q: (t: string) => Promise<{ rows: Array<{ pid: number }> }>) =>
          (await q('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        const storePid = (
          await admin.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
          )
        ).rows[0].pid;
        // A holder on another shard than the store's connection (ids that agree modulo 16 share one).
        let client = holder;
        await client.connect();
        while ((await pidOf((t) => client.query(t))) % 16 === storePid % 16) {
          spare.push(client);
          client = new pg.Client({ connectionString: db.url });
          await client.connect();
        }
        await client.query('BEGIN');
        // The same hours, sets, providers, models and outcomes, and the same minutes, in the holder's shard, held open.
        await client.query(`INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls)
          SELECT hour, question_set, provider, model, outcome, 0 FROM decision_spend
          ON CONFLICT (hour, question_set, provider, model, outcome, shard) DO UPDATE SET calls = decision_spend.calls`);
        await client.query(`INSERT INTO job_throughput (minute, outcome, jobs) SELECT minute, outcome, 1 FROM job_throughput
          ON CONFLICT (minute, outcome, shard) DO UPDATE SET jobs = job_throughput.jobs + 1`);
        const finished = runOnce(opts, signal, held!).then((r) => r!.outcome.kind);
        const stalled = waitFor(async () => {
          const r = await admin.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          );
          return r.rows[0].n > 0 ? 'stalled on a lock' : null;
        });
        expect(await Promise.race([finished, stalled])).toBe('complete');
        await client.query('COMMIT');
        if (client !== holder) spare.push(client);
        // Two shards of one minute read as one row, their sum: 4 jobs completed, 1 added by the holder.
        const { rows } = await one.throughputSince(60 * 60_000);
        expect(rows.filter((r) => r.outcome === 'complete')).toHaveLength(1);
        expect(rows.find((r) => r.outcome === 'complete')!.jobs).toBe(5);
        const shards = await admin.query<{ n: number }>('SELECT count(DISTINCT shard)::int AS n FROM job_throughput');
        expect(shards.rows[0].n).toBe(2);
        expect((await one.spendSince(60 * 60_000)).calls).toBe(2);
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        for (const c of [holder, ...spare]) await c.end().catch(() => undefined);
        await one.close();
      }
    });
  },
);
