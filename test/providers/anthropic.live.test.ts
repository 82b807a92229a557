import { describe, expect, it } from 'vitest';
import { choice, noul, score, type Question } from '../../src/decision/questions.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { askOpts } from './support.js';

/**
 * Against the real Messages API; skipped unless ANTHROPIC_API_KEY is set. One call with one
 * question of each kind, about an item whose answers are not in doubt. Costs a fraction of a cent.
 * LLM_MODEL picks another model; ANTHROPIC_BASE_URL another endpoint.
 */

const key = process.env.ANTHROPIC_API_KEY;

describe.skipIf(!key)('AnthropicProvider live', () => {
  it('answers a noul, a choice and a score question', { timeout: 180_000 }, async () => {
    const provider = new AnthropicProvider({
      apiKey: key!,
      ...(process.env.ANTHROPIC_BASE_URL ? { baseURL: process.env.ANTHROPIC_BASE_URL } : {}),
      ...(process.env.LLM_MODEL ? { model: process.env.LLM_MODEL } : {}),
    });
    const state = JSON.stringify({
      title: 'Login page crashes when the password field is empty',
      collection: 'bugs',
      fields: { priority: 'high' },
      body: 'Steps: open /login, leave the password empty, press Sign in. The server returns a 500 and the page shows a stack trace. Fix: validate the field before submitting. One-line change.',
      recent_trail: [],
    });
    const questions = new Map<string, Question>([
      [
        'is_bug',
        noul('Does the item describe a defect in existing behaviour?', {
          trueDesc: 'Something that worked or should work is broken',
          falseDesc: 'A feature request, question or chore',
        }),
      ],
      [
        'area',
        choice('Which area does the item mainly touch?', {
          auth: 'Login, sessions, passwords',
          billing: 'Payments and invoices',
          docs: 'Documentation only',
        }),
      ],
      ['effort', score('How much work is the fix?', ['trivial', 'small', 'medium', 'large'])],
    ]);
    const r = await provider.ask(state, questions, askOpts({ explain: true }));

    const isBug = r.answers.get('is_bug')!.answer;
    expect(isBug.type).toBe('noul');
    if (isBug.type === 'noul') expect(isBug.noul).toBeGreaterThan(0.5);
    expect(r.answers.get('area')!.answer).toMatchObject({ type: 'choice', choice: 'auth' });
    const effort = r.answers.get('effort')!.answer;
    expect(effort.type).toBe('score');
    if (effort.type === 'score') expect(effort.score).toBeLessThan(2);
    expect(r.rationales?.size).toBe(3);
    expect(r.usage.inputTokens).toBeGreaterThan(0);
    expect(r.responseModel).toContain(provider.model.replace(/-\d{8}$/, ''));
  });
});
