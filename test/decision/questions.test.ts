import { describe, expect, it } from 'vitest';
import {
  choice,
  fingerprintContextText,
  noul,
  pickedLevel,
  questionFingerprint,
  score,
  validateQuestion,
  type ScoreAnswer,
} from '../../src/decision/questions.js';
import { deriveAnswer, deriveAnswers } from '../../src/providers/answers.js';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { defineQuestionSet, Registry } from '../../src/decision/registry.js';
import { AnswerDefect } from '../../src/providers/errors.js';

const ctx = { model: 'claude-haiku-5-5', promptVersion: 'anthropic-v1', effort: 'low' };

describe('question validation', () => {
  it('refuses blank instructions, lone trueDesc, too few options, blank levels', () => {
    expect(() => noul('  ')).toThrow(/instructions/);
    expect(() => validateQuestion('k', { kind: 'noul', instructions: 'x', trueDesc: 'yes' })).toThrow(
      /both or neither/,
    );
    expect(() => choice('x', { only: 'one' })).toThrow(/2 to 64/);
    expect(() => choice('x', { a: 'A', b: ' ' })).toThrow(/blank/);
    expect(() => score('x', ['low', ''])).toThrow(/blank/);
    expect(() =>
      score(
        'x',
        Array.from({ length: 12 }, (_, i) => `l${i}`),
      ),
    ).toThrow();
    expect(noul('x', { trueDesc: 'y', falseDesc: 'n' }).kind).toBe('noul');
  });

  it('refuses a key holding @ (DESIGN §7.1: per-comment keys split at the first @), and takes other punctuation', () => {
    const q = { kind: 'noul', instructions: 'x' };
    for (const key of ['a@b', '@a', 'a@', 'conv:bd@7h7'])
      expect(() => validateQuestion(key, q)).toThrow(/must not contain "@"/);
    for (const key of ['conv:bd-7h7', 'conv:CONV-1', 'a.b_c', 'with space', 'é'])
      expect(validateQuestion(key, q).kind).toBe('noul');
  });
});

describe('deriveAnswer', () => {
  it('derives choice argmax and confidence from the probabilities', () => {
    const q = choice('x', { b: 'B', a: 'A', c: 'C' });
    const { answer, confidence } = deriveAnswer('k', q, { probabilities: { a: 0.2, b: 0.5, c: 0.3 } });
    expect(answer).toEqual({ type: 'choice', choice: 'b', probabilities: { a: 0.2, b: 0.5, c: 0.3 } });
    expect(confidence).toBe(0.5);
  });

  it('derives the score as the weighted mean and picks the argmax level, not round(score)', () => {
    const q = score('x', ['trivial', 'small', 'medium', 'large', 'epic']);
    const { answer, confidence } = deriveAnswer('k', q, { probabilities: { 0: 0.4, 1: 0, 2: 0, 3: 0.3, 4: 0.3 } });
    const a = answer as ScoreAnswer;
    expect(a.score).toBeCloseTo(2.1, 10);
    expect(pickedLevel(a)).toBe('trivial'); // round(2.1) would say medium
    expect(a.legend['4']).toBe('epic');
    expect(confidence).toBe(0.4);
  });

  it('ties pick the lowest level', () => {
    const a = deriveAnswer('k', score('x', ['a', 'b']), { probabilities: { 0: 0.5, 1: 0.5 } }).answer as ScoreAnswer;
    expect(pickedLevel(a)).toBe('a');
  });

  it('normalises sums within 1 ± 0.02 and refuses others', () => {
    const q = choice('x', { a: 'A', b: 'B' });
    const ok = deriveAnswer('k', q, { probabilities: { a: 0.51, b: 0.5 } }).answer as {
      probabilities: Record<string, number>;
    };
    expect(ok.probabilities.a + ok.probabilities.b).toBeCloseTo(1, 12);
    expect(() => deriveAnswer('k', q, { probabilities: { a: 0.6, b: 0.5 } })).toThrow(AnswerDefect);
  });

  it('a noul has no confidence: null, never 0', () => {
    expect(deriveAnswer('k', noul('x'), { probability: 0.2 })).toEqual({
      answer: { type: 'noul', noul: 0.2 },
      confidence: null,
    });
    expect(() => deriveAnswer('k', noul('x'), { probability: 1.2 })).toThrow(AnswerDefect);
    expect(() => deriveAnswer('k', noul('x'), { probabilities: { a: 1 } })).toThrow(/wrong kind/);
  });

  it('builds a call from the questions asked: extras ignored, a missing key fails all', () => {
    const qs = new Map([
      ['a', noul('x')],
      ['b', noul('y')],
    ]);
    expect([...deriveAnswers(qs, { a: { probability: 0.1 }, b: { probability: 0.2 }, extra: 1 }).keys()]).toEqual([
      'a',
      'b',
    ]);
    expect(() => deriveAnswers(qs, { a: { probability: 0.1 } })).toThrow(/"b" missing/);
  });
});

describe('questionFingerprint', () => {
  it('changes with wording, model, prompt template and effort; not with option order', () => {
    const q = noul('Is it blocked?');
    const f = questionFingerprint(q, ctx);
    expect(questionFingerprint(noul('Is it blocked? '), ctx)).not.toBe(f);
    expect(questionFingerprint(q, { ...ctx, model: 'claude-sonnet-5-5' })).not.toBe(f);
    expect(questionFingerprint(q, { ...ctx, promptVersion: 'anthropic-v2' })).not.toBe(f);
    expect(questionFingerprint(q, { ...ctx, effort: 'high' })).not.toBe(f);
    expect(questionFingerprint(choice('x', { a: 'A', b: 'B' }), ctx)).toBe(
      questionFingerprint(choice('x', { b: 'B', a: 'A' }), ctx),
    );
  });

  it('follows a context object whose model, template or effort changed in place (a provider reconfigured)', () => {
    const q = noul('Is it blocked?');
    const live = { ...ctx };
    const f = questionFingerprint(q, live);
    const text = fingerprintContextText(live);
    for (const change of [{ model: 'claude-sonnet-5-5' }, { promptVersion: 'anthropic-v2' }, { effort: 'high' }]) {
      Object.assign(live, change);
      expect(questionFingerprint(q, live)).toBe(questionFingerprint(q, { ...live }));
      expect(questionFingerprint(q, live)).not.toBe(f);
      expect(fingerprintContextText(live)).toBe(fingerprintContextText({ ...live }));
      expect(fingerprintContextText(live)).not.toBe(text);
      Object.assign(live, ctx);
    }
  });

  it('pins the production questions (their wording is part of the fingerprint)', () => {
    const fps = Object.fromEntries(
      [...Object.entries(attentionSet.questions!), ...Object.entries(effortSet.questions!)].map(([k, q]) => [
        k,
        questionFingerprint(q, ctx).slice(0, 16),
      ]),
    );
    expect(fps).toEqual(PINNED);
  });
});

const PINNED = {
  blocked: 'b938ddb1c7178b0f',
  effort: '5cb9ab41963933fb',
  needs_human_decision: 'fbb740768d62fd0a',
  waiting_on_external: '404eb778b101bf63',
};

describe('registry', () => {
  it('refuses empty names, duplicates, neither or both of questions/resolve, bad keys', () => {
    expect(() => defineQuestionSet({ name: '', questions: {} })).toThrow(/empty name/);
    expect(() => defineQuestionSet({ name: 's' })).toThrow(/exactly one/);
    expect(() => defineQuestionSet({ name: 's', questions: {}, resolve: async () => ({}) })).toThrow(/exactly one/);
    expect(() => defineQuestionSet({ name: 's', questions: { '': noul('x') } })).toThrow(/empty key/);
    expect(() => defineQuestionSet({ name: 's', questions: { 'a@b': noul('x') } })).toThrow(/@/);
    expect(() => new Registry([attentionSet, attentionSet])).toThrow(/duplicate/);
  });

  it('setsFor is sorted and covers empty-collection sets for every slug', () => {
    const only = defineQuestionSet({ name: 'aaa', collections: ['bug'], questions: { k: noul('x') } });
    const r = new Registry([effortSet, attentionSet, only]);
    expect(r.setsFor('bug').map((s) => s.name)).toEqual(['aaa', 'attention', 'effort']);
    expect(r.setsFor('task').map((s) => s.name)).toEqual(['attention', 'effort']);
  });
});
