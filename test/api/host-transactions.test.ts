import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/node-postgres';
import { sql } from 'drizzle-orm';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, defineQuestionSet, noul, type Verdict } from '../../src/index.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from '../store/conformance-backends.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * Several write doors in one transaction, and a host's own writes in the same transaction
 * (DESIGN §16.1): all or nothing, on SQLite and on PostgreSQL.
 */

const sets = [
  defineQuestionSet({
    name: 'triage',
    questions: { blocked: noul('Is the item blocked on something outside the team?') },
  }),
];

class Boom extends Error {}

describe('SQLite: { sqlite: db } and store.transaction', () => {
  let t: ReturnType<typeof tempDir>;
  let host: Database.Database;
  let v: Verdict;
  afterEach(async () => {
    await v?.close();
    if (host?.open) host.close();
    t?.cleanup();
  });

  async function open() {
    t = tempDir();
    host = new Database(join(t.dir, 'host.db'));
    host.exec('CREATE TABLE host_audit (id INTEGER PRIMARY KEY, note TEXT NOT NULL)');
    v = await createVerdict({ database: { sqlite: host }, sets, provider: 'fake' });
    const ws = await v.store.createWorkspace({ slug: 'acme' });
    const col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
    return { ws, col };
  }
  const count = (table: string) => (host.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;

  it('a host transaction that writes its own row and an item, then throws, leaves neither, nor an owed job', async () => {
    const { ws, col } = await open();
    await expect(
      v.store.transaction(async (tx) => {
        host.prepare('INSERT INTO host_audit (note) VALUES (?)').run('created T-1');
        const it = await tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'Ship it' });
        await tx.addComment({ itemId: it.row.id, author: 'ann', body: 'Blocked on review' });
        expect(it.owed).toBe(1);
        throw new Boom('host failed after the writes');
      }),
    ).rejects.toBeInstanceOf(Boom);
    expect(count('host_audit')).toBe(0);
    expect(count('items')).toBe(0);
    expect(count('comments')).toBe(0);
    expect(count('decision_jobs')).toBe(0);
    expect(host.inTransaction).toBe(false);
  });

  it('the same transaction, resolving, commits the host row, the item, the comment and the owed job together', async () => {
    const { ws, col } = await open();
    await v.store.transaction(async (tx) => {
      host.prepare('INSERT INTO host_audit (note) VALUES (?)').run('created T-1');
      const it = await tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'Ship it' });
      await tx.addComment({ itemId: it.row.id, author: 'ann', body: 'Blocked on review' });
    });
    expect([count('host_audit'), count('items'), count('comments'), count('decision_jobs')]).toEqual([1, 1, 1, 1]);
  });

  it("a transaction the host opened itself on the connection takes the doors' writes with it on ROLLBACK", async () => {
    const { ws, col } = await open();
    host.exec('BEGIN IMMEDIATE');
    host.prepare('INSERT INTO host_audit (note) VALUES (?)').run('created T-2');
    await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-2', title: 'Ship it' });
    host.exec('ROLLBACK');
    expect([count('host_audit'), count('items'), count('decision_jobs')]).toEqual([0, 0, 0]);
  });

  it('while a transaction awaits, other calls on the store wait for it and are not rolled back with it (connection mutex)', async () => {
    const { ws, col } = await open();
    let letGo!: () => void;
    const hold = new Promise<void>((r) => (letGo = r));
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    const tx = v.store.transaction(async (t) => {
      await t.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'IN', title: 'inside' });
      inside();
      await hold;
      throw new Boom('roll back');
    });
    await entered;
    let outsideDone = false;
    const outside = v.store
      .createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'OUT', title: 'outside' })
      .then((r) => {
        outsideDone = true;
        return r;
      });
    await new Promise((r) => setImmediate(r));
    expect(outsideDone).toBe(false); // waiting for the mutex, not running inside the open transaction
    letGo();
    await expect(tx).rejects.toBeInstanceOf(Boom);
    await outside;
    const refs = (host.prepare('SELECT ref FROM items ORDER BY ref').all() as Array<{ ref: string }>).map((r) => r.ref);
    expect(refs).toEqual(['OUT']);
  });

  it('a call on the store itself from inside its own transaction callback is refused, never a deadlock', async () => {
    const { ws, col } = await open();
    await expect(
      v.store.transaction(async () => {
        await v.store.createItem({
          workspaceId: ws.id,
          collectionId: col.id,
          ref: 'WRONG',
          title: 'on the store, not on tx',
        });
      }),
    ).rejects.toMatchObject({ code: 'transaction_misuse' });
    await expect(v.store.transaction(async () => v.store.transaction(async () => undefined))).rejects.toMatchObject({
      code: 'transaction_misuse',
    });
    expect(count('items')).toBe(0);
    // The store is usable again afterwards.
    await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'AFTER', title: 'after' });
    expect(count('items')).toBe(1);
  });

  it('an in-process worker never writes inside a transaction the host opened itself: a host ROLLBACK loses no answer and re-asks nothing', async () => {
    t = tempDir();
    host = new Database(join(t.dir, 'host.db'));
    host.exec('CREATE TABLE host_audit (id INTEGER PRIMARY KEY, note TEXT NOT NULL)');
    const due = [
      defineQuestionSet({
        name: 'triage',
        quietPeriodMs: 0,
        questions: { blocked: noul('Is the item blocked on something outside the team?') },
      }),
    ];
    v = await createVerdict({ database: { sqlite: host }, sets: due, provider: 'fake' });
    const ws = await v.store.createWorkspace({ slug: 'acme' });
    const col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
    for (let i = 1; i <= 6; i++)
      await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: `T-${i}`, title: `Task ${i}` });
    expect(count('decision_jobs')).toBe(6);

    host.exec('BEGIN IMMEDIATE');
    host.prepare('INSERT INTO host_audit (note) VALUES (?)').run('rolled back');
    await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'ROLLED', title: 'rolled back' });
    const worker = v.worker({ concurrency: 2 });
    let outcomes = 0;
    worker.on('outcome', () => outcomes++);
    const drained = worker.runUntilIdle();
    for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 5)); // the worker gets many turns of the loop
    const outcomesWhileOpen = outcomes;
    host.exec('ROLLBACK');
    await drained;

    expect(outcomesWhileOpen).toBe(0); // it waited for the host's transaction instead of writing inside it
    const calls = (host.prepare('SELECT coalesce(sum(calls), 0) AS n FROM decision_spend').get() as { n: number }).n;
    expect([count('host_audit'), count('items'), count('item_decisions'), calls, count('decision_jobs')]).toEqual([
      0, 6, 6, 6, 0,
    ]);
  });

  it('a transaction handle used after its transaction ended is refused', async () => {
    const { ws, col } = await open();
    let leaked: Parameters<Parameters<Verdict['store']['transaction']>[0]>[0] | undefined;
    await v.store.transaction(async (tx) => {
      leaked = tx;
    });
    await expect(
      leaked!.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'LATE', title: 'late' }),
    ).rejects.toMatchObject({ code: 'transaction_closed' });
    expect(count('items')).toBe(0);
  });

  it('the public store exposes the tracker doors and reads, not the queue or close', async () => {
    await open();
    const s = v.store as unknown as Record<string, unknown>;
    expect(typeof s.createItem).toBe('function');
    expect(typeof s.transaction).toBe('function');
    for (const internal of ['claimNextJob', 'insertDecisions', 'close', 'oweJobs', 'setMeta'])
      expect(s[internal]).toBeUndefined();
  });
});

describe.skipIf(!TEST_PG_URL)(`PostgreSQL: { postgres: pool }${TEST_PG_URL ? '' : ` (${PG_SKIP_REASON})`}`, () => {
  let db: { url: string; drop(): Promise<void> };
  let pool: pg.Pool;
  let v: Verdict;
  let ws: { id: string };
  let col: { id: string };
  beforeAll(async () => {
    db = await createTestDatabase(TEST_PG_URL!);
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    await pool.query('CREATE TABLE host_audit (id serial PRIMARY KEY, note text NOT NULL)');
    v = await createVerdict({ database: { postgres: pool }, sets, provider: 'fake' });
    ws = await v.store.createWorkspace({ slug: 'acme' });
    col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
  });
  afterAll(async () => {
    await v?.close();
    await pool?.end();
    await db?.drop();
  });
  afterEach(async () => {
    await pool.query('TRUNCATE host_audit');
  });
  const counts = async () => {
    const r = await pool.query(
      `SELECT (SELECT count(*) FROM host_audit)::int AS audit, (SELECT count(*) FROM items)::int AS items, (SELECT count(*) FROM decision_jobs)::int AS jobs`,
    );
    return r.rows[0] as { audit: number; items: number; jobs: number };
  };

  it('a host transaction on its own client (BEGIN) that writes its row and an item, then throws: neither, nor an owed job', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await expect(
        (async () => {
          await client.query('INSERT INTO host_audit (note) VALUES ($1)', ['created P-1']);
          const it = await v.store
            .joinTransaction(client)
            .createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'P-1', title: 'Ship it' });
          expect(it.owed).toBe(1);
          throw new Boom('host failed');
        })(),
      ).rejects.toBeInstanceOf(Boom);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await counts()).toEqual({ audit: 0, items: 0, jobs: 0 });
  });

  it('a host drizzle transaction that writes its row and an item, then throws: neither, nor an owed job', async () => {
    const hostDb = drizzle({ client: pool });
    await expect(
      hostDb.transaction(async (htx) => {
        await htx.execute(sql`INSERT INTO host_audit (note) VALUES ('created P-2')`);
        const doors = v.store.joinTransaction(htx);
        const it = await doors.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'P-2', title: 'Ship it' });
        await doors.addComment({ itemId: it.row.id, author: 'ann', body: 'Blocked on review' });
        throw new Boom('host failed');
      }),
    ).rejects.toBeInstanceOf(Boom);
    expect(await counts()).toEqual({ audit: 0, items: 0, jobs: 0 });
  });

  it('a host drizzle transaction that commits keeps its row, the item and the owed job', async () => {
    const hostDb = drizzle({ client: pool });
    await hostDb.transaction(async (htx) => {
      await htx.execute(sql`INSERT INTO host_audit (note) VALUES ('created P-3')`);
      await v.store
        .joinTransaction(htx)
        .createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'P-3', title: 'Ship it' });
    });
    expect(await counts()).toEqual({ audit: 1, items: 1, jobs: 1 });
    await pool.query('DELETE FROM decision_jobs; DELETE FROM items');
  });

  it('store.transaction: several doors, then a throw, leave nothing', async () => {
    await expect(
      v.store.transaction(async (tx) => {
        const it = await tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'P-4', title: 'Ship it' });
        await tx.addComment({ itemId: it.row.id, author: 'ann', body: 'Blocked on review' });
        throw new Boom('fail');
      }),
    ).rejects.toBeInstanceOf(Boom);
    expect(await counts()).toEqual({ audit: 0, items: 0, jobs: 0 });
  });
});
