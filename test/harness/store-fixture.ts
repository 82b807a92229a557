import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../src/clock.js';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry, type QuestionSet } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { CollectionRow, WorkspaceRow } from '../../src/store/tracker-reads.js';

/** A temporary directory removed by `cleanup`. */
export function tempDir(prefix = 'verdict-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Fixture {
  store: SqliteStore;
  clock: ManualClock;
  registry: Registry;
  ws: WorkspaceRow;
  tasks: CollectionRow;
  file: string;
  cleanup: () => Promise<void>;
}

/** Collection schema of tracker-like collections: `status` is a select whose terminal option is `closed`. */
export const TASK_SCHEMA = {
  fields: [{ key: 'status', type: 'select', options: ['open', 'in_progress', 'closed'], terminal_options: ['closed'] }],
};

/**
 * A real SQLite file in a temp dir with a manual clock, one workspace and a `task` collection.
 * Sets default to the production sets.
 */
export async function makeFixture(sets: QuestionSet[] = productionSets()): Promise<Fixture> {
  const t = tempDir();
  const clock = new ManualClock();
  const registry = new Registry(sets);
  const file = join(t.dir, 'verdict.db');
  let n = 0;
  const store = new SqliteStore({ url: file, registry, clock, newId: () => `id-${(++n).toString().padStart(6, '0')}` });
  const ws = await store.createWorkspace({ slug: 'acme' });
  const tasks = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  return {
    store,
    clock,
    registry,
    ws,
    tasks,
    file,
    cleanup: async () => {
      await store.close();
      t.cleanup();
    },
  };
}
