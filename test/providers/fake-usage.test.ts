import { describe, expect, it } from 'vitest';
import { FakeProvider } from '../../src/providers/fake.js';
import { buildAnswerSchema, buildSystemPrompt, checkInputBudget, questionAliases } from '../../src/providers/prompt.js';
import { estimateTokens } from '../../src/providers/provider.js';
import { callEstimate } from '../../src/runner/evaluate.js';
import { questions, STATE } from './support.js';

/**
 * The fake provider's `usage: 'prompt'` mode (FakeUsageMode), which `npm run bench:cost` prices:
 * input counted as the Anthropic request of the same chunk carries it (system prompt + answer
 * schema + state, the real providers' `checkInputBudget` and the runner's `callEstimate`), output
 * as the reply JSON under the aliases. The default mode keeps the small numbers tests pin.
 */

const opts = (explain = false) => ({ signal: new AbortController().signal, beforeSend: () => undefined, explain });

describe("FakeProvider usage: 'prompt'", () => {
  it.each([false, true])(
    'input is system prompt + schema + state, as checkInputBudget and callEstimate count it (explain %s)',
    async (explain) => {
      const qs = questions();
      const r = await new FakeProvider({ usage: 'prompt' }).ask(STATE, qs, opts(explain));
      const budget = checkInputBudget(
        'fake',
        { system: buildSystemPrompt(qs, { explain }), schema: buildAnswerSchema(qs, { explain }), state: STATE },
        1e9,
      );
      expect(r.usage.inputTokens).toBe(budget);
      expect(r.usage.inputTokens).toBe(callEstimate(qs, STATE, explain).inputTokens);
      // Far above the default mode's count: the rules and the schema are most of a short request.
      expect(r.usage.inputTokens).toBeGreaterThan(
        (await new FakeProvider().ask(STATE, qs, opts(explain))).usage.inputTokens + 500,
      );
    },
  );

  it('output is the reply JSON under the aliases, probabilities at 3 decimals', async () => {
    const qs = questions();
    const p = new FakeProvider({
      usage: 'prompt',
      handler: () => ({
        blocked: { probability: 0.8 },
        area: { probabilities: { frontend: 0.1, backend: 0.7, docs: 0.2 } },
        effort: { probabilities: { '0': 1 / 3, '1': 1 / 3, '2': 1 / 3 } },
      }),
    });
    const r = await p.ask(STATE, qs, opts());
    const [a1, a2, a3] = questionAliases(qs).map(([alias]) => alias);
    const reply = {
      [a1]: { probabilities: { frontend: 0.1, backend: 0.7, docs: 0.2 } },
      [a2]: { probability: 0.8 },
      [a3]: { probabilities: { '0': 0.333, '1': 0.333, '2': 0.333 } },
    };
    expect(questionAliases(qs).map(([, k]) => k)).toEqual(['area', 'blocked', 'effort']);
    expect(r.usage.outputTokens).toBe(estimateTokens(JSON.stringify(reply)));
  });

  it('the default mode is unchanged: questions JSON + state in, 12 per question out', async () => {
    const qs = questions();
    const r = await new FakeProvider().ask(STATE, qs, opts());
    expect(r.usage.inputTokens).toBe(
      estimateTokens([...qs.values()].map((q) => JSON.stringify(q)).join('\n')) + estimateTokens(STATE),
    );
    expect(r.usage.outputTokens).toBe(12 * qs.size);
  });

  it('the input budget and countTokens count in the same mode', async () => {
    const qs = questions();
    const prompt = callEstimate(qs, STATE, false).inputTokens;
    await expect(
      new FakeProvider({ usage: 'prompt', inputBudgetTokens: prompt - 1 }).ask(STATE, qs, opts()),
    ).rejects.toMatchObject({ code: 'input_over_budget' });
    await expect(new FakeProvider({ inputBudgetTokens: prompt - 1 }).ask(STATE, qs, opts())).resolves.toBeDefined();
    expect(
      await new FakeProvider({ usage: 'prompt' }).countTokens(STATE, qs, { signal: new AbortController().signal }),
    ).toBe(prompt);
  });
});
