import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { TASK_SCHEMA } from '../harness/store-fixture.js';
import { sqliteBackend, type OpenedStore } from './conformance-backends.js';

/**
 * What SQLite's claim writes (DESIGN §3 "Claim", "Abandons"): a fresh claim names no `not_before`
 * in its SET, so SQLite leaves the row's entry in decision_jobs_claim_idx alone; only a claim that
 * counts an abandon writes it. Seen by a TEMP `AFTER UPDATE OF not_before` trigger, which SQLite
 * fires whenever the column is in an UPDATE's SET list, whatever the value written.
 */
describe('the SQLite claim writes not_before only when it counts an abandon', () => {
  let opened: OpenedStore;
  let ids = 0;
  beforeEach(async () => {
    opened = await sqliteBackend().open(
      new Registry([attentionSet]),
      () => `id-${(++ids).toString().padStart(6, '0')}`,
    );
  });
  afterEach(() => opened.cleanup());

  it('a fresh claim leaves not_before out of its SET; the claim that counts an abandon sets it', async () => {
    const { store } = opened;
    const ws = await store.createWorkspace({ slug: 'acme' });
    const tasks = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
    const { row: item } = await store.createItem({
      workspaceId: ws.id,
      collectionId: tasks.id,
      ref: 'T-1',
      title: 'title',
      content: 'body',
      fields: { status: 'open' },
    });
    opened.advance(30_000);
    const db = (store as unknown as { ctx: { db: { $client: import('better-sqlite3').Database } } }).ctx.db.$client;
    db.exec(`CREATE TEMP TABLE not_before_writes (n INTEGER);
      CREATE TEMP TRIGGER count_not_before_writes AFTER UPDATE OF not_before ON main.decision_jobs
      BEGIN INSERT INTO not_before_writes VALUES (1); END;`);
    const writes = () => (db.prepare('SELECT count(*) AS n FROM not_before_writes').get() as { n: number }).n;
    const before = (await store.getJob(item.id, 'attention'))!.notBefore;

    const fresh = await store.claimNextJob('w1', 1_000, 8);
    expect(fresh).toMatchObject({ itemId: item.id, abandons: 0, attempts: 1 });
    expect(writes()).toBe(0);
    expect((await store.getJob(item.id, 'attention'))!.notBefore).toBe(before);

    // The claimant dies: the next claim counts the abandon and backs the job off (one lease).
    opened.advance(1_500);
    expect(await store.claimNextJob('w2', 1_000, 8)).toBeNull();
    expect(writes()).toBe(1);
    const backedOff = (await store.getJob(item.id, 'attention'))!;
    expect(backedOff).toMatchObject({ abandons: 1, attempts: 1, claimToken: null });
    expect(backedOff.notBefore).toBeGreaterThan(before);
  });
});
