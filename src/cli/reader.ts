import type { Config } from '../config.js';
import { readerContextFor, readerOn } from '../compose/reader.js';
import type { DecisionReader, ReaderContext } from '../reads/reads.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { MetaStore } from '../store/meta-store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { Store } from '../store/whole-store.js';

/** The configured provider for reads: `'none'`, the built provider, or undefined when none is configured. Building opens no connection. */
function readProvider(cfg: Config, logger: Logger) {
  if (cfg.provider === 'none') return 'none' as const;
  return cfg.provider === undefined ? undefined : (createProvider(cfg, logger) ?? undefined);
}

/**
 * The fingerprint context reads judge against (compose/reader.ts): the configured provider's; with
 * none configured, the one the worker last pinned; `null` when the provider is `none`.
 */
export async function readerContext(
  cfg: Config,
  store: Pick<MetaStore, 'getMeta'>,
  logger: Logger,
): Promise<ReaderContext | null> {
  return readerContextFor(readProvider(cfg, logger), store);
}

/**
 * A reader whose "current" is judged against `readerContext`, so answers from another model read
 * `model_changed`. With provider `none` every read is empty (DESIGN §9).
 */
export async function readerFor(
  cfg: Config,
  store: TrackerStore &
    QueueStore &
    DecisionStore &
    MetaStore &
    HumanVerdictStore &
    Pick<Store, 'loadItemForEvaluation'>,
  registry: Registry,
  logger: Logger,
): Promise<DecisionReader> {
  return readerOn(store, registry, readProvider(cfg, logger), logger);
}
