import { silentLogger } from '../src/log.js';
import { PRIORITY_BACKFILL } from '../src/store/queue-store.js';
import type { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

/**
 * Seeds the benchmark's items: one workspace, one `task` collection with a terminal `status`, and
 * `items` open items (`<ref>-0` …, titled `<word> item N`), 500 per transaction. Each owes its jobs
 * at once (backfill priority, no quiet period), so a drain starts on them without waiting.
 * Set-up, never measured. @returns the items' ids, in ref order.
 */
export async function seedBenchItems(
  store: SqliteStore,
  items: number,
  names: { workspace?: string; ref?: string; word?: string } = {},
): Promise<string[]> {
  const { workspace = 'bench', ref = 'B', word = 'bench' } = names;
  const ws = await store.createWorkspace({ slug: workspace });
  const col = await store.createCollection({
    workspaceId: ws.id,
    slug: 'task',
    schema: { fields: [{ key: 'status', type: 'select', options: ['open', 'closed'], terminal_options: ['closed'] }] },
  });
  const ids: string[] = [];
  for (let i = 0; i < items; i += 500) {
    await store.transaction(async (tx) => {
      for (let j = i; j < Math.min(items, i + 500); j++) {
        const w = await tx.createItem(
          {
            workspaceId: ws.id,
            collectionId: col.id,
            ref: `${ref}-${j}`,
            title: `${word} item ${j}`,
            content: `body of ${word} item ${j}`,
            fields: { status: 'open' },
          },
          { priority: PRIORITY_BACKFILL, quietPeriod: false },
        );
        ids.push(w.row.id);
      }
    });
  }
  return ids;
}

/**
 * The worker options every in-process bench drain shares, beside its own store, provider,
 * concurrency and co-asking: no logs, a 50 ms tick, a 60 s lease (no renewal inside a drain),
 * a pass limit no bench reaches, and `untilIdle` (the drain ends when nothing is owed).
 */
export const BENCH_DRAIN = {
  logger: silentLogger,
  tickMs: 50,
  leaseMs: 60_000,
  passLimit: 1_000,
  abandonLimit: 8,
  untilIdle: true,
} as const;
