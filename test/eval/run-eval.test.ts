import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { parseGoldSet } from '../../src/eval/gold-set.js';
import { parseMaxCost } from '../../src/cli/eval.js';
import {
  EvalCostNotConfirmed,
  goldFromVerdicts,
  labelOfValue,
  runEval,
  type EvalColumn,
  type EvalReport,
  type RunEvalOptions,
} from '../../src/eval/run-eval.js';
import { FakeProvider, type FakeRequest } from '../../src/providers/fake.js';
import type { AskOptions, AskResult, Provider } from '../../src/providers/provider.js';
import type { Question } from '../../src/decision/questions.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { readerOf, settle } from '../reads/support.js';

/**
 * `runEval` (DESIGN §8.3) on a small seeded case whose answers are scripted exactly: the fake
 * provider's handler returns chosen probabilities per item, the runner stores them, and the
 * figures are checked against values computed by hand below.
 */

const triage = defineQuestionSet({
  name: 'triage',
  questions: {
    blocked: noul('The item is blocked.'),
    urgent: noul('The item is urgent.'),
    other: noul('A key no gold row labels: eval must never ask it.'),
  },
  eligible: ['notTerminal'],
  threshold: 0.5,
  maxPerCall: 2,
});

/** The model's probabilities per item title (model A, fake-model-1). */
const P_A: Record<string, Record<string, number>> = {
  'Item T-1': { blocked: 0.9, urgent: 0.2, other: 0.5 },
  'Item T-2': { blocked: 0.7, urgent: 0.6, other: 0.5 },
  'Item T-3': { blocked: 0.3, urgent: 0.4, other: 0.5 },
  'Item T-4': { blocked: 0.1, urgent: 0.55, other: 0.5 },
  'Item T-5': { blocked: 0.5, urgent: 0.5, other: 0.5 },
  'Item T-6': { blocked: 0.8, urgent: 0.8, other: 0.8 },
};
/** Model B differs on two answered rows: T-2 blocked (B right) and T-1 urgent (B wrong). */
const P_B: Record<string, Record<string, number>> = {
  ...P_A,
  'Item T-2': { ...P_A['Item T-2'], blocked: 0.2 },
  'Item T-1': { ...P_A['Item T-1'], urgent: 0.8 },
};

function titleOf(req: FakeRequest): string {
  const m = /"Item T-\d"/.exec(req.state);
  if (!m) throw new Error('no title in the state');
  return m[0].slice(1, -1);
}
const scripted = (table: Record<string, Record<string, number>>) => (req: FakeRequest) =>
  Object.fromEntries(req.keys.map((k) => [k, { probability: table[titleOf(req)][k] }]));

/**
 * Labels. blocked: T-1 true, T-2 false, T-3 true, T-4 false, T-5 true (closed: never asked), T-6
 * true (edited after its answer: stale). urgent: T-1..T-4 false, true, false, false. Plus one row
 * of each unresolved kind.
 */
const GOLD = [
  { ref: 'T-1', set: 'triage', key: 'blocked', label: true },
  { ref: 'T-2', set: 'triage', key: 'blocked', label: false },
  { ref: 'T-3', set: 'triage', key: 'blocked', label: true },
  { ref: 'T-4', set: 'triage', key: 'blocked', label: false },
  { ref: 'T-5', set: 'triage', key: 'blocked', label: true },
  { ref: 'T-6', set: 'triage', key: 'blocked', label: true },
  { ref: 'T-1', set: 'triage', key: 'urgent', label: false },
  { ref: 'T-2', set: 'triage', key: 'urgent', label: true },
  { ref: 'T-3', set: 'triage', key: 'urgent', label: false },
  { ref: 'T-4', set: 'triage', key: 'urgent', label: false },
  { ref: 'T-404', set: 'triage', key: 'blocked', label: true },
  { ref: 'T-1', set: 'nope', key: 'blocked', label: true },
  { ref: 'T-1', set: 'triage', key: 'blokked', label: true },
  { ref: 'T-5', set: 'triage', key: 'urgent', label: 'yes' },
]
  .map((r) => JSON.stringify(r))
  .join('\n');

let fx: Fixture;
let fakeA: FakeProvider;
const ids: Record<string, string> = {};

beforeEach(async () => {
  fx = await makeFixture([triage]);
  fakeA = new FakeProvider({ handler: scripted(P_A) });
  for (const n of [1, 2, 3, 4, 5, 6]) {
    const status = n === 5 ? 'closed' : 'open';
    const r = await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: `T-${n}`,
      title: `Item T-${n}`,
      content: `body ${n}`,
      fields: { status },
    });
    ids[`T-${n}`] = r.row.id;
  }
  await settle(fx, fakeA); // every open item answered, all three keys (2 calls each: maxPerCall 2)
  await fx.store.updateItem(ids['T-6'], { content: 'edited after its answer' }); // stale, job owed in its quiet period
});
afterEach(async () => fx.cleanup());

const gold = () => ({ rows: parseGoldSet(GOLD, 'gold.jsonl'), source: 'gold.jsonl' });
const base = (over: Partial<RunEvalOptions>): RunEvalOptions => ({
  store: fx.store,
  registry: fx.registry,
  workspace: fx.ws,
  gold: gold(),
  a: { kind: 'stored', reader: readerOf(fx, fx.registry, fakeA), judgedAgainst: { name: 'fake', model: fakeA.model } },
  ...over,
});
const key = (c: EvalColumn, k: string) => c.byKey.find((x) => x.key === k)!;

/** Figures computed by hand from P_A and the labels (threshold 0.5, 10 bins). */
function expectHandFigures(r: EvalReport, blockedN: number): void {
  const blocked = key(r.a, 'blocked');
  // blocked: T-1 0.9/T (tp), T-2 0.7/F (fp), T-3 0.3/T (fn), T-4 0.1/F (tn).
  expect(blocked).toMatchObject({ n: blockedN, answered: 4, correct: 2, tp: 1, fp: 1, fn: 1, tn: 1 });
  expect(blocked.accuracy).toBeCloseTo(0.5, 12);
  expect(blocked.precision).toBeCloseTo(0.5, 12);
  expect(blocked.recall).toBeCloseTo(0.5, 12);
  expect(blocked.f1).toBeCloseTo(0.5, 12);
  expect(blocked.brier).toBeCloseTo((0.01 + 0.49 + 0.49 + 0.01) / 4, 12); // 0.25
  expect(blocked.ece).toBeCloseTo((0.1 + 0.7 + 0.7 + 0.1) / 4, 12); // one row per bin: 0.4
  const urgent = key(r.a, 'urgent');
  // urgent: T-1 0.2/F (tn), T-2 0.6/T (tp), T-3 0.4/F (tn), T-4 0.55/F (fp).
  expect(urgent).toMatchObject({ n: 4, answered: 4, correct: 3, tp: 1, fp: 1, fn: 0, tn: 2 });
  expect(urgent.accuracy).toBeCloseTo(0.75, 12);
  expect(urgent.precision).toBeCloseTo(0.5, 12);
  expect(urgent.recall).toBeCloseTo(1, 12);
  expect(urgent.f1).toBeCloseTo(2 / 3, 12);
  expect(urgent.brier).toBeCloseTo((0.04 + 0.16 + 0.16 + 0.3025) / 4, 12); // 0.165625
  expect(urgent.ece).toBeCloseTo((0.2 + 0.4 + 0.4 + 0.55) / 4, 12); // 0.3875
  // The set pools both keys' 8 answered nouls.
  const set = r.a.bySet[0];
  expect(set).toMatchObject({ set: 'triage', n: blockedN + 4, answered: 8, correct: 5, tp: 2, fp: 2, fn: 1, tn: 3 });
  expect(set.accuracy).toBeCloseTo(5 / 8, 12);
  expect(set.precision).toBeCloseTo(0.5, 12);
  expect(set.recall).toBeCloseTo(2 / 3, 12);
  expect(set.f1).toBeCloseTo(4 / 7, 12);
  expect(set.brier).toBeCloseTo((1 + 0.6625) / 8, 12);
  expect(set.ece).toBeCloseTo((0.1 + 0.2 + 0.7 + 0.4 + 0.55 + 0.4 + 0.7 + 0.1) / 8, 12); // 8 points, 8 distinct bins
  expect(r.a.overall).toMatchObject({
    n: blockedN + 4,
    answered: 8,
    accuracy: set.accuracy,
    brier: set.brier,
    ece: set.ece,
  });
}

describe('stored answers (no calls)', () => {
  it('scores the current stored answers with hand-computed figures, and says why rows are unanswered', async () => {
    const calls = fakeA.requests.length;
    const r = await runEval(base({}));
    expect(fakeA.requests.length).toBe(calls); // no call
    expect(r.gold).toMatchObject({
      rows: 14,
      resolved: 10,
      unresolvedByReason: { unknown_ref: 1, unknown_set: 1, unknown_key: 1, label_mismatch: 1 },
    });
    expect(r.gold.unresolved.map((u) => [u.line, u.reason])).toEqual([
      [11, 'unknown_ref'],
      [12, 'unknown_set'],
      [13, 'unknown_key'],
      [14, 'label_mismatch'],
    ]);
    expectHandFigures(r, 6);
    expect(r.a.unanswered.byReason).toEqual({ not_applicable: 1, state_changed: 1 });
    expect(r.a.unanswered.rows.map((u) => [u.ref, u.reason])).toEqual([
      ['T-5', 'not_applicable'],
      ['T-6', 'state_changed'],
    ]);
    expect(r.a).toMatchObject({
      mode: 'stored',
      provider: 'fake',
      model: 'fake-model-1',
      answeredBy: { 'fake:fake-model-1': 8 },
    });
    expect(r.a.overall).toMatchObject({ calls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 });
    expect(r.b).toBeNull();
    expect(r.answersStored).toBe(false);
  });
});

describe("a person's override", () => {
  it("is never the prediction: the model's own answer is scored", async () => {
    const d = (await fx.store.listDecisions(ids['T-2'])).find((x) => x.questionKey === 'blocked')!;
    await fx.store.insertVerdict(
      {
        workspaceId: fx.ws.id,
        itemId: ids['T-2'],
        questionSet: 'triage',
        questionKey: 'blocked',
        verdict: 'value',
        value: JSON.stringify({ type: 'noul', noul: 0 }),
        stateHash: d.stateHash,
        stateVersion: d.stateVersion,
        stateParts: d.stateParts,
        decisionId: d.id,
        author: 'ann',
        note: null,
      },
      null,
    );
    const view = (await readerOf(fx, fx.registry, fakeA).decisions(ids['T-2'])).find(
      (x) => x.questionKey === 'blocked',
    )!;
    expect(view).toMatchObject({ source: 'human', answer: { noul: 0 }, modelAnswer: { noul: 0.7 } }); // the read shows the person's value
    expectHandFigures(await runEval(base({})), 6); // and eval still scores 0.7 (a false positive)
  });
});

describe('asking the provider', () => {
  it('asks only the gold keys of askable rows, stores no answer, records the spend as eval', async () => {
    const stored = await fx.store.countDecisions();
    const before = fakeA.requests.length;
    const r = await runEval(base({ a: { kind: 'asked', provider: fakeA } }));
    const asked = fakeA.requests.slice(before);
    // T-1..T-4 and T-6 (its new state); T-5 is closed. Two gold keys fit one call (maxPerCall 2).
    expect(asked.map((q) => [titleOf(q), q.keys])).toEqual([
      ['Item T-1', ['blocked', 'urgent']],
      ['Item T-2', ['blocked', 'urgent']],
      ['Item T-3', ['blocked', 'urgent']],
      ['Item T-4', ['blocked', 'urgent']],
      ['Item T-6', ['blocked']],
    ]);
    expect(await fx.store.countDecisions()).toBe(stored); // nothing stored in item_decisions
    // The same probabilities as stored, plus T-6 asked at its new state (0.8, label true: a tp).
    expect(key(r.a, 'blocked')).toMatchObject({ n: 6, answered: 5, tp: 2, fp: 1, fn: 1, tn: 1 });
    expect(key(r.a, 'urgent')).toMatchObject({ n: 4, answered: 4, tp: 1, fp: 1, fn: 0, tn: 2 });
    expect(r.a.unanswered.byReason).toEqual({ not_applicable: 1 });
    const usage = asked.length; // each call: 12 output tokens per key (the fake's usage)
    expect(r.a.overall.calls).toBe(usage);
    expect(r.a.overall.outputTokens).toBe(12 * 9);
    expect(r.a.overall.costUsd).toBe(0); // the fake provider costs nothing
    expect(r.a.pricingNote).toMatch(/fake provider/);
    expect(r.a.estimate).toMatchObject({ calls: 5, items: 5, questions: 9, costUsd: 0 });
    // Per key: each call that asked the key; per set: each call once.
    expect(key(r.a, 'blocked').calls).toBe(5);
    expect(key(r.a, 'urgent').calls).toBe(4);
    expect(r.a.bySet[0].calls).toBe(5);
    const spend = (await fx.store.spendRowsSince(86_400_000)).rows.filter((s) => s.outcome === 'eval');
    expect(spend).toEqual([
      expect.objectContaining({
        questionSet: 'triage',
        provider: 'fake',
        model: 'fake-model-1',
        calls: 5,
        outputTokens: 12 * 9,
      }),
    ]);
  });

  it('asked with the same model as the stored answers, the figures are the stored ones', async () => {
    await settle(fx, fakeA); // T-6 answered at its new state too
    const stored = await runEval(base({}));
    const asked = await runEval(base({ a: { kind: 'asked', provider: fakeA } }));
    for (const k of ['blocked', 'urgent']) {
      const { calls: _c, inputTokens: _i, outputTokens: _o, costUsd: _u, ...s } = key(stored.a, k);
      const { calls: _c2, inputTokens: _i2, outputTokens: _o2, costUsd: _u2, ...a } = key(asked.a, k);
      expect(a).toEqual(s);
    }
  });
});

/** A provider that claims a priced model (so the guard applies) and answers like the scripted fake, with usage × `inflate`. */
function pricedProvider(inner: FakeProvider, inflate = 1): Provider & { asked: number } {
  const p = {
    name: 'anthropic',
    model: 'claude-haiku-5-5',
    promptVersion: 'test',
    effort: null,
    worstCaseCallMs: 1_000,
    asked: 0,
    async ask(state: string, questions: ReadonlyMap<string, Question>, opts: AskOptions): Promise<AskResult> {
      p.asked++;
      const r = await inner.ask(state, questions, opts);
      return {
        ...r,
        usage: { ...r.usage, inputTokens: r.usage.inputTokens * inflate, outputTokens: r.usage.outputTokens * inflate },
      };
    },
  };
  return p;
}

describe('cost guard', () => {
  it('a priced model without --max-cost, or with one below the estimate, is refused before any call, the estimate in the message', async () => {
    const p = pricedProvider(new FakeProvider({ handler: scripted(P_A) }));
    const none = await runEval(base({ a: { kind: 'asked', provider: p } })).catch((e: unknown) => e);
    expect(none).toBeInstanceOf(EvalCostNotConfirmed);
    expect((none as Error).message).toMatch(
      /5 calls to anthropic:claude-haiku-5-5, ~[\d,]+ input \/ ~[\d,]+ output tokens, estimated \$0\.\d{4}; rerun with --max-cost/,
    );
    const low = await runEval(base({ a: { kind: 'asked', provider: p }, maxCostUsd: 0.00001 })).catch(
      (e: unknown) => e,
    );
    expect(low).toBeInstanceOf(EvalCostNotConfirmed);
    expect((low as Error).message).toMatch(/above --max-cost \$0\.0000; nothing was asked/);
    expect((low as EvalCostNotConfirmed).estimate.calls).toBe(5);
    // A library caller's NaN or negative limit is refused, not read as "no limit".
    for (const bad of [NaN, -1, Infinity])
      await expect(runEval(base({ a: { kind: 'asked', provider: p }, maxCostUsd: bad }))).rejects.toThrow(
        /finite number of US dollars/,
      );
    expect(p.asked).toBe(0);
    const spend = (await fx.store.spendRowsSince(86_400_000)).rows.filter((s) => s.outcome.startsWith('eval'));
    expect(spend).toEqual([]);
  });

  it('a model with no price needs confirmUnpriced (--yes)', async () => {
    const p = { ...pricedProvider(new FakeProvider({ handler: scripted(P_A) })), name: 'openai', model: 'local-llm' };
    await expect(runEval(base({ a: { kind: 'asked', provider: p } }))).rejects.toThrow(/no price .* --yes/);
    const r = await runEval(base({ a: { kind: 'asked', provider: p }, confirmUnpriced: true }));
    expect(r.a.overall.costUsd).toBeNull();
    expect(r.a.overall.calls).toBe(5);
  });

  it('sends a call only while its whole output ceiling still fits under max-cost', async () => {
    const p = pricedProvider(new FakeProvider({ handler: scripted(P_A) }));
    // One row, one call: a limit of exactly its typical estimate passes the check before the run,
    // but the call's max_tokens would not fit under it, so it is not sent.
    const one = {
      rows: parseGoldSet('{"ref":"T-1","set":"triage","key":"blocked","label":true}\n', 'one.jsonl'),
      source: 'one.jsonl',
    };
    const est = await runEval(base({ gold: one, a: { kind: 'asked', provider: p }, maxCostUsd: 1 })).then(
      (r) => r.a.estimate!,
    );
    expect(est.calls).toBe(1);
    const before = p.asked;
    const r = await runEval(base({ gold: one, a: { kind: 'asked', provider: p }, maxCostUsd: est.costUsd! }));
    expect(p.asked - before).toBe(0);
    expect(r.a.stoppedAtMaxCost).toBe(true);
    expect(r.a.unanswered.byReason).toEqual({ max_cost: 1 });
  });

  it('stops before the call that would pass max-cost when real usage runs above the estimate', async () => {
    const p = pricedProvider(new FakeProvider({ handler: scripted(P_A) }), 1_000);
    const first = await runEval(base({ a: { kind: 'asked', provider: p }, maxCostUsd: 1 })).then((r) => r.a.estimate!);
    // A limit just above the estimate: the inflated first call spends past it, so the rest are not sent.
    const before = p.asked;
    const r = await runEval(base({ a: { kind: 'asked', provider: p }, maxCostUsd: first.costUsd! * 1.01 }));
    expect(p.asked - before).toBe(1);
    expect(r.a.stoppedAtMaxCost).toBe(true);
    expect(r.a.unanswered.byReason).toEqual({ not_applicable: 1, max_cost: 7 });
    expect(r.a.overall.calls).toBe(1);
  });
});

describe('compare', () => {
  it('lists the rows whose decisions differ, both columns, and the price of re-asking with model B', async () => {
    const fakeB = new FakeProvider({ model: 'fake-model-2', handler: scripted(P_B) });
    const stored = await fx.store.countDecisions();
    const r = await runEval(base({ b: { kind: 'asked', provider: fakeB } }));
    expectHandFigures(r, 6); // column A: the stored answers
    expect(r.b).toMatchObject({ mode: 'asked', provider: 'fake', model: 'fake-model-2' });
    expect(key(r.b!, 'blocked')).toMatchObject({ answered: 5, tp: 2, fp: 0, fn: 1, tn: 2 });
    expect(key(r.b!, 'urgent')).toMatchObject({ answered: 4, tp: 1, fp: 2, fn: 0, tn: 1 });
    expect(r.differences).toEqual([
      {
        ref: 'T-2',
        set: 'triage',
        key: 'blocked',
        label: false,
        a: 'true (p=0.700)',
        b: 'false (p=0.200)',
        correct: 'b',
      },
      {
        ref: 'T-1',
        set: 'triage',
        key: 'urgent',
        label: false,
        a: 'false (p=0.200)',
        b: 'true (p=0.800)',
        correct: 'a',
      },
    ]);
    expect(r.answeredByOneOnly).toBe(1); // T-6: stale in A, asked at its new state in B
    expect(r.reask).toMatchObject({
      provider: 'fake',
      model: 'fake-model-2',
      sets: [{ set: 'triage', eligibleItems: 5, items: 5, calls: 10, costUsd: 0 }],
    });
    expect(r.reask!.total.calls).toBe(10); // 5 live open items × 3 keys at maxPerCall 2
    expect(fakeB.requests.every((q) => !q.keys.includes('other'))).toBe(true);
    expect(await fx.store.countDecisions()).toBe(stored);
  });
});

describe('labels from human verdicts', () => {
  it('takes the latest verdict per key, skips withdrawn and valueless ones, and counts labels at an older state', async () => {
    const rows = await fx.store.listDecisions(ids['T-1']);
    const at = rows.find((d) => d.questionKey === 'blocked')!;
    const verdict = (
      itemId: string,
      k: string,
      kind: 'value' | 'withdrawn' | 'disagree',
      value: string | null,
      stateHash = at.stateHash,
    ) =>
      fx.store.insertVerdict(
        {
          workspaceId: fx.ws.id,
          itemId,
          questionSet: 'triage',
          questionKey: k,
          verdict: kind,
          value,
          stateHash,
          stateVersion: at.stateVersion,
          stateParts: at.stateParts,
          decisionId: null,
          author: 'ann',
          note: null,
        },
        null,
      );
    await verdict(ids['T-1'], 'blocked', 'value', JSON.stringify({ type: 'noul', noul: 0 }));
    await verdict(ids['T-1'], 'blocked', 'value', JSON.stringify({ type: 'noul', noul: 1 })); // the latest wins: true
    await verdict(ids['T-2'], 'urgent', 'value', JSON.stringify({ type: 'noul', noul: 1 }));
    await verdict(ids['T-2'], 'urgent', 'withdrawn', null); // withdrawn: no label
    await verdict(ids['T-3'], 'urgent', 'value', JSON.stringify({ type: 'noul', noul: 0.2 }), 'an-older-state'); // false, at another state
    const g = await goldFromVerdicts(fx.store, fx.registry, fx.ws.id);
    expect(g.rows.map((x) => [x.ref, x.key, x.label])).toEqual([
      ['T-1', 'blocked', true],
      ['T-3', 'urgent', false],
    ]);
    expect(g.labelsAtOlderState).toBe(1);
    // A noul value's label is its side of the set's threshold, as it surfaces: 0.6 is false at 0.7.
    expect([labelOfValue('{"type":"noul","noul":0.6}', 0.7), labelOfValue('{"type":"noul","noul":0.6}', 0.5)]).toEqual([
      false,
      true,
    ]);
    const r = await runEval(base({ gold: { ...g, source: 'verdicts' } }));
    expect(r.a.overall).toMatchObject({ n: 2, answered: 2, correct: 2 });
  });
});

describe('--max-cost parsing (src/cli/eval.ts)', () => {
  it('takes decimal dollars only: 0x10 is not 16, blank, negative and NaN are usage errors', () => {
    expect([parseMaxCost('0.05'), parseMaxCost(' 2 '), parseMaxCost('1e-2'), parseMaxCost(undefined)]).toEqual([
      0.05,
      2,
      0.01,
      undefined,
    ]);
    for (const bad of ['0x10', '0b1', '', '-1', 'NaN', 'Infinity'])
      expect(() => parseMaxCost(bad)).toThrow(/--max-cost: got/);
  });
});

describe('time-dependent sets (DESIGN §5.2)', () => {
  it('asks a set with maxAge at the state dated today, as the worker asks it', async () => {
    const aged = defineQuestionSet({
      name: 'aged',
      questions: { stalled: noul('No progress in 14 days.') },
      maxAgeMs: 7 * 86_400_000,
      eligible: ['notTerminal'],
    });
    const own = await makeFixture([aged]);
    try {
      await own.store.createItem({
        workspaceId: own.ws.id,
        collectionId: own.tasks.id,
        ref: 'A-1',
        title: 'Item A-1',
        fields: { status: 'open' },
      });
      const fake = new FakeProvider({
        handler: (req) => Object.fromEntries(req.keys.map((k) => [k, { probability: 0.9 }])),
      });
      const today = new Date(await own.store.now()).toISOString().slice(0, 10);
      const rows = parseGoldSet('{"ref":"A-1","set":"aged","key":"stalled","label":true}\n', 'aged.jsonl');
      const r = await runEval({
        store: own.store,
        registry: own.registry,
        workspace: own.ws,
        gold: { rows, source: 'aged.jsonl' },
        a: { kind: 'asked', provider: fake },
      });
      expect(r.a.overall).toMatchObject({ n: 1, answered: 1 });
      expect(fake.requests).toHaveLength(1);
      expect(fake.requests[0].state).toContain(`"as_of":"${today}"`);
    } finally {
      await own.cleanup();
    }
  });
});

describe('verdict.eval (the library door)', () => {
  it('scores the stored answers of a workspace by slug, and compares with a model named by id', async () => {
    const { createVerdict } = await import('../../src/compose/verdict.js');
    const v = await createVerdict({ database: fx.file, sets: [triage], provider: fakeA });
    try {
      const r = await v.eval({ workspace: 'acme', gold: gold().rows, stored: true });
      expectHandFigures(r, 6);
      const c = await v.eval({ workspace: 'acme', gold: gold().rows, stored: true, compare: 'fake-model-2' });
      expect(c.b).toMatchObject({ mode: 'asked', provider: 'fake', model: 'fake-model-2' });
      expect(c.b!.overall.calls).toBe(5);
      await expect(v.eval({ workspace: 'nowhere', gold: gold().rows, stored: true })).rejects.toMatchObject({
        code: 'eval_unavailable',
      });
    } finally {
      await v.close();
    }
  });
});
