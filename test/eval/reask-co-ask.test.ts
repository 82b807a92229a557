import { afterEach, describe, expect, it } from 'vitest';
import { formatEvalReport } from '../../src/cli/eval.js';
import { questionsOf } from '../../src/decision/registry.js';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { parseGoldSet } from '../../src/eval/gold-set.js';
import { runEval } from '../../src/eval/run-eval.js';
import { bundledSamplePath, importBeads } from '../../src/importers/beads.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { batchCostOf, formatUsd } from '../../src/providers/pricing.js';
import type { BatchApi, Provider } from '../../src/providers/provider.js';
import { estimateTarget } from '../../src/backfill/estimate.js';
import type { WorkspaceRow } from '../../src/store/tracker-reads.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * `eval --compare`'s price of re-asking every live item with model B counts calls as the worker
 * makes them (DESIGN §7.2): an item's sets reading byte-identical state share one call. Checked
 * against the spend table after a drain with model B, the fake provider counting tokens as the
 * estimate's heuristic does (`usage: 'prompt'`), on a co-asked set pair and on the bundled sample.
 */

let fx: Fixture | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const within = (estimated: number, billed: number) => Math.abs(estimated - billed) / billed;
const MODEL_B = 'fake-model-2';

/** One gold row per key of every set, on the item `ref`, with a label of the key's kind. */
async function goldOver(f: Fixture, ws: WorkspaceRow, ref: string) {
  const rows: string[] = [];
  for (const set of f.registry.all()) {
    const qs = await questionsOf(set, { workspaceId: ws.id, store: f.store });
    for (const [key, q] of Object.entries(qs)) {
      const label = q.kind === 'noul' ? true : q.kind === 'choice' ? Object.keys(q.options)[0] : 0;
      rows.push(JSON.stringify({ ref, set: set.name, key, label }));
    }
  }
  return { rows: parseGoldSet(rows.join('\n'), 'gold.jsonl'), source: 'gold.jsonl' };
}

/** The re-ask estimate of `eval --compare`, then what a drain with model B bills for the same items. */
async function reaskThenDrain(
  f: Fixture,
  ws: WorkspaceRow,
  ref: string,
  b: Provider = new FakeProvider({ model: MODEL_B }),
) {
  const report = await runEval({
    store: f.store,
    registry: f.registry,
    workspace: ws,
    gold: await goldOver(f, ws, ref),
    a: { kind: 'asked', provider: new FakeProvider() },
    b: { kind: 'asked', provider: b },
  });
  const reask = report.reask!;
  // The eval's own calls are billed as outcome "eval": only the drain's calls are compared.
  const before = await f.store.spendSince(365 * 86_400_000);
  f.clock.advance(24 * 3_600_000);
  await drainNow(runnerOptions(f, new FakeProvider({ model: MODEL_B, usage: 'prompt' })), 100_000);
  const after = await f.store.spendSince(365 * 86_400_000);
  const billed = {
    calls: after.calls - before.calls,
    inputTokens: after.inputTokens - before.inputTokens,
    outputTokens: after.outputTokens - before.outputTokens,
  };
  return { report, reask, billed };
}

describe('eval --compare: the price of re-asking with model B', () => {
  it('a co-asked set pair: calls and tokens within 10 % of what the drain bills', async () => {
    fx = await makeFixture([attentionSet, effortSet]);
    for (const ref of ['T-1', 'T-2', 'T-3']) {
      await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref,
          title: ref,
          content: `body of ${ref}`,
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
    }
    const { reask, billed } = await reaskThenDrain(fx, fx.ws, 'T-1');
    expect(billed.calls).toBe(3);
    // Each set alone counts a call per item; together the pair shares one.
    expect(reask.sets.map((s) => s.calls)).toEqual([3, 3]);
    expect(reask.total.calls).toBe(billed.calls);
    expect(within(reask.total.inputTokens, billed.inputTokens)).toBeLessThan(0.1);
    expect(within(reask.total.outputTokens, billed.outputTokens)).toBeLessThan(0.1);
    expect(reask.batchCostUsd).toBeNull(); // the fake has no batch API
  });

  it('the bundled sample: calls and tokens within 10 % of what the drain bills', async () => {
    fx = await makeFixture();
    await importBeads(fx.store, bundledSamplePath(), { workspaceSlug: 'beads' });
    const ws = (await fx.store.getWorkspaceBySlug('beads'))!;
    // The gold rows' item only names the sets; the re-ask covers every live item.
    const [first] = await fx.store.listItems({ workspaceId: ws.id, limit: 1 });
    const { reask, billed } = await reaskThenDrain(fx, ws, first.ref);
    expect(billed.calls).toBeGreaterThan(0);
    const alone = reask.sets.reduce((n, s) => n + s.calls, 0);
    expect(alone).toBeGreaterThan(billed.calls * 1.1); // the figure the sets alone give, which the total must not
    expect(within(reask.total.calls, billed.calls)).toBeLessThan(0.1);
    expect(within(reask.total.inputTokens, billed.inputTokens)).toBeLessThan(0.1);
    expect(within(reask.total.outputTokens, billed.outputTokens)).toBeLessThan(0.1);
  }, 180_000); // 80 items estimated and drained on a shared machine

  it('states the batch price where a worker would batch the re-ask, and not with --batch off', async () => {
    fx = await makeFixture([attentionSet, effortSet]);
    for (const ref of ['T-1', 'T-2']) {
      await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref,
          title: ref,
          content: `body of ${ref}`,
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
    }
    // Model B priced as an Anthropic model with a batch API; its calls answered by the fake.
    const fake = new FakeProvider({ model: 'claude-haiku-4-5' });
    const b = Object.assign(Object.create(fake) as Provider, { name: 'anthropic', batch: {} as BatchApi });
    const report = await runEval({
      store: fx.store,
      registry: fx.registry,
      workspace: fx.ws,
      gold: await goldOver(fx, fx.ws, 'T-1'),
      a: { kind: 'asked', provider: new FakeProvider() },
      b: { kind: 'asked', provider: b },
      maxCostUsd: 1,
    });
    const reask = report.reask!;
    expect(reask.total.calls).toBe(2);
    const half = batchCostOf(estimateTarget('anthropic', 'claude-haiku-4-5').pricing, reask.total)!;
    expect(half).toBeGreaterThan(0);
    expect(half).toBeCloseTo(reask.total.costUsd! / 2, 12);
    expect(reask.batchCostUsd).toBeCloseTo(half, 12);
    const text = formatEvalReport(report, 'r.svg', 'auto');
    expect(text).toContain(
      'total, with sets reading the same state asked in one call as the worker asks them: 2 items, 2 calls',
    );
    expect(text).toContain(`a worker sends the re-ask as Message Batches at the batch price: ${formatUsd(half)}`);
    expect(formatEvalReport(report, 'r.svg', 'off')).not.toContain('Message Batches');
  });
});
