import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/program.js';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { ANTHROPIC_PRICES, costUsd, pricingFor } from '../../src/providers/pricing.js';
import { estimateSet, estimateTarget } from '../../src/backfill/estimate.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/** `verdict jobs list|retry|drop` through the real CLI entry, and `estimate` on real items. */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet, effortSet]);
});
afterEach(async () => fx.cleanup());

async function item(ref: string, status = 'open', content = 'b') {
  return (
    await fx.store.createItem(
      { workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref, title: ref, content, fields: { status } },
      { quietPeriod: false },
    )
  ).row;
}

/** Runs the CLI in this process; returns the exit code and what it printed. */
async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  try {
    process.exitCode = undefined;
    const code = await main(['node', 'verdict', ...args, '--database-url', fx.file, '--log-level', 'silent']);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
    process.exitCode = undefined;
  }
}

describe('jobs', () => {
  it('list filters by set, state and item; retry re-owes parked jobs only; drop needs a filter and keeps jobs in flight', async () => {
    const a = await item('T-1');
    const b = await item('T-2');
    const c1 = (await fx.store.claimNextJob('w', 60_000, 8))!;
    await fx.store.parkJob(c1, 'refused 5 times: provider_refusal 400');
    const c2 = (await fx.store.claimNextJob('w', 60_000, 8))!;
    await fx.store.failJob(c2, { backoffMs: 3_600_000, error: 'provider_unavailable 529' });
    const backingOff = (await fx.store.getJob(c2.itemId, c2.questionSet))!;

    const all = JSON.parse((await cli('jobs', 'list', '--json')).out);
    expect(all).toHaveLength(4);
    const parked = JSON.parse((await cli('jobs', 'list', '--state', 'parked', '--json')).out);
    expect(parked.map((j: { ref: string; questionSet: string }) => [j.ref, j.questionSet])).toEqual([
      ['T-1', 'attention'],
    ]);
    expect(
      JSON.parse((await cli('jobs', 'list', '--item', 'T-2', '--set', 'effort', '--json')).out).map(
        (j: { itemId: string }) => j.itemId,
      ),
    ).toEqual([b.id]);
    const text = (await cli('jobs', 'list')).out;
    expect(text).toMatch(/T-1\s+attention\s+parked\s+0\s+1\s+0\s+0\s+-\s+refused 5 times: provider_refusal 400/);
    expect((await cli('jobs', 'list', '--state', 'stuck')).code).toBe(2);

    const retried = await cli('jobs', 'retry', '--json');
    expect(JSON.parse(retried.out).retried).toBe(1);
    const re = (await fx.store.getJob(a.id, 'attention'))!;
    expect(re).toMatchObject({ state: 'owed', attempts: 0, refusals: 0, abandons: 0 });
    // The backing-off job was not parked, so a plain retry leaves it alone.
    expect(await fx.store.getJob(c2.itemId, c2.questionSet)).toEqual(backingOff);
    await cli('jobs', 'retry', '--state', 'owed', '--set', c2.questionSet, '--item', 'T-1');
    // (The CLI's store reads the wall clock, the fixture a manual one: compare counters, not times.)
    const now = (await fx.store.getJob(c2.itemId, c2.questionSet))!;
    expect(backingOff.attempts).toBe(1);
    expect(now).toMatchObject({ state: 'owed', attempts: 0 });
    expect(now.notBefore).not.toBe(backingOff.notBefore);

    expect((await cli('jobs', 'drop')).code).toBe(2);
    const inFlight = (await fx.store.claimNextJob('w', 86_400_000 * 365, 8))!;
    const dropped = await cli('jobs', 'drop', '--all', '--json');
    expect(JSON.parse(dropped.out).dropped).toBe(3);
    expect((await fx.store.listJobs({})).map((j) => [j.itemId, j.questionSet])).toEqual([
      [inFlight.itemId, inFlight.questionSet],
    ]);
  });
});

describe('estimate', () => {
  it('prices unanswered keys from real states: nothing after a drain, everything for another model, one item after an edit', async () => {
    const items = [await item('T-1'), await item('T-2', 'open', 'x'.repeat(3_000)), await item('T-3')];
    await item('T-4', 'closed'); // the set does not apply
    const fake = estimateTarget('fake', 'fake-model-1');
    const before = await estimateSet(fx.store, attentionSet, fake);
    expect(before).toMatchObject({
      eligibleItems: 3,
      unanswered: { items: 3, calls: 3, questions: 9, costUsd: 0 },
      all: { items: 3, calls: 3 },
    });
    expect(before.pricingNote).toContain('fake provider');
    // The long body costs more input tokens than the short ones.
    expect(before.all.inputTokens).toBeGreaterThan(3 * 1_000);

    await drainNow(runnerOptions(fx, new FakeProvider()));
    const after = await estimateSet(fx.store, attentionSet, fake);
    expect(after.unanswered).toMatchObject({ items: 0, calls: 0, inputTokens: 0, outputTokens: 0 });
    expect(after.all).toEqual(before.all);

    const haiku = estimateTarget('anthropic', 'claude-haiku-5-5');
    const switched = await estimateSet(fx.store, attentionSet, haiku);
    expect(switched.unanswered.calls).toBe(3);
    expect(switched.unanswered.costUsd).toBeCloseTo(
      costUsd(ANTHROPIC_PRICES['claude-haiku-5-5'], switched.unanswered),
      12,
    );
    expect(switched.unanswered.costUsd).toBeGreaterThan(0);

    await fx.store.updateItem(items[0].id, { content: 'changed' });
    expect((await estimateSet(fx.store, attentionSet, fake)).unanswered).toMatchObject({
      items: 1,
      calls: 1,
      questions: 3,
    });
  });

  it('splits keys into calls of maxPerCall, as the runner does', async () => {
    const wide = defineQuestionSet({
      name: 'wide',
      questions: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`q${i}`, noul(`Question ${i} holds.`)])),
      maxPerCall: 2,
    });
    await item('T-1');
    const e = await estimateSet(fx.store, wide, estimateTarget('fake', 'fake-model-1'));
    expect(e.all).toMatchObject({ items: 1, calls: 3, questions: 5 });
  });

  it('the CLI prints the estimate; a paid backfill prints it and owes nothing without --yes', async () => {
    await item('T-1');
    await fx.store.dropJobs({});
    const r = await cli('estimate', '--set', 'attention', '--provider', 'anthropic', '--model', 'claude-haiku-4-5');
    expect(r.code).toBe(0);
    expect(r.out).toContain('estimate for anthropic:claude-haiku-4-5');
    expect(r.out).toMatch(
      /unanswered now \(what a backfill or reask sends\): 1 items, 1 calls, ~[\d,]+ input \/ ~[\d,]+ output tokens, \$0\.\d{4}/,
    );
    const bf = await cli('backfill', '--set', 'attention', '--provider', 'anthropic', '--model', 'claude-haiku-4-5');
    expect(bf.code).toBe(2);
    expect(bf.err).toContain('rerun with --yes');
    expect(await fx.store.listJobs({})).toHaveLength(0);
    const dry = await cli('backfill', '--set', 'attention', '--provider', 'fake', '--dry-run', '--json');
    expect(JSON.parse(dry.out).estimate.unanswered).toMatchObject({ items: 1, calls: 1 });
    expect(await fx.store.listJobs({})).toHaveLength(0);
  });
});

describe('pricing', () => {
  it('knows the table, dated snapshots, the free fake, and says when a price is unknown', () => {
    const haiku = pricingFor('anthropic', 'claude-haiku-5-5');
    expect(haiku.kind).toBe('priced');
    const p = (haiku as unknown as { price: Record<string, number> }).price;
    expect(
      [p.inputPerMTok, p.outputPerMTok, p.cacheReadPerMTok, p.cacheWritePerMTok].map((x) => Math.round(x * 1e6) / 1e6),
    ).toEqual([0.1, 0.5, 0.01, 0.125]);
    expect(pricingFor('anthropic', 'claude-haiku-5-5-20261007')).toMatchObject({
      kind: 'priced',
      model: 'claude-haiku-5-5',
    });
    expect(pricingFor('anthropic', 'claude-haiku-5-5-preview').kind).toBe('unknown');
    expect(pricingFor('fake', 'fake-model-1').kind).toBe('free');
    expect(pricingFor('openai', 'gpt-x').kind).toBe('unknown');
    expect(
      costUsd(ANTHROPIC_PRICES['claude-opus-5-5'], {
        inputTokens: 1_000_000,
        outputTokens: 1_000_000,
        cacheReadTokens: 1_000_000,
        cacheWriteTokens: 1_000_000,
      }),
    ).toBeCloseTo(4 + 20 + 0.4 + 5, 10);
  });
});
