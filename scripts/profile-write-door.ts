/**
 * `node --cpu-prof --cpu-prof-dir=<dir> --import tsx scripts/profile-write-door.ts [updates=20000] [sets=production|none] [sync=FULL|NORMAL|OFF]`:
 * the write door of bench part h (scripts/bench-evals.ts `benchWriteDoor`) alone, for a CPU
 * profile: `updateItem` title edits on 200 items of a `task` collection, with the production sets
 * registered (or none), one transaction each, after an untimed warm-up. `sync` below FULL takes the
 * commit's fsync out of the profile, whose samples otherwise count its wait as SQLite's (the
 * commit runs inside better-sqlite3's transaction wrapper). Prints CPU µs per update
 * (`process.cpuUsage`); read the profile with `scripts/cpu-profile-categories.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRegistry } from '../src/compose/open.js';
import { Registry } from '../src/decision/registry.js';
import { PRIORITY_BACKFILL } from '../src/store/queue-store.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

const updates = Number(process.argv[2] ?? 20_000);
const registry = process.argv[3] === 'none' ? new Registry([]) : buildRegistry();
const dir = mkdtempSync(join(tmpdir(), 'verdict-profile-door-'));
const store = new SqliteStore({ url: join(dir, 'door.db'), registry });
const sync = process.argv[4] ?? 'FULL';
if (!['FULL', 'NORMAL', 'OFF'].includes(sync)) throw new TypeError(`sync: expected FULL, NORMAL or OFF, got ${sync}`);
store.ctx.db.$client.pragma(`synchronous = ${sync}`);
try {
  const ws = await store.createWorkspace({ slug: 'bench' });
  const col = await store.createCollection({
    workspaceId: ws.id,
    slug: 'task',
    schema: { fields: [{ key: 'status', type: 'select', options: ['open', 'closed'], terminal_options: ['closed'] }] },
  });
  const ids: string[] = [];
  await store.transaction(async (tx) => {
    for (let j = 0; j < 200; j++) {
      const w = await tx.createItem(
        {
          workspaceId: ws.id,
          collectionId: col.id,
          ref: `B-${j}`,
          title: `bench item ${j}`,
          fields: { status: 'open' },
        },
        { priority: PRIORITY_BACKFILL, quietPeriod: false },
      );
      ids.push(w.row.id);
    }
  });
  const run = async (n: number, tag: string) => {
    let owed = 0;
    const cpu0 = process.cpuUsage();
    for (let u = 0; u < n; u++)
      owed += (await store.updateItem(ids[u % ids.length], { title: `bench item ${u % 200}, ${tag}.${u}` })).owed;
    const c = process.cpuUsage(cpu0);
    return { cpuUs: (c.user + c.system) / n, owed: owed / n };
  };
  await run(2_000, 'warm');
  const r = await run(updates, 'timed');
  console.log(`${updates} updates: ${r.cpuUs.toFixed(1)} CPU µs per update, ${r.owed.toFixed(2)} owed per update`);
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
