import { describe, expect, it } from 'vitest';
import { sameNumberLiteral, scanObject, spliceMembers } from '../../src/store/fields-patch.js';

/** The splice under the field edit door (DESIGN §3.2): only the touched members' bytes move. */

const edits = (set: Record<string, string> = {}, remove: string[] = []) => ({
  set: new Map(Object.entries(set)),
  remove: new Set(remove),
});

describe('scanObject', () => {
  it('finds top-level members past strings holding braces, quotes and escapes, and nested values', () => {
    const text = ' { "a\\"}" : "x}\\\\", "b":{"c":[1,{"d":"]"}]} ,"e":-1.5e+3,"f":null }';
    const l = scanObject(text);
    expect(l.members.map((m) => [m.key, text.slice(m.valueStart, m.valueEnd)])).toEqual([
      ['a"}', '"x}\\\\"'],
      ['b', '{"c":[1,{"d":"]"}]}'],
      ['e', '-1.5e+3'],
      ['f', 'null'],
    ]);
    expect(text[l.close]).toBe('}');
  });

  it('decodes escaped keys and handles the empty object', () => {
    expect(scanObject('{"st\\u0061tus":1}').members[0].key).toBe('status');
    expect(scanObject('{ }').members).toEqual([]);
    expect(() => scanObject('[1]')).toThrow(SyntaxError);
  });
});

describe('spliceMembers', () => {
  const text = '{"a":1.0, "b" : 2e0 ,"c":"\\u00e9"}';
  it('replaces a value in place and leaves every other byte', () => {
    expect(spliceMembers(text, edits({ b: '3' }))).toBe('{"a":1.0, "b" : 3 ,"c":"\\u00e9"}');
    expect(spliceMembers(text, edits())).toBe(text);
  });
  it('removes the first, a middle, the last, and every member with one separator each', () => {
    expect(spliceMembers(text, edits({}, ['a']))).toBe('{"b" : 2e0 ,"c":"\\u00e9"}');
    expect(spliceMembers(text, edits({}, ['b']))).toBe('{"a":1.0 ,"c":"\\u00e9"}');
    expect(spliceMembers(text, edits({}, ['c']))).toBe('{"a":1.0, "b" : 2e0}');
    expect(spliceMembers(text, edits({}, ['a', 'c']))).toBe('{"b" : 2e0}');
    expect(spliceMembers(text, edits({}, ['a', 'b', 'c']))).toBe('{}');
  });
  it('appends new members, into an empty object too', () => {
    expect(spliceMembers(text, edits({ d: 'true', a: '7' }, ['b']))).toBe('{"a":7 ,"c":"\\u00e9","d":true}');
    expect(spliceMembers('{ }', edits({ 'k"': '1' }))).toBe('{ "k\\"":1}');
  });
});

describe('sameNumberLiteral', () => {
  it('compares the numbers literals denote, exactly', () => {
    expect(sameNumberLiteral('3', '3.0')).toBe(true);
    expect(sameNumberLiteral('1e2', '100')).toBe(true);
    expect(sameNumberLiteral('0.3e1', '3')).toBe(true);
    expect(sameNumberLiteral('-0', '0.0')).toBe(true);
    expect(sameNumberLiteral('12345678901234567890', '12345678901234567000')).toBe(false);
    expect(sameNumberLiteral('-3', '3')).toBe(false);
    expect(sameNumberLiteral('1e999999999999999999999', '10e999999999999999999998')).toBe(true);
  });
});
