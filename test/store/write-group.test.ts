import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * The SQLite write doors' group commit (DESIGN §10.6) on a real file: the write-door calls of one
 * turn share one transaction, counted by SQLite itself (the commit frames in the write-ahead log);
 * one write whose statements throw fails alone; a COMMIT that fails fails every write of it and
 * leaves nothing of any. The process kill between hand-in and commit is in write-group-kill.test.ts.
 */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
});
afterEach(async () => fx.cleanup());

const client = () => fx.store.ctx.db.$client;

/**
 * Commits in the write-ahead log since it was last reset: its frames whose header carries the
 * database size after a commit (non-zero only on a transaction's last frame) and the log's current
 * salt (frames of an earlier generation stay in the file after a reset). Format:
 * https://www.sqlite.org/fileformat2.html#walformat
 */
function walCommits(): number {
  const wal = readFileSync(`${fx.file}-wal`);
  if (wal.length < 32) return 0;
  const pageSize = wal.readUInt32BE(8);
  const salt = wal.subarray(16, 24);
  let n = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (!wal.subarray(at + 8, at + 16).equals(salt)) break;
    if (wal.readUInt32BE(at + 4) !== 0) n++;
  }
  return n;
}

const item = (ref: string) => ({
  workspaceId: fx.ws.id,
  collectionId: fx.tasks.id,
  ref,
  title: `Item ${ref}`,
  content: 'waiting for legal sign-off',
  fields: { status: 'open' },
});

const refs = () =>
  (client().prepare('SELECT ref FROM items ORDER BY ref').all() as Array<{ ref: string }>).map((r) => r.ref);
const jobItems = () =>
  (
    client()
      .prepare('SELECT i.ref FROM decision_jobs j JOIN items i ON i.id = j.item_id ORDER BY i.ref')
      .all() as Array<{ ref: string }>
  ).map((r) => r.ref);

describe('write-door group commit (SQLite)', () => {
  it('write-door calls made in the same turn share one commit, each answered with its own result', async () => {
    const walBefore = walCommits();
    const groupsBefore = fx.store.writes.commits;
    const made = await Promise.all(
      ['T-1', 'T-2', 'T-3', 'T-4', 'T-5', 'T-6'].map((ref) => fx.store.createItem(item(ref))),
    );
    // One transaction: one commit in the log for six doors (each door alone is one).
    expect(walCommits() - walBefore).toBe(1);
    expect(fx.store.writes.commits - groupsBefore).toBe(1);
    expect(made.map((m) => m.row.ref)).toEqual(['T-1', 'T-2', 'T-3', 'T-4', 'T-5', 'T-6']);
    expect(new Set(made.map((m) => m.row.id)).size).toBe(6);
    expect(made.every((m) => m.owed > 0)).toBe(true);
    expect(jobItems()).toEqual(['T-1', 'T-2', 'T-3', 'T-4', 'T-5', 'T-6']);
    // A caller that awaits each write gets a commit each.
    await fx.store.updateItem(made[0].row.id, { title: 'renamed' });
    await fx.store.updateItem(made[1].row.id, { title: 'renamed' });
    expect(walCommits() - walBefore).toBe(3);
  });

  it('the hot doors (updateItem, oweJobs: prepared SQL text) join the same group commit', async () => {
    const made = await Promise.all(['T-1', 'T-2', 'T-3'].map((ref) => fx.store.createItem(item(ref))));
    const walBefore = walCommits();
    const [renamed, owed] = await Promise.all([
      fx.store.updateItem(made[0].row.id, { title: 'renamed' }),
      fx.store.oweJobs([{ itemId: made[1].row.id, questionSet: 'attention' }], { quietPeriod: false }),
      fx.store.updateItem(made[2].row.id, { title: 'renamed too' }),
    ]);
    expect(walCommits() - walBefore).toBe(1);
    expect(renamed.row.title).toBe('renamed');
    expect(owed).toBeGreaterThanOrEqual(0);
    expect(refs()).toEqual(['T-1', 'T-2', 'T-3']);
  });

  it("one write's statements throw: that caller alone gets the error and nothing of its write is kept; the others commit", async () => {
    // The bad door's item insert runs, then its owed job's insert throws: a half-done write to undo.
    client().exec(
      `CREATE TEMP TRIGGER refuse_one BEFORE INSERT ON main.decision_jobs
       WHEN (SELECT ref FROM main.items WHERE id = NEW.item_id) = 'T-BAD' BEGIN SELECT RAISE(ABORT, 'injected'); END`,
    );
    const walBefore = walCommits();
    const settled = await Promise.allSettled(
      ['T-1', 'T-BAD', 'T-3', 'T-4'].map((ref) => fx.store.createItem(item(ref))),
    );
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toContain('injected');
    expect(refs()).toEqual(['T-1', 'T-3', 'T-4']);
    expect(jobItems()).toEqual(['T-1', 'T-3', 'T-4']);
    // Still one commit for the group (its first run was rolled back, not committed).
    expect(walCommits() - walBefore).toBe(1);
  });

  it('a COMMIT that fails: every write of it gets the error and nothing of any is written; the next writes commit', async () => {
    // The poisoned item's insert leaves a deferred foreign-key violation, so the COMMIT throws.
    client().exec(`
      CREATE TEMP TABLE breaker_parent (id INTEGER PRIMARY KEY);
      CREATE TEMP TABLE breaker (p INTEGER REFERENCES breaker_parent(id) DEFERRABLE INITIALLY DEFERRED);
      CREATE TEMP TRIGGER break_commit AFTER INSERT ON main.items WHEN NEW.ref = 'T-POISON'
        BEGIN INSERT INTO breaker VALUES (42); END`);
    const walBefore = walCommits();
    const groupsBefore = fx.store.writes.commits;
    const settled = await Promise.allSettled(
      ['T-1', 'T-2', 'T-POISON', 'T-4'].map((ref) => fx.store.createItem(item(ref))),
    );
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    for (const s of settled) expect(String((s as PromiseRejectedResult).reason)).toMatch(/FOREIGN KEY/i);
    expect(refs()).toEqual([]);
    expect(jobItems()).toEqual([]);
    expect(walCommits() - walBefore).toBe(0);
    expect(fx.store.writes.commits - groupsBefore).toBe(0);
    expect(client().inTransaction).toBe(false);
    // The connection is left clean: the next group commits.
    await Promise.all(['T-5', 'T-6'].map((ref) => fx.store.createItem(item(ref))));
    expect(refs()).toEqual(['T-5', 'T-6']);
  });

  it('a write handed in before a store.transaction began waits for it to end and never joins it', async () => {
    const walBefore = walCommits();
    const turn = () => new Promise((r) => setImmediate(r));
    // Handed in first; the transaction takes the connection before the group's turn comes.
    const outside = fx.store.createItem(item('T-3'));
    const inside = fx.store.transaction(async (tx) => {
      await tx.createItem(item('T-1'));
      await turn(); // the group's turn passes while the transaction is open
      await turn();
      await tx.createItem(item('T-2'));
      throw new Error('rolled back');
    });
    await expect(inside).rejects.toThrow('rolled back');
    await outside;
    // The transaction's writes went with its rollback; the group's write committed on its own.
    expect(refs()).toEqual(['T-3']);
    expect(walCommits() - walBefore).toBe(1);
  });
});
