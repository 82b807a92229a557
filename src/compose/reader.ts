import { parsePinnedProvider, PINNED_PROVIDER_META_KEY } from '../decision/pinned-provider.js';
import { DecisionReader, type ReaderContext } from '../reads/reads.js';
import { DecisionsOffReader } from '../reads/reads-off.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import type { Provider } from '../providers/provider.js';
import type { MetaStore } from '../store/meta-store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { Store } from '../store/whole-store.js';

/**
 * The fingerprint context reads judge against (DESIGN §8: "current" means asked with the model
 * pinned now): the given provider's; with none given (`undefined`), the one the worker last pinned
 * (`verdict_meta` key `provider:pinned`); `null` for `'none'` (decisions off). With neither, the
 * context names no model and nothing reads current.
 */
export async function readContext(
  provider: Provider | 'none' | undefined,
  store: Pick<MetaStore, 'getMeta'>,
): Promise<ReaderContext | null> {
  if (provider === 'none') return null;
  if (provider)
    return {
      name: provider.name,
      model: provider.model,
      promptVersion: provider.promptVersion,
      effort: provider.effort,
    };
  return (
    parsePinnedProvider(await store.getMeta(PINNED_PROVIDER_META_KEY)) ?? {
      name: 'unconfigured',
      model: '',
      promptVersion: '',
      effort: null,
    }
  );
}

/**
 * Opens the reader every surface uses: "current" is judged against `readContext(provider)`, so
 * answers from another model read `model_changed`. With `'none'` every read is empty (DESIGN §9).
 */
export async function openReader(
  store: TrackerStore &
    QueueStore &
    MetaStore &
    HumanVerdictStore &
    DecisionStore &
    Pick<Store, 'loadItemForEvaluation'>,
  registry: Registry,
  provider: Provider | 'none' | undefined,
  logger: Logger,
): Promise<DecisionReader> {
  const ctx = await readContext(provider, store);
  if (ctx === null) return new DecisionsOffReader(store);
  return new DecisionReader(store, registry, ctx, logger);
}
