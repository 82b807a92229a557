import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidInput } from '../../src/errors.js';
import { bundledSamplePath, importBeads } from '../../src/importers/beads.js';
import { emptyReport, normaliseText, refProblem } from '../../src/store/input-rules.js';
import { InvalidWrite } from '../../src/store/store.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * The input rules of every write door (DESIGN §3.1) on the library's doors and the beads
 * importer, on a real SQLite file. The /v1 side is in test/server/api-input-rules.test.ts.
 */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture();
});
afterEach(async () => {
  await fx.cleanup();
});

/** The first `n` lines of the bundled sample (real beads rows). */
function sampleLines(n: number): string[] {
  return readFileSync(bundledSamplePath(), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(0, n);
}

/** Every string of a JSON value mapped through `f`. */
function mapStrings(v: unknown, f: (s: string) => string): unknown {
  if (typeof v === 'string') return f(v);
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, f));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapStrings(x, f)]));
  return v;
}

describe('text is stored in NFC with LF line ends', () => {
  it('normaliseText: CRLF and lone CR become LF, NFD becomes NFC, neither counted as a repair', () => {
    const r = emptyReport();
    expect(normaliseText('a\r\nb\rc\n', r)).toBe('a\nb\nc\n');
    expect(normaliseText('Cafe\u0301', r)).toBe('Caf\u00e9');
    expect(r).toEqual({ loneSurrogates: 0, nulsRemoved: 0 });
  });

  it('the same item written with CRLF or in NFD is unchanged and owes nothing, on the library doors', async () => {
    const base = {
      id: 'it-1',
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: 'bd-1',
      title: 'Café title',
      content: 'line one\nline two',
      fields: { note: 'naïve\nfield' },
    };
    const first = await fx.store.upsertItem(base);
    expect(first.changed).toBe(true);
    const crlf = await fx.store.upsertItem({
      ...base,
      content: 'line one\r\nline two',
      fields: { note: 'naïve\r\nfield' },
    });
    expect(crlf).toMatchObject({ changed: false, owed: 0 });
    const nfd = await fx.store.upsertItem({
      ...base,
      title: base.title.normalize('NFD'),
      fields: { note: 'naïve\nfield'.normalize('NFD') },
    });
    expect(nfd).toMatchObject({ changed: false, owed: 0 });
    const patched = await fx.store.updateItem('it-1', {
      content: 'line one\rline two',
      setFields: { note: 'naïve\r\nfield'.normalize('NFD') },
    });
    expect(patched).toMatchObject({ changed: false, owed: 0 });
    // Fields given as text: escaped CRLF inside a string is stored as LF too.
    const asText = await fx.store.updateItem('it-1', { fields: '{"note":"na\\u0069\\u0308ve\\r\\nfield"}' });
    expect(asText.changed).toBe(false);

    await fx.store.addComment({ id: 'c-1', itemId: 'it-1', author: 'Zoë', body: 'a\nb' });
    expect(await fx.store.editComment('c-1', 'a\r\nb')).toMatchObject({ changed: false, owed: 0 });
    expect(
      await fx.store.upsertComment({ id: 'c-1', itemId: 'it-1', author: 'Zoe\u0308', body: 'a\r\nb' }),
    ).toMatchObject({ changed: false, owed: 0 });
  });

  it('a beads file re-imported with CRLF inside its strings and as its line ends updates nothing and owes nothing', async () => {
    const lines = sampleLines(150);
    const file = join(fx.file, '..', 'lf.jsonl');
    writeFileSync(file, lines.join('\n') + '\n');
    const first = await importBeads(fx.store, file);
    expect(first.imported.created).toBeGreaterThan(100);
    const crlfInside = lines.map((l) => JSON.stringify(mapStrings(JSON.parse(l), (s) => s.replace(/\n/g, '\r\n'))));
    // The sample must carry line ends inside its strings, or the check below checks nothing.
    expect(crlfInside.join('\n')).not.toBe(lines.map((l) => JSON.stringify(JSON.parse(l))).join('\n'));
    writeFileSync(file, crlfInside.join('\r\n') + '\r\n');
    const again = await importBeads(fx.store, file);
    expect(again).toMatchObject({
      imported: { created: 0, updated: 0 },
      comments: { written: 0 },
      jobsOwed: 0,
      jobRowsOwed: 0,
    });
    // The sample has no character that NFD decomposes (checked: NFD leaves every string of its
    // 1,881 rows as it is), so the NFD form is checked on the doors above, not on a re-import.
  });
});

describe('a ref or id that would have to change is refused, text repairs are reported', () => {
  const bad: Array<[string, string, RegExp]> = [
    ['NUL', 'N\u0000UL', /ref: holds a control character/],
    ['a line end', 'a\nb', /ref: holds a control character/],
    ['a lone surrogate', 'x\uD800', /ref: holds a lone surrogate/],
    ['NFD', 'Cafe\u0301', /ref: is not in Unicode NFC/],
    ['501 characters', 'r'.repeat(501), /ref: is longer than 500 characters/],
    ['empty', '', /ref: is empty/],
  ];
  it.each(bad)('a ref with %s is refused (InvalidInput naming ref), nothing written', async (_what, ref, message) => {
    const err = await fx.store
      .createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref, title: 't' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInput);
    expect((err as Error).message).toMatch(/^createItem: /);
    expect((err as Error).message).toMatch(message);
    expect(await fx.store.countItems(fx.ws.id)).toBe(0);
  });

  it('refProblem accepts the refs trackers use', () => {
    for (const ref of ['#12', 'bd-7h7', 'PROJ-1234', 'Café', '日本-1']) expect(refProblem(ref)).toBeNull();
  });

  it('text with a lone surrogate or NUL is repaired, and the write reports how many', async () => {
    const r = await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: 'x',
      title: 'a\uD800b\u0000c',
    });
    expect(r.row.title).toBe('a\uFFFDbc');
    expect(r.normalised).toEqual({ loneSurrogates: 1, nulsRemoved: 1 });
  });
});

describe('every library door checks its input before touching the database', () => {
  it('addComment without author throws InvalidInput naming author, even on a closed store (no statement ran)', async () => {
    const item = await fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'x', title: 't' });
    const err = await fx.store.addComment({ itemId: item.row.id, body: 'b' } as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInput);
    expect((err as Error).message).toBe('addComment: author: expected string');
    await fx.store.close();
    // Closed: any statement fails (the connection is not open), so InvalidInput proves the check came first.
    const closed = await fx.store.addComment({ itemId: item.row.id, body: 'b' } as never).catch((e: unknown) => e);
    expect(closed).toBeInstanceOf(InvalidInput);
    const touched = await fx.store.addComment({ itemId: item.row.id, author: 'a', body: 'b' }).catch((e: unknown) => e);
    expect(touched).not.toBeInstanceOf(InvalidInput);
    expect((touched as Error).message).toMatch(/not open/);
  });

  const cases: Array<[string, (s: Fixture['store'], f: Fixture) => Promise<unknown>, RegExp]> = [
    ['createWorkspace', (s) => s.createWorkspace({ slug: 5 } as never), /^createWorkspace: slug: expected string$/],
    [
      'createCollection',
      (s, f) => s.createCollection({ workspaceId: f.ws.id } as never),
      /^createCollection: slug: expected string$/,
    ],
    [
      'updateCollection',
      (s, f) => s.updateCollection(f.tasks.id, { settings: 'x' } as never),
      /^updateCollection: settings: expected record$/,
    ],
    [
      'createItem',
      (s, f) => s.createItem({ workspaceId: f.ws.id, collectionId: f.tasks.id, ref: 'r' } as never),
      /^createItem: title: expected string$/,
    ],
    ['updateItem', (s) => s.updateItem('x', { title: 3 } as never), /^updateItem: title: expected string$/],
    [
      'upsertItem',
      (s, f) => s.upsertItem({ workspaceId: f.ws.id, collectionId: f.tasks.id, ref: 'r', title: 't' } as never),
      /^upsertItem: id: expected string$/,
    ],
    ['moveItem', (s) => s.moveItem('x', undefined as never), /^moveItem: collectionId: expected string$/],
    ['softDeleteItem', (s) => s.softDeleteItem(undefined as never), /^softDeleteItem: id: expected string$/],
    [
      'upsertComment',
      (s) => s.upsertComment({ itemId: 'i', author: 'a', body: 'b' } as never),
      /^upsertComment: id: expected string$/,
    ],
    ['editComment', (s) => s.editComment('c', null as never), /^editComment: body: expected string$/],
    ['deleteComment', (s) => s.deleteComment(7 as never), /^deleteComment: id: expected string$/],
    [
      'addLink',
      (s, f) => s.addLink({ workspaceId: f.ws.id, sourceId: 'a', targetId: 'b' } as never),
      /^addLink: linkType: expected string$/,
    ],
    ['removeLink', (s) => s.removeLink(undefined as never), /^removeLink: id: expected string$/],
    [
      'softDeleteWorkspace',
      (s) => s.softDeleteWorkspace(undefined as never),
      /^softDeleteWorkspace: id: expected string$/,
    ],
  ];
  it.each(cases)(
    '%s refuses a missing or mistyped member with InvalidInput naming it',
    async (_door, call, message) => {
      const err = await call(fx.store, fx).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInput);
      expect((err as Error).message).toMatch(message);
    },
  );

  it('5,000-deep fields are refused with the depth rule, not a stack overflow', async () => {
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 5000; i++) deep = { a: deep };
    for (const write of [
      () =>
        fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'd', title: 't', fields: deep }),
      () =>
        fx.store.upsertItem({
          id: 'd2',
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: 'd2',
          title: 't',
          fields: deep,
        }),
    ]) {
      const err = await write().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidWrite);
      expect((err as Error).message).toBe('fields nest deeper than 32 levels');
    }
    const item = await fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref: 'ok', title: 't' });
    const err = await fx.store.updateItem(item.row.id, { setFields: { x: deep } }).catch((e: unknown) => e);
    expect((err as Error).message).toBe('setFields nest deeper than 32 levels');
  });
});

describe('the beads importer follows the same rules', () => {
  it('invalid UTF-8 and an escaped NUL are repaired and reported per line; a 100,000-character id is rejected with the reason', async () => {
    const [a, b, c] = sampleLines(3).map((l) => JSON.parse(l) as Record<string, unknown>);
    const file = join(fx.file, '..', 'bad.jsonl');
    const lineA = Buffer.from(JSON.stringify(a));
    // Line 1: a real row whose title holds a byte that is not UTF-8.
    const at = lineA.indexOf(Buffer.from('"title":"')) + 9;
    const broken = Buffer.concat([lineA.subarray(0, at), Buffer.from([0xff]), lineA.subarray(at)]);
    // Line 2: an escaped NUL in the title. Line 3: an id no door accepts.
    const nul = JSON.stringify({ ...b, title: `${String(b.title)}\u0000` });
    const longId = JSON.stringify({ ...c, id: 'x'.repeat(100_000), dependencies: [], comments: [] });
    writeFileSync(file, Buffer.concat([broken, Buffer.from(`\n${nul}\n${longId}\n`)]));
    const r = await importBeads(fx.store, file);
    expect(r.imported.created).toBe(2);
    expect(r.repairedLines).toEqual({ count: 2, invalidUtf8: 1, loneSurrogates: 0, nulsRemoved: 1, lines: [1, 2] });
    expect(r.rejected).toEqual({
      count: 1,
      lines: [{ line: 3, reason: 'invalid_row', detail: 'id: is longer than 500 characters' }],
    });
    expect((await fx.store.getItemByRef(r.workspaceId, String(a.id)))!.title).toBe(`\uFFFD${String(a.title)}`);
  });
});
