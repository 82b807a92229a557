import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { Provider } from '../../src/providers/provider.js';
import { runOnce, type RunnerOptions, type RunReport } from '../../src/runner/job-life.js';
import type { Fixture } from './store-fixture.js';

/** Runner options over a fixture, with the fake provider unless one is given. */
export function runnerOptions(
  fx: Fixture,
  provider: Provider = new FakeProvider(),
  over: Partial<RunnerOptions> = {},
): RunnerOptions {
  return {
    store: fx.store,
    registry: fx.registry,
    provider,
    logger: silentLogger,
    workerId: 'runner-a',
    leaseMs: 60_000,
    random: () => 0.5, // no jitter
    ...over,
  };
}

/** Runs jobs until nothing is claimable now; returns the reports. */
export async function drainNow(opts: RunnerOptions, max = 1000): Promise<RunReport[]> {
  const out: RunReport[] = [];
  const signal = new AbortController().signal;
  for (let i = 0; i < max; i++) {
    const r = await runOnce(opts, signal);
    if (!r) return out;
    out.push(r);
  }
  throw new Error('drainNow: did not drain');
}
