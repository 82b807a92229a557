import { describe, expect, it } from 'vitest';
import { buildCommentState, buildItemState, changedParts, clipCodePoints, STATE_VERSION, type ItemStateSource } from '../../src/decision/state.js';
import { canonicalJson, compareCodePoints } from '../../src/decision/canonical-json.js';

const base: ItemStateSource = {
  title: 'Fix <b> & render 🎉 café\u0301 line\u2028sep',
  collectionSlug: 'task',
  fieldsText: '{"status":"open","priority":3.0,"labels":["a","b"],"Zeta":1e3}',
  content: 'Body with <tags> & ampersands, emoji 👩‍💻 and e\u0301.',
  comments: [
    { id: 'c2', author: 'bob', body: 'second', createdAt: Date.UTC(2026, 0, 2, 3, 4, 5, 678) },
    { id: 'c1', author: 'amy', body: 'first', createdAt: Date.UTC(2026, 0, 1) },
  ],
  links: [
    { relation: 'blocks', ref: 'T-9', title: 'later' },
    { relation: 'parent', ref: 'E-1', title: 'epic' },
  ],
};

describe('buildItemState', () => {
  it('pins the hash of one fixed state (an accidental builder change must fail here)', () => {
    const s = buildItemState(base, { withLinks: false, noTrail: false });
    expect(s.bytes).toBe(
      '{"title":"Fix <b> & render 🎉 café\u0301 line\\u2028sep","collection":"task","fields":{"Zeta":1e3,"labels":["a","b"],"priority":3.0,"status":"open"},"body":"Body with <tags> & ampersands, emoji 👩‍💻 and e\u0301.","recent_trail":[{"author":"amy","body":"first","created_at":"2026-01-01T00:00:00Z"},{"author":"bob","body":"second","created_at":"2026-01-02T03:04:05Z"}]}',
    );
    expect(s.hash).toBe('bdd1a92812ea745e573f6b406afefd35c011286012e8f103622bba04efdf362d');
    expect(s.version).toBe(STATE_VERSION);
    expect(s.truncated).toBe(false);
  });

  it('includes links only WithLinks, sorted by relation then ref, and [] trail when NoTrail', () => {
    const s = buildItemState(base, { withLinks: true, noTrail: true });
    const doc = JSON.parse(s.bytes);
    expect(Object.keys(doc)).toEqual(['title', 'collection', 'fields', 'body', 'recent_trail', 'links']);
    expect(doc.recent_trail).toEqual([]);
    expect(doc.links.map((l: { relation: string }) => l.relation)).toEqual(['blocks', 'parent']);
    const without = JSON.parse(buildItemState({ ...base, links: [] }, { withLinks: true, noTrail: true }).bytes);
    expect(without.links).toEqual([]);
  });

  it('clips on code points, never splitting a surrogate pair, and marks truncated', () => {
    const title = '🎉'.repeat(600);
    const s = buildItemState({ ...base, title }, { withLinks: false, noTrail: false });
    const t = JSON.parse(s.bytes).title as string;
    expect([...t].length).toBe(500);
    expect(t.isWellFormed()).toBe(true);
    expect(s.truncated).toBe(true);
    expect(clipCodePoints('ab🎉cd', 3)).toEqual({ text: 'ab🎉', clipped: true });
    expect(clipCodePoints('ab🎉', 3)).toEqual({ text: 'ab🎉', clipped: false });
  });

  it('keeps the newest 10 live comments oldest first and marks the drop', () => {
    const comments = Array.from({ length: 12 }, (_, i) => ({ id: `c${i}`, author: 'a', body: `n${i}`, createdAt: 1000 * i }));
    const s = buildItemState({ ...base, comments }, { withLinks: false, noTrail: false });
    const trail = JSON.parse(s.bytes).recent_trail as Array<{ body: string }>;
    expect(trail.map((c) => c.body)).toEqual(['n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8', 'n9', 'n10', 'n11']);
    expect(s.truncated).toBe(true);
  });

  it('bounds fields: 100 keys, 1,000 code points per string, literal numbers', () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 120; i++) many[`k${String(i).padStart(3, '0')}`] = 'x';
    many.long = 'y'.repeat(1500);
    const s = buildItemState({ ...base, fieldsText: JSON.stringify(many) }, { withLinks: false, noTrail: false });
    const fields = JSON.parse(s.bytes).fields as Record<string, string>;
    expect(Object.keys(fields)).toHaveLength(100);
    expect(s.truncated).toBe(true);
    const lit = buildItemState({ ...base, fieldsText: '{"n":3.0,"m":1E5}' }, { withLinks: false, noTrail: false });
    expect(lit.bytes).toContain('"fields":{"m":1E5,"n":3.0}');
  });

  it('holds the whole fields object to 16,000 code points, dropping keys from the end', () => {
    const huge: Record<string, string[]> = {};
    for (let i = 0; i < 100; i++) huge[`k${String(i).padStart(3, '0')}`] = Array.from({ length: 100 }, () => 'z'.repeat(1000));
    const s = buildItemState({ ...base, fieldsText: JSON.stringify(huge) }, { withLinks: false, noTrail: false });
    const fieldsJson = JSON.stringify(JSON.parse(s.bytes).fields);
    expect([...fieldsJson].length).toBeLessThanOrEqual(16_000);
    expect(s.truncated).toBe(true);
    // control: a small object is untouched
    expect(buildItemState(base, { withLinks: false, noTrail: false }).truncated).toBe(false);
  });

  it('is unchanged by ids, seq or comment order, and changed by a comment body', () => {
    const a = buildItemState(base, { withLinks: false, noTrail: false });
    const b = buildItemState({ ...base, comments: [...base.comments].reverse() }, { withLinks: false, noTrail: false });
    expect(b.hash).toBe(a.hash);
    const c = buildItemState({ ...base, comments: [{ ...base.comments[0], body: 'edited' }, base.comments[1]] }, { withLinks: false, noTrail: false });
    expect(c.hash).not.toBe(a.hash);
    expect(changedParts(a.parts, c.parts)).toEqual(['trail']);
  });

  it('builds the per-comment state {title, collection, comment}', () => {
    const s = buildCommentState({ title: 't', collectionSlug: 'task', comment: base.comments[0] });
    expect(s.bytes).toBe('{"title":"t","collection":"task","comment":{"author":"bob","body":"second","created_at":"2026-01-02T03:04:05Z"}}');
    expect(Object.keys(s.parts)).toEqual(['title', 'collection', 'comment']);
  });
});

describe('canonicalJson', () => {
  it('sorts keys by code point, not UTF-16 unit, and escapes U+2028/U+2029', () => {
    // U+FF61 sorts before U+1F600 by code point but after it by UTF-16 units.
    expect(compareCodePoints('\uFF61', '😀')).toBe(-1);
    expect('\uFF61' < '😀').toBe(false);
    expect(canonicalJson({ '😀': 1, '\uFF61': 2 })).toBe('{"\uFF61":2,"😀":1}');
    expect(canonicalJson('a\u2028b\u2029')).toBe('"a\\u2028b\\u2029"');
  });
});

describe('clipCodePoints with unpaired surrogates', () => {
  it('counts a lone high surrogate as one code point, never swallowing the next character', () => {
    expect(clipCodePoints('\uD800ab', 2)).toEqual({ text: '\uD800a', clipped: true });
  });
});
