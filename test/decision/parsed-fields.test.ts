import { expect, it } from 'vitest';
import { parsedFieldsOf } from '../../src/decision/canonical-json.js';
import { appliesNow, whyNotApplies } from '../../src/decision/eligibility.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { itemStateFor, type LoadedItemForState } from '../../src/decision/set-states.js';
import type { CollectionRow, ItemRow } from '../../src/tracker-rows.js';

/**
 * A row's fields are parsed once per row object (src/decision/canonical-json.ts `parsedFieldsOf`)
 * and shared by eligibility and the state builder: building a state (which bounds and drops keys)
 * leaves the shared value as parsed, and a row object whose fields text changed is parsed anew.
 */

const set = defineQuestionSet({
  name: 'open_only',
  questions: { q: noul('Is it blocked?') },
  eligible: [{ field: 'status', equals: 'open' }],
});
const collection: CollectionRow = {
  id: 'c',
  workspaceId: 'w',
  slug: 'task',
  isSystem: false,
  schema: { fields: [] },
  settings: {},
  createdAt: 0,
  deletedAt: null,
};
// 120 keys: over the state's 100-key bound, so the builder drops keys from its copy.
const many = Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`k${String(i).padStart(3, '0')}`, 'x']));
const itemRow = (fields: string): ItemRow => ({
  id: 'i',
  workspaceId: 'w',
  collectionId: 'c',
  ref: 'T-1',
  title: 'title',
  content: 'body',
  fields,
  seq: 1,
  createdAt: 0,
  updatedAt: 0,
  deletedAt: null,
  sourceUrl: null,
});
const loadedOf = (item: ItemRow): LoadedItemForState => ({ item, collection, comments: [], links: [] });

it('building a state leaves the shared parse as parsed: a second build and eligibility read the same', () => {
  const text = JSON.stringify({ ...many, status: 'open' });
  const row = itemRow(text);
  const first = itemStateFor(set, loadedOf(row));
  expect(first.truncated).toBe(true);
  expect(Object.keys(parsedFieldsOf(row) as object)).toHaveLength(121);
  const again = itemStateFor(set, loadedOf(row));
  const fresh = itemStateFor(set, loadedOf(itemRow(text)));
  expect(again.bytes).toBe(fresh.bytes);
  expect(first.bytes).toBe(fresh.bytes);
  expect(appliesNow(set, row, collection)).toBe(true);
});

it('a row object whose fields text changed is parsed anew', () => {
  const row = itemRow(JSON.stringify({ status: 'open' }));
  expect(appliesNow(set, row, collection)).toBe(true);
  row.fields = JSON.stringify({ status: 'closed' });
  expect(whyNotApplies(set, row, collection)).not.toBeNull();
  expect(itemStateFor(set, loadedOf(row)).bytes).toContain('closed');
});
