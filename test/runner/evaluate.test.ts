import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { noul, type Question } from '../../src/decision/questions.js';
import { defineQuestionSet, Registry } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { runOnce } from '../../src/runner/job-life.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';

let fx: Fixture;
let fake: FakeProvider;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
  fake = new FakeProvider();
});
afterEach(async () => fx.cleanup());

const signal = new AbortController().signal;

async function newItem(ref = 'T-1') {
  return (
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref,
      title: `Item ${ref}`,
      content: 'waiting for legal sign-off',
      fields: { status: 'open' },
    })
  ).row;
}

describe('evaluate: what costs a call', () => {
  it('answers all keys in one call and stores one row per key', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const [r] = await drainNow(runnerOptions(fx, fake));
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].keys).toEqual(['blocked', 'needs_human_decision', 'waiting_on_external']);
    const rows = await fx.store.listDecisions(it1.id);
    expect(rows.map((d) => d.questionKey)).toEqual(['blocked', 'needs_human_decision', 'waiting_on_external']);
    expect(rows[0]).toMatchObject({
      provider: 'fake',
      model: 'fake-model-1',
      kind: 'noul',
      confidence: null,
      stateVersion: 2,
    });
    expect(await fx.store.getJob(it1.id, 'attention')).toBeNull();
  });

  it('sends the bytes that are hashed', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    await drainNow(runnerOptions(fx, fake));
    const { createHash } = await import('node:crypto');
    const row = (await fx.store.listDecisions(it1.id))[0];
    expect(createHash('sha256').update(fake.requests[0].state).digest('hex')).toBe(row.stateHash);
  });

  it('a write that changes no state byte costs no call; a comment does', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    await drainNow(runnerOptions(fx, fake));
    // A write that changes a stored value outside the state (a field set to the same JSON with other spacing)
    await fx.store.updateItem(it1.id, { fields: '{ "status": "open" }' });
    expect(await fx.store.getJob(it1.id, 'attention')).not.toBeNull(); // owed: a stored value changed
    fx.clock.advance(3_600_000);
    const [r] = await drainNow(runnerOptions(fx, fake));
    expect(r.outcome).toEqual({ kind: 'complete', reason: 'already_answered' });
    expect(fake.requests).toHaveLength(1);
    await fx.store.addComment({ itemId: it1.id, author: 'amy', body: 'still blocked on legal' });
    fx.clock.advance(3_600_000);
    await drainNow(runnerOptions(fx, fake));
    expect(fake.requests).toHaveLength(2);
  });

  it('rewording a question or changing the model re-asks at an unchanged state', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    await drainNow(runnerOptions(fx, fake));
    const reworded = defineQuestionSet({
      ...attentionSet,
      questions: { ...attentionSet.questions, blocked: noul('Is the work blocked by anything?') },
    });
    const reg2 = new Registry([reworded]);
    fx.store.setRegistry(reg2);
    await fx.store.oweJobs([{ itemId: it1.id, questionSet: 'attention' }], { quietPeriod: false });
    fx.clock.advance(3_600_000);
    await drainNow(runnerOptions(fx, fake, { registry: reg2 }));
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1].keys).toEqual(['blocked']); // only the reworded key
    const other = new FakeProvider({ model: 'fake-model-2' });
    await fx.store.oweJobs([{ itemId: it1.id, questionSet: 'attention' }], { quietPeriod: false });
    fx.clock.advance(3_600_000);
    await drainNow(runnerOptions(fx, other, { registry: reg2 }));
    expect(other.requests).toHaveLength(1);
    expect(other.requests[0].keys).toHaveLength(3);
    // control: the same model again asks nothing
    await fx.store.oweJobs([{ itemId: it1.id, questionSet: 'attention' }], { quietPeriod: false });
    fx.clock.advance(3_600_000);
    await drainNow(runnerOptions(fx, other, { registry: reg2 }));
    expect(other.requests).toHaveLength(1);
  });

  it("splits keys into calls of maxPerCall and stores each call's answers even when a later one fails", async () => {
    const big = defineQuestionSet({
      name: 'big',
      questions: Object.fromEntries(['a', 'b', 'c', 'd', 'e'].map((k) => [k, noul(`q ${k}`)])),
      maxPerCall: 2,
    });
    await fx.cleanup();
    fx = await makeFixture([big]);
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const f = new FakeProvider({ faults: [] });
    let calls = 0;
    f.handler = (req) => {
      calls++;
      if (calls === 2) throw Object.assign(new Error('boom'), { code: 'ECONNRESET' });
      return Object.fromEntries(req.keys.map((k) => [k, { probability: 0.5 }]));
    };
    const [r] = await drainNow(runnerOptions(fx, f));
    expect(r.outcome.kind).toBe('fail');
    expect((await fx.store.listDecisions(it1.id)).map((d) => d.questionKey)).toEqual(['a', 'b']);
    fx.clock.advance(60_000);
    f.handler = undefined;
    await drainNow(runnerOptions(fx, f));
    expect(f.requests.map((q) => q.keys)).toEqual([['a', 'b'], ['c', 'd'], ['c', 'd'], ['e']]);
  });

  it('drops a job whose set no longer applies (terminal item) before any idempotency read or call', async () => {
    const it1 = await newItem();
    await fx.store.updateItem(it1.id, { fields: { status: 'closed' } });
    fx.clock.advance(30_000);
    const [r] = await drainNow(runnerOptions(fx, fake));
    expect(r.outcome).toEqual({ kind: 'drop', reason: 'set no longer applies' });
    expect(fake.requests).toHaveLength(0);
  });

  it('parks a job of a set unknown in this process', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const [r] = await drainNow(runnerOptions(fx, fake, { registry: new Registry([effortSet]) }));
    expect(r.outcome.kind).toBe('park');
    expect((await fx.store.getJob(it1.id, 'attention'))!.state).toBe('parked');
  });

  it('parks at once a state over the input budget', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const [r] = await drainNow(runnerOptions(fx, new FakeProvider({ inputBudgetTokens: 10 })));
    expect(r.outcome.kind).toBe('park');
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'parked', refusals: 0 });
  });
});

describe('links are read for the sets that show them', () => {
  it('a WithLinks set is asked with its links; a set without links is asked with none, from a load that skips them', async () => {
    const linked = defineQuestionSet({
      name: 'linked',
      questions: { blocked: noul('The work on this item is blocked by another item.') },
      eligible: ['notSystem', 'tracksWork', 'notTerminal'],
      withLinks: true,
    });
    await fx.cleanup();
    fx = await makeFixture([attentionSet, linked]);
    const it1 = await newItem('T-1');
    const blocker = await newItem('T-2');
    await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: blocker.id, targetId: it1.id, linkType: 'blocks' });
    fx.clock.advance(3_600_000);
    const loads: Array<{ links?: boolean } | undefined> = [];
    const load = fx.store.loadItemForEvaluation.bind(fx.store);
    fx.store.loadItemForEvaluation = (id, o) => {
      loads.push(o);
      return load(id, o);
    };
    await drainNow(runnerOptions(fx, fake, { coAsk: false }));
    const states = fake.requests.map(
      (r) => JSON.parse(r.state) as { links?: Array<{ relation: string; ref: string }> },
    );
    const withLinks = states.filter((s) => s.links !== undefined);
    // T-1 is blocked by T-2 and T-2 blocks T-1: each item's linked state names the other.
    expect(withLinks.map((s) => s.links)).toEqual(
      expect.arrayContaining([[expect.objectContaining({ relation: 'blocked_by', ref: 'T-2' })]]),
    );
    expect(withLinks).toHaveLength(2);
    expect(states).toHaveLength(4);
    expect(loads.filter((o) => o?.links === false)).toHaveLength(2);
    expect(loads.filter((o) => o?.links === true)).toHaveLength(2);
  });
});

describe('fences: a write during an evaluation, a lost lease', () => {
  it('a write landing during the provider call: the answers are kept, the job survives the completion and runs once more', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    let wrote = false;
    fake.handler = async (req) => {
      if (!wrote) {
        wrote = true;
        await fx.store.updateItem(it1.id, { content: 'unblocked now' }); // lands while the call is out
      }
      return Object.fromEntries(req.keys.map((k) => [k, { probability: 0.4 }]));
    };
    const first = await runOnce(runnerOptions(fx, fake), signal);
    expect(first!.recorded).toBe('superseded');
    expect(await fx.store.listDecisions(it1.id)).toHaveLength(3); // paid for, so kept
    const job = (await fx.store.getJob(it1.id, 'attention'))!;
    expect(job).toMatchObject({ claimToken: null, state: 'owed', generation: 2 });
    fx.clock.advance(3_600_000);
    const second = await runOnce(runnerOptions(fx, fake), signal);
    expect(second!.recorded).toBe('applied');
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1].state).toContain('unblocked now');
    expect(await fx.store.getJob(it1.id, 'attention')).toBeNull();
  });

  it('a write landing before the send: the old state is never sent; the newer generation asks once', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    await fx.store.addComment({ itemId: it1.id, author: 'amy', body: 'the key is SECRET-123' }, { quietPeriod: false });
    fx.clock.advance(30_000);
    let deleted = false;
    const opts = runnerOptions(fx, fake, {
      beforeAsk: async () => {
        if (deleted) return;
        deleted = true;
        const c = (await fx.store.loadItemForEvaluation(it1.id))!.comments[0];
        await fx.store.deleteComment(c.id); // the built state still holds its text
      },
    });
    const first = await runOnce(opts, signal);
    expect(first!.outcome).toMatchObject({ kind: 'release' });
    expect(first!.recorded).toBe('superseded');
    expect(fake.requests).toHaveLength(0);
    fx.clock.advance(3_600_000);
    await runOnce(opts, signal);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].state).not.toContain('SECRET-123');
  });

  it('a runner whose lease expired cannot complete, fail or drop the new claim', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const late = (await fx.store.claimNextJob('runner-a', 60_000, 8))!;
    fx.clock.advance(121_000); // the lease (60 s), then its abandon backoff (one lease), run out
    const taker = (await fx.store.claimNextJob('runner-b', 60_000, 8))!;
    expect(taker.abandons).toBe(1);
    expect(await fx.store.completeJob(late)).toBe('lost');
    expect(await fx.store.failJob(late, { backoffMs: 1000, error: 'x' })).toBe('lost');
    expect(await fx.store.dropJob(late, 'x')).toBe('lost');
    expect(await fx.store.releaseJob(late)).toBe('lost');
    expect(await fx.store.renewLease(late, 60_000)).toBe(false);
    expect((await fx.store.getJob(it1.id, 'attention'))!.claimToken).toBe(taker.claimToken);
    // control: the live claim can complete
    expect(await fx.store.completeJob(taker)).toBe('applied');
  });
});

describe('liveness before the send', () => {
  it('an item deleted right before the send: no call, the job drops', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    // A provider that never calls beforeSend itself: only the runner's own last check stands guard.
    const sent: string[] = [];
    const careless = Object.assign(Object.create(fake), {
      ask: async (state: string, qs: ReadonlyMap<string, unknown>, o: unknown) => {
        sent.push(state);
        return fake.ask(state, qs as never, { ...(o as object), beforeSend: () => undefined } as never);
      },
    });
    const opts = runnerOptions(fx, careless, { beforeAsk: async () => void (await fx.store.softDeleteItem(it1.id)) });
    const r = await runOnce(opts, signal);
    expect(sent).toHaveLength(0);
    expect(fake.requests).toHaveLength(0);
    expect(r!.outcome.kind).toBe('drop');
    // the delete itself owed a newer generation; that run drops too, still without a call
    fx.clock.advance(3_600_000);
    await drainNow(runnerOptions(fx, fake));
    expect(fake.requests).toHaveLength(0);
    expect(await fx.store.getJob(it1.id, 'attention')).toBeNull();
  });

  it('control: without the delete the same path makes the call', async () => {
    await newItem();
    fx.clock.advance(30_000);
    await runOnce(runnerOptions(fx, fake, { beforeAsk: () => undefined }), signal);
    expect(fake.requests).toHaveLength(1);
  });

  it('a deleted item between provider retries: beforeSend stops the retry', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    let sends = 0;
    const retrying = {
      ...fake,
      name: 'fake',
      model: fake.model,
      promptVersion: fake.promptVersion,
      effort: null,
      worstCaseCallMs: 1000,
      ask: async (state: string, qs: Map<string, unknown>, o: { beforeSend: () => Promise<void> | void }) => {
        await o.beforeSend();
        sends++;
        await fx.store.softDeleteItem(it1.id); // lands between attempt 1 and its retry
        await o.beforeSend();
        sends++;
        throw new Error('unreachable');
      },
    };
    const r = await runOnce(runnerOptions(fx, retrying as never), signal);
    expect(sends).toBe(1);
    expect(r!.outcome.kind).toBe('drop');
  });

  it('a deleted workspace holds the job; a restore resumes it', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const opts = runnerOptions(fx, fake, {
      beforeAsk: async () => void (await fx.store.softDeleteWorkspace(fx.ws.id)),
    });
    const r = await runOnce(opts, signal);
    expect(r!.outcome.kind).toBe('release');
    expect(fake.requests).toHaveLength(0);
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
      state: 'owed',
      attempts: 0,
      claimToken: null,
    });
    expect(await runOnce(runnerOptions(fx, fake), signal)).toBeNull(); // held
    await fx.store.restoreWorkspace(fx.ws.id);
    const resumed = await runOnce(runnerOptions(fx, fake), signal);
    expect(resumed!.outcome).toEqual({ kind: 'complete', reason: 'answered' });
    expect(fake.requests).toHaveLength(1);
  });
});

describe('permanent versus transient failures', () => {
  it('HTTP-400-style refusals park the job after 5', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const f = new FakeProvider({ faults: Array(10).fill({ status: 400 }) });
    const kinds: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await runOnce(runnerOptions(fx, f), signal);
      kinds.push(`${r!.outcome.kind}/${r!.recorded}`);
      fx.clock.advance(3_600_000 * 2);
    }
    // The refusal that reaches the limit reads as the park the store applied.
    expect(kinds).toEqual(['refuse/applied', 'refuse/applied', 'refuse/applied', 'refuse/applied', 'park/applied']);
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'parked', refusals: 5 });
    expect(await runOnce(runnerOptions(fx, f), signal)).toBeNull();
    // a write re-owes it
    await fx.store.updateItem(it1.id, { content: 'rewritten' });
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'owed', refusals: 0 });
  });

  it('repeated 503s never drop the job and the backoff follows 30 s × 2^(n−1) up to 1 h', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const f = new FakeProvider({ faults: Array(12).fill({ status: 503 }) });
    const waits: number[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await runOnce(runnerOptions(fx, f), signal);
      expect(r!.outcome.kind).toBe('fail');
      const job = (await fx.store.getJob(it1.id, 'attention'))!;
      waits.push(job.notBefore - fx.clock.now());
      fx.clock.set(job.notBefore);
    }
    expect(waits).toEqual([
      30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000, 3_600_000,
    ]);
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'owed', refusals: 0, attempts: 10 });
  });

  it('a 429 defers without counting an attempt', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const r = await runOnce(
      runnerOptions(fx, new FakeProvider({ faults: [{ status: 429, retryAfterMs: 90_000 }] })),
      signal,
    );
    expect(r!.outcome).toMatchObject({ kind: 'defer', delayMs: 90_000 });
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
      attempts: 0,
      notBefore: fx.clock.now() + 90_000,
    });
  });

  it('a broken answer (missing key, wrong kind) is a refusal, never a crash', async () => {
    await newItem();
    fx.clock.advance(30_000);
    const r = await runOnce(runnerOptions(fx, new FakeProvider({ faults: ['partial'] })), signal);
    expect(r!.outcome).toEqual({ kind: 'refuse', reason: 'answer_defect' });
    fx.clock.advance(120_000);
    const r2 = await runOnce(runnerOptions(fx, new FakeProvider({ faults: ['wrong_kind'] })), signal);
    expect(r2!.outcome).toEqual({ kind: 'refuse', reason: 'answer_defect' });
  });

  it('a misconfigured provider releases the job without an attempt', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const r = await runOnce(runnerOptions(fx, new FakeProvider({ faults: [{ status: 401 }] })), signal);
    expect(r!.outcome.kind).toBe('misconfigured');
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({
      attempts: 0,
      state: 'owed',
      claimToken: null,
    });
  });

  it('the abandon limit parks a job whose claims keep dying, before any call', async () => {
    const it1 = await newItem();
    fx.clock.advance(30_000);
    for (let i = 0; i < 8; i++) {
      expect(await fx.store.claimNextJob(`dead-${i}`, 1_000, 8)).not.toBeNull();
      // The lease runs out, then the abandon backoff the next claim counts (1 s × 2^i).
      fx.clock.advance(1_001 + 1_000 * 2 ** i);
    }
    expect(await fx.store.claimNextJob('next', 1_000, 8)).toBeNull();
    expect((await fx.store.getJob(it1.id, 'attention'))!).toMatchObject({ state: 'parked', abandons: 8 });
  });
});

describe('rows the builder cannot read park visibly instead of failing forever', () => {
  it('fields nested deeper than the parser can follow park the job at the first claim', async () => {
    const deep = '{"a":' + '['.repeat(20_000) + ']'.repeat(20_000) + '}';
    // The write door refuses it with a clear error...
    await expect(
      fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-D',
        title: 't',
        content: 'b',
        fields: deep,
      }),
    ).rejects.toThrow(/not valid JSON|nest deeper/);
    await expect(
      fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-D',
        title: 't',
        content: 'b',
        fields: '{"a":' + '['.repeat(40) + ']'.repeat(40) + '}',
      }),
    ).rejects.toThrow(/nest deeper than 32/);
    // ...and a row that got past it (an older row, another writer) parks instead of failing forever.
    const it1 = (
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-D',
        title: 't',
        content: 'b',
        fields: { status: 'open' },
      })
    ).row;
    fx.store.ctx.db.$client
      .prepare('UPDATE items SET fields = ? WHERE id = ?')
      .run('{"a":' + '['.repeat(5_000) + ']'.repeat(5_000) + '}', it1.id);
    fx.clock.advance(30_000);
    const r = await runOnce(runnerOptions(fx, fake), signal);
    expect(r!.outcome.kind).toBe('park');
    expect((await fx.store.getJob(it1.id, 'attention'))!.state).toBe('parked');
    expect(fake.requests).toHaveLength(0);
  });

  it('a collection schema whose fields is not a list does not break the runner', async () => {
    // The door refuses such a schema (DESIGN §3.1)...
    await expect(
      fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'odd', schema: { fields: 5 } as never }),
    ).rejects.toThrow(/schema\.fields/);
    // ...and a row that got past it (an older row, another writer) does not break the runner.
    const odd = await fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'odd', schema: { fields: [] } });
    fx.store.ctx.db.$client.prepare('UPDATE collections SET schema = ? WHERE id = ?').run('{"fields":5}', odd.id);
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: odd.id,
      ref: 'O-1',
      title: 't',
      content: 'b',
      fields: { status: 'open' },
    });
    fx.clock.advance(30_000);
    const r = await runOnce(runnerOptions(fx, fake), signal);
    expect(r!.outcome).toEqual({ kind: 'complete', reason: 'answered' });
  });
});

describe('resolved questions before the send', () => {
  it('a question whose source changed or went away (a deleted convention) is not sent; the job is released', async () => {
    let wording: string | null = 'The item breaks rule CONF-1: never mention the SECRET codename.';
    const resolved = defineQuestionSet({
      name: 'rules',
      resolve: async (): Promise<Record<string, Question>> =>
        wording === null ? {} : { 'conv:CONF-1': noul(wording) },
    });
    await fx.cleanup();
    fx = await makeFixture([resolved]);
    const it1 = await newItem();
    fx.clock.advance(30_000);
    const opts = runnerOptions(fx, fake, { beforeAsk: () => void (wording = null) });
    const r = await runOnce(opts, signal);
    expect(r!.outcome).toEqual({ kind: 'release', reason: 'questions changed before send' });
    expect(fake.requests).toHaveLength(0);
    expect((await fx.store.getJob(it1.id, 'rules'))!).toMatchObject({ attempts: 0, claimToken: null });
    // control: with the rule unchanged the same path asks it
    wording = 'The item breaks rule CONF-1: never mention the SECRET codename.';
    await runOnce(runnerOptions(fx, fake, { beforeAsk: () => undefined }), signal);
    expect(fake.requests).toHaveLength(1);
  });
});
