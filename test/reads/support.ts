import { DecisionReader, type ReaderContext } from '../../src/reads/reads.js';
import type { Registry } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { Provider } from '../../src/providers/provider.js';
import type { RunReport } from '../../src/runner/job-life.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import type { Fixture } from '../harness/store-fixture.js';

/** Past any quiet period and re-ask debounce (1 h), then runs every claimable job. */
export async function settle(fx: Fixture, provider: Provider, registry: Registry = fx.registry): Promise<RunReport[]> {
  fx.clock.advance(3_600_001);
  return drainNow(runnerOptions(fx, provider, { registry }));
}

/** The fingerprint context of a provider, as the CLI's reader builds it. */
export function ctxOf(p: Pick<Provider, 'name' | 'model' | 'promptVersion' | 'effort'>): ReaderContext {
  return { name: p.name, model: p.model, promptVersion: p.promptVersion, effort: p.effort };
}

/** A reader over the fixture judging against `provider` (default: a fresh fake, model fake-model-1). */
export function readerOf(
  fx: Fixture,
  registry: Registry = fx.registry,
  provider: Pick<Provider, 'name' | 'model' | 'promptVersion' | 'effort'> = new FakeProvider(),
): DecisionReader {
  return new DecisionReader(fx.store, registry, ctxOf(provider));
}

/** `set/key` → `current` or the stale reason (with moved parts), for compact assertions. */
export async function currency(reader: DecisionReader, itemId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const d of await reader.decisions(itemId)) {
    out[`${d.questionSet}/${d.questionKey}`] = d.current
      ? 'current'
      : `${d.staleReason}${d.changedParts.length ? `(${d.changedParts.join(',')})` : ''}`;
  }
  return out;
}
