import { describe, expect, it } from 'vitest';
import {
  ANTHROPIC_PRICES,
  BATCH_PRICE_MULTIPLIER,
  batchCostOf,
  batchPrice,
  costOf,
  pricingFor,
} from '../../src/providers/pricing.js';

/** Batched tokens cost half (DESIGN §7.3; Anthropic's batch docs: "50 % of standard prices"). */

describe('batch pricing', () => {
  const tokens = {
    inputTokens: 1_000_000,
    outputTokens: 1_000_000,
    cacheReadTokens: 1_000_000,
    cacheWriteTokens: 1_000_000,
  };

  it('halves every rate, cache writes at the 1-hour TTL that batch requests carry', () => {
    expect(BATCH_PRICE_MULTIPLIER).toBe(0.5);
    const p = ANTHROPIC_PRICES['claude-haiku-4-5'];
    expect(batchPrice(p)).toEqual({
      inputPerMTok: 0.5,
      outputPerMTok: 2.5,
      cacheReadPerMTok: 0.05,
      cacheWritePerMTok: 1,
      cacheWrite1hPerMTok: 1,
    });
  });

  it('prices batched tokens at the batch price; free stays 0 and unknown stays null', () => {
    const priced = pricingFor('anthropic', 'claude-haiku-4-5');
    // 1 + 5 + 0.1 + 2 (1-hour writes) at full price, halved.
    expect(batchCostOf(priced, tokens)).toBeCloseTo(4.05, 10);
    expect(batchCostOf(priced, { inputTokens: 1_000_000, outputTokens: 1_000_000 })).toBeCloseTo(
      costOf(priced, { inputTokens: 1_000_000, outputTokens: 1_000_000 })! / 2,
      10,
    );
    expect(batchCostOf(pricingFor('fake', 'x'), tokens)).toBe(0);
    expect(batchCostOf(pricingFor('openai', 'llama'), tokens)).toBeNull();
  });
});
