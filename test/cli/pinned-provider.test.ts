import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openReader } from '../../src/compose/reader.js';
import { readsAgainst } from '../../src/cli/reader.js';
import { loadConfig } from '../../src/config.js';
import { pinnedProviderValue, PINNED_PROVIDER_META_KEY } from '../../src/decision/pinned-provider.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * A read with no provider configured (`verdict show` after the demo) judges "current" against the
 * provider the worker last pinned, not against nothing.
 */
let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture();
});
afterEach(async () => fx.cleanup());

describe('reads without a configured provider', () => {
  it('use the pinned provider recorded by the worker', async () => {
    const it1 = (
      await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: 'T-1',
          title: 't',
          content: 'b',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      )
    ).row;
    const fake = new FakeProvider({ model: 'fake-model-7' });
    await drainNow(runnerOptions(fx, fake));
    const cfg = loadConfig({ databaseUrl: join(fx.file) }, {});
    expect(cfg.provider).toBeUndefined();
    // control: nothing pinned yet, so nothing can read current
    const before = await (
      await openReader(fx.store, fx.registry, readsAgainst(cfg, silentLogger), silentLogger)
    ).decisions(it1.id);
    expect(before.length).toBeGreaterThan(0);
    expect(before.every((d) => !d.current)).toBe(true);
    await fx.store.setMeta(PINNED_PROVIDER_META_KEY, pinnedProviderValue(fake));
    const after = await (
      await openReader(fx.store, fx.registry, readsAgainst(cfg, silentLogger), silentLogger)
    ).decisions(it1.id);
    expect(after.every((d) => d.current)).toBe(true);
    // a pinned other model makes them stale again
    await fx.store.setMeta(PINNED_PROVIDER_META_KEY, pinnedProviderValue(new FakeProvider({ model: 'fake-model-8' })));
    const other = await (
      await openReader(fx.store, fx.registry, readsAgainst(cfg, silentLogger), silentLogger)
    ).decisions(it1.id);
    expect(other.every((d) => !d.current)).toBe(true);
  });
});
