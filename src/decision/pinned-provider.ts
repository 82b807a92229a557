import type { FingerprintContext } from './questions.js';

/**
 * The fingerprint context a worker is pinned to, kept in `verdict_meta` so that a read in another
 * process (`verdict show`, `flags`) judges "current" against the model the worker asks, without
 * having to be given the same provider flags. A read with a provider configured uses that one.
 */
export const PINNED_PROVIDER_META_KEY = 'provider:pinned';

/** The provider identity and fingerprint context a worker asks with. */
export interface PinnedProvider extends FingerprintContext {
  /** `anthropic`, `openai` or `fake`. */
  readonly name: string;
}

/** Serialises a provider's identity for `verdict_meta`. */
export function pinnedProviderValue(p: PinnedProvider): string {
  return JSON.stringify({ name: p.name, model: p.model, promptVersion: p.promptVersion, effort: p.effort });
}

/** Parses a stored value; null when absent or unreadable (then nothing reads current). */
export function parsePinnedProvider(value: string | null): PinnedProvider | null {
  if (!value) return null;
  try {
    const v = JSON.parse(value) as Record<string, unknown>;
    if (typeof v.name !== 'string' || typeof v.model !== 'string' || typeof v.promptVersion !== 'string') return null;
    return {
      name: v.name,
      model: v.model,
      promptVersion: v.promptVersion,
      effort: typeof v.effort === 'string' ? v.effort : null,
    };
  } catch {
    return null;
  }
}
