import { and, asc, eq, type SQLWrapper } from 'drizzle-orm';
import type { StateLink, TrailComment } from '../../decision/state.js';
import type { JobRow } from '../queue-store.js';
import type { ItemViewRows } from '../item-view-store.js';
import type { CollectionRow, ItemRow, WorkspaceRow } from '../tracker-reads.js';
import type { DecisionRow } from '../decision-store.js';
import { toCollectionRow } from '../write-rules.js';
import { stateCommentsShape, stateLinksShape } from './decisions.js';
import { bind, one, read, rows, shape, type SqlContext, type Tables } from './steps.js';
import { itemSurfacingChanges, itemVerdicts } from './surfacing.js';

/**
 * The item view's one read (`Store.readItemView`, DESIGN §16.2 `GET /v1/items/{ref}`, MCP
 * `item_get`, the dashboard's item page): the workspace by slug, the item by ref, its collection,
 * its stored answers, its jobs, people's verdicts on it, and, when it has answers, what judging
 * them needs (its surfacing memory, live comments and links). Every statement is a shape, so SQLite
 * prepares each once per connection and a request only binds values: building the statements'
 * text with drizzle on every call, and reading the same rows again per part of the view, was
 * most of a read's CPU (bench part j under --cpu-prof). One `read`: on SQLite the statements run
 * back to back in one synchronous step, with no other request between them.
 */

type CollectionDbRow = Tables['collections']['$inferSelect'];

/**
 * The workspace by slug, its item by ref and the item's collection, in one statement: three
 * indexed lookups in one step instead of three (bench part j: about 20 µs of a read's CPU).
 * No row when any of the three is missing.
 */
const itemByRefShape = shape<'slug' | 'ref'>(
  'item view: workspace, item by ref, collection',
  (d, p) => (db) =>
    db
      .select({ workspace: d.t.workspaces, item: d.t.items, collection: d.t.collections })
      .from(d.t.workspaces)
      .innerJoin(d.t.items, and(eq(d.t.items.workspaceId, d.t.workspaces.id), eq(d.t.items.ref, p.ref as SQLWrapper)))
      .innerJoin(d.t.collections, eq(d.t.collections.id, d.t.items.collectionId))
      .where(eq(d.t.workspaces.slug, p.slug as SQLWrapper)),
);
/**
 * Unordered: the caller sorts them oldest first (by id, as `listDecisions` reads them). An ORDER BY
 * here sorts the whole rows (answers, states) in a temporary B-tree, since the item's index is
 * (item, set, key, id): that sort was about 40 % of this statement's CPU.
 */
const decisionsShape = shape<'itemId'>(
  'item view: decisions',
  (d, p) => (db) =>
    db
      .select()
      .from(d.t.itemDecisions)
      .where(eq(d.t.itemDecisions.itemId, p.itemId as SQLWrapper)),
);
/** At most one job per (item, set) (the primary key); by set name for a stable order. */
const jobsShape = shape<'itemId'>(
  'item view: jobs',
  (d, p) => (db) =>
    db
      .select()
      .from(d.t.decisionJobs)
      .where(eq(d.t.decisionJobs.itemId, p.itemId as SQLWrapper))
      .orderBy(asc(d.t.decisionJobs.questionSet)),
);

/** See `Store.readItemView`. @returns null when the workspace, the item or its collection is missing. */
export function readItemView(c: SqlContext, workspaceSlug: string, ref: string): Promise<ItemViewRows | null> {
  return read(c, function* () {
    const found = yield* one<{ workspace: WorkspaceRow; item: ItemRow; collection: CollectionDbRow }>(
      bind(itemByRefShape, { slug: workspaceSlug, ref }),
    );
    if (!found) return null;
    const { workspace, item, collection } = found;
    const decisions = (yield* rows<DecisionRow>(bind(decisionsShape, { itemId: item.id }))).sort((a, b) => a.id - b.id);
    const jobs = yield* rows<JobRow>(bind(jobsShape, { itemId: item.id }));
    const verdicts = yield* itemVerdicts(item.id);
    // What judging the answers needs; an item never answered is shown without it.
    const judging =
      decisions.length === 0
        ? null
        : {
            surfacingChanges: yield* itemSurfacingChanges(item.id),
            comments: yield* rows<TrailComment>(bind(stateCommentsShape, { itemId: item.id })),
            links: yield* rows<StateLink>(bind(stateLinksShape, { itemId: item.id })),
          };
    return {
      workspace,
      item,
      collection: toCollectionRow(collection) as CollectionRow,
      decisions,
      jobs,
      verdicts,
      judging,
    };
  });
}
