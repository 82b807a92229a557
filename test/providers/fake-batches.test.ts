import { describe, expect, it } from 'vitest';
import { choice, noul, score, type Question } from '../../src/decision/questions.js';
import {
  AnswerDefect,
  BatchNotFound,
  ProviderMisconfigured,
  ProviderRefusal,
  ProviderUnavailable,
} from '../../src/providers/errors.js';
import { BATCH_EXPIRY_MS } from '../../src/providers/fake-batches.js';
import { FakeProvider, type FakeProviderOptions } from '../../src/providers/fake.js';
import type { AskResult, BatchRequest, BatchResult } from '../../src/providers/provider.js';
import { askOpts, questions, STATE } from './support.js';

/**
 * The fake provider's in-memory batch API (DESIGN §7.3): the semantics of Anthropic's Message
 * Batches, answers byte-identical to its `ask`, an injected clock and faults per batch.
 */

const sig = () => ({ signal: new AbortController().signal });

function req(customId: string, over: Partial<BatchRequest> = {}): BatchRequest {
  return { customId, state: STATE, questions: questions(), explain: false, ...over };
}

function fake(over: FakeProviderOptions = {}): FakeProvider & { batch: NonNullable<FakeProvider['batch']> } {
  return new FakeProvider(over) as FakeProvider & { batch: NonNullable<FakeProvider['batch']> };
}

const lookupOf = (requests: BatchRequest[]) => (id: string) => {
  const r = requests.find((x) => x.customId === id);
  return r ? { questions: r.questions, explain: r.explain } : null;
};

async function collect(it: AsyncIterable<BatchResult>): Promise<BatchResult[]> {
  const out: BatchResult[] = [];
  for await (const r of it) out.push(r);
  return out;
}

async function runBatch(p: ReturnType<typeof fake>, requests: BatchRequest[]): Promise<Map<string, BatchResult>> {
  const info = await p.batch.submit(requests, sig());
  expect((await p.batch.retrieve(info.id, sig())).status).toBe('ended');
  return new Map((await collect(p.batch.results(info.id, lookupOf(requests), sig()))).map((r) => [r.customId, r]));
}

/** An AskResult as bytes: every member, Maps as entry lists, in order. */
function bytes(r: AskResult): string {
  return JSON.stringify({
    answers: [...r.answers],
    rationales: r.rationales ? [...r.rationales] : null,
    usage: r.usage,
    responseModel: r.responseModel,
  });
}

function succeeded(r: BatchResult | undefined): AskResult {
  if (r?.type !== 'succeeded') throw new Error(`expected succeeded, got ${r?.type}`);
  return r.result;
}

function erroredWith(r: BatchResult | undefined): Error {
  if (r?.type !== 'errored') throw new Error(`expected errored, got ${r?.type}`);
  return r.error;
}

const STATES = ['{"title":"a"}', '{"title":"b"}', STATE, '{"title":"long","body":"' + 'x'.repeat(2000) + '"}'];

describe('FakeProvider batch: answers', () => {
  it.each(['questions', 'prompt'] as const)(
    'answers each request byte-identically to ask (usage mode %s)',
    async (usage) => {
      const p = fake({ usage });
      const one = new Map<string, Question>([['solo', noul('Is it solo?')]]);
      const requests = STATES.flatMap((state, i) => [
        req(`s${i}`, { state }),
        req(`e${i}`, { state, explain: true }),
        req(`o${i}`, { state, questions: one }),
      ]);
      const results = await runBatch(p, requests);
      expect(results.size).toBe(requests.length);
      for (const r of requests) {
        const asked = await p.ask(r.state, r.questions, askOpts({ explain: r.explain }));
        expect(bytes(succeeded(results.get(r.customId)))).toBe(bytes(asked));
      }
      // Different states answer differently: the results are not one answer copied.
      expect(bytes(succeeded(results.get('s0')))).not.toBe(bytes(succeeded(results.get('s1'))));
    },
  );

  it('answers through the handler as ask does, and a handler’s defective answer is an errored AnswerDefect', async () => {
    const p = fake({
      handler: (r) =>
        r.state === 'broken'
          ? {}
          : Object.fromEntries(
              r.keys.map((k) => [
                k,
                r.questions.get(k)!.kind === 'noul' ? { probability: 0.25 } : { probabilities: { x: 1 } },
              ]),
            ),
    });
    const only = new Map<string, Question>([['n', noul('Is it?')]]);
    const results = await runBatch(p, [
      req('ok', { questions: only }),
      req('bad', { state: 'broken', questions: only }),
    ]);
    expect(succeeded(results.get('ok')).answers.get('n')!.answer).toEqual({ type: 'noul', noul: 0.25 });
    expect(bytes(succeeded(results.get('ok')))).toBe(bytes(await p.ask(STATE, only, askOpts())));
    expect(erroredWith(results.get('bad'))).toBeInstanceOf(AnswerDefect);
  });

  it('yields results in no submission order, each custom id once', async () => {
    const p = fake();
    const requests = Array.from({ length: 20 }, (_, i) => req(`r${i}`));
    const info = await p.batch.submit(requests, sig());
    await p.batch.retrieve(info.id, sig());
    const ids = (await collect(p.batch.results(info.id, lookupOf(requests), sig()))).map((r) => r.customId);
    expect([...ids].sort()).toEqual(requests.map((r) => r.customId).sort());
    expect(ids).not.toEqual(requests.map((r) => r.customId));
  });

  it('a result whose custom id the lookup does not know is an errored AnswerDefect with the usage', async () => {
    const p = fake();
    const info = await p.batch.submit([req('a'), req('b')], sig());
    await p.batch.retrieve(info.id, sig());
    const results = await collect(
      p.batch.results(info.id, (id) => (id === 'a' ? { questions: questions(), explain: false } : null), sig()),
    );
    const b = results.find((r) => r.customId === 'b');
    expect(erroredWith(b)).toBeInstanceOf(AnswerDefect);
    expect((erroredWith(b) as AnswerDefect).usage?.inputTokens).toBeGreaterThan(0);
    expect(results.find((r) => r.customId === 'a')?.type).toBe('succeeded');
  });

  it('answers that do not fit the questions looked up are an AnswerDefect', async () => {
    const p = fake();
    const info = await p.batch.submit([req('a')], sig());
    await p.batch.retrieve(info.id, sig());
    const other = new Map<string, Question>([['else', noul('Something else?')]]);
    const [r] = await collect(p.batch.results(info.id, () => ({ questions: other, explain: false }), sig()));
    expect(erroredWith(r)).toBeInstanceOf(AnswerDefect);
  });

  it('batches are not `ask` requests: `requests` stays empty, the batch record and counters grow', async () => {
    const p = fake();
    await runBatch(p, [req('a'), req('b')]);
    await runBatch(p, [req('c')]);
    expect(p.requests).toHaveLength(0);
    expect(p.batch.count).toBe(2);
    expect(p.batch.requestCount).toBe(3);
    expect(p.batch.retrieveCalls).toBe(2);
    expect(p.batch.submitted[0].requests.map((r) => r.customId)).toEqual(['a', 'b']);
  });

  it('without `batch: false` the fake has a batch API; with it, none', () => {
    expect(fake().batch).toBeDefined();
    expect(new FakeProvider({ batch: false }).batch).toBeUndefined();
  });
});

describe('FakeProvider batch: time', () => {
  it('ends at the first retrieve by default', async () => {
    const p = fake();
    const info = await p.batch.submit([req('a')], sig());
    expect(info).toMatchObject({ status: 'in_progress', counts: { processing: 1, succeeded: 0 } });
    expect(await p.batch.retrieve(info.id, sig())).toMatchObject({
      status: 'ended',
      counts: { processing: 0, succeeded: 1 },
    });
  });

  it('with a latency, ends at the first retrieve once the injected clock has passed it', async () => {
    let now = 5_000;
    const p = fake({ now: () => now, batchLatencyMs: 60_000 });
    const info = await p.batch.submit([req('a')], sig());
    expect(info).toMatchObject({ createdAt: 5_000, expiresAt: 5_000 + BATCH_EXPIRY_MS });
    now = 64_999;
    expect((await p.batch.retrieve(info.id, sig())).status).toBe('in_progress');
    await expect(collect(p.batch.results(info.id, lookupOf([req('a')]), sig()))).rejects.toThrow(TypeError);
    now = 65_000;
    expect((await p.batch.retrieve(info.id, sig())).status).toBe('ended');
    expect(p.batch.submitted[0].endedAt).toBe(65_000);
  });

  it('a latency of 24 h or more ends at the expiry with every request expired', async () => {
    let now = 0;
    const p = fake({ now: () => now, batchLatencyMs: BATCH_EXPIRY_MS });
    const info = await p.batch.submit([req('a'), req('b')], sig());
    now = BATCH_EXPIRY_MS - 1;
    expect((await p.batch.retrieve(info.id, sig())).status).toBe('in_progress');
    now = BATCH_EXPIRY_MS + 5;
    expect(await p.batch.retrieve(info.id, sig())).toMatchObject({ status: 'ended', counts: { expired: 2 } });
    expect(p.batch.submitted[0].endedAt).toBe(BATCH_EXPIRY_MS);
  });

  it('the injected clock also times ask requests', async () => {
    const p = fake({ now: () => 42 });
    await p.ask(STATE, questions(), askOpts());
    expect(p.requests[0].at).toBe(42);
  });

  it('lists batches created at or after `since`, newest first, the lost ones left out', async () => {
    let now = 1_000;
    const p = fake({ now: () => now, batchFaults: [null, 'lost'] });
    const a = await p.batch.submit([req('a')], sig());
    now = 2_000;
    await p.batch.submit([req('a')], sig());
    const c = await p.batch.submit([req('a')], sig());
    expect((await p.batch.list({ ...sig(), since: 0 })).map((b) => b.id)).toEqual([c.id, a.id]);
    expect((await p.batch.list({ ...sig(), since: 1_001 })).map((b) => b.id)).toEqual([c.id]);
    expect(await p.batch.list({ ...sig(), since: 2_001 })).toEqual([]);
    await expect(p.batch.list({ ...sig(), since: Number.NaN })).rejects.toThrow(TypeError);
  });
});

describe('FakeProvider batch: faults', () => {
  it('expired: every request expired', async () => {
    const results = await runBatch(fake({ batchFaults: ['expired'] }), [req('a'), req('b')]);
    expect([...results.values()].map((r) => r.type)).toEqual(['expired', 'expired']);
  });

  it('partial: the first request and every second one errored (ProviderRefusal), the rest answered', async () => {
    const results = await runBatch(
      fake({ batchFaults: ['partial'] }),
      ['a', 'b', 'c', 'd', 'e'].map((id) => req(id)),
    );
    for (const id of ['a', 'c', 'e']) expect(erroredWith(results.get(id))).toBeInstanceOf(ProviderRefusal);
    for (const id of ['b', 'd']) expect(succeeded(results.get(id)).answers.size).toBe(3);
  });

  it('canceled: every request canceled', async () => {
    const results = await runBatch(fake({ batchFaults: ['canceled'] }), [req('a')]);
    expect(results.get('a')?.type).toBe('canceled');
  });

  it('faults are consumed one per submit; null leaves a batch alone; a test may set one until the batch ends', async () => {
    const p = fake({ batchFaults: [null, 'expired'] });
    expect((await runBatch(p, [req('a')])).get('a')?.type).toBe('succeeded');
    expect((await runBatch(p, [req('a')])).get('a')?.type).toBe('expired');
    expect((await runBatch(p, [req('a')])).get('a')?.type).toBe('succeeded');
    const info = await p.batch.submit([req('a')], sig());
    p.batch.submitted.at(-1)!.fault = 'canceled';
    await p.batch.retrieve(info.id, sig());
    expect((await collect(p.batch.results(info.id, lookupOf([req('a')]), sig())))[0].type).toBe('canceled');
  });

  it.each([
    [429, ProviderUnavailable],
    [529, ProviderUnavailable],
    [400, ProviderRefusal],
    [401, ProviderMisconfigured],
  ] as const)('{status: %i}: submit throws what ask would, and no batch is created', async (status, cls) => {
    const p = fake({ batchFaults: [{ status, retryAfterMs: 1_000 }] });
    const err = await p.batch.submit([req('a')], sig()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(cls);
    if (status === 429) expect((err as ProviderUnavailable).rateLimited).toBe(true);
    expect(p.batch.count).toBe(0);
    expect(await p.batch.list({ ...sig(), since: 0 })).toEqual([]);
  });

  it('ambiguous: submit throws, yet the batch exists; list finds it and it ends as usual', async () => {
    const p = fake({ batchFaults: ['ambiguous'] });
    const since = Date.now();
    await expect(p.batch.submit([req('a')], sig())).rejects.toBeInstanceOf(ProviderUnavailable);
    const [found] = await p.batch.list({ ...sig(), since });
    expect(found.status).toBe('in_progress');
    expect((await p.batch.retrieve(found.id, sig())).counts.succeeded).toBe(1);
  });

  it('lost: retrieve, results and cancel throw BatchNotFound', async () => {
    const p = fake({ batchFaults: ['lost'] });
    const info = await p.batch.submit([req('a')], sig());
    await expect(p.batch.retrieve(info.id, sig())).rejects.toBeInstanceOf(BatchNotFound);
    await expect(p.batch.cancel(info.id, sig())).rejects.toBeInstanceOf(BatchNotFound);
    await expect(collect(p.batch.results(info.id, lookupOf([req('a')]), sig()))).rejects.toBeInstanceOf(BatchNotFound);
    await expect(p.batch.retrieve('fakebatch_999', sig())).rejects.toBeInstanceOf(BatchNotFound);
    await expect(p.batch.retrieve('', sig())).rejects.toThrow(TypeError);
  });

  it('cancel: canceling, then ended with every request canceled; an ended batch stays as it is', async () => {
    const p = fake({ batchLatencyMs: 1e9 });
    const info = await p.batch.submit([req('a'), req('b')], sig());
    expect((await p.batch.cancel(info.id, sig())).status).toBe('canceling');
    expect(await p.batch.retrieve(info.id, sig())).toMatchObject({ status: 'ended', counts: { canceled: 2 } });
    const after = await p.batch.cancel(info.id, sig());
    expect(after).toMatchObject({ status: 'ended', counts: { canceled: 2 } });
  });
});

describe('FakeProvider batch: guards before any batch', () => {
  it.each([
    ['a bad custom id', [req('a b')]],
    ['a custom id of 65 characters', [req('x'.repeat(65))]],
    ['a repeated custom id', [req('a'), req('a')]],
    ['no request', []],
    ['a request without questions', [req('a', { questions: new Map() })]],
  ])('refuses %s with a TypeError', async (_, requests) => {
    const p = fake();
    await expect(p.batch.submit(requests, sig())).rejects.toThrow(TypeError);
    expect(p.batch.count).toBe(0);
  });

  it('refuses more requests or bytes than its limits', async () => {
    const p = fake({ batchMaxRequests: 2 });
    expect(fake().batch.maxRequests).toBe(100_000);
    await expect(p.batch.submit([req('a'), req('b'), req('c')], sig())).rejects.toThrow(/at most 2 requests/);
    const bytes = p.batch.requestBytes(req('a'));
    const tight = fake({ batchMaxBytes: 2 * bytes - 1 });
    await expect(tight.batch.submit([req('a'), req('b')], sig())).rejects.toThrow(/bytes/);
    await tight.batch.submit([req('a')], sig());
    expect(p.batch.count + tight.batch.count).toBe(1);
  });

  it('requestBytes grows with the state and refuses what submit refuses', () => {
    const p = fake();
    expect(p.batch.requestBytes(req('a', { state: 'x'.repeat(1000) }))).toBeGreaterThan(
      p.batch.requestBytes(req('a', { state: 'x' })) + 998,
    );
    expect(() => p.batch.requestBytes(req('a b'))).toThrow(TypeError);
    expect(() => p.batch.requestBytes(req('a', { questions: new Map() }))).toThrow(TypeError);
  });

  it('refuses a request over the input budget as ask does, in requestBytes and submit', async () => {
    const p = fake({ inputBudgetTokens: 100 });
    const big = req('big', { state: 'x'.repeat(1_000) });
    await expect(p.ask(big.state, big.questions, askOpts())).rejects.toMatchObject({ code: 'input_over_budget' });
    expect(() => p.batch.requestBytes(big)).toThrow(ProviderRefusal);
    await expect(p.batch.submit([big], sig())).rejects.toMatchObject({ code: 'input_over_budget' });
    expect(p.batch.count).toBe(0);
  });

  it('an abort between results ends the iteration with the signal’s reason', async () => {
    const p = fake();
    const requests = [req('a'), req('b'), req('c')];
    const info = await p.batch.submit(requests, sig());
    await p.batch.retrieve(info.id, sig());
    const c = new AbortController();
    const seen: string[] = [];
    const run = (async () => {
      for await (const r of p.batch.results(info.id, lookupOf(requests), { signal: c.signal })) {
        seen.push(r.customId);
        c.abort(new Error('lease lost'));
      }
    })();
    await expect(run).rejects.toThrow('lease lost');
    expect(seen).toHaveLength(1);
  });

  it('an aborted signal rejects every call', async () => {
    const p = fake();
    const info = await p.batch.submit([req('a')], sig());
    const c = new AbortController();
    c.abort(new Error('stop'));
    const s = { signal: c.signal };
    await expect(p.batch.submit([req('a')], s)).rejects.toThrow('stop');
    await expect(p.batch.retrieve(info.id, s)).rejects.toThrow('stop');
    await expect(p.batch.list({ ...s, since: 0 })).rejects.toThrow('stop');
    await expect(p.batch.cancel(info.id, s)).rejects.toThrow('stop');
    await expect(collect(p.batch.results(info.id, lookupOf([req('a')]), s))).rejects.toThrow('stop');
    expect(p.batch.count).toBe(1);
  });
});

describe('FakeProvider batch: question kinds', () => {
  it('answers every kind as ask does', async () => {
    const p = fake();
    const kinds = new Map<string, Question>([
      ['n', noul('Is it?')],
      ['c', choice('Which?', { x: 'X', y: 'Y', z: 'Z' })],
      ['s', score('How much?', ['low', 'mid', 'high', 'top'])],
    ]);
    const results = await runBatch(p, [req('k', { questions: kinds })]);
    expect(bytes(succeeded(results.get('k')))).toBe(bytes(await p.ask(STATE, kinds, askOpts())));
  });
});
