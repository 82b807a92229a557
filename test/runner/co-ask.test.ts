import { afterEach, describe, expect, it } from 'vitest';
import { noul } from '../../src/decision/questions.js';
import { attentionSet, conventionsSet, effortSet } from '../../src/decision/production-sets.js';
import { defineQuestionSet, type QuestionSet } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { coAskCalls, type Chunk } from '../../src/runner/evaluate.js';
import { coAskPartners, runOnce } from '../../src/runner/job-life.js';
import type { DecisionRow } from '../../src/store/decision-store.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Co-asking (DESIGN §7.2): owed sets of one item whose states are byte-identical are asked in
 * one call, each set's answers stored under its own fingerprints, spend split by keys.
 */

const fixtures: Fixture[] = [];
afterEach(async () => {
  for (const fx of fixtures.splice(0)) await fx.cleanup();
});

async function fixture(sets: QuestionSet[]): Promise<Fixture> {
  const fx = await makeFixture(sets);
  fixtures.push(fx);
  return fx;
}

async function items(fx: Fixture, n: number): Promise<void> {
  for (let i = 1; i <= n; i++) {
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: `T-${i}`,
      title: `Item ${i}`,
      content: i % 2 ? 'waiting for legal sign-off on the vendor contract' : 'refactor the parser',
      fields: { status: 'open' },
    });
  }
  fx.clock.advance(30_000);
}

/** What a stored answer is, without what differs between two databases (ids, times). */
function answerOf(d: DecisionRow) {
  return [
    d.questionSet,
    d.questionKey,
    d.answer,
    d.confidence,
    d.stateHash,
    d.questionHash,
    d.stateVersion,
    d.stateParts,
    d.model,
  ].join('|');
}

async function answers(fx: Fixture): Promise<string[]> {
  const out: string[] = [];
  for (const item of await fx.store.listItems({ workspaceId: fx.ws.id }))
    out.push(...(await fx.store.listDecisions(item.id)).map((d) => `${item.ref}|${answerOf(d)}`));
  return out.sort();
}

const signal = new AbortController().signal;

describe('co-asking', () => {
  it('asks attention and effort of an item in one call, with answers byte-identical to asking them apart', async () => {
    const together = await fixture([attentionSet, effortSet]);
    const apart = await fixture([attentionSet, effortSet]);
    await items(together, 3);
    await items(apart, 3);
    const fakeTogether = new FakeProvider();
    const fakeApart = new FakeProvider();
    await drainNow(runnerOptions(together, fakeTogether));
    await drainNow(runnerOptions(apart, fakeApart, { coAsk: false }));

    expect(fakeApart.requests).toHaveLength(6);
    expect(fakeTogether.requests).toHaveLength(3);
    // Each co-asked call carries both sets' keys about one state, sent once.
    for (const r of fakeTogether.requests)
      expect(r.keys.sort()).toEqual(['blocked', 'effort', 'needs_human_decision', 'waiting_on_external']);
    expect(new Set(fakeTogether.requests.map((r) => r.state))).toEqual(new Set(fakeApart.requests.map((r) => r.state)));
    const a = await answers(together);
    expect(a).toHaveLength(12);
    expect(a).toEqual(await answers(apart));
    expect(await together.store.listJobs({})).toEqual([]);
  });

  it('splits the spend by keys: three quarters to attention, a quarter to effort, the call counted once', async () => {
    const fx = await fixture([attentionSet, effortSet]);
    await items(fx, 1);
    const fake = new FakeProvider();
    const r = (await runOnce(runnerOptions(fx, fake), signal))!;
    expect(r.outcome).toMatchObject({ kind: 'complete', reason: 'answered' });
    expect(fake.requests).toHaveLength(1);
    const { rows } = await fx.store.spendRowsSince(3_600_000);
    const bySet = Object.fromEntries(rows.map((row) => [row.questionSet, row]));
    const input = bySet.attention.inputTokens + bySet.effort.inputTokens;
    expect(bySet.attention.calls + bySet.effort.calls).toBe(1);
    expect(bySet.attention.calls).toBe(1); // the slot's job leads the call
    expect(Math.abs(bySet.attention.inputTokens - 3 * bySet.effort.inputTokens)).toBeLessThanOrEqual(3);
    // Per-row token shares add up to the call's usage, across both sets.
    const rowsIn = (await fx.store.listDecisions(r.claim.itemId)).reduce((s, d) => s + d.inputTokens, 0);
    expect(rowsIn).toBe(input);
    expect(input).toBeGreaterThan(0);
  });

  it('reports each co-asked job to onOutcome, so summaries and metrics count both', async () => {
    const fx = await fixture([attentionSet, effortSet]);
    await items(fx, 1);
    const seen: string[] = [];
    await runOnce(
      runnerOptions(fx, new FakeProvider(), {
        onOutcome: (rep) => seen.push(`${rep.claim.questionSet}:${rep.outcome.kind}:${rep.stats.calls}`),
      }),
      signal,
    );
    expect(seen.sort()).toEqual(['attention:complete:1', 'effort:complete:0']);
  });

  it('does not co-ask sets whose state differs (conventions reads links and no trail)', async () => {
    expect(coAskPartners(conventionsSet, [attentionSet, effortSet, conventionsSet])).toEqual([]);
    expect(coAskPartners(attentionSet, [attentionSet, effortSet, conventionsSet])).toEqual(['effort']);
  });

  it('leaves a sibling that is not due, or held by another claimant, to run on its own', async () => {
    const fx = await fixture([attentionSet, effortSet]);
    await items(fx, 1);
    const [item] = await fx.store.listItems({ workspaceId: fx.ws.id });
    // Another worker holds the effort job.
    const other = await fx.store.claimSiblingJobs(
      {
        ...(await fx.store.getJob(item.id, 'attention'))!,
        claimToken: 'x',
        claimedBy: 'other',
        itemId: item.id,
      } as never,
      ['effort'],
      { leaseMs: 60_000, abandonLimit: 8 },
    );
    expect(other.map((c) => c.questionSet)).toEqual(['effort']);
    const fake = new FakeProvider();
    const r = (await runOnce(runnerOptions(fx, fake), signal))!;
    expect(r.claim.questionSet).toBe('attention');
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].keys.sort()).toEqual(['blocked', 'needs_human_decision', 'waiting_on_external']);
    expect((await fx.store.getJob(item.id, 'effort'))!.claimedBy).toBe('other');
  });

  it('a call that fails gives its outcome to every job in it: both back off, attempts counted, nothing lost', async () => {
    const fx = await fixture([attentionSet, effortSet]);
    await items(fx, 1);
    const fake = new FakeProvider({ faults: [{ status: 503 }] });
    const r = (await runOnce(runnerOptions(fx, fake), signal))!;
    expect(r.outcome.kind).toBe('fail');
    const jobs = await fx.store.listJobs({});
    expect(jobs.map((j) => [j.questionSet, j.attempts, j.claimToken, j.notBefore > fx.clock.now()])).toEqual([
      ['attention', 1, null, true],
      ['effort', 1, null, true],
    ]);
    expect(await fx.store.countDecisions()).toBe(0);
  });

  it('an item deleted before the send: no call, both jobs dropped', async () => {
    const fx = await fixture([attentionSet, effortSet]);
    await items(fx, 1);
    const [item] = await fx.store.listItems({ workspaceId: fx.ws.id });
    const fake = new FakeProvider();
    const r = (await runOnce(
      runnerOptions(fx, fake, { beforeAsk: async () => void (await fx.store.softDeleteItem(item.id)) }),
      signal,
    ))!;
    expect(r.outcome.kind).toBe('drop');
    expect(fake.requests).toHaveLength(0);
    // The delete owed both jobs again (a newer generation); they drop without a call.
    fx.clock.advance(3_600_000);
    await drainNow(runnerOptions(fx, fake));
    expect(fake.requests).toHaveLength(0);
    expect(await fx.store.listJobs({})).toEqual([]);
    expect(await fx.store.countDecisions()).toBe(0);
  });

  it('a set whose answers are already stored is completed without a call; only the other is asked', async () => {
    const fx = await fixture([attentionSet, effortSet]);
    await items(fx, 1);
    const [item] = await fx.store.listItems({ workspaceId: fx.ws.id });
    // Attention is answered; effort's call fails before the send and backs off.
    const failEffort = ({ claim }: { claim: { questionSet: string } }) => {
      if (claim.questionSet === 'effort') throw Object.assign(new Error('boom'), { code: 'test_failure' });
    };
    await drainNow(runnerOptions(fx, new FakeProvider(), { coAsk: false, beforeAsk: failEffort }));
    expect((await fx.store.listJobs({})).map((j) => j.questionSet)).toEqual(['effort']);
    await fx.store.oweJobs([{ itemId: item.id, questionSet: 'attention' }], {});
    fx.clock.advance(3_600_000 * 3);
    const fake = new FakeProvider();
    await drainNow(runnerOptions(fx, fake));
    expect(fake.requests.map((r) => r.keys)).toEqual([['effort']]);
    expect(await fx.store.listJobs({})).toEqual([]);
    expect((await fx.store.listDecisions(item.id)).map((d) => d.questionKey).sort()).toEqual([
      'blocked',
      'effort',
      'needs_human_decision',
      'waiting_on_external',
    ]);
  });
});

describe('coAskCalls (the packing rule)', () => {
  const state = { bytes: '{"title":"x"}', hash: 'h', version: 2, parts: {}, truncated: false } as never;
  const other = { bytes: '{"title":"y"}', hash: 'h2', version: 2, parts: {}, truncated: false } as never;
  const q = noul('A question?');
  const chunk = (s: never, keys: string[]): Chunk => ({
    state: s,
    questions: new Map(keys.map((k) => [k, q])),
    storedKeys: new Map(keys.map((k) => [k, k])),
    fingerprints: new Map(keys.map((k) => [k, `fp-${k}`])),
  });
  const set = (name: string, maxPerCall = 8, explain = false) =>
    defineQuestionSet({ name, questions: { a: q }, maxPerCall, explain });

  it('joins chunks of one state, keeps different states apart', () => {
    const calls = coAskCalls([
      { claim: 0, set: set('a'), chunks: [chunk(state, ['k1', 'k2'])] },
      { claim: 1, set: set('b'), chunks: [chunk(state, ['k3']), chunk(other, ['k4'])] },
    ]);
    expect(calls.map((c) => c.parts.map((p) => `${p.claim}:${[...p.chunk.questions.keys()].join(',')}`))).toEqual([
      ['0:k1,k2', '1:k3'],
      ['1:k4'],
    ]);
  });

  it('never joins past the smallest maxPerCall, across explain settings, or when a key is in both', () => {
    expect(
      coAskCalls([
        { claim: 0, set: set('a', 3), chunks: [chunk(state, ['k1', 'k2'])] },
        { claim: 1, set: set('b'), chunks: [chunk(state, ['k3', 'k4'])] },
      ]),
    ).toHaveLength(2);
    expect(
      coAskCalls([
        { claim: 0, set: set('a', 4), chunks: [chunk(state, ['k1', 'k2'])] },
        { claim: 1, set: set('b'), chunks: [chunk(state, ['k3', 'k4'])] },
      ]),
    ).toHaveLength(1);
    expect(
      coAskCalls([
        { claim: 0, set: set('a'), chunks: [chunk(state, ['k1'])] },
        { claim: 1, set: set('b', 8, true), chunks: [chunk(state, ['k2'])] },
      ]),
    ).toHaveLength(2);
    expect(
      coAskCalls([
        { claim: 0, set: set('a'), chunks: [chunk(state, ['k1'])] },
        { claim: 1, set: set('b'), chunks: [chunk(state, ['k1'])] },
      ]),
    ).toHaveLength(2);
  });

  it('never puts two chunks of one claim in one call', () => {
    expect(
      coAskCalls([{ claim: 0, set: set('a'), chunks: [chunk(state, ['k1']), chunk(state, ['k2'])] }]),
    ).toHaveLength(2);
  });
});
