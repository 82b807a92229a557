import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { createProvider } from '../../src/providers/create.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { askOpts, questions, STATE } from './support.js';

/**
 * The fake's request log (`FakeProvider.requests`): tests read every request back, while a worker
 * on `--provider fake` runs for hours and must not hold the state text of every call it made.
 */
describe('FakeProvider: the request log', () => {
  it('keeps every request by default, and counts them', async () => {
    const p = new FakeProvider();
    await p.ask(STATE, questions(), askOpts());
    await p.ask(`${STATE} again`, questions(), askOpts());
    expect(p.calls).toBe(2);
    expect(p.requests.map((r) => r.state)).toEqual([STATE, `${STATE} again`]);
  });

  it('with keepRequests: false keeps none and still counts them, answering alike', async () => {
    const kept = new FakeProvider();
    const p = new FakeProvider({ keepRequests: false });
    const a = await p.ask(STATE, questions(), askOpts());
    expect(a).toEqual(await kept.ask(STATE, questions(), askOpts()));
    await p.ask(STATE, questions(), askOpts());
    expect(p.calls).toBe(2);
    expect(p.requests).toEqual([]);
  });

  it('the fake the CLI and createVerdict build (createProvider) keeps no request', async () => {
    const p = createProvider(loadConfig({ provider: 'fake' }, {}), silentLogger) as FakeProvider;
    expect(p).toBeInstanceOf(FakeProvider);
    await p.ask(STATE, questions(), askOpts());
    expect(p.calls).toBe(1);
    expect(p.requests).toEqual([]);
  });
});
