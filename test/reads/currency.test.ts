import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { fingerprintContextText, noul, questionFingerprint } from '../../src/decision/questions.js';
import { DecisionReader, judgeRows, type SetNow } from '../../src/reads/reads.js';
import { defineQuestionSet, Registry } from '../../src/decision/registry.js';
import { buildItemState, NO_CLIPS, STATE_VERSION } from '../../src/decision/state.js';
import { itemStateFor } from '../../src/decision/set-states.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { DecisionRow } from '../../src/store/decision-store.js';
import { makeFixture, TASK_SCHEMA, type Fixture } from '../harness/store-fixture.js';
import { ctxOf, currency, readerOf, settle } from './support.js';

/**
 * Every currency rule and every stale reason of DESIGN §8, each with a control showing the row
 * was current right before the change.
 */

const linked = defineQuestionSet({
  name: 'linked',
  questions: { risky: noul('The change is risky.') },
  withLinks: true,
  noTrail: true,
  eligible: ['notSystem'],
});
const taskOnly = defineQuestionSet({
  name: 'task_only',
  collections: ['task'],
  questions: { clear: noul('The item is clear.') },
});
const SETS = [attentionSet, linked, taskOnly];

let fx: Fixture;
let fake: FakeProvider;
beforeEach(async () => {
  fx = await makeFixture(SETS);
  fake = new FakeProvider();
});
afterEach(async () => fx.cleanup());

async function newItem(ref = 'T-1', extra: Record<string, unknown> = {}) {
  return (
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref,
      title: `Item ${ref}`,
      content: 'waiting for legal',
      fields: { status: 'open' },
      ...extra,
    })
  ).row;
}

const ALL_CURRENT = {
  'attention/blocked': 'current',
  'attention/needs_human_decision': 'current',
  'attention/waiting_on_external': 'current',
  'linked/risky': 'current',
  'task_only/clear': 'current',
};

describe('current', () => {
  it('a row is current while state, question fingerprint and state version all match', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    const ds = await readerOf(fx).decisions(it1.id);
    expect(ds).toHaveLength(5);
    for (const d of ds) expect(d).toMatchObject({ current: true, staleReason: null, changedParts: [] });
  });

  it('S1 → S2 → S1 reads current again without a new call', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    const s1Rows = (await readerOf(fx).decisions(it1.id)).map((d) => d.rowId);
    await fx.store.updateItem(it1.id, { content: 'unblocked now' });
    await settle(fx, fake);
    const calls = fake.requests.length;
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT); // S2, answered
    await fx.store.updateItem(it1.id, { content: 'waiting for legal' }); // back to S1
    const back = await readerOf(fx).decisions(it1.id);
    expect(back.every((d) => d.current)).toBe(true);
    expect(back.map((d) => d.rowId)).toEqual(s1Rows); // the S1 rows, not the latest ones
    await settle(fx, fake);
    expect(fake.requests.length).toBe(calls); // and the owed job costs nothing
  });
});

describe('state_changed names the parts that moved', () => {
  it.each([
    ['title', { title: 'Renamed' }, ['title']],
    ['body', { content: 'a new body' }, ['body']],
    ['fields', { fields: { status: 'in_progress' } }, ['fields']],
  ] as const)('%s', async (_n, patch, parts) => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT); // control
    await fx.store.updateItem(it1.id, patch as never);
    const c = await currency(readerOf(fx), it1.id);
    expect(c['attention/blocked']).toBe(`state_changed(${parts.join(',')})`);
    expect(c['linked/risky']).toBe(`state_changed(${parts.join(',')})`);
  });

  it('trail: a comment moves the trail of trail readers only', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    await fx.store.addComment({ itemId: it1.id, author: 'amy', body: 'ping legal again' });
    const c = await currency(readerOf(fx), it1.id);
    expect(c['attention/blocked']).toBe('state_changed(trail)');
    expect(c['linked/risky']).toBe('current'); // NoTrail: its state did not move
  });

  it('links: a link moves the links of WithLinks sets only', async () => {
    const it1 = await newItem();
    const it2 = await newItem('T-2');
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: it2.id, targetId: it1.id, linkType: 'blocks' });
    const c = await currency(readerOf(fx), it1.id);
    expect(c['linked/risky']).toBe('state_changed(links)');
    expect(c['attention/blocked']).toBe('current');
  });

  it('collection: a move to another covered collection', async () => {
    const bugs = await fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'bug', schema: TASK_SCHEMA });
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    await fx.store.moveItem(it1.id, bugs.id);
    const c = await currency(readerOf(fx), it1.id);
    expect(c['attention/blocked']).toBe('state_changed(collection)');
    expect(c['task_only/clear']).toBe('not_applicable'); // task_only covers task only
  });
});

describe('question_changed and model_changed', () => {
  it('question_changed: a reworded question, that key only', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    const reworded = new Registry([
      defineQuestionSet({
        ...attentionSet,
        questions: { ...attentionSet.questions, blocked: noul('Is the work blocked by anything?') },
      }),
      linked,
      taskOnly,
    ]);
    const c = await currency(readerOf(fx, reworded), it1.id);
    expect(c).toEqual({ ...ALL_CURRENT, 'attention/blocked': 'question_changed' });
  });

  it.each([
    ['another model of the same provider', { model: 'fake-model-2' }],
    ['another prompt template', { promptVersion: 'fake-v2' }],
    ['another effort', { effort: 'high' }],
    ['another provider', { name: 'anthropic', model: 'claude-haiku-5-5', promptVersion: 'anthropic-v1' }],
  ])('model_changed: %s', async (_n, over) => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    const c = await currency(new DecisionReader(fx.store, fx.registry, { ...ctxOf(fake), ...over }), it1.id);
    expect(Object.values(c)).toEqual(Array(5).fill('model_changed'));
  });

  it('a reworded question read by another provider is question_changed (the stored context decides, not the provider name)', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    const reworded = new Registry([
      defineQuestionSet({ ...attentionSet, questions: { ...attentionSet.questions, blocked: noul('Blocked?') } }),
      linked,
      taskOnly,
    ]);
    // Same model and template as the answers were asked under, under another provider name.
    const c = await currency(new DecisionReader(fx.store, reworded, { ...ctxOf(fake), name: 'other' }), it1.id);
    expect(c['attention/blocked']).toBe('question_changed');
    expect(c['attention/needs_human_decision']).toBe('current');
  });

  it('rows carry the fingerprint context they were asked under', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    for (const r of await fx.store.listDecisions(it1.id))
      expect(r.fingerprintContext).toBe(fingerprintContextText(fake));
  });

  it('rows stored before fingerprint contexts fall back to the provider name', () => {
    const q = attentionSet.questions!.blocked;
    const now: SetNow = {
      set: attentionSet,
      applies: true,
      questions: attentionSet.questions!,
      state: { bytes: '{}', hash: 'h', parts: {}, truncated: false, clips: NO_CLIPS, version: STATE_VERSION },
      commentStates: new Map(),
    };
    const row = legacyRow({
      questionKey: 'blocked',
      stateHash: 'h',
      questionHash: questionFingerprint(q, { model: 'old', promptVersion: 'fake-v1', effort: null }),
      provider: 'fake',
    });
    expect(judgeRows([row], now, ctxOf(fake)).staleReason).toBe('question_changed');
    expect(judgeRows([{ ...row, provider: 'anthropic' }], now, ctxOf(fake)).staleReason).toBe('model_changed');
    // control: with the stored context, the same row is known to be a model change
    expect(
      judgeRows(
        [
          {
            ...row,
            fingerprintContext: fingerprintContextText({ model: 'old', promptVersion: 'fake-v1', effort: null }),
          },
        ],
        now,
        ctxOf(fake),
      ).staleReason,
    ).toBe('model_changed');
  });
});

describe('question_removed, not_applicable, set_unknown, not_compared', () => {
  it('question_removed: the set no longer asks the key', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    const { blocked: _gone, ...rest } = attentionSet.questions!;
    const fewer = new Registry([defineQuestionSet({ ...attentionSet, questions: rest }), linked, taskOnly]);
    expect(await currency(readerOf(fx, fewer), it1.id)).toEqual({
      ...ALL_CURRENT,
      'attention/blocked': 'question_removed',
    });
  });

  it('not_applicable: the item became terminal (attention is notTerminal; linked is not)', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    await fx.store.updateItem(it1.id, { fields: { status: 'closed' } });
    const c = await currency(readerOf(fx), it1.id);
    expect(c['attention/blocked']).toBe('not_applicable');
    expect(c['linked/risky']).toBe('state_changed(fields)');
  });

  it('not_applicable: the item was deleted', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    await fx.store.softDeleteItem(it1.id);
    expect(Object.values(await currency(readerOf(fx), it1.id))).toEqual(Array(5).fill('not_applicable'));
  });

  it('set_unknown: the set is not registered in this process', async () => {
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    const c = await currency(readerOf(fx, new Registry([linked, taskOnly])), it1.id);
    expect(c['attention/blocked']).toBe('set_unknown');
    expect(c['linked/risky']).toBe('current');
  });

  it('not_compared: a row of another state version, even at the same hashes', async () => {
    const it1 = await newItem();
    await fx.store.dropJobs({});
    const loaded = (await fx.store.loadItemForEvaluation(it1.id))!;
    const state = buildItemState(
      {
        title: loaded.item.title,
        collectionSlug: 'task',
        fieldsText: loaded.item.fields,
        content: loaded.item.content,
        comments: [],
        links: [],
      },
      { withLinks: true, noTrail: true },
    );
    const row = {
      workspaceId: fx.ws.id,
      itemId: it1.id,
      questionSet: 'linked',
      questionKey: 'risky',
      kind: 'noul' as const,
      answer: JSON.stringify({ type: 'noul', noul: 0.95 }),
      confidence: null,
      provider: 'fake',
      model: 'fake-model-1',
      stateHash: state.hash,
      questionHash: questionFingerprint(linked.questions!.risky, fake),
      stateVersion: STATE_VERSION + 1,
      stateParts: JSON.stringify(state.parts),
      inputTokens: 0,
      outputTokens: 0,
      itemSeq: 1,
      stateTruncated: false,
      fingerprintContext: fingerprintContextText(fake),
    };
    await fx.store.insertDecisions([row]);
    expect((await currency(readerOf(fx), it1.id))['linked/risky']).toBe('not_compared');
    // control: the very same row at this state version is current
    await fx.store.insertDecisions([{ ...row, stateVersion: STATE_VERSION }]);
    expect((await currency(readerOf(fx), it1.id))['linked/risky']).toBe('current');
  });

  it('not_compared: the questions could not be read (resolve failed) is never "unchanged"', async () => {
    let fail = false;
    const resolved = defineQuestionSet({
      name: 'resolved',
      resolve: async () => {
        if (fail) throw Object.assign(new Error('db gone'), { code: 'SQLITE_IOERR' });
        return { q: noul('Resolved question.') };
      },
    });
    await fx.cleanup();
    fx = await makeFixture([resolved]);
    const it1 = await newItem();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), it1.id)).toEqual({ 'resolved/q': 'current' });
    fail = true;
    expect(await currency(readerOf(fx), it1.id)).toEqual({ 'resolved/q': 'not_compared' });
  });
});

describe('state version 2 (DESIGN §5.1: omitted_comments)', () => {
  it('an answer of state version 1 reads not_compared even at the very same state bytes, until re-asked', async () => {
    const it1 = await newItem();
    const loaded = (await fx.store.loadItemForEvaluation(it1.id))!;
    const state = itemStateFor(attentionSet, loaded);
    expect(state.version).toBe(2);
    const keys = Object.keys(attentionSet.questions!);
    await fx.store.insertDecisions(
      keys.map((k) => ({
        workspaceId: fx.ws.id,
        itemId: it1.id,
        questionSet: 'attention',
        questionKey: k,
        kind: 'noul' as const,
        answer: JSON.stringify({ type: 'noul', noul: 0.95 }),
        confidence: null,
        provider: 'fake',
        model: 'fake-model-1',
        stateHash: state.hash, // an item with no comments: v1 and v2 bytes are identical
        questionHash: questionFingerprint(attentionSet.questions![k], fake),
        stateVersion: 1,
        stateParts: JSON.stringify(state.parts),
        inputTokens: 0,
        outputTokens: 0,
        itemSeq: it1.seq,
        stateTruncated: false,
        fingerprintContext: fingerprintContextText(fake),
      })),
    );
    const before = await currency(readerOf(fx), it1.id);
    for (const k of keys) expect(before[`attention/${k}`]).toBe('not_compared');
    await settle(fx, fake);
    expect(fake.requests.filter((r) => r.keys.includes('blocked'))).toHaveLength(1); // re-asked at version 2
    expect(await currency(readerOf(fx), it1.id)).toEqual(ALL_CURRENT);
    expect(
      (await fx.store.listDecisions(it1.id))
        .filter((r) => r.questionSet === 'attention')
        .map((r) => r.stateVersion)
        .sort(),
    ).toEqual([1, 1, 1, 2, 2, 2]);
  });

  it('stateClips: the sets whose state leaves comments out, not a NoTrail set; empty with decisions off', async () => {
    const it1 = await newItem();
    for (let i = 0; i < 10; i++)
      await fx.store.addComment({ itemId: it1.id, author: 'amy', body: `c${i}`, createdAt: i + 1 });
    expect(await readerOf(fx).stateClips(it1.id)).toEqual([]); // control: 10 comments fit the trail
    await fx.store.addComment({ itemId: it1.id, author: 'amy', body: 'c10', createdAt: 11 });
    const clips = await readerOf(fx).stateClips(it1.id);
    expect(clips.map((c) => [c.questionSet, c.clips.omittedComments])).toEqual([
      ['attention', 1],
      ['task_only', 1],
    ]);
    expect(await new DecisionReader(fx.store, fx.registry, null).stateClips(it1.id)).toEqual([]);
  });
});

describe('reads are never null', () => {
  it('an item without answers, an unknown item, an empty workspace, and decisions off', async () => {
    const it1 = await newItem();
    const r = readerOf(fx);
    expect(await r.decisions(it1.id)).toEqual([]);
    expect(await r.decisions('no-such-item')).toEqual([]);
    expect(await r.itemReadDecisions(it1.id)).toEqual([]);
    expect(await r.surfacedDecisions(it1.id)).toEqual({ surfaced: [], belowThreshold: 0, stale: 0 });
    expect(await r.workspaceFlags(fx.ws.id, 'attention')).toEqual({ flags: {}, failing: false });
    expect(await r.workspaceFlags(fx.ws.id, 'no_such_set')).toEqual({ flags: {}, failing: false });
    await settle(fx, fake);
    const off = new DecisionReader(fx.store, fx.registry, null);
    expect(await off.decisions(it1.id)).toEqual([]);
    expect(await off.workspaceFlags(fx.ws.id, 'attention')).toEqual({ flags: {}, failing: false });
    expect(await r.decisions(it1.id)).toHaveLength(5); // control: the same reads with decisions on
  });
});

function legacyRow(over: Partial<DecisionRow>): DecisionRow {
  return {
    id: 1,
    workspaceId: 'w',
    itemId: 'i',
    questionSet: 'attention',
    questionKey: 'blocked',
    kind: 'noul',
    answer: JSON.stringify({ type: 'noul', noul: 0.5 }),
    confidence: null,
    provider: 'fake',
    model: 'fake-model-1',
    stateHash: 'h',
    questionHash: 'q',
    stateVersion: STATE_VERSION,
    stateParts: '{}',
    inputTokens: 0,
    outputTokens: 0,
    itemSeq: 1,
    stateTruncated: false,
    evaluatedAt: 0,
    rationale: null,
    fingerprintContext: null,
    ...over,
  };
}
