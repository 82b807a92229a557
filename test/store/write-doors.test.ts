import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { noul } from '../../src/decision/questions.js';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { PRIORITY_BACKFILL } from '../../src/store/store.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

const linkSet = defineQuestionSet({ name: 'linked', questions: { k: noul('x') }, withLinks: true, noTrail: true });

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet, effortSet, linkSet]);
});
afterEach(async () => fx.cleanup());

async function item(ref: string, extra: Record<string, unknown> = {}) {
  return (await fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref, title: `title ${ref}`, content: 'body', fields: { status: 'open' }, ...extra })).row;
}

describe('write doors owe jobs in the same transaction', () => {
  it('a create owes one job per covering set, after the quiet period', async () => {
    const it1 = await item('T-1');
    const jobs = await fx.store.listJobs({ itemId: it1.id });
    expect(jobs.map((j) => j.questionSet).sort()).toEqual(['attention', 'effort', 'linked']);
    for (const j of jobs) expect(j.notBefore - j.enqueuedAt).toBe(30_000);
  });

  it('a burst of writes coalesces into one row: generation bumps, enqueued_at never moves', async () => {
    const it1 = await item('T-1');
    const before = (await fx.store.getJob(it1.id, 'attention'))!;
    fx.clock.advance(10_000);
    await fx.store.updateItem(it1.id, { content: 'b2' });
    fx.clock.advance(10_000);
    await fx.store.updateItem(it1.id, { content: 'b3' });
    const after = (await fx.store.getJob(it1.id, 'attention'))!;
    expect(after.generation).toBe(before.generation + 2);
    expect(after.enqueuedAt).toBe(before.enqueuedAt);
    expect(after.notBefore).toBe(fx.clock.now() + 30_000); // trailing quiet period
  });

  it('not_before is capped at enqueued_at + maxDelay under constant editing', async () => {
    const it1 = await item('T-1');
    const enq = (await fx.store.getJob(it1.id, 'attention'))!.enqueuedAt;
    for (let i = 0; i < 300; i++) {
      fx.clock.advance(29_000);
      await fx.store.updateItem(it1.id, { content: `edit ${i}` });
    }
    expect((await fx.store.getJob(it1.id, 'attention'))!.notBefore).toBe(enq + 7_200_000);
  });

  it('a write that changes no stored value is a no-op: no seq bump, nothing owed', async () => {
    const it1 = await item('T-1');
    await fx.store.dropJobs({});
    const r = await fx.store.updateItem(it1.id, { title: it1.title, fields: it1.fields });
    expect(r.changed).toBe(false);
    expect(r.row.seq).toBe(it1.seq);
    expect(await fx.store.listJobs({})).toHaveLength(0);
    // control: a real change owes
    expect((await fx.store.updateItem(it1.id, { title: 'new' })).owed).toBeGreaterThan(0);
  });

  it('a comment edit owes only when the body changes', async () => {
    const it1 = await item('T-1');
    const c = (await fx.store.addComment({ itemId: it1.id, author: 'amy', body: 'hi' })).row;
    await fx.store.dropJobs({});
    expect((await fx.store.editComment(c.id, 'hi')).changed).toBe(false);
    expect(await fx.store.listJobs({})).toHaveLength(0);
    expect((await fx.store.editComment(c.id, 'hello')).owed).toBe(2); // attention and effort read the trail; linked is NoTrail
  });

  it('a move owes the target collection sets', async () => {
    const only = await fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'bug' });
    const it1 = await item('T-1');
    await fx.store.dropJobs({});
    const r = await fx.store.moveItem(it1.id, only.id);
    expect(r.owed).toBe(3);
  });

  it('link add and remove owe both ends for sets that read links only', async () => {
    const a = await item('T-1');
    const b = await item('T-2');
    await fx.store.dropJobs({});
    const l = await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: b.id, linkType: 'blocks' });
    expect((await fx.store.listJobs({})).map((j) => `${j.itemId}:${j.questionSet}`).sort()).toEqual([`${a.id}:linked`, `${b.id}:linked`]);
    await fx.store.dropJobs({});
    await fx.store.removeLink(l.row.id);
    expect(await fx.store.listJobs({})).toHaveLength(2);
  });

  it('a title edit owes the items whose state shows that title', async () => {
    const a = await item('T-1');
    const b = await item('T-2');
    await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: b.id, linkType: 'parent' });
    await fx.store.dropJobs({});
    await fx.store.updateItem(b.id, { title: 'renamed parent' });
    const jobs = await fx.store.listJobs({ itemId: a.id });
    expect(jobs.map((j) => j.questionSet)).toEqual(['linked']);
  });

  it('the re-ask debounce pushes not_before to the latest stored answer + 1 h', async () => {
    const it1 = await item('T-1');
    await fx.store.insertDecisions([
      { workspaceId: fx.ws.id, itemId: it1.id, questionSet: 'attention', questionKey: 'blocked', kind: 'noul', answer: '{"type":"noul","noul":0.1}', confidence: null, provider: 'fake', model: 'm', stateHash: 'h', questionHash: 'q', stateVersion: 1, stateParts: '{}', inputTokens: 1, outputTokens: 1, itemSeq: 1, stateTruncated: false },
    ]);
    const answeredAt = fx.clock.now();
    await fx.store.dropJobs({});
    fx.clock.advance(60_000);
    await fx.store.updateItem(it1.id, { content: 'changed' });
    expect((await fx.store.getJob(it1.id, 'attention'))!.notBefore).toBe(answeredAt + 3_600_000);
    // a set without answers waits only for the quiet period
    expect((await fx.store.getJob(it1.id, 'effort'))!.notBefore).toBe(fx.clock.now() + 30_000);
  });

  it('normalises lone surrogates and NUL and reports them', async () => {
    const r = await fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'T-9', title: 'a\uD800b\u0000c', content: 'x\uDC00' });
    expect(r.row.title).toBe('a\uFFFDbc');
    expect(r.normalised).toEqual({ loneSurrogates: 2, nulsRemoved: 1 });
  });

  it('refuses fields that are not a JSON object and writes nothing', async () => {
    await expect(fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'T-9', title: 't', fields: '[1]' })).rejects.toThrow(/JSON object/);
    expect(await fx.store.getItemByRef(fx.ws.id, 'T-9')).toBeNull();
    expect(await fx.store.listJobs({})).toHaveLength(0);
  });

  it('keeps number literals in stored fields', async () => {
    const it1 = await item('T-1', { fields: '{"estimate":3.0}' });
    expect((await fx.store.getItem(it1.id))!.fields).toBe('{"estimate":3.0}');
  });

  it('a comment with replies becomes a blank tombstone; one without is removed', async () => {
    const it1 = await item('T-1');
    const parent = (await fx.store.addComment({ itemId: it1.id, author: 'a', body: 'p' })).row;
    await fx.store.addComment({ itemId: it1.id, author: 'b', body: 'r', parentCommentId: parent.id });
    const lone = (await fx.store.addComment({ itemId: it1.id, author: 'c', body: 'l' })).row;
    expect((await fx.store.deleteComment(parent.id)).row).toMatchObject({ body: '', deletedAt: fx.clock.now() });
    expect((await fx.store.deleteComment(lone.id)).row).toBeNull();
    const loaded = await fx.store.loadItemForEvaluation(it1.id);
    expect(loaded!.comments.map((c) => c.body)).toEqual(['r']);
  });

  it('a collection rename owes its live items at backfill priority', async () => {
    const it1 = await item('T-1');
    await fx.store.dropJobs({});
    const r = await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' });
    expect(r.owed).toBe(3);
    expect((await fx.store.listJobs({ itemId: it1.id })).every((j) => j.priority === PRIORITY_BACKFILL)).toBe(true);
  });
});

describe('normalisation order', () => {
  it('repairs lone surrogates before removing NUL, so no pair is made up', async () => {
    const { normaliseText, emptyReport } = await import('../../src/store/normalise.js');
    const report = emptyReport();
    expect(normaliseText('\uD800\u0000\uDC00', report)).toBe('\uFFFD\uFFFD');
    expect(report).toEqual({ loneSurrogates: 2, nulsRemoved: 1 });
  });
});
