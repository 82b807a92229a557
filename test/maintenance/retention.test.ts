import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { DecisionReader } from '../../src/reads/reads.js';
import { pruneDecisions } from '../../src/maintenance/retention.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { currency, readerOf, settle } from '../reads/support.js';

/**
 * Retention (DESIGN §2): superseded rows are pruned in small batches; the latest row per key,
 * any current row, and rows within the history window are kept.
 */

const DAY = 86_400_000;
let fx: Fixture;
let fake: FakeProvider;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
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
      content: 'v1',
      fields: { status: 'open' },
    })
  ).row;
}

/** Answers the item at three states: v1, v2, v3 (3 keys each). */
async function threeGenerations(itemId: string) {
  await settle(fx, fake);
  await fx.store.updateItem(itemId, { content: 'v2' });
  await settle(fx, fake);
  await fx.store.updateItem(itemId, { content: 'v3' });
  await settle(fx, fake);
}

const ids = async (itemId: string) => (await fx.store.listDecisions(itemId)).map((r) => r.id);

describe('pruneDecisions', () => {
  it('keeps rows within the history window; past it, deletes superseded rows and keeps the latest per key', async () => {
    const it1 = await newItem();
    await threeGenerations(it1.id);
    const all = await ids(it1.id);
    expect(all).toHaveLength(9);
    // control: everything is inside a 30-day window
    expect(await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY })).toMatchObject({
      examined: 0,
      deleted: 0,
      done: true,
    });
    expect(await ids(it1.id)).toEqual(all);
    fx.clock.advance(31 * DAY);
    const r = await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY });
    expect(r).toMatchObject({ examined: 6, keptCurrent: 0, deleted: 6, done: true });
    expect(await ids(it1.id)).toEqual(all.slice(6)); // the v3 rows: the latest per key
    expect(Object.values(await currency(readerOf(fx), it1.id))).toEqual(['current', 'current', 'current']);
  });

  it('keeps a superseded row that is current: S1 → S2 → S1 keeps the S1 answers', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    const s1 = await ids(it1.id);
    await fx.store.updateItem(it1.id, { content: 'v2' });
    await settle(fx, fake);
    await fx.store.updateItem(it1.id, { content: 'v1' }); // back to S1: the older rows are current
    await settle(fx, fake);
    fx.clock.advance(31 * DAY);
    const r = await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY });
    expect(r).toMatchObject({ examined: 3, keptCurrent: 3, deleted: 0 });
    expect((await ids(it1.id)).slice(0, 3)).toEqual(s1);
    const calls = fake.requests.length;
    expect(Object.values(await currency(readerOf(fx), it1.id))).toEqual(['current', 'current', 'current']);
    // control: at S2 again the S1 rows are neither current nor latest, and go
    await fx.store.updateItem(it1.id, { content: 'v2' });
    expect(await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY })).toMatchObject({
      keptCurrent: 0,
      deleted: 3,
    });
    expect(fake.requests.length).toBe(calls);
  });

  it('keeps every row of a set it cannot judge: unknown is not absent', async () => {
    const { defineQuestionSet, Registry } = await import('../../src/decision/registry.js');
    const it1 = await newItem();
    await settle(fx, fake);
    await fx.store.updateItem(it1.id, { content: 'v2' });
    await settle(fx, fake);
    await fx.store.updateItem(it1.id, { content: 'v1' }); // S1 rows are current again
    await settle(fx, fake);
    fx.clock.advance(31 * DAY);
    // The same set, but its questions cannot be read now (a resolver that throws).
    const broken = defineQuestionSet({
      ...attentionSet,
      questions: undefined,
      resolve: async () => {
        throw new Error('db down');
      },
    });
    const blind = new DecisionReader(fx.store, new Registry([broken]), {
      name: fake.name,
      model: fake.model,
      promptVersion: fake.promptVersion,
      effort: fake.effort,
    });
    expect(await pruneDecisions(fx.store, blind, { historyMs: 30 * DAY })).toMatchObject({ deleted: 0 });
    expect(await ids(it1.id)).toHaveLength(6);
    // control: with the questions readable, the superseded S2 rows go and S1 stays
    expect(await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY })).toMatchObject({
      keptCurrent: 3,
      deleted: 0,
    });
  });

  it('works in small batches; dry run deletes nothing', async () => {
    for (const ref of ['T-1', 'T-2', 'T-3']) await newItem(ref);
    for (const ref of ['T-1', 'T-2', 'T-3']) await threeGenerations((await fx.store.getItemByRef(fx.ws.id, ref))!.id);
    fx.clock.advance(31 * DAY);
    const before = await fx.store.countDecisions();
    const dry = await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY, batchSize: 4, dryRun: true });
    expect(dry).toMatchObject({ examined: 18, deleted: 18, batches: 5 });
    expect(await fx.store.countDecisions()).toBe(before);
    const slice = await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY, batchSize: 4, maxBatches: 2 });
    expect(slice).toMatchObject({ deleted: 8, batches: 2, done: false });
    const rest = await pruneDecisions(fx.store, readerOf(fx), { historyMs: 30 * DAY, batchSize: 4 });
    expect(rest).toMatchObject({ deleted: 10, done: true });
    expect(await fx.store.countDecisions()).toBe(before - 18);
  });

  it('the store never deletes the latest row of a key, whatever it is asked', async () => {
    const it1 = await newItem();
    await threeGenerations(it1.id);
    const all = await ids(it1.id);
    expect(await fx.store.deleteDecisions(all)).toBe(6);
    expect(await ids(it1.id)).toEqual(all.slice(6));
  });

  it('refuses a decisions-off reader, which would call nothing current', async () => {
    await expect(
      pruneDecisions(fx.store, new DecisionReader(fx.store, fx.registry, null), { historyMs: 0 }),
    ).rejects.toThrow(/needs a reader/);
  });
});
