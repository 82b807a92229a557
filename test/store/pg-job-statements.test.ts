import type { PGlite } from '@electric-sql/pglite';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { claimNext, finishStatement, type PgJobContext } from '../../src/store/postgres/job-statements.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { loadItemForEvaluation } from '../../src/store/sql/decisions.js';
import type { SqlContext } from '../../src/store/sql/steps.js';
import { freshPglite } from '../harness/pglite-fresh.js';

/**
 * The PostgreSQL job path's own statements (src/store/postgres/job-statements.ts), on PGlite: the
 * conformance suite checks the Store's behaviour; these check what only the one-statement forms
 * can get wrong (the state read against the shared five selects, the next claim found at the
 * abandon limit inside a finish, the co-asked siblings claimed by a finish, a put-back no kill can
 * split from its claim).
 */
describe('PostgreSQL job statements', () => {
  let client: PGlite;
  let store: PgStore;
  let ws: string;
  let col: string;
  beforeAll(async () => {
    client = await freshPglite();
  }, 120_000);
  afterAll(async () => {
    await client.close();
  });
  beforeEach(async () => {
    store = await PgStore.onPglite(client, { registry: new Registry([attentionSet, effortSet]), closeClient: false });
    await client.exec(
      'TRUNCATE workspaces, collections, items, comments, item_links, decision_jobs, item_decisions, decision_spend RESTART IDENTITY CASCADE',
    );
    ws = (await store.createWorkspace({ slug: 'acme' })).id;
    col = (await store.createCollection({ workspaceId: ws, slug: 'task' })).id;
  }, 120_000);
  afterEach(async () => {
    await store.close();
  });
  const item = async (ref: string) =>
    (
      await store.createItem({
        workspaceId: ws,
        collectionId: col,
        ref,
        title: `title of ${ref}`,
        content: `body of ${ref}`,
        fields: { status: 'open' },
      })
    ).row;

  it('the state read in one statement returns what the shared five selects return: live comments in order, links both ways, none to a deleted item', async () => {
    const a = await item('T-1');
    const parent = await item('T-2');
    const blocked = await item('T-3');
    const blocker = await item('T-4');
    const gone = await item('T-5');
    await store.addComment({ itemId: a.id, author: 'ann', body: 'first', createdAt: 1_000 });
    const dropped = (await store.addComment({ itemId: a.id, author: 'bob', body: 'deleted later', createdAt: 2_000 }))
      .row;
    await store.addComment({ itemId: a.id, author: 'cy', body: 'third', createdAt: 3_000 });
    await store.deleteComment(dropped.id);
    await store.addLink({ workspaceId: ws, sourceId: a.id, targetId: parent.id, linkType: 'parent' });
    await store.addLink({ workspaceId: ws, sourceId: a.id, targetId: blocked.id, linkType: 'blocks' });
    await store.addLink({ workspaceId: ws, sourceId: blocker.id, targetId: a.id, linkType: 'blocks' });
    await store.addLink({ workspaceId: ws, sourceId: a.id, targetId: gone.id, linkType: 'blocks' });
    await store.softDeleteItem(gone.id);

    const one = await store.loadItemForEvaluation(a.id);
    // The shared statements the one-statement read replaces, on the store's own context.
    const shared = await loadItemForEvaluation((store as unknown as { c: SqlContext }).c, a.id);
    expect(one).toEqual(shared);
    expect(one!.comments.map((c) => c.body)).toEqual(['first', 'third']);
    expect(one!.links.map((l) => `${l.relation} ${l.ref}`).sort()).toEqual([
      'blocked_by T-4',
      'blocks T-3',
      'parent T-2',
    ]);
    expect(one!.collection.schema).toEqual({ fields: [] });
    expect(await store.loadItemForEvaluation('no-such-item')).toBeNull();
  });

  it("a finish's next claim found at the abandon limit is parked before any call, and the claim goes on to the next job", async () => {
    const dying = await item('T-1');
    await store.dropJobs({ questionSet: 'effort' });
    store.advanceClockForTests(30_000);
    // Seven claims on T-1 that die (their leases run out), and an eighth whose lease is still live
    // while T-2 is claimed, and ends before T-2's finish claims the next job.
    // Each dead claim's successor first finds the abandon backoff running and puts the job back
    // (DESIGN §3 "Abandons"); past the backoff the job is claimed again.
    for (let i = 0; i < 8; i++) {
      let got = await store.claimNextJob(`dead-${i}`, i < 7 ? 1_000 : 60_000, 8);
      if (i > 0) {
        expect(got).toBeNull();
        expect((await store.getJob(dying.id, 'attention'))!.abandons).toBe(i);
        store.advanceClockForTests(3_600_001);
        got = await store.claimNextJob(`dead-${i}`, i < 7 ? 1_000 : 60_000, 8);
      }
      expect(got).toMatchObject({ itemId: dying.id });
      if (i < 7) store.advanceClockForTests(1_001);
    }
    const other = await item('T-2');
    await store.dropJobs({ questionSet: 'effort' });
    store.advanceClockForTests(30_000);
    const held = (await store.claimNextJob('runner', 60_000, 8))!;
    expect(held.itemId).toBe(other.id);
    store.advanceClockForTests(31_000);
    const f = await store.finishJob(held, { claimNext: { workerId: 'runner', leaseMs: 60_000, abandonLimit: 8 } });
    expect(f).toEqual({ result: 'applied', answersStored: 0, next: null });
    expect(await store.getJob(dying.id, 'attention')).toMatchObject({ state: 'parked', abandons: 8, claimToken: null });
    expect((await store.getJob(dying.id, 'attention'))!.lastError).toMatch(/abandon limit/);
  });

  it("a finish's next claim takes the item's co-asked siblings in the same statement, the group from its first set", async () => {
    const a = await item('T-1');
    const b = await item('T-2');
    store.advanceClockForTests(30_000);
    const coAsk = { attention: ['effort'], effort: ['attention'] };
    const first = (await store.claimNextJob('runner', 60_000, 8, [], { coAsk }))!;
    expect(first).toMatchObject({
      itemId: a.id,
      questionSet: 'attention',
      coAsked: [{ itemId: a.id, questionSet: 'effort' }],
    });
    await store.finishJob(first.coAsked![0], {});
    const f = await store.finishJob(first, {
      claimNext: { workerId: 'runner', leaseMs: 60_000, abandonLimit: 8, coAsk },
    });
    expect(f.result).toBe('applied');
    expect(f.next).toMatchObject({
      itemId: b.id,
      questionSet: 'attention',
      claimedBy: 'runner',
      coAsked: [{ itemId: b.id, questionSet: 'effort', claimedBy: 'runner' }],
    });
    expect((await store.getJob(b.id, 'effort'))!.claimToken).toBe(f.next!.coAsked![0].claimToken);
    expect(await store.getJob(a.id, 'attention')).toBeNull();
  });

  for (const via of ['claim', 'finish'] as const) {
    it(`a ${via} that finds a dead worker's group backing off puts it back in its own statement: a process killed right after it leaves no claim behind`, async () => {
      const other = await item('T-1');
      const a = await item('T-2');
      store.advanceClockForTests(30_000);
      const coAsk = { attention: ['effort'], effort: ['attention'] };
      const held = (await store.claimNextJob('runner', 600_000, 8, [], { coAsk }))!;
      expect(held.itemId).toBe(other.id);
      const dead = (await store.claimNextJob('dead', 10_000, 8, [], { coAsk }))!;
      expect(dead).toMatchObject({ itemId: a.id, questionSet: 'attention', coAsked: [{ questionSet: 'effort' }] });
      const leaseEnd = (await store.getJob(a.id, 'attention'))!.leaseExpiresAt!;
      store.advanceClockForTests(10_001);
      // The next claimant's process is killed once its first statement has committed: every
      // later statement of it fails. The claim that counts the group's abandons must not leave
      // the first set under a claim that never ran (its partner was then claimed alone, and the
      // claim's own expiry counted one more abandon).
      const jobs = (store as unknown as { jobs: PgJobContext }).jobs;
      let sent = 0;
      const dying: PgJobContext = {
        ...jobs,
        query: (name, text, values) =>
          sent++ === 0 ? jobs.query(name, text, values) : Promise.reject(new Error('killed')),
      };
      const req = { workerId: 'next', leaseMs: 10_000, abandonLimit: 8, coAsk };
      await expect(
        via === 'claim' ? claimNext(dying, req) : finishStatement(dying, held, { claimNext: req }),
      ).rejects.toThrow('killed');
      const group = (await store.listJobs({ itemId: a.id })).sort((x, y) => (x.questionSet < y.questionSet ? -1 : 1));
      expect(group.map((j) => [j.questionSet, j.abandons, j.attempts, j.claimToken, j.notBefore])).toEqual([
        ['attention', 1, 1, null, leaseEnd + 10_000],
        ['effort', 1, 1, null, leaseEnd + 10_000],
      ]);
    });
  }
});
