import { describe, expect, it } from 'vitest';
import {
  buildCommentState,
  buildItemState,
  changedParts,
  clipCodePoints,
  COMMENT_STATE_VERSION,
  describeClips,
  STATE_VERSION,
  type ItemStateSource,
} from '../../src/decision/state.js';
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

  it('keeps the newest 10 live comments oldest first and says how many older ones it left out (DESIGN §5.1)', () => {
    const comments = Array.from({ length: 12 }, (_, i) => ({
      id: `c${i}`,
      author: 'a',
      body: `n${i}`,
      createdAt: 1000 * i,
    }));
    const s = buildItemState({ ...base, comments }, { withLinks: true, noTrail: false });
    const doc = JSON.parse(s.bytes);
    expect(doc.recent_trail.map((c: { body: string }) => c.body)).toEqual([
      'n2',
      'n3',
      'n4',
      'n5',
      'n6',
      'n7',
      'n8',
      'n9',
      'n10',
      'n11',
    ]);
    expect(doc.omitted_comments).toBe(2);
    expect(Object.keys(doc)).toEqual([
      'title',
      'collection',
      'fields',
      'body',
      'recent_trail',
      'omitted_comments',
      'links',
    ]);
    expect(s.truncated).toBe(true);
    expect(s.clips).toMatchObject({ omittedComments: 2, commentsCut: 0, bodyCut: false });
    expect(s.version).toBe(2);
    expect(Object.keys(s.parts)).toEqual(['title', 'collection', 'fields', 'body', 'trail', 'links']);
    // one more old comment changes the count, the bytes and the trail part, nothing else
    const more = buildItemState(
      { ...base, comments: [{ id: 'c-old', author: 'a', body: 'old', createdAt: -1 }, ...comments] },
      { withLinks: true, noTrail: false },
    );
    expect(JSON.parse(more.bytes).omitted_comments).toBe(3);
    expect(changedParts(s.parts, more.parts)).toEqual(['trail']);
  });

  it('pins the bytes and hash of a state that omits comments', () => {
    const comments = Array.from({ length: 11 }, (_, i) => ({
      id: `c${i}`,
      author: 'a',
      body: `n${i}`,
      createdAt: Date.UTC(2026, 0, 1 + i),
    }));
    const s = buildItemState({ ...base, fieldsText: '{}', comments }, { withLinks: false, noTrail: false });
    expect(
      s.bytes.endsWith('{"author":"a","body":"n10","created_at":"2026-01-11T00:00:00Z"}],"omitted_comments":1}'),
    ).toBe(true);
    expect(s.hash).toBe('818bae1304d51255de68c775a36b7c6e887a9b424c24d86ed26936acd6be4067');
  });

  it('carries no omitted_comments at 10 comments or fewer, nor for a NoTrail set', () => {
    const ten = Array.from({ length: 10 }, (_, i) => ({
      id: `c${i}`,
      author: 'a',
      body: `n${i}`,
      createdAt: 1000 * i,
    }));
    const s = buildItemState({ ...base, comments: ten }, { withLinks: false, noTrail: false });
    expect(s.bytes).not.toContain('omitted_comments');
    expect(s.clips.omittedComments).toBe(0);
    expect(s.truncated).toBe(false);
    const noTrail = buildItemState(
      { ...base, comments: [...ten, { id: 'c10', author: 'a', body: 'n10', createdAt: 99_999 }] },
      { withLinks: false, noTrail: true },
    );
    expect(noTrail.bytes).not.toContain('omitted_comments');
    expect(noTrail.truncated).toBe(false);
  });

  it('records how it was clipped and says so in words', () => {
    const comments = [
      ...Array.from({ length: 13 }, (_, i) => ({ id: `c${i}`, author: 'a', body: `n${i}`, createdAt: 1000 * i })),
      { id: 'long', author: 'b', body: 'x'.repeat(2_001), createdAt: 1_000_000 },
    ];
    const links = Array.from({ length: 52 }, (_, i) => ({
      relation: 'blocks' as const,
      ref: `T-${String(i).padStart(2, '0')}`,
      title: i === 0 ? 'y'.repeat(201) : 't',
    }));
    const s = buildItemState(
      { ...base, content: 'z'.repeat(16_001), comments, links },
      { withLinks: true, noTrail: false },
    );
    expect(s.clips).toEqual({
      omittedComments: 4,
      commentsCut: 1,
      titleCut: false,
      bodyCut: true,
      fieldsCut: false,
      linksDropped: 2,
      linkTitlesCut: 1,
    });
    expect(describeClips(s.clips)).toBe(
      '4 older comments omitted (the trail holds the newest 10); 1 comment cut; body cut to 16,000 code points; 2 links dropped (the state holds 50); 1 link title cut',
    );
    expect(describeClips(buildItemState(base, { withLinks: true, noTrail: false }).clips)).toBe('');
    expect(
      buildCommentState({
        title: 't',
        collectionSlug: 'task',
        comment: { id: 'c', author: 'a', body: 'w'.repeat(16_001), createdAt: 0 },
      }).clips.commentsCut,
    ).toBe(1);
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
    for (let i = 0; i < 100; i++)
      huge[`k${String(i).padStart(3, '0')}`] = Array.from({ length: 100 }, () => 'z'.repeat(1000));
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
    const c = buildItemState(
      { ...base, comments: [{ ...base.comments[0], body: 'edited' }, base.comments[1]] },
      { withLinks: false, noTrail: false },
    );
    expect(c.hash).not.toBe(a.hash);
    expect(changedParts(a.parts, c.parts)).toEqual(['trail']);
  });

  it('builds the per-comment state {title, collection, comment}', () => {
    const s = buildCommentState({ title: 't', collectionSlug: 'task', comment: base.comments[0] });
    expect(s.bytes).toBe(
      '{"title":"t","collection":"task","comment":{"author":"bob","body":"second","created_at":"2026-01-02T03:04:05Z"}}',
    );
    expect(Object.keys(s.parts)).toEqual(['title', 'collection', 'comment']);
    expect(s.version).toBe(COMMENT_STATE_VERSION); // untouched by DESIGN §5.1: its answers stay comparable
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
