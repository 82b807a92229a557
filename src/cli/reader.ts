import type { Config } from '../config.js';
import { DecisionReader, type ReaderContext } from '../decision/reads.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Store } from '../store/store.js';

/**
 * The fingerprint context reads judge against: the configured provider's. `null` when the
 * provider is `none` (decisions off: reads are empty). With no provider configured at all, the
 * context names no model, so every answer reads `model_changed`: pass `--provider` (or set
 * `VERDICT_PROVIDER`) as the worker has it. Building the provider opens no connection.
 */
export function readerContext(cfg: Config, logger: Logger): ReaderContext | null {
  if (cfg.provider === 'none') return null;
  const provider = cfg.provider === undefined ? null : createProvider(cfg, logger);
  return provider
    ? { name: provider.name, model: provider.model, promptVersion: provider.promptVersion, effort: provider.effort }
    : { name: 'unconfigured', model: '', promptVersion: '', effort: null };
}

/** A reader whose "current" is judged against the configured provider (see `readerContext`). */
export function readerFor(cfg: Config, store: Store, registry: Registry, logger: Logger): DecisionReader {
  return new DecisionReader(store, registry, readerContext(cfg, logger), logger);
}
