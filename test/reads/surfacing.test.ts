import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { choice, noul } from '../../src/decision/questions.js';
import { surfacingOf } from '../../src/reads/reads.js';
import { defineQuestionSet, Registry } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { readerOf, settle } from './support.js';

/** Surfacing (DESIGN §8): one shared rule; thresholds per set; unsurfaced keys; `failing` on flags. */

const signals = defineQuestionSet({
  name: 'signals',
  questions: {
    high: noul('High.'),
    low: noul('Low.'),
    hidden: noul('Asked, stored, not yet shown.'),
    kind: choice('Which kind.', { bug: 'A defect.', feature: 'New behaviour.' }),
  },
  unsurfaced: ['hidden'],
  threshold: 0.7,
});
const lenient = defineQuestionSet({ name: 'lenient', questions: { low: noul('Low.') }, threshold: 0 });
const P: Record<string, number> = { high: 0.9, low: 0.3, hidden: 0.99 };

let fx: Fixture;
let fake: FakeProvider;
beforeEach(async () => {
  fx = await makeFixture([signals, lenient]);
  fake = new FakeProvider({
    handler: (req) =>
      Object.fromEntries(
        req.keys.map((k) => [k, k === 'kind' ? { probabilities: { bug: 0.8, feature: 0.2 } } : { probability: P[k] }]),
      ),
  });
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

const surfacing = async (itemId: string, r = readerOf(fx)) =>
  Object.fromEntries((await r.decisions(itemId)).map((d) => [`${d.questionSet}/${d.questionKey}`, d.surfacing]));

describe('the shared surfacing rule', () => {
  it('only nouls surface; unsurfaced keys never do; thresholds are per set', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await surfacing(it1.id)).toEqual({
      'lenient/low': 'surfaced', // threshold 0 surfaces every noul
      'signals/hidden': 'not_surfaced', // listed unsurfaced, though p = 0.99
      'signals/high': 'surfaced',
      'signals/kind': 'not_surfaced', // a choice is stored and readable, never surfaced
      'signals/low': 'below_threshold', // 0.3 < 0.7
    });
  });

  it('itemReadDecisions drops only unsurfaced keys; surfacedDecisions counts below-threshold and stale rows', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    const r = readerOf(fx);
    expect((await r.itemReadDecisions(it1.id)).map((d) => `${d.questionSet}/${d.questionKey}`)).toEqual([
      'lenient/low',
      'signals/high',
      'signals/kind',
      'signals/low',
    ]);
    const s = await r.surfacedDecisions(it1.id);
    expect(s.surfaced.map((d) => `${d.questionSet}/${d.questionKey}`)).toEqual(['lenient/low', 'signals/high']);
    expect(s).toMatchObject({ belowThreshold: 1, stale: 0 });
    // a reworded question: its row reads stale, and is counted so
    const reworded = new Registry([
      defineQuestionSet({ ...signals, questions: { ...signals.questions, high: noul('High, reworded.') } }),
      lenient,
    ]);
    expect(await readerOf(fx, reworded).surfacedDecisions(it1.id)).toMatchObject({ belowThreshold: 1, stale: 1 });
  });

  it('a state_changed row whose job is owed still surfaces, marked not current; parked, it does not', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect((await surfacing(it1.id))['signals/high']).toBe('surfaced'); // control
    await fx.store.updateItem(it1.id, { content: 'edited' }); // owes the job, within the debounce
    const d = (await readerOf(fx).decisions(it1.id)).find(
      (x) => x.questionKey === 'high' && x.questionSet === 'signals',
    )!;
    expect(d).toMatchObject({ current: false, staleReason: 'state_changed', surfacing: 'surfaced' });
    // the job parks (refused five times): the row no longer surfaces
    const claim = async () => {
      fx.clock.advance(7_200_001);
      return (await fx.store.claimNextJob('w', 60_000, 8))!;
    };
    for (let i = 0; i < 5; i++) {
      let c = await claim();
      while (c.questionSet !== 'signals') {
        await fx.store.completeJob(c);
        c = await claim();
      }
      await fx.store.refuseJob(c, { backoffMs: 1, error: 'answer_defect', refusalLimit: 5 });
    }
    expect((await fx.store.getJob(it1.id, 'signals'))!.state).toBe('parked');
    expect((await surfacing(it1.id))['signals/high']).toBe('stale');
  });

  it('every other stale reason does not surface', () => {
    const answer = { type: 'noul' as const, noul: 0.99 };
    for (const reason of [
      'question_changed',
      'model_changed',
      'question_removed',
      'not_applicable',
      'set_unknown',
      'not_compared',
      'comment_gone',
    ] as const) {
      expect(
        surfacingOf({
          answer,
          current: false,
          staleReason: reason,
          jobOwed: true,
          threshold: 0.5,
          unsurfacedKey: false,
        }),
      ).toBe('stale');
    }
    expect(
      surfacingOf({
        answer,
        current: false,
        staleReason: 'state_changed',
        jobOwed: true,
        threshold: 0.5,
        unsurfacedKey: false,
      }),
    ).toBe('surfaced');
    expect(
      surfacingOf({
        answer,
        current: false,
        staleReason: 'state_changed',
        jobOwed: false,
        threshold: 0.5,
        unsurfacedKey: false,
      }),
    ).toBe('stale');
    expect(
      surfacingOf({ answer, current: true, staleReason: null, jobOwed: false, threshold: 0.99, unsurfacedKey: false }),
    ).toBe('surfaced'); // at the threshold
  });

  it('an expired answer surfaces until its re-ask, owed yet or not (DESIGN §5.2); a person’s value surfaces nothing once its key is gone', () => {
    const answer = { type: 'noul' as const, noul: 0.99 };
    expect(
      surfacingOf({
        answer,
        current: false,
        staleReason: 'expired',
        jobOwed: false,
        threshold: 0.5,
        unsurfacedKey: false,
      }),
    ).toBe('surfaced');
    const human = { type: 'noul' as const, noul: 1 };
    expect(
      surfacingOf({
        answer: human,
        current: false,
        staleReason: 'question_changed',
        jobOwed: false,
        threshold: 0.5,
        unsurfacedKey: false,
        human: true,
      }),
    ).toBe('surfaced');
    for (const reason of ['not_applicable', 'comment_gone', 'question_removed', 'set_unknown'] as const) {
      expect(
        surfacingOf({
          answer: human,
          current: false,
          staleReason: reason,
          jobOwed: true,
          threshold: 0.5,
          unsurfacedKey: false,
          human: true,
        }),
      ).toBe('stale');
    }
  });
});

describe('workspaceFlags', () => {
  it('item → key → p of the surfaced nouls, with the set threshold or an override', async () => {
    const a = await newItem('T-1');
    await newItem('T-2');
    await settle(fx, fake);
    const r = readerOf(fx);
    const flags = await r.workspaceFlags(fx.ws.id, 'signals');
    expect(Object.keys(flags.flags)).toHaveLength(2);
    expect(flags.flags[a.id]).toEqual({ ref: 'T-1', keys: { high: 0.9 } });
    expect((await r.workspaceFlags(fx.ws.id, 'signals', 0.2)).flags[a.id].keys).toEqual({ high: 0.9, low: 0.3 });
    expect((await r.workspaceFlags(fx.ws.id, 'signals', 0.95)).flags).toEqual({});
  });

  it('leaves out stale rows that do not surface; keeps state_changed rows with their job owed', async () => {
    const a = await newItem('T-1');
    const b = await newItem('T-2');
    await settle(fx, fake);
    await fx.store.updateItem(a.id, { content: 'edited' });
    const flags = await readerOf(fx).workspaceFlags(fx.ws.id, 'signals');
    expect(Object.keys(flags.flags).sort()).toEqual([a.id, b.id].sort());
    const reworded = new Registry([
      defineQuestionSet({ ...signals, questions: { ...signals.questions, high: noul('High, reworded.') } }),
      lenient,
    ]);
    expect((await readerOf(fx, reworded).workspaceFlags(fx.ws.id, 'signals')).flags).toEqual({});
  });

  it('failing: a parked job, or an owed one that failed within the hour', async () => {
    await newItem('T-1');
    const r = readerOf(fx);
    expect((await r.workspaceFlags(fx.ws.id, 'signals')).failing).toBe(false);
    fx.clock.advance(3_600_001);
    let c = (await fx.store.claimNextJob('w', 60_000, 8))!;
    while (c.questionSet !== 'signals') {
      await fx.store.completeJob(c);
      c = (await fx.store.claimNextJob('w', 60_000, 8))!;
    }
    await fx.store.failJob(c, { backoffMs: 30_000, error: 'unavailable 503' });
    expect((await r.workspaceFlags(fx.ws.id, 'signals')).failing).toBe(true);
    expect((await r.workspaceFlags(fx.ws.id, 'lenient')).failing).toBe(false); // per set
    fx.clock.advance(3_600_001); // the failure is over an hour old
    expect((await r.workspaceFlags(fx.ws.id, 'signals')).failing).toBe(false);
    c = (await fx.store.claimNextJob('w', 60_000, 8))!;
    await fx.store.parkJob(c, 'abandon limit');
    expect((await r.workspaceFlags(fx.ws.id, c.questionSet)).failing).toBe(true);
  });
});
