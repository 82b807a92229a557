import type { Config } from '../config.js';
import { DecisionReader } from '../decision/reads.js';
import { DecisionsOffReader } from '../decision/reads-off.js';
import { parsePinnedProvider, PINNED_PROVIDER_META_KEY } from '../decision/pinned-provider.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Store } from '../store/store.js';

/**
 * A reader whose "current" is judged against the configured provider's fingerprint context, so
 * answers from another model read `model_changed`. Building the provider opens no connection.
 * With provider `none` every read is empty (DESIGN §9). With no provider configured, the one the
 * worker last pinned (`verdict_meta` key `provider:pinned`) is used.
 */
export async function readerFor(cfg: Config, store: Store, registry: Registry, logger: Logger): Promise<DecisionReader> {
  if (cfg.provider === 'none') return new DecisionsOffReader(store);
  const provider = cfg.provider === undefined ? null : createProvider(cfg, logger);
  // Without a configured provider, judge against the one the worker last ran with (DESIGN §8:
  // "current" means asked with the model pinned now). With neither, nothing reads current.
  const ctx = provider
    ? { name: provider.name, model: provider.model, promptVersion: provider.promptVersion, effort: provider.effort }
    : (parsePinnedProvider(await store.getMeta(PINNED_PROVIDER_META_KEY)) ?? { name: 'none', model: '', promptVersion: '', effort: null });
  return new DecisionReader(store, registry, ctx);
}
