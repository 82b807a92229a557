import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { choice, noul, score } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { recordVerdict, type RecordVerdictInput } from '../../src/compose/record-verdict.js';
import { pruneDecisions } from '../../src/maintenance/retention.js';
import type { DecisionView } from '../../src/reads/reads.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { readerOf, settle } from './support.js';

/**
 * People in the loop (DESIGN §8.1, §8.2): a person's value overrides the model across re-asks
 * and edits, `flags` honours it, and surfacing holds inside the hysteresis band and counts flips.
 * Real SQLite files, the real runner, a scripted fake provider.
 */

const triage = defineQuestionSet({
  name: 'triage',
  questions: {
    blocked: noul('The work on this item is blocked by something outside it.'),
    kind: choice('What kind of work this is.', { bug: 'Something broken.', feature: 'Something new.' }),
    size: score('How much work remains.', ['small', 'medium', 'large']),
  },
  threshold: 0.7,
  eligible: ['notSystem', 'tracksWork', 'notTerminal'],
});

/** The probability the fake gives `blocked`, by the marker in the item's body (`P=0.66`). */
function scripted(): FakeProvider {
  return new FakeProvider({
    handler: (req) => {
      const p = Number(/P=([0-9.]+)/.exec(req.state)?.[1] ?? '0.5');
      const out: Record<string, unknown> = {};
      for (const k of req.keys) {
        if (k === 'blocked') out[k] = { probability: p };
        else if (k === 'kind') out[k] = { probabilities: { bug: 0.8, feature: 0.2 } };
        else out[k] = { probabilities: { '0': 0.1, '1': 0.7, '2': 0.2 } };
      }
      return out;
    },
  });
}

let fx: Fixture;
let fake: FakeProvider;
beforeEach(async () => {
  fx = await makeFixture([triage]);
  fake = scripted();
});
afterEach(async () => fx.cleanup());

async function newItem(ref: string, p: number) {
  return (
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref,
      title: `Item ${ref}`,
      content: `P=${p}`,
      fields: { status: 'open' },
    })
  ).row;
}
const setP = (id: string, p: number, extra = '') => fx.store.updateItem(id, { content: `P=${p}${extra}` });
const record = (o: Partial<RecordVerdictInput> & Pick<RecordVerdictInput, 'ref' | 'verdict'>) =>
  recordVerdict(fx.store, readerOf(fx), { workspace: fx.ws.slug, key: 'blocked', author: 'ana', ...o });
async function view(itemId: string, key = 'blocked'): Promise<DecisionView> {
  return (await readerOf(fx).decisions(itemId)).find((d) => d.questionKey === key)!;
}
const flagged = async () =>
  Object.values((await readerOf(fx).workspaceFlags(fx.ws.id, 'triage')).flags).map(
    (f) => `${f.ref} ${f.keys.blocked}${f.human ? ' human' : ''}`,
  );

describe('a person’s value overrides the model (DESIGN §8.1)', () => {
  it('survives a re-ask at a new state (the disagreeing answer is proposed), reads override_stale after an edit, and flags honour it', async () => {
    const a = await newItem('T-1', 0.9);
    await settle(fx, fake);
    expect(await flagged()).toEqual(['T-1 0.9']);

    const rec = await record({ ref: 'T-1', verdict: 'value', value: 'false', note: 'the vendor shipped the fix' });
    expect(rec).toMatchObject({ inForce: true, value: { type: 'noul', noul: 0 } });
    let v = await view(a.id);
    expect(v).toMatchObject({
      source: 'human',
      answer: { type: 'noul', noul: 0 },
      modelAnswer: { type: 'noul', noul: 0.9 },
      current: true,
      proposed: null,
      surfacing: 'below_threshold',
    });
    expect(v.verdict).toMatchObject({
      verdict: 'value',
      author: 'ana',
      note: 'the vendor shipped the fix',
      inForce: true,
      staleReason: null,
      changedParts: [],
    });
    expect(await flagged()).toEqual([]); // "not blocked", whatever the model says

    // The item changes; the model is asked again and still says blocked (0.95).
    await setP(a.id, 0.95);
    await settle(fx, fake);
    v = await view(a.id);
    expect(v).toMatchObject({
      source: 'human',
      answer: { type: 'noul', noul: 0 },
      current: true,
      proposed: { type: 'noul', noul: 0.95 },
    });
    expect(v.verdict).toMatchObject({ staleReason: 'override_stale', changedParts: ['body'] });
    expect(await flagged()).toEqual([]); // still honoured: a person must look again
    expect((await fx.store.listSurfacingChanges({ itemId: a.id })).map((c) => `${c.surfaced} ${c.cause}`)).toEqual([
      'true model',
      'false human',
    ]);

    // A person looks again and agrees with the model now: its answer is theirs, in force.
    await record({ ref: 'T-1', verdict: 'agree' });
    v = await view(a.id);
    expect(v).toMatchObject({ source: 'human', answer: { type: 'noul', noul: 1 }, proposed: null });
    expect(v.verdict).toMatchObject({ verdict: 'agree', staleReason: null });
    expect(await flagged()).toEqual(['T-1 1 human']);

    // Withdrawn: the model decides again.
    await record({ ref: 'T-1', verdict: 'withdrawn' });
    v = await view(a.id);
    expect(v).toMatchObject({ source: 'model', answer: { type: 'noul', noul: 0.95 }, surfacing: 'surfaced' });
    expect(await flagged()).toEqual(['T-1 0.95']);
  });

  it('a model answer under an override that agrees with it is not proposed; the S1 answer the person overrode is not either', async () => {
    const a = await newItem('T-1', 0.2);
    await settle(fx, fake);
    await record({ ref: 'T-1', verdict: 'value', value: 'true' });
    expect(await view(a.id)).toMatchObject({ source: 'human', proposed: null, surfacing: 'surfaced' }); // the answer the person saw, not a later one
    await setP(a.id, 0.8);
    await settle(fx, fake);
    expect(await view(a.id)).toMatchObject({ source: 'human', proposed: null, modelAnswer: { noul: 0.8 } }); // agrees: nothing proposed
    expect(await flagged()).toEqual(['T-1 1 human']);
  });

  it('agree, disagree and values fit the question kind; label-only disagree on a choice does not override', async () => {
    const a = await newItem('T-1', 0.4);
    await settle(fx, fake);
    expect((await record({ ref: 'T-1', verdict: 'disagree' })).value).toEqual({ type: 'noul', noul: 1 }); // the model said below: the person says blocked
    expect((await record({ ref: 'T-1', key: 'kind', verdict: 'agree' })).value).toMatchObject({
      type: 'choice',
      choice: 'bug',
    });
    const dis = await record({ ref: 'T-1', key: 'kind', verdict: 'disagree' });
    expect(dis).toMatchObject({ inForce: false, value: null });
    expect(await view(a.id, 'kind')).toMatchObject({
      source: 'model',
      verdict: { verdict: 'disagree', inForce: false },
    });
    expect((await record({ ref: 'T-1', key: 'size', verdict: 'value', value: 'large' })).value).toMatchObject({
      type: 'score',
      score: 2,
      legend: { '2': 'large' },
    });
    expect((await record({ ref: 'T-1', key: 'size', verdict: 'value', value: '0' })).value).toMatchObject({
      type: 'score',
      score: 0,
    });
    expect(await view(a.id, 'size')).toMatchObject({ source: 'human', answer: { type: 'score', score: 0 } });
    expect((await record({ ref: 'T-1', verdict: 'value', value: 0.35 })).value).toEqual({ type: 'noul', noul: 0.35 });

    const refused = async (o: Parameters<typeof record>[0], msg: RegExp) => expect(record(o)).rejects.toThrow(msg);
    await refused({ ref: 'T-1', verdict: 'value', value: '1.5' }, /noul takes true, false or a probability/);
    await refused({ ref: 'T-1', verdict: 'value', value: '0x1' }, /noul takes true, false or a probability/); // Number() reads hex
    await refused({ ref: 'T-1', verdict: 'agree', note: 'a\u0000b' }, /must not contain a NUL character/);
    await refused({ ref: 'T-1', key: 'kind', verdict: 'value', value: 'epic' }, /one of its options \(bug, feature\)/);
    await refused({ ref: 'T-1', key: 'size', verdict: 'value', value: 3 }, /levels by name or index 0\.\.2/);
    await refused({ ref: 'T-1', key: 'nope', verdict: 'agree' }, /no question set of T-1 asks "nope"/);
    await refused({ ref: 'T-9', verdict: 'agree' }, /item T-9 not found/);
    await refused({ ref: 'T-1', verdict: 'value' }, /needs a value/);
    expect((await record({ ref: 'T-1', key: 'size', verdict: 'withdrawn' })).inForce).toBe(false);
    await refused({ ref: 'T-1', key: 'size', verdict: 'withdrawn' }, /has no verdict to withdraw/); // the latest is already withdrawn
    await refused({ ref: 'T-1', verdict: 'agree', value: 'true' }, /takes no value/);
    await refused({ ref: 'T-1', verdict: 'agree', author: '  ' }, /needs an author/);
    await refused({ ref: 'T-1', verdict: 'agree', note: 'x'.repeat(2_001) }, /at most 2000 code points/);
    // agree needs the model's answer to be current: after an edit, before the re-ask, it is not.
    await setP(a.id, 0.5);
    await refused({ ref: 'T-1', verdict: 'agree' }, /not current \(state_changed\)/);
    // A set that does not apply (the item is done) has nothing to override.
    await fx.store.updateItem(a.id, { fields: { status: 'closed' } });
    await refused({ ref: 'T-1', verdict: 'value', value: 'true' }, /does not apply to T-1/);
  });

  it('a person’s value surfaces nothing once the key is gone (item deleted or closed), and can always be withdrawn', async () => {
    const a = await newItem('T-1', 0.2);
    await settle(fx, fake);
    await record({ ref: 'T-1', verdict: 'value', value: 'true' });
    expect(await flagged()).toEqual(['T-1 1 human']);
    await fx.store.softDeleteItem(a.id);
    expect(await flagged()).toEqual([]);
    expect(await view(a.id)).toMatchObject({ source: 'human', staleReason: 'not_applicable', surfacing: 'stale' });
    // Withdrawn while deleted: taken (nothing else could end it), and moves no surfacing.
    expect(await record({ ref: 'T-1', verdict: 'withdrawn' })).toMatchObject({
      inForce: false,
      row: { verdict: 'withdrawn' },
    });
    await fx.store.restoreItem(a.id);
    expect(await view(a.id)).toMatchObject({ source: 'model', answer: { noul: 0.2 }, surfacing: 'below_threshold' });
    expect(await flagged()).toEqual([]);
    await record({ ref: 'T-1', verdict: 'value', value: 'yes' });
    await fx.store.updateItem(a.id, { fields: { status: 'closed' } });
    expect(await flagged()).toEqual([]);
  });

  it('who may withdraw: a person’s door any verdict in force, an agent’s door (withdraws: own) only its author’s, at every door alike', async () => {
    await newItem('T-1', 0.9);
    await settle(fx, fake);
    await record({ ref: 'T-1', verdict: 'value', value: 'false', author: 'ana' });
    await expect(
      record({ ref: 'T-1', verdict: 'withdrawn', author: 'agent (MCP; token:t1)', withdraws: 'own' }),
    ).rejects.toMatchObject({
      code: 'invalid_input',
      message: expect.stringMatching(/given by someone else \(ana\); an agent withdraws only its own/),
    });
    await expect(record({ ref: 'T-1', verdict: 'withdrawn', withdraws: 'some' as 'own' })).rejects.toMatchObject({
      param: 'withdraws',
    });
    expect((await record({ ref: 'T-1', verdict: 'withdrawn', author: 'ana', withdraws: 'own' })).row.verdict).toBe(
      'withdrawn',
    );
    await record({ ref: 'T-1', verdict: 'value', value: 'false', author: 'agent (MCP; token:t1)' });
    // A person (the default, `any`) ends an agent's verdict.
    expect((await record({ ref: 'T-1', verdict: 'withdrawn', author: 'bo' })).row.verdict).toBe('withdrawn');
  });

  it('a score’s agree takes the picked level (the argmax show prints), not the rounded mean', async () => {
    fake.handler = (req) =>
      Object.fromEntries(
        req.keys.map((k) => [
          k,
          k === 'size'
            ? { probabilities: { '0': 0.6, '1': 0, '2': 0.4 } }
            : k === 'kind'
              ? { probabilities: { bug: 1, feature: 0 } }
              : { probability: 0.5 },
        ]),
      );
    const a = await newItem('T-1', 0.5);
    await settle(fx, fake);
    expect((await view(a.id, 'size')).modelAnswer).toMatchObject({ score: 0.8 }); // the mean rounds to 1 (medium)
    expect((await record({ ref: 'T-1', key: 'size', verdict: 'agree' })).value).toMatchObject({
      score: 0,
      legend: { '0': 'small' },
    });
  });

  it('a verdict on a key never answered is refused; verdicts are never pruned by retention', async () => {
    const a = await newItem('T-1', 0.9);
    await expect(record({ ref: 'T-1', verdict: 'value', value: 'false' })).rejects.toThrow(/has no answer yet/);
    await settle(fx, fake);
    await record({ ref: 'T-1', verdict: 'value', value: 'false' });
    for (const p of [0.91, 0.92, 0.93]) {
      await setP(a.id, p);
      await settle(fx, fake);
    }
    fx.clock.advance(400 * 86_400_000);
    const report = await pruneDecisions(fx.store, readerOf(fx), { historyMs: 0 });
    expect(report.deleted).toBeGreaterThan(0); // superseded answers went
    expect((await fx.store.listVerdicts({ workspaceId: fx.ws.id })).map((r) => r.verdict)).toEqual(['value']); // the verdict stays
    expect(await view(a.id)).toMatchObject({ source: 'human', answer: { noul: 0 } });
  });
});

describe('surfacing without flip-flops (DESIGN §8.2)', () => {
  it('an answer oscillating around the threshold across states stays surfaced inside the band; flips outside it are counted and listed', async () => {
    const a = await newItem('T-1', 0.72);
    await settle(fx, fake);
    const side = async () => (await view(a.id)).surfacing;
    expect(await side()).toBe('surfaced');
    // Inside the band (0.65 ≤ p < 0.7) after surfacing: it holds, whatever the wobble.
    for (const [i, p] of [0.68, 0.71, 0.66, 0.69, 0.65, 0.7].entries()) {
      await setP(a.id, p, ` edit ${i}`);
      await settle(fx, fake);
      expect(await side()).toBe('surfaced');
    }
    expect(await flagged()).toEqual(['T-1 0.7']);
    expect((await view(a.id)).flips).toBe(0); // the first answer set its side: not a flip
    // Outside the band it flips each time: 0.6 clears, 0.68 does not bring it back (below 0.7), 0.75 does.
    for (const [i, p] of [0.6, 0.68, 0.75, 0.55, 0.8].entries()) {
      await setP(a.id, p, ` swing ${i}`);
      await settle(fx, fake);
    }
    expect(await side()).toBe('surfaced');
    expect(
      (await fx.store.listSurfacingChanges({ itemId: a.id })).map(
        (c) => `${c.surfaced ? 'up' : 'down'} ${c.probability}${c.flip ? '' : ' (first)'}`,
      ),
    ).toEqual(['up 0.72 (first)', 'down 0.6', 'up 0.75', 'down 0.55', 'up 0.8']);
    expect((await view(a.id)).flips).toBe(4);

    // A steady item does not flap.
    const b = await newItem('T-2', 0.9);
    await settle(fx, fake);
    const flapping = await readerOf(fx).flapping(fx.ws.id, 'triage');
    expect(flapping).toHaveLength(1);
    expect(flapping[0]).toMatchObject({ itemId: a.id, ref: 'T-1', questionKey: 'blocked', flips: 4, surfaced: true });
    expect(await readerOf(fx).flapping(fx.ws.id, 'triage', { minFlips: 5 })).toEqual([]);
    // Flips older than the 30-day window no longer count.
    fx.clock.advance(31 * 86_400_000);
    expect(await readerOf(fx).flapping(fx.ws.id, 'triage')).toEqual([]);
    expect((await view(b.id)).flips).toBe(0);
  });

  it('flips count moves between answers, the same both ways: up-down-up and down-up-down are 2 each', async () => {
    const a = await newItem('T-1', 0.9);
    const b = await newItem('T-2', 0.1);
    await settle(fx, fake);
    for (const [i, [pa, pb]] of [
      [0.1, 0.9],
      [0.9, 0.1],
    ].entries()) {
      await setP(a.id, pa, ` e${i}`);
      await setP(b.id, pb, ` e${i}`);
      await settle(fx, fake);
    }
    expect([(await view(a.id)).flips, (await view(b.id)).flips]).toEqual([2, 2]);
  });

  it('a held key the person agrees with stays flagged (agree resolves to the side the read showed, band included)', async () => {
    const a = await newItem('T-1', 0.9);
    await settle(fx, fake);
    await setP(a.id, 0.68);
    await settle(fx, fake);
    expect(await view(a.id)).toMatchObject({ surfacing: 'surfaced', source: 'model' }); // held by the band
    expect((await record({ ref: 'T-1', verdict: 'agree' })).value).toEqual({ type: 'noul', noul: 1 });
    expect(await flagged()).toEqual(['T-1 1 human']);
    expect((await record({ ref: 'T-1', verdict: 'withdrawn' })).inForce).toBe(false);
    expect((await record({ ref: 'T-1', verdict: 'disagree' })).value).toEqual({ type: 'noul', noul: 0 });
    expect(await flagged()).toEqual([]);
  });

  it('a read at another threshold than the set’s uses the plain cut (the memory is kept at the set’s own)', async () => {
    const a = await newItem('T-1', 0.72);
    await settle(fx, fake);
    await setP(a.id, 0.67);
    await settle(fx, fake);
    expect((await readerOf(fx).workspaceFlags(fx.ws.id, 'triage')).flags[a.id]?.keys.blocked).toBe(0.67); // held by the band
    expect((await readerOf(fx).workspaceFlags(fx.ws.id, 'triage', 0.69)).flags[a.id]).toBeUndefined(); // plain cut at 0.69
    expect((await readerOf(fx).workspaceFlags(fx.ws.id, 'triage', 0.6)).flags[a.id]?.keys.blocked).toBe(0.67);
  });
});
