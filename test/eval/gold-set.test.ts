import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { choice, noul, score } from '../../src/decision/questions.js';
import { InputNotFound } from '../../src/errors.js';
import { checkGoldLabel, InvalidGoldSet, parseGoldSet, readGoldSet } from '../../src/eval/gold-set.js';

const good = [
  '{"ref":"bd-1","set":"attention","key":"blocked","label":true}',
  '',
  '   ',
  '{"ref":"bd-1","set":"attention","key":"needs_human_decision","label":false}',
  '{"ref":"bd-2","set":"triage","key":"kind","label":"bug"}',
  '{"ref":"bd-2","set":"effort","key":"effort","label":0}\r',
  '{"ref":"bd-3","set":"effort","key":"effort","label":4}',
  '',
].join('\n');

/** The error a one-line-bad file gives, with the bad line at line 2. */
function errorAt2(bad: string): InvalidGoldSet {
  const text = `{"ref":"bd-1","set":"attention","key":"blocked","label":true}\n${bad}\n`;
  try {
    parseGoldSet(text, 'gold.jsonl');
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidGoldSet);
    return err as InvalidGoldSet;
  }
  throw new Error('expected an InvalidGoldSet');
}

describe('parseGoldSet', () => {
  it('reads every kind of label, skips blank lines, keeps 1-based line numbers', () => {
    expect(parseGoldSet(good, 'gold.jsonl')).toEqual([
      { ref: 'bd-1', set: 'attention', key: 'blocked', label: true, line: 1 },
      { ref: 'bd-1', set: 'attention', key: 'needs_human_decision', label: false, line: 4 },
      { ref: 'bd-2', set: 'triage', key: 'kind', label: 'bug', line: 5 },
      { ref: 'bd-2', set: 'effort', key: 'effort', label: 0, line: 6 },
      { ref: 'bd-3', set: 'effort', key: 'effort', label: 4, line: 7 },
    ]);
  });

  it.each([
    ['not JSON', '{"ref":"bd-2",', /not JSON/],
    ['a comment (JSONL has none)', '# a comment', /not JSON/],
    ['an array', '["bd-2","attention","blocked",true]', /not a JSON object/],
    ['a string', '"bd-2"', /not a JSON object/],
    ['a missing ref', '{"set":"attention","key":"blocked","label":true}', /missing "ref"/],
    ['two missing members', '{"ref":"bd-2","set":"attention"}', /missing "key", "label"/],
    ['a missing label', '{"ref":"bd-2","set":"attention","key":"blocked"}', /missing "label"/],
    ['a blank key', '{"ref":"bd-2","set":"attention","key":"  ","label":true}', /key: must not be blank/],
    ['a numeric ref', '{"ref":2,"set":"attention","key":"blocked","label":true}', /ref: expected a string$/],
    [
      'an unknown member',
      '{"ref":"bd-2","set":"attention","key":"blocked","lable":true,"label":true}',
      /unknown member "lable"/,
    ],
    ['a null label', '{"ref":"bd-2","set":"attention","key":"blocked","label":null}', /label must be true\/false/],
    ['a fractional score label', '{"ref":"bd-2","set":"effort","key":"effort","label":2.5}', /label must be/],
    [
      'a negative score label',
      '{"ref":"bd-2","set":"effort","key":"effort","label":-1}',
      /label: a score label is a level index, 0 or more/,
    ],
    ['a blank choice label', '{"ref":"bd-2","set":"triage","key":"kind","label":""}', /label: must not be blank/],
  ])('refuses %s, naming the file and line', (_what, bad, detail) => {
    const err = errorAt2(bad);
    expect(err.code).toBe('invalid_gold_set');
    expect(err.line).toBe(2);
    expect(err.message).toMatch(/^gold\.jsonl:2: /);
    expect(err.message).toMatch(detail);
  });

  it('refuses a duplicate (ref, set, key), naming both lines', () => {
    const err = errorAt2('{"ref":"bd-1","set":"attention","key":"blocked","label":false}');
    expect(err.message).toBe('gold.jsonl:2: duplicate (ref, set, key): the same row as line 1');
  });

  it('does not quote the line in the message', () => {
    const err = errorAt2('{"ref":"secret-title-text","set":"attention","key":"blocked","label":"maybe","x":1}');
    expect(err.message).not.toContain('secret-title-text');
  });

  it('refuses a file with no rows', () => {
    expect(() => parseGoldSet('\n \n', 'empty.jsonl')).toThrow(/^empty\.jsonl: no rows/);
  });
});

describe('a byte-order mark', () => {
  it('is not part of the first line: a file an editor saved with a UTF-8 BOM reads the same', () => {
    const line = '{"ref":"T-1","set":"attention","key":"blocked","label":true}';
    expect(parseGoldSet(`\uFEFF${line}\n`, 'bom.jsonl')).toEqual(parseGoldSet(`${line}\n`, 'plain.jsonl'));
  });
});

describe('readGoldSet', () => {
  it('reads a file and names it in errors', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'verdict-gold-'));
    const path = join(dir, 'gold.jsonl');
    writeFileSync(path, good);
    expect(await readGoldSet(path)).toHaveLength(5);
    writeFileSync(path, `${good}oops\n`);
    await expect(readGoldSet(path)).rejects.toThrow(`${path}:8: not JSON`);
    await expect(readGoldSet(join(dir, 'missing.jsonl'))).rejects.toBeInstanceOf(InputNotFound);
  });
});

describe('checkGoldLabel', () => {
  const [row] = parseGoldSet('{"ref":"bd-1","set":"s","key":"k","label":true}', 'g');
  it('accepts a label of the question kind', () => {
    expect(() => checkGoldLabel(row, noul('x'), 'g')).not.toThrow();
    expect(() => checkGoldLabel({ ...row, label: 'b' }, choice('x', { a: 'A', b: 'B' }), 'g')).not.toThrow();
    expect(() => checkGoldLabel({ ...row, label: 2 }, score('x', ['lo', 'mid', 'hi']), 'g')).not.toThrow();
  });
  it('refuses one that does not fit, naming the line', () => {
    expect(() => checkGoldLabel({ ...row, label: 'yes' }, noul('x'), 'g')).toThrow(
      'g:1: s/k is a noul: its label is true or false',
    );
    expect(() => checkGoldLabel({ ...row, label: 'c' }, choice('x', { a: 'A', b: 'B' }), 'g')).toThrow(
      /one of the option names a, b/,
    );
    expect(() => checkGoldLabel({ ...row, label: 3 }, score('x', ['lo', 'mid', 'hi']), 'g')).toThrow(
      /level index 0\.\.2 \(0 = lo, 1 = mid, 2 = hi\)/,
    );
    expect(() => checkGoldLabel(row, score('x', ['lo', 'hi']), 'g')).toThrow(InvalidGoldSet);
  });
});

describe('the committed sample gold set (sample/gold/attention.jsonl)', () => {
  it('parses, fits the production attention questions, and has the counts its README gives', async () => {
    const { attentionSet } = await import('../../src/decision/production-sets.js');
    const source = 'sample/gold/attention.jsonl';
    const rows = await readGoldSet(source);
    const questions = attentionSet.questions!;
    for (const row of rows) {
      expect(row.set).toBe('attention');
      checkGoldLabel(row, questions[row.key], source);
    }
    const count = (key: string, label?: boolean) =>
      rows.filter((r) => r.key === key && (label === undefined || r.label === label)).length;
    expect(rows).toHaveLength(239);
    expect([count('blocked'), count('blocked', true)]).toEqual([79, 2]);
    expect([count('needs_human_decision'), count('needs_human_decision', true)]).toEqual([80, 7]);
    expect([count('waiting_on_external'), count('waiting_on_external', true)]).toEqual([80, 1]);
  });
});
