/**
 * Prices per model, in one place (DESIGN §1 principle 10: no surprise bills). `status`,
 * `estimate` and `backfill --dry-run` price tokens with this table and nothing else.
 *
 * Source: the Anthropic SDK's model list and the platform's pricing docs, checked 2026-11-30:
 * claude-haiku-5-5 is "from $0.10/$0.50 per MTok" (input/output, standard tier), claude-haiku-4-5
 * $1/$5, claude-sonnet-5-5 $2/$10, claude-opus-5-5 $4/$20. Prompt-cache multipliers are the same pages': reads 0.1× the
 * input price, writes 1.25× (5-minute TTL) or 2× (1-hour TTL). Batch requests (Message Batches, DESIGN §7.3) cost
 * 50 % of these prices for every kind of token ("50 % of standard prices", Anthropic's
 * batch-processing docs; the cache multipliers apply on top of it): `batchPrice`, `batchCostOf`. Re-check the page and update this table (and its date) when prices change; a model
 * missing here is reported as "price unknown", never guessed.
 */

/** Dollars per million tokens (USD / MTok). */
export interface ModelPrice {
  inputPerMTok: number;
  outputPerMTok: number;
  /** Prompt-cache reads. */
  cacheReadPerMTok: number;
  /** Prompt-cache writes (5-minute TTL). */
  cacheWritePerMTok: number;
  /**
   * Prompt-cache writes at the 1-hour TTL (`cache_control.ttl: '1h'`, which batch requests use so
   * a batch's requests can hit one cache entry: STACK.md §3): 2× the input price.
   */
  cacheWrite1hPerMTok: number;
}

/** When the table was last checked against its source (the pricing docs named above). */
export const PRICES_CHECKED = '2026-11-30';

const CACHE_READ_MULTIPLIER = 0.1;
const CACHE_WRITE_MULTIPLIER = 1.25;
const CACHE_WRITE_1H_MULTIPLIER = 2;

function price(inputPerMTok: number, outputPerMTok: number): ModelPrice {
  return {
    inputPerMTok,
    outputPerMTok,
    cacheReadPerMTok: inputPerMTok * CACHE_READ_MULTIPLIER,
    cacheWritePerMTok: inputPerMTok * CACHE_WRITE_MULTIPLIER,
    cacheWrite1hPerMTok: inputPerMTok * CACHE_WRITE_1H_MULTIPLIER,
  };
}

/** Anthropic model ids → price (USD / MTok), from the pricing docs named above. */
export const ANTHROPIC_PRICES: Readonly<Record<string, ModelPrice>> = {
  'claude-haiku-5-5': price(0.1, 0.5),
  'claude-haiku-4-5': price(1, 5),
  'claude-sonnet-5-5': price(2, 10),
  'claude-opus-5-5': price(4, 20),
};

/**
 * What a (provider, model) costs:
 * - `free`: the fake provider (it calls no model) or `none`;
 * - `priced`: a known model;
 * - `unknown`: no price in this table (an OpenAI-compatible server, a model not listed).
 */
export type Pricing =
  | { kind: 'free'; reason: string }
  | { kind: 'priced'; price: ModelPrice; model: string }
  | { kind: 'unknown'; reason: string };

/**
 * Looks up the price of a model. A dated snapshot id (`claude-haiku-5-5-20261007`) takes the
 * price of its base id.
 */
export function pricingFor(provider: string, model: string): Pricing {
  if (provider === 'fake') return { kind: 'free', reason: 'fake provider: no model is called, it costs nothing' };
  if (provider === 'none') return { kind: 'free', reason: 'decisions are off' };
  if (provider === 'anthropic') {
    const exact = ANTHROPIC_PRICES[model];
    if (exact) return { kind: 'priced', price: exact, model };
    const base = Object.keys(ANTHROPIC_PRICES).find(
      (id) => model.startsWith(`${id}-`) && /^\d{8}$/.test(model.slice(id.length + 1)),
    );
    if (base) return { kind: 'priced', price: ANTHROPIC_PRICES[base], model: base };
  }
  return { kind: 'unknown', reason: `no price for ${provider}:${model} in Verdict's price table` };
}

/**
 * Minimum cacheable prefix per Anthropic model, in tokens (DESIGN §9.3): a prefix shorter than
 * this is processed without caching, silently (no error; `cache_creation_input_tokens` stays 0),
 * so the provider sends a cache breakpoint only when its estimated prefix reaches it.
 *
 * Sources, checked 2026-11-30:
 * - Anthropic's prompt-caching docs, "Cache limitations"
 *   (platform.claude.com/docs/en/build-with-claude/prompt-caching), as quoted in
 *   anthropics/anthropic-sdk-python issue #1194 (2026) and by the mirrors docs.orq.ai
 *   (docs/proxy/prompt-caching) and docs.aihubmix.com (api/Claude-Cache, "increased from 1,024 to
 *   4,096" for Opus 4.5, Opus 4.6 and Haiku 4.5): 4096 for Claude Haiku 4.5, Opus 4.5 and Opus 4.6;
 *   1024 for Sonnet 4.5, Opus 4.1, Opus 4 and Sonnet 4; 2048 for Haiku 3.5 and Haiku 3.
 * - A later revision of the same page, quoted in a review on iii-hq/workers pull request #1202
 *   (2026), and the dev.to article "Claude's prompt cache fails silently below 1,024 tokens"
 *   (Creeta, news.creeta.com, 2026): 512 for Opus 5, Fable 5 and Mythos 5; 1024 for Sonnet 5 and
 *   Opus 4.8; 2048 for Opus 4.7 and Mythos Preview.
 * - Sonnet 4.6: the docs say 1024, but issue #1194 reports caching starting only at a 2048-token
 *   prefix, and docs.orq.ai lists 2048. The table takes 2048 (see the rule below).
 *
 * ASSUMED, no source found: claude-haiku-5-5 (4096), claude-sonnet-5-5 (1024) and claude-opus-5-5
 * (1024). The rule for a value without a source (and for sources that disagree) is the higher
 * plausible one: §9.3 sends a breakpoint only where caching can work, so the error accepted is a
 * missed saving (a prefix between the true and the listed minimum goes uncached, as every prefix
 * did before this table), never a breakpoint that cannot work. Haiku 5.5 has no documented
 * generation-5 Haiku to follow: it takes Haiku 4.5's 4096, the highest minimum of any current
 * model. Sonnet 5.5 and Opus 5.5 take 1024, the highest generation-5 value (Sonnet 5 1024, Opus 5
 * 512): the Opus line has moved both ways between releases (4.1 1024, 4.5 4096, 4.7 2048, 4.8
 * 1024, 5 512), so Opus 5's 512 is no safe guess for Opus 5.5. Replace an assumed value as soon as
 * the docs list the model.
 *
 * A model missing here gets no breakpoint at all (`minCacheablePrefixTokens` is null): never
 * guessed. Changing a value changes which requests carry a breakpoint, never a fingerprint.
 */
export const ANTHROPIC_MIN_CACHEABLE_TOKENS: Readonly<Record<string, number>> = {
  'claude-haiku-5-5': 4096, // assumed (see above)
  'claude-sonnet-5-5': 1024, // assumed (see above)
  'claude-opus-5-5': 1024, // assumed (see above)
  'claude-opus-5': 512,
  'claude-fable-5': 512,
  'claude-mythos-5': 512,
  'claude-sonnet-5': 1024,
  'claude-opus-4-8': 1024,
  'claude-opus-4-7': 2048,
  'claude-mythos-preview': 2048,
  'claude-opus-4-6': 4096,
  'claude-sonnet-4-6': 2048, // sources disagree (1024 or 2048): the higher
  'claude-opus-4-5': 4096,
  'claude-haiku-4-5': 4096,
  'claude-sonnet-4-5': 1024,
  'claude-opus-4-1': 1024,
  'claude-opus-4-0': 1024,
  'claude-opus-4': 1024,
  'claude-sonnet-4-0': 1024,
  'claude-sonnet-4': 1024,
  'claude-3-5-haiku': 2048,
  'claude-3-haiku': 2048,
};

/**
 * The entry of `model` in a per-model table: its own, or, for a dated snapshot id
 * (`claude-haiku-4-5-20251001`), its base id's, the same rule `pricingFor` applies.
 */
function modelEntry<T>(table: Readonly<Record<string, T>>, model: string): T | undefined {
  if (Object.prototype.hasOwnProperty.call(table, model)) return table[model];
  const base = Object.keys(table).find(
    (id) => model.startsWith(`${id}-`) && /^\d{8}$/.test(model.slice(id.length + 1)),
  );
  return base === undefined ? undefined : table[base];
}

/**
 * The shortest prefix a (provider, model) caches, in tokens (`ANTHROPIC_MIN_CACHEABLE_TOKENS`).
 * @returns null for a model not in the table and for every provider but `anthropic`: no cache
 *   breakpoint is sent then.
 */
export function minCacheablePrefixTokens(provider: string, model: string): number | null {
  if (provider !== 'anthropic') return null;
  return modelEntry(ANTHROPIC_MIN_CACHEABLE_TOKENS, model) ?? null;
}

/** Token counts to price. */
export interface TokenCounts {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
}

/** Cost in US dollars of these tokens at this price. */
export function costUsd(p: ModelPrice, t: TokenCounts): number {
  return (
    (t.inputTokens * p.inputPerMTok +
      t.outputTokens * p.outputPerMTok +
      (t.cacheReadTokens ?? 0) * p.cacheReadPerMTok +
      (t.cacheWriteTokens ?? 0) * p.cacheWritePerMTok) /
    1_000_000
  );
}

/**
 * The cost of tokens under a pricing: dollars, 0 for free providers, null when unknown.
 */
export function costOf(pricing: Pricing, t: TokenCounts): number | null {
  if (pricing.kind === 'free') return 0;
  if (pricing.kind === 'unknown') return null;
  return costUsd(pricing.price, t);
}

/** `$0.0123`, `$12.34`; `unknown` for null. Four decimals below a dollar, since a call costs fractions of a cent. */
export function formatUsd(usd: number | null): string {
  if (usd === null) return 'unknown';
  return usd < 1 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/**
 * The batch discount: Message Batches are billed at "50 % of standard prices" (Anthropic's
 * batch-processing docs, checked 2026-11-30), input, output and cache tokens alike. Tokens are
 * counted as ever (a batched call's usage holds the same counts as an asked one); only the price
 * changes.
 */
export const BATCH_PRICE_MULTIPLIER = 0.5;

/**
 * The price of batched tokens at this model price: every rate × BATCH_PRICE_MULTIPLIER. Batch
 * requests carry the 1-hour cache TTL (anthropic.ts), so the cache-write rate of the result is the
 * discounted 1-hour rate, in both `cacheWritePerMTok` and `cacheWrite1hPerMTok`.
 */
export function batchPrice(p: ModelPrice): ModelPrice {
  const m = BATCH_PRICE_MULTIPLIER;
  return {
    inputPerMTok: p.inputPerMTok * m,
    outputPerMTok: p.outputPerMTok * m,
    cacheReadPerMTok: p.cacheReadPerMTok * m,
    cacheWritePerMTok: p.cacheWrite1hPerMTok * m,
    cacheWrite1hPerMTok: p.cacheWrite1hPerMTok * m,
  };
}

/** The cost of batched tokens under a pricing (`costOf` at `batchPrice`): dollars, 0 for free providers, null when unknown. */
export function batchCostOf(pricing: Pricing, t: TokenCounts): number | null {
  if (pricing.kind !== 'priced') return costOf(pricing, t);
  return costUsd(batchPrice(pricing.price), t);
}
