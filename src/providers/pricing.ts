/**
 * Prices per model, in one place (DESIGN §1 principle 10: no surprise bills). `status`,
 * `estimate` and `backfill --dry-run` price tokens with this table and nothing else.
 *
 * Source: the Anthropic SDK's model list and the platform's pricing docs, checked 2026-11-30:
 * claude-haiku-5-5 is "from $0.10/$0.50 per MTok" (input/output, standard tier), claude-haiku-4-5
 * $1/$5, claude-sonnet-5-5 $2/$10, claude-opus-5-5 $4/$20. Prompt-cache multipliers are the same pages': reads 0.1× the
 * input price, writes 1.25× (5-minute TTL). Batch pricing (50 %) is not used by Verdict and not
 * listed. Re-check the page and update this table (and its date) when prices change; a model
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
}

/** When the table was last checked against its source (the pricing docs named above). */
export const PRICES_CHECKED = '2026-11-30';

const CACHE_READ_MULTIPLIER = 0.1;
const CACHE_WRITE_MULTIPLIER = 1.25;

function price(inputPerMTok: number, outputPerMTok: number): ModelPrice {
  return {
    inputPerMTok,
    outputPerMTok,
    cacheReadPerMTok: inputPerMTok * CACHE_READ_MULTIPLIER,
    cacheWritePerMTok: inputPerMTok * CACHE_WRITE_MULTIPLIER,
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
    const base = Object.keys(ANTHROPIC_PRICES).find((id) => model.startsWith(`${id}-`) && /^\d{8}$/.test(model.slice(id.length + 1)));
    if (base) return { kind: 'priced', price: ANTHROPIC_PRICES[base], model: base };
  }
  return { kind: 'unknown', reason: `no price for ${provider}:${model} in src/providers/pricing.ts` };
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
