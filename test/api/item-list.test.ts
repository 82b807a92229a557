import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { itemListPage, type ItemListEntry, type ItemListQuery } from '../../src/compose/item-list.js';
import { openReader } from '../../src/compose/reader.js';
import { InvalidInput } from '../../src/errors.js';
import { importBeads } from '../../src/importers/beads.js';
import { silentLogger } from '../../src/log.js';
import type { WorkspaceRow } from '../../src/store/tracker-reads.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * `VerdictReader.items` (compose/item-list.ts) on the bundled beads sample (real tracker data) in
 * a real SQLite file: each sort pages through every item exactly once in order, filters narrow,
 * bad input names its member, and content is left out unless asked.
 */

const ROOT = join(import.meta.dirname, '../..');
let f: Fixture;
let ws: WorkspaceRow;
let all: Array<{
  id: string;
  ref: string;
  title: string;
  updatedAt: number;
  createdAt: number;
  fields: string;
  collectionId: string;
}>;

beforeAll(async () => {
  f = await makeFixture();
  const lines = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8').split('\n').filter(Boolean).slice(0, 120);
  // Items written at distinct times, and some sharing one, so the keyset's tie-break on id is exercised.
  let n = 0;
  for (const line of lines) {
    if (n++ % 3 === 0) f.clock.advance(1_000);
    await importBeads(f.store, [line], { workspaceSlug: 'beads' });
  }
  ws = (await f.store.getWorkspaceBySlug('beads'))!;
  all = await f.store.listItems({ workspaceId: ws.id });
}, 60_000);
afterAll(() => f?.cleanup());

const page = (q: Omit<ItemListQuery, 'workspace'>) =>
  itemListPage(f.store, f.registry, () => openReader(f.store, f.registry, 'none', silentLogger), ws, {
    workspace: 'beads',
    ...q,
  });

async function walk(q: Omit<ItemListQuery, 'workspace'>): Promise<ItemListEntry[]> {
  const out: ItemListEntry[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1_000; pages++) {
    const p = await page({ ...q, cursor });
    out.push(...p.items);
    expect(p.hasMore).toBe(p.nextCursor !== null);
    if (!p.nextCursor) return out;
    cursor = p.nextCursor;
  }
  throw new Error('no last page');
}

const cmp = (a: string | number, b: string | number) => (a < b ? -1 : a > b ? 1 : 0);

describe('items: a list people can use', () => {
  it('the sample is many items, some sharing an update time', () => {
    expect(all.length).toBeGreaterThan(100);
    expect(new Set(all.map((i) => i.updatedAt)).size).toBeLessThan(all.length);
  });

  it.each([
    ['updated', 'desc'],
    ['updated', 'asc'],
    ['created', 'desc'],
    ['ref', 'asc'],
    ['ref', 'desc'],
  ] as const)('sort %s %s pages through every item once, in order, ties by id', async (sort, order) => {
    const seen = await walk({ sort, order, limit: 7 });
    const key = (i: { updatedAt: number; createdAt: number; ref: string }) =>
      sort === 'updated' ? i.updatedAt : sort === 'created' ? i.createdAt : i.ref;
    const sign = order === 'asc' ? 1 : -1;
    const expected = [...all].sort((a, b) => sign * (cmp(key(a), key(b)) || cmp(a.id, b.id)));
    expect(seen.map((i) => i.id)).toEqual(expected.map((i) => i.id));
  });

  it('defaults to newest update first, 50 a page, without content unless asked', async () => {
    const p = await page({});
    expect(p.items).toHaveLength(50);
    expect(p.items[0].updatedAt).toBe(Math.max(...all.map((i) => i.updatedAt)));
    expect(p.items.every((i) => i.content === undefined)).toBe(true);
    const withContent = await page({ includeContent: true, limit: 5 });
    expect(withContent.items.every((i) => typeof i.content === 'string')).toBe(true);
    expect(withContent.items.some((i) => i.content!.length > 0)).toBe(true);
  });

  it('filters by field value, update time, collection and title text', async () => {
    const closed = await walk({ fields: { status: 'closed' }, limit: 50 });
    expect(closed.length).toBe(all.filter((i) => JSON.parse(i.fields).status === 'closed').length);
    expect(closed.length).toBeGreaterThan(0);
    expect(closed.every((i) => i.fields.status === 'closed')).toBe(true);

    const since = [...new Set(all.map((i) => i.updatedAt))].sort((a, b) => a - b)[10];
    const recent = await walk({ updatedSince: since, limit: 50 });
    expect(recent.map((i) => i.id).sort()).toEqual(
      all
        .filter((i) => i.updatedAt >= since)
        .map((i) => i.id)
        .sort(),
    );

    const word = all[5].title.split(/\s+/).find((w) => w.length > 4)!;
    const found = await walk({ search: word.toUpperCase(), limit: 50 });
    expect(found.map((i) => i.id).sort()).toEqual(
      all
        .filter((i) => i.title.toLowerCase().includes(word.toLowerCase()))
        .map((i) => i.id)
        .sort(),
    );
    // `%` is the text itself, not a wildcard.
    expect((await walk({ search: '%', limit: 100 })).length).toBe(all.filter((i) => i.title.includes('%')).length);

    const slug = (await f.store.listCollections(ws.id)).find((c) => c.id === all[0].collectionId)!.slug;
    const inCollection = await walk({ collection: slug, limit: 100 });
    expect(inCollection.length).toBe(all.filter((i) => i.collectionId === all[0].collectionId).length);
  });

  it('refuses a bad cursor, sort, limit, collection or set, naming the member', async () => {
    const first = await page({ limit: 3 });
    const bad = async (q: Omit<ItemListQuery, 'workspace'>) => {
      const err = await page(q).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInput);
      return (err as InvalidInput).param;
    };
    expect(await bad({ cursor: 'not-a-cursor' })).toBe('cursor');
    expect(await bad({ cursor: Buffer.from('{"s":"updated"}').toString('base64url') })).toBe('cursor');
    expect(await bad({ cursor: first.nextCursor!, sort: 'ref' })).toBe('cursor'); // made for another sort
    expect(await bad({ sort: 'title' as never })).toBe('sort');
    expect(await bad({ limit: 0 })).toBe('limit');
    expect(await bad({ limit: 501 })).toBe('limit');
    expect(await bad({ collection: 'nope' })).toBe('collection');
    expect(await bad({ surfaced: 'nope' })).toBe('surfaced');
  });
});
