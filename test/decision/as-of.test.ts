import { describe, expect, it } from 'vitest';
import { describeSet } from '../../src/cli/sets.js';
import {
  answerIsCurrent,
  asOfDate,
  currentAnswer,
  DAY_MS,
  isExpired,
  MIN_MAX_AGE_MS,
  movedParts,
  onlyExpired,
  stateToAsk,
  type DatedAnswer,
} from '../../src/decision/as-of.js';
import { orderedJson } from '../../src/decision/canonical-json.js';
import { parseQuestionSetConfig, InvalidConfigFile } from '../../src/decision/config-file.js';
import { formatDuration, parseDuration } from '../../src/duration.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet, InvalidQuestionSet } from '../../src/decision/registry.js';
import { buildItemState, sha256, STATE_VERSION, withAsOf, type BuiltState } from '../../src/decision/state.js';
import { judgeRows } from '../../src/reads/reads.js';
import type { DecisionRow } from '../../src/store/decision-store.js';

/**
 * The as_of rule of time-dependent questions (DESIGN §5.2, decision/as-of.ts), its state
 * serialisation, and `maxAge` in the registry and the config file. Pure: no store.
 */

const base = buildItemState(
  { title: 'T', collectionSlug: 'task', fieldsText: '{"status":"open"}', content: 'body', comments: [], links: [] },
  { withLinks: false, noTrail: false },
);
const edited = buildItemState(
  { title: 'T', collectionSlug: 'task', fieldsText: '{"status":"open"}', content: 'edited', comments: [], links: [] },
  { withLinks: false, noTrail: false },
);
const DAY0 = Date.UTC(2026, 0, 1, 12);
const WEEK = 7 * DAY_MS;
const aged = { maxAgeMs: WEEK };
const plain = { maxAgeMs: null };

/** A stored answer keyed to `state`, stored at `evaluatedAt`. */
function row(state: BuiltState, evaluatedAt: number, over: Partial<DatedAnswer> = {}): DatedAnswer {
  return {
    stateHash: state.hash,
    questionHash: 'fp',
    stateVersion: state.version,
    stateParts: JSON.stringify(state.parts),
    evaluatedAt,
    ...over,
  };
}

describe('the dated state (withAsOf)', () => {
  it('is the undated state with as_of as its last member: the bytes sent are the bytes hashed', () => {
    const dated = withAsOf(base, '2026-01-01');
    const members = Object.entries(JSON.parse(base.bytes) as Record<string, unknown>);
    expect(dated.bytes).toBe(orderedJson([...members, ['as_of', '2026-01-01']]));
    expect(Object.keys(JSON.parse(dated.bytes)).at(-1)).toBe('as_of');
    expect(dated.hash).toBe(sha256(dated.bytes));
    expect(dated.hash).not.toBe(base.hash);
    expect(dated.parts).toEqual({ ...base.parts, as_of: '2026-01-01' }); // the date itself, not a hash
    expect(dated).toMatchObject({ version: STATE_VERSION, truncated: base.truncated });
    expect(withAsOf(base, '2026-01-02').hash).not.toBe(dated.hash);
    expect(() => withAsOf(dated, '2026-01-02')).toThrow(TypeError);
  });

  it('asOfDate is the UTC date, whatever the time of day', () => {
    expect(asOfDate(Date.UTC(2026, 0, 1, 0, 0, 0))).toBe('2026-01-01');
    expect(asOfDate(Date.UTC(2026, 0, 1, 23, 59, 59, 999))).toBe('2026-01-01');
    expect(asOfDate(Date.UTC(2026, 0, 2))).toBe('2026-01-02');
  });

  it('stateToAsk dates the state today only for a set with maxAgeMs', () => {
    expect(stateToAsk(base, plain, DAY0)).toBe(base);
    expect(stateToAsk(base, aged, DAY0 + 3 * DAY_MS).parts.as_of).toBe('2026-01-04');
  });
});

describe('answerIsCurrent: the one rule of the runner and the reads', () => {
  const dayOld = row(withAsOf(base, '2026-01-01'), DAY0);

  it('a dated answer stays current on later dates while unchanged and unexpired (no midnight cut-off)', () => {
    for (const days of [0, 0.6, 1, 6, 7])
      expect(answerIsCurrent(dayOld, base, 'fp', aged, DAY0 + days * DAY_MS)).toBe(true);
    expect(currentAnswer([dayOld], base, 'fp', aged, DAY0 + 6 * DAY_MS)).toBe(dayOld);
  });

  it('is not current past maxAge (measured from evaluated_at), nor after an edit, nor under another fingerprint or version', () => {
    expect(isExpired(DAY0, WEEK, DAY0 + WEEK)).toBe(false); // exactly maxAge old: not older than it
    expect(answerIsCurrent(dayOld, base, 'fp', aged, DAY0 + WEEK + 1)).toBe(false);
    expect(answerIsCurrent(dayOld, edited, 'fp', aged, DAY0 + DAY_MS)).toBe(false);
    expect(answerIsCurrent(dayOld, base, 'fp2', aged, DAY0 + DAY_MS)).toBe(false);
    expect(answerIsCurrent({ ...dayOld, stateVersion: 1 }, base, 'fp', aged, DAY0 + DAY_MS)).toBe(false);
  });

  it('a set without maxAgeMs compares exact hashes, at any age', () => {
    expect(answerIsCurrent(row(base, DAY0), base, 'fp', plain, DAY0 + 365 * DAY_MS)).toBe(true);
    expect(answerIsCurrent(dayOld, base, 'fp', plain, DAY0)).toBe(false); // a dated answer is not the undated state
  });

  it('an undated answer of a set that gained maxAge is compared undated until it expires', () => {
    const undated = row(base, DAY0);
    expect(answerIsCurrent(undated, base, 'fp', aged, DAY0 + 6 * DAY_MS)).toBe(true);
    expect(answerIsCurrent(undated, base, 'fp', aged, DAY0 + 8 * DAY_MS)).toBe(false);
    expect(onlyExpired(undated, base, aged, DAY0 + 8 * DAY_MS)).toBe(true);
  });

  it('an expired answer is always of an earlier date than today, so its re-ask is a new state hash', () => {
    // An answer's as_of is the date its state was built, never after its evaluated_at.
    for (let i = 0; i < 500; i++) {
      const evaluatedAt = DAY0 + Math.floor(((i * 7919) % 1000) * 3_600_000 * 0.37);
      const asOf = asOfDate(evaluatedAt - (i % 3) * 3_600_000 * 11);
      const maxAgeMs = MIN_MAX_AGE_MS + (i % 5) * 3_600_000;
      const now = evaluatedAt + maxAgeMs + 1 + (i % 7) * 60_000;
      expect(isExpired(evaluatedAt, maxAgeMs, now)).toBe(true);
      expect(stateToAsk(base, { maxAgeMs }, now).hash).not.toBe(withAsOf(base, asOf).hash);
    }
  });
});

describe('movedParts and onlyExpired', () => {
  const d0 = withAsOf(base, '2026-01-01');
  it('as_of is never a moved part of a dated answer of a dated set; an edit is', () => {
    expect(movedParts(d0.parts, base.parts, aged)).toEqual([]);
    expect(movedParts(d0.parts, edited.parts, aged)).toEqual(['body']);
  });
  it('a set that lost maxAge lists as_of: the state shape moved', () => {
    expect(movedParts(d0.parts, base.parts, plain)).toEqual(['as_of']);
    expect(movedParts(base.parts, base.parts, aged)).toEqual([]);
  });
  it('onlyExpired: old, and about the state as it still is', () => {
    expect(onlyExpired(row(d0, DAY0), base, aged, DAY0 + 8 * DAY_MS)).toBe(true);
    expect(onlyExpired(row(d0, DAY0), base, aged, DAY0 + 6 * DAY_MS)).toBe(false);
    expect(onlyExpired(row(d0, DAY0), edited, aged, DAY0 + 8 * DAY_MS)).toBe(false);
    expect(onlyExpired(row(d0, DAY0), base, plain, DAY0 + 8 * DAY_MS)).toBe(false);
  });
});

describe('judgeRows with maxAge', () => {
  const set = defineQuestionSet({ name: 'stale', questions: { q: noul('No progress in 14 days.') }, maxAgeMs: WEEK });
  const ctx = { name: 'fake', model: 'm', promptVersion: 'v', effort: null };
  it("reads current, expired, state_changed; without the store's now a dated set is not compared", async () => {
    const { questionFingerprint } = await import('../../src/decision/questions.js');
    const fp = questionFingerprint(set.questions!.q, ctx);
    const r = {
      ...row(withAsOf(base, '2026-01-01'), DAY0, { questionHash: fp }),
      id: 1,
      questionKey: 'q',
      provider: 'fake',
      fingerprintContext: null,
    } as unknown as DecisionRow;
    const now = (state: BuiltState, nowMs?: number) => ({
      set,
      applies: true,
      questions: set.questions!,
      state,
      commentStates: new Map(),
      nowMs,
    });
    expect(judgeRows([r], now(base, DAY0 + 6 * DAY_MS), ctx)).toMatchObject({ current: true, staleReason: null });
    expect(judgeRows([r], now(base, DAY0 + 8 * DAY_MS), ctx)).toMatchObject({
      current: false,
      staleReason: 'expired',
      changedParts: [],
    });
    expect(judgeRows([r], now(edited, DAY0 + 8 * DAY_MS), ctx)).toMatchObject({
      staleReason: 'state_changed',
      changedParts: ['body'],
    });
    expect(judgeRows([r], now(base), ctx)).toMatchObject({ current: false, staleReason: 'not_compared' });
  });
});

describe('maxAge in the registry and the config file', () => {
  const q = { q: noul('x') };
  it('defaults to null and is validated: whole milliseconds, at least one day', () => {
    expect(defineQuestionSet({ name: 's', questions: q }).maxAgeMs).toBeNull();
    expect(defineQuestionSet({ name: 's', questions: q, maxAgeMs: DAY_MS }).maxAgeMs).toBe(DAY_MS);
    for (const bad of [0, -1, DAY_MS - 1, 1.5 * DAY_MS + 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => defineQuestionSet({ name: 's', questions: q, maxAgeMs: bad })).toThrow(InvalidQuestionSet);
    }
    expect(() => defineQuestionSet({ name: 's', questions: q, maxAgeMs: 3_600_000 })).toThrow(
      /at least 86400000 .*day precision/,
    );
  });

  const config = (maxAge: string) =>
    `sets:\n  - name: t\n    maxAge: ${maxAge}\n    questions:\n      q: {kind: noul, instructions: x}\n`;
  it('reads a duration string or milliseconds', () => {
    expect(parseQuestionSetConfig(config('7d'), 'f.yaml')[0].maxAgeMs).toBe(WEEK);
    expect(parseQuestionSetConfig(config('"36h"'), 'f.yaml')[0].maxAgeMs).toBe(36 * 3_600_000);
    expect(parseQuestionSetConfig(config('2w'), 'f.yaml')[0].maxAgeMs).toBe(2 * WEEK);
    expect(parseQuestionSetConfig(config('86400000'), 'f.yaml')[0].maxAgeMs).toBe(DAY_MS);
    expect(
      parseQuestionSetConfig(config('86400000').replace('    maxAge: 86400000\n', ''), 'f.yaml')[0].maxAgeMs,
    ).toBeNull();
  });

  it('refuses a bad value with a message naming the file, the set, the key, the value and what was expected', () => {
    const refusal = (v: string) => {
      try {
        parseQuestionSetConfig(config(v), 'f.yaml');
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidConfigFile);
        return (err as Error).message;
      }
      throw new Error(`accepted ${v}`);
    };
    expect(refusal('7x')).toBe(
      'config file f.yaml: set "t": maxAge: "7x" is not a duration: expected a whole number with a unit (ms, s, m, h, d or w), such as 7d or 36h, or a number of milliseconds',
    );
    expect(refusal('12h')).toBe(
      'config file f.yaml: set "t": maxAge: "12h" is shorter than 1d, the least a maxAge can be (as_of has day precision, DESIGN §5.2)',
    );
    expect(refusal('0')).toMatch(/maxAge: 0 is not a duration/);
    expect(refusal('1.5')).toMatch(/maxAge: 1.5 is not a duration/);
    expect(refusal('"7 days"')).toMatch(/maxAge: "7 days" is not a duration/);
  });

  it('durations parse and print as the config writes them; sets show prints maxAge', () => {
    expect(['500ms', '30s', '90m', '36h', '7d', '2w', ' 7 d '].map(parseDuration)).toEqual([
      500,
      30_000,
      5_400_000,
      129_600_000,
      WEEK,
      2 * WEEK,
      WEEK,
    ]);
    expect(['7', 'd', '-1d', '1.5d', '7days', '99999999999999999d'].map(parseDuration)).toEqual([
      null,
      null,
      null,
      null,
      null,
      null,
    ]);
    expect([WEEK, 36 * 3_600_000, 90 * 60_000, 1_500].map(formatDuration)).toEqual(['7d', '36h', '90m', '1500ms']);
    const shown = describeSet(defineQuestionSet({ name: 's', questions: q, maxAgeMs: WEEK }));
    expect(shown).toMatchObject({ maxAgeMs: WEEK, maxAge: '7d' });
    expect(describeSet(defineQuestionSet({ name: 's', questions: q }))).toMatchObject({ maxAgeMs: null, maxAge: null });
  });
});
