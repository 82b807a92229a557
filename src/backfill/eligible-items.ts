import type { QuestionSet } from '../decision/registry.js';
import type { CollectionRow, ItemRow, WorkspaceRow } from '../store/tracker-reads.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import { appliesNow } from '../decision/eligibility.js';

/** Items read per store call while scanning. */
const SCAN_PAGE = 1_000;

/** An item a set applies to now, with its collection. */
export interface EligibleItem {
  item: ItemRow;
  collection: CollectionRow;
}

/**
 * Yields the items `set` applies to now (DESIGN §7 step 3 `appliesNow`), in item id order, after
 * `afterId` when given: live items of live collections in live workspaces (one workspace, or all).
 * This is the same rule the runner checks at evaluation, so a backfill owes, and an estimate
 * prices, only jobs that would not be dropped; the runner still checks again when it runs them.
 *
 * Reads pages of `SCAN_PAGE` items and every collection of the workspaces involved once.
 */
export async function* eligibleItems(
  store: Pick<TrackerReads, 'getWorkspace' | 'listCollections' | 'listItems' | 'listWorkspaces'>,
  set: QuestionSet,
  opts: { workspaceId?: string; afterId?: string | null } = {},
): AsyncGenerator<EligibleItem> {
  const workspaces: WorkspaceRow[] = opts.workspaceId
    ? [await store.getWorkspace(opts.workspaceId)].filter((w): w is WorkspaceRow => w !== null)
    : await store.listWorkspaces();
  const live = new Set(workspaces.filter((w) => w.deletedAt === null).map((w) => w.id));
  const collections = new Map<string, CollectionRow>();
  for (const w of workspaces) for (const c of await store.listCollections(w.id)) collections.set(c.id, c);
  let after = opts.afterId ?? undefined;
  for (;;) {
    const page = await store.listItems({ workspaceId: opts.workspaceId, afterId: after, limit: SCAN_PAGE });
    if (page.length === 0) return;
    for (const item of page) {
      const collection = collections.get(item.collectionId);
      if (!collection || collection.deletedAt !== null || !live.has(item.workspaceId)) continue;
      if (appliesNow(set, item, collection)) yield { item, collection };
    }
    after = page[page.length - 1].id;
    if (page.length < SCAN_PAGE) return;
  }
}
