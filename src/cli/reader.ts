import type { Config } from '../config.js';
import { DecisionReader, type ReaderContext } from '../reads/reads.js';
import { DecisionsOffReader } from '../reads/reads-off.js';
import { parsePinnedProvider, PINNED_PROVIDER_META_KEY } from '../decision/pinned-provider.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Store } from '../store/store.js';

/**
 * The fingerprint context reads judge against: the configured provider's; with none configured,
 * the one the worker last pinned (`verdict_meta` key `provider:pinned`, DESIGN §8: "current" means
 * asked with the model pinned now); `null` when the provider is `none` (decisions off). With
 * neither, the context names no model and nothing reads current. Building the provider opens no
 * connection.
 */
export async function readerContext(cfg: Config, store: Store, logger: Logger): Promise<ReaderContext | null> {
  if (cfg.provider === 'none') return null;
  const provider = cfg.provider === undefined ? null : createProvider(cfg, logger);
  if (provider) return { name: provider.name, model: provider.model, promptVersion: provider.promptVersion, effort: provider.effort };
  return parsePinnedProvider(await store.getMeta(PINNED_PROVIDER_META_KEY)) ?? { name: 'unconfigured', model: '', promptVersion: '', effort: null };
}

/**
 * A reader whose "current" is judged against `readerContext`, so answers from another model read
 * `model_changed`. With provider `none` every read is empty (DESIGN §9).
 */
export async function readerFor(cfg: Config, store: Store, registry: Registry, logger: Logger): Promise<DecisionReader> {
  const ctx = await readerContext(cfg, store, logger);
  if (ctx === null) return new DecisionsOffReader(store);
  return new DecisionReader(store, registry, ctx, logger);
}
