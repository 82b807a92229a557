import type { Config } from '../config.js';
import { DecisionReader } from '../decision/reads.js';
import { DecisionsOffReader } from '../decision/reads-off.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Store } from '../store/store.js';

/**
 * A reader whose "current" is judged against the configured provider's fingerprint context, so
 * answers from another model read `model_changed`. Building the provider opens no connection.
 * With provider `none` every read is empty (DESIGN §9).
 */
export function readerFor(cfg: Config, store: Store, registry: Registry, logger: Logger): DecisionReader {
  if (cfg.provider === 'none') return new DecisionsOffReader(store);
  const provider = cfg.provider === undefined ? null : createProvider(cfg, logger);
  const ctx = provider
    ? { name: provider.name, model: provider.model, promptVersion: provider.promptVersion, effort: provider.effort }
    : { name: 'none', model: '', promptVersion: '', effort: null };
  return new DecisionReader(store, registry, ctx);
}
