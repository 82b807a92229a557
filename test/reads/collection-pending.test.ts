import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet, Registry } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { currency, readerOf, settle } from './support.js';

/**
 * Reads while a collection change is still being owed in chunks (DESIGN §3.3): an item whose
 * chunk is not written yet never reads current (currency compares the live state), and its
 * state_changed flag keeps surfacing as for an owed job, instead of blinking off until its chunk.
 */

const signals = defineQuestionSet({ name: 'signals', questions: { high: noul('High.') }, threshold: 0.7 });

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([signals]);
});
afterEach(async () => fx.cleanup());

describe('reads during a chunked collection change', () => {
  it('an item past the first chunk reads state_changed, not current, and still surfaces', async () => {
    fx.store.setRegistry(new Registry([]));
    let last = '';
    for (let i = 0; i < 1_001; i++) {
      last = (
        await fx.store.createItem({
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: `T-${i}`,
          title: `t${i}`,
          fields: { status: 'open' },
        })
      ).row.id;
    }
    fx.store.setRegistry(fx.registry);
    await fx.store.oweJobs([{ itemId: last, questionSet: 'signals' }], {});
    await settle(fx, new FakeProvider({ handler: () => ({ high: { probability: 0.9 } }) }));
    const reader = readerOf(fx);
    expect((await reader.decisions(last))[0]).toMatchObject({ current: true, surfacing: 'surfaced' });

    await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' });
    expect(await fx.store.getJob(last, 'signals')).toBeNull(); // its chunk is not owed yet
    expect(await currency(reader, last)).toEqual({ 'signals/high': 'state_changed(collection)' });
    expect((await reader.decisions(last))[0].surfacing).toBe('surfaced');
    expect(Object.keys((await reader.workspaceFlags(fx.ws.id, 'signals')).flags)).toEqual([last]);

    while ((await fx.store.advanceCollectionOwes()).collectionId !== null);
    expect((await fx.store.getJob(last, 'signals'))!.state).toBe('owed');
    expect((await reader.decisions(last))[0]).toMatchObject({ current: false, surfacing: 'surfaced' });
  }, 60_000);
});
