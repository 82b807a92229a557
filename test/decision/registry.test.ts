import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet, questionsOf, Registry, type ResolveContext } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { makeFixture, TASK_SCHEMA, type Fixture } from '../harness/store-fixture.js';
import { settle } from '../reads/support.js';

/** Resolved sets (DESIGN §6): questions per workspace at evaluation time, validated, never combined with fixed ones. */

describe('defining a resolved set', () => {
  it('takes exactly one of questions and resolve', () => {
    const resolve = async () => ({ a: noul('A.') });
    expect(() => defineQuestionSet({ name: 'both', questions: { a: noul('A.') }, resolve })).toThrow(
      /exactly one of `questions` and `resolve`/,
    );
    expect(() => defineQuestionSet({ name: 'neither' })).toThrow(/exactly one/);
    expect(defineQuestionSet({ name: 'resolved', resolve }).questions).toBeUndefined(); // control
  });

  it('refuses unsurfaced keys a fixed set does not ask', () => {
    expect(() => defineQuestionSet({ name: 's', questions: { a: noul('A.') }, unsurfaced: ['b'] })).toThrow(
      /unsurfaced names keys the set does not ask: b/,
    );
    expect(defineQuestionSet({ name: 's', questions: { a: noul('A.') }, unsurfaced: ['a'] }).unsurfaced).toEqual(['a']);
  });

  it('questionsOf validates what resolve returns by the registry rules', async () => {
    const ctx = { workspaceId: 'w' } as ResolveContext;
    const bad = (q: Record<string, unknown>) => defineQuestionSet({ name: 'r', resolve: async () => q as never });
    await expect(questionsOf(bad({ a: { kind: 'noul', instructions: '  ' } }), ctx)).rejects.toThrow(
      /question "a" is invalid/,
    );
    await expect(questionsOf(bad({ 'a@b': noul('A.') }), ctx)).rejects.toThrow(/must not contain "@"/);
    await expect(questionsOf(bad({ '': noul('A.') }), ctx)).rejects.toThrow(/empty key/);
    await expect(questionsOf(bad({ a: noul('A.') }), ctx)).resolves.toEqual({ a: noul('A.') });
  });
});

describe('evaluating a resolved set', () => {
  let fx: Fixture;
  let fake: FakeProvider;
  let seen: string[];
  let answer: (ctx: ResolveContext) => Promise<Record<string, unknown>>;
  const perWorkspace = defineQuestionSet({
    name: 'per_ws',
    resolve: async (ctx) => {
      seen.push(ctx.workspaceId);
      return (await answer(ctx)) as never;
    },
  });
  beforeEach(async () => {
    fx = await makeFixture([perWorkspace]);
    fake = new FakeProvider();
    seen = [];
    answer = async (ctx) => ({
      [`q_${(await ctx.store.listCollections(ctx.workspaceId)).length}`]: noul('Asked here.'),
    });
  });
  afterEach(async () => fx.cleanup());

  it('supplies the questions per workspace at evaluation time, through a read-only store', async () => {
    const ws2 = await fx.store.createWorkspace({ slug: 'other' });
    const c2 = await fx.store.createCollection({ workspaceId: ws2.id, slug: 'task', schema: TASK_SCHEMA });
    await fx.store.createCollection({ workspaceId: ws2.id, slug: 'bug', schema: TASK_SCHEMA });
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: 'A-1',
      title: 'a',
      fields: { status: 'open' },
    });
    await fx.store.createItem({
      workspaceId: ws2.id,
      collectionId: c2.id,
      ref: 'B-1',
      title: 'b',
      fields: { status: 'open' },
    });
    await settle(fx, fake);
    expect(fake.requests.map((r) => r.keys).sort()).toEqual([['q_1'], ['q_2']]);
    expect(new Set(seen)).toEqual(new Set([fx.ws.id, ws2.id]));
  });

  it('an invalid resolved question fails the job as transient: no call, nothing dropped', async () => {
    const it1 = (
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'A-1',
        title: 'a',
        fields: { status: 'open' },
      })
    ).row;
    answer = async () => ({ a: { kind: 'noul', instructions: '' } });
    const [r] = await settle(fx, fake);
    expect(r.outcome).toEqual({ kind: 'fail', reason: 'resolve failed: invalid_question' });
    expect(fake.requests).toHaveLength(0);
    expect((await fx.store.getJob(it1.id, 'per_ws'))!).toMatchObject({ state: 'owed', attempts: 1 });
    // control: once resolve is fixed the same job is asked
    answer = async () => ({ a: noul('Fixed.') });
    await settle(fx, fake);
    expect(fake.requests).toHaveLength(1);
  });

  it('a resolve that throws fails the job as transient', async () => {
    const it1 = (
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'A-1',
        title: 'a',
        fields: { status: 'open' },
      })
    ).row;
    answer = async () => {
      throw Object.assign(new Error('locked'), { code: 'SQLITE_BUSY' });
    };
    const [r] = await settle(fx, fake);
    expect(r.outcome).toEqual({ kind: 'fail', reason: 'resolve failed: SQLITE_BUSY' });
    expect((await fx.store.getJob(it1.id, 'per_ws'))!.state).toBe('owed');
  });

  it('a set that resolves to no questions completes without a call', async () => {
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: 'A-1',
      title: 'a',
      fields: { status: 'open' },
    });
    answer = async () => ({});
    const [r] = await settle(fx, fake);
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'nothing_to_ask' });
    expect(fake.requests).toHaveLength(0);
  });

  it('the registry keeps resolved and fixed sets side by side', () => {
    const fixed = defineQuestionSet({ name: 'fixed', questions: { a: noul('A.') } });
    expect(new Registry([perWorkspace, fixed]).all().map((s) => s.name)).toEqual(['fixed', 'per_ws']);
  });
});
