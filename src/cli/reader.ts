import type { Config } from '../config.js';
import { DecisionReader, type ReaderContext } from '../decision/reads.js';
import { DecisionsOffReader } from '../decision/reads-off.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Store } from '../store/store.js';

/**
 * The fingerprint context reads judge against: the configured provider's. `null` when the
 * provider is `none` (decisions off). With no provider configured at all, the context names no
 * model, so every answer reads `model_changed`: pass `--provider` (or set `VERDICT_PROVIDER`) as
 * the worker has it. Building the provider opens no connection.
 */
export function readerContext(cfg: Config, logger: Logger): ReaderContext | null {
  if (cfg.provider === 'none') return null;
  const provider = cfg.provider === undefined ? null : createProvider(cfg, logger);
  return provider
    ? { name: provider.name, model: provider.model, promptVersion: provider.promptVersion, effort: provider.effort }
    : { name: 'unconfigured', model: '', promptVersion: '', effort: null };
}

/**
 * A reader whose "current" is judged against the configured provider (see `readerContext`), so
 * answers from another model read `model_changed`. With provider `none` every read is empty
 * (DESIGN §9).
 */
export function readerFor(cfg: Config, store: Store, registry: Registry, logger: Logger): DecisionReader {
  const ctx = readerContext(cfg, logger);
  if (ctx === null) return new DecisionsOffReader(store);
  return new DecisionReader(store, registry, ctx, logger);
}
