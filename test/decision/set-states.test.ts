import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { itemStateFor, type ItemStates, type LoadedItemForState } from '../../src/decision/set-states.js';

/**
 * One co-asked group builds each shape of item state once (src/decision/set-states.ts
 * `itemStateFor` with a shared `ItemStates`): sets that read the item alike get the very same
 * state, and a set that reads it differently (links, no trail) never gets another shape's.
 */
interface BeadsRow {
  id: string;
  title: string;
  description: string;
  status: string;
  dependencies?: Array<{ depends_on_id: string }>;
  comments?: Array<{ id: number; author: string; text: string; created_at: string }>;
}
const rows = readFileSync(new URL('../../sample/beads-issues.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .map((l) => JSON.parse(l) as BeadsRow);
// The sample's first item, its parent (a parent-child dependency), and the first comment in the sample.
const row = rows[0]!;
const linked = rows.find((r) => r.id === row.dependencies![0]!.depends_on_id)!;
const comment = rows.find((r) => r.comments?.length)!.comments![0]!;
const loaded: LoadedItemForState = {
  item: { title: row.title, fields: JSON.stringify({ status: row.status }), content: row.description },
  collection: { slug: 'task' },
  comments: [
    { id: String(comment.id), author: comment.author, body: comment.text, createdAt: Date.parse(comment.created_at) },
  ],
  links: [{ relation: 'parent', ref: linked.id, title: linked.title }],
};

describe('itemStateFor with the states already built for one loaded item', () => {
  it('gives sets of one shape the same built state, and each other shape its own, as built alone', () => {
    const built: ItemStates = new Map();
    const shapes = [
      { withLinks: false, noTrail: false },
      { withLinks: true, noTrail: false },
      { withLinks: false, noTrail: true },
      { withLinks: true, noTrail: true },
    ];
    const shared = shapes.map((s) => itemStateFor(s, loaded, built));
    expect(new Set(shared.map((s) => s.hash)).size).toBe(4);
    for (const [i, s] of shapes.entries()) {
      // The same object for a second set of the shape: built and hashed once.
      expect(itemStateFor({ ...s }, loaded, built)).toBe(shared[i]);
      // The same bytes as a state built on its own.
      expect(shared[i]!.bytes).toBe(itemStateFor(s, loaded).bytes);
    }
    expect(built.size).toBe(4);
  });
});
