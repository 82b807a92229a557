import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fingerprintContextText, noul, questionFingerprint } from '../../src/decision/questions.js';
import { splitCommentKey } from '../../src/reads/reads.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { buildCommentState, COMMENT_STATE_VERSION } from '../../src/decision/state.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { currency, readerOf, settle } from './support.js';

/** Per-comment sets (DESIGN §7b) and how their answers read (DESIGN §8). */

const perComment = defineQuestionSet({
  name: 'tone',
  questions: { rude: noul('The comment is rude.'), vague: noul('The comment is vague.') },
  perComment: true,
  noTrail: true,
  maxPerCall: 12,
  threshold: 0.5,
});

let fx: Fixture;
let fake: FakeProvider;
beforeEach(async () => {
  fx = await makeFixture([perComment]);
  fake = new FakeProvider();
});
afterEach(async () => fx.cleanup());

async function newItem(ref = 'T-1') {
  return (
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref,
      title: `Item ${ref}`,
      content: 'body',
      fields: { status: 'open' },
    })
  ).row;
}

async function comment(itemId: string, body: string) {
  fx.clock.advance(1_000); // distinct created_at, so "newest" is well defined
  return (await fx.store.addComment({ itemId, author: 'amy', body })).row;
}

describe('keys', () => {
  it('split at the first @ (DESIGN §7.1: question keys never hold @, comment ids may)', () => {
    expect(splitCommentKey('conv:A@b@c1')).toEqual({ key: 'conv:A', commentId: 'b@c1' });
    expect(splitCommentKey('rude@gh@123')).toEqual({ key: 'rude', commentId: 'gh@123' });
    expect(splitCommentKey('rude@c1')).toEqual({ key: 'rude', commentId: 'c1' });
    expect(splitCommentKey('rude')).toBeNull();
    expect(splitCommentKey('rude@')).toBeNull();
    expect(splitCommentKey('@c1')).toBeNull();
  });

  it('a comment whose id holds @ is asked and its answers read current under their own key', async () => {
    const it1 = await newItem();
    fx.clock.advance(1_000);
    const c = (await fx.store.addComment({ id: 'gh@comment@42', itemId: it1.id, author: 'amy', body: 'hello' })).row;
    expect(c.id).toBe('gh@comment@42');
    await settle(fx, fake);
    const keys = (await fx.store.listDecisions(it1.id)).map((r) => r.questionKey);
    expect(keys).toEqual(['rude@gh@comment@42', 'vague@gh@comment@42']);
    expect(await currency(readerOf(fx), it1.id)).toEqual({
      'tone/rude@gh@comment@42': 'current',
      'tone/vague@gh@comment@42': 'current',
    });
    await fx.store.editComment(c.id, 'hello, edited');
    expect((await currency(readerOf(fx), it1.id))['tone/rude@gh@comment@42']).toBe('state_changed(comment)');
  });

  it('a malformed stored key is never current, even at the current hashes', async () => {
    const it1 = await newItem();
    const c = await comment(it1.id, 'hello');
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual({
      [`tone/rude@${c.id}`]: 'current',
      [`tone/vague@${c.id}`]: 'current',
    }); // control
    const good = (await fx.store.listDecisions(it1.id)).find((r) => r.questionKey === `rude@${c.id}`)!;
    const { id: _id, evaluatedAt: _at, ...row } = good;
    await fx.store.insertDecisions([
      { ...row, questionKey: 'rude' },
      { ...row, questionKey: 'rude@' },
    ]);
    const cur = await currency(readerOf(fx), it1.id);
    expect(cur['tone/rude']).toBe('question_removed');
    expect(cur['tone/rude@']).toBe('question_removed');
    expect(cur[`tone/rude@${c.id}`]).toBe('current');
  });
});

describe('per-comment answers', () => {
  it('ask each of the newest 10 live comments, oldest first, one call per comment, skipping answered ones', async () => {
    const it1 = await newItem();
    const cs = [];
    for (let i = 0; i < 12; i++) cs.push(await comment(it1.id, `comment ${i}`));
    await settle(fx, fake);
    expect(fake.requests).toHaveLength(10);
    expect(fake.requests.map((r) => JSON.parse(r.state).comment.body)).toEqual(cs.slice(2).map((c) => c.body));
    expect(fake.requests[0].keys).toEqual(['rude', 'vague']);
    const keys = (await fx.store.listDecisions(it1.id)).map((r) => r.questionKey);
    expect(keys).toEqual(cs.slice(2).flatMap((c) => [`rude@${c.id}`, `vague@${c.id}`]));
    // a new comment costs one call: the other nine are answered at their hashes
    await comment(it1.id, 'one more');
    await settle(fx, fake);
    expect(fake.requests).toHaveLength(11);
  });

  it("answers are inserted per comment: a later call failing keeps the earlier comment's answers", async () => {
    const it1 = await newItem();
    const a = await comment(it1.id, 'first');
    await comment(it1.id, 'second');
    fx.clock.advance(3_600_001);
    let calls = 0;
    fake.handler = (req) => {
      if (++calls === 2) throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
      return Object.fromEntries(req.keys.map((k) => [k, { probability: 0.2 }]));
    };
    const [r] = await drainNow(runnerOptions(fx, fake));
    expect(r.outcome.kind).toBe('fail');
    expect((await fx.store.listDecisions(it1.id)).map((d) => d.questionKey)).toEqual([`rude@${a.id}`, `vague@${a.id}`]);
  });

  it('stays current after 11 newer comments; state_changed after its comment is edited; comment_gone after it is deleted', async () => {
    const it1 = await newItem();
    const first = await comment(it1.id, 'the first comment');
    await settle(fx, fake);
    const key = `tone/rude@${first.id}`;
    expect((await currency(readerOf(fx), it1.id))[key]).toBe('current'); // control

    for (let i = 0; i < 11; i++) await comment(it1.id, `newer ${i}`);
    const before = fake.requests.length;
    await settle(fx, fake);
    expect(fake.requests.length - before).toBe(10); // the newest 10 only: the first is out of the window
    expect((await currency(readerOf(fx), it1.id))[key]).toBe('current'); // still current: its own comment is unchanged

    await fx.store.editComment(first.id, 'the first comment, edited');
    expect((await currency(readerOf(fx), it1.id))[key]).toBe('state_changed(comment)');
    // the documented limit: an edit to a comment older than the newest 10 is not re-asked
    const n = fake.requests.length;
    await settle(fx, fake);
    expect(fake.requests.length).toBe(n);
    expect((await currency(readerOf(fx), it1.id))[key]).toBe('state_changed(comment)');

    await fx.store.deleteComment(first.id);
    expect((await currency(readerOf(fx), it1.id))[key]).toBe('comment_gone');
  });

  it('comment_gone: a deleted comment within the newest 10', async () => {
    const it1 = await newItem();
    const c = await comment(it1.id, 'soon gone');
    const kept = await comment(it1.id, 'stays');
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toMatchObject({
      [`tone/rude@${c.id}`]: 'current',
      [`tone/rude@${kept.id}`]: 'current',
    });
    await fx.store.deleteComment(c.id);
    expect(await currency(readerOf(fx), it1.id)).toMatchObject({
      [`tone/rude@${c.id}`]: 'comment_gone',
      [`tone/rude@${kept.id}`]: 'current',
    });
  });

  it('a title edit moves every comment state (the title is part of it)', async () => {
    const it1 = await newItem();
    const c = await comment(it1.id, 'hello');
    await settle(fx, fake);
    expect((await currency(readerOf(fx), it1.id))[`tone/rude@${c.id}`]).toBe('current');
    await fx.store.updateItem(it1.id, { title: 'Renamed' });
    expect((await currency(readerOf(fx), it1.id))[`tone/rude@${c.id}`]).toBe('state_changed(title)');
  });

  it('the stored row holds the comment state hash it answered', async () => {
    const it1 = await newItem();
    const c = await comment(it1.id, 'hello');
    await settle(fx, fake);
    const row = (await fx.store.listDecisions(it1.id)).find((r) => r.questionKey === `rude@${c.id}`)!;
    const state = buildCommentState({
      title: 'Item T-1',
      collectionSlug: 'task',
      comment: { id: c.id, author: 'amy', body: 'hello', createdAt: c.createdAt },
    });
    expect(row).toMatchObject({
      stateHash: state.hash,
      stateVersion: COMMENT_STATE_VERSION,
      questionHash: questionFingerprint(perComment.questions!.rude, fake),
      fingerprintContext: fingerprintContextText(fake),
    });
  });
});
