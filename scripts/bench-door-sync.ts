/**
 * `npx tsx scripts/bench-door-sync.ts [N]`: the cost of `synchronous = FULL` on the write doors
 * (DESIGN §3.9). N `updateItem` calls (each its own transaction, as one HTTP write is) on a
 * Verdict-opened file (FULL) against the same on a host handle set to NORMAL, µs per write, in one
 * run on this machine's disk. Never part of the test suite.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createVerdict, type Verdict } from '../src/index.js';

async function perWrite(v: Verdict, n: number): Promise<number> {
  const ws = await v.store.createWorkspace({ slug: 'bench' });
  const col = await v.store.createCollection({ workspaceId: ws.id, slug: 'task' });
  const item = await v.store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'B-1', title: 't' });
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await v.store.updateItem(item.row.id, { title: `t${i}` });
  return Number(process.hrtime.bigint() - start) / 1000 / n;
}

const n = Number(process.argv[2] ?? 500);
const dir = mkdtempSync(join(tmpdir(), 'verdict-bench-sync-'));
try {
  const full = await createVerdict({ database: join(dir, 'full.db'), provider: 'fake' });
  const fullUs = await perWrite(full, n);
  await full.close();
  const host = new Database(join(dir, 'normal.db'));
  host.pragma('journal_mode = WAL');
  host.pragma('synchronous = NORMAL');
  const normal = await createVerdict({ database: { sqlite: host }, provider: 'fake' });
  const normalUs = await perWrite(normal, n);
  await normal.close();
  host.close();
  console.log(
    `write door (updateItem, one transaction each), ${n} writes: FULL ${fullUs.toFixed(0)} µs/write, NORMAL ${normalUs.toFixed(0)} µs/write, ratio ${(fullUs / normalUs).toFixed(2)}×`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
