import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ManualClock } from '../src/clock.js';
import { attentionSet, effortSet } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

/**
 * Fault measurement for DESIGN §16.12: the longest write transaction (the SQLite write lock is
 * held for exactly its duration: IMMEDIATE begins take it, better-sqlite3 runs the callback
 * synchronously) when a collection of `--items` (default 1,000,000) live items is renamed, on a
 * fresh SQLite file, with the attention and effort sets covering it. The items are written
 * straight into the file first (one bulk transaction, no jobs), then the clock starts:
 * - the rename door (`updateCollection`), one transaction;
 * - where the store has it, `advanceCollectionOwes` until nothing is pending, one transaction each.
 * Prints each phase's longest transaction and totals. The rule: no transaction over 250 ms.
 *
 *   npx tsx scripts/fault-collection-chunks.ts [--items 1000000]
 */

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

async function main(): Promise<void> {
  const n = arg('items', 1_000_000);
  const dir = mkdtempSync(join(tmpdir(), 'verdict-col-chunks-'));
  const file = join(dir, 'verdict.db');
  const clock = new ManualClock();
  const registry = new Registry([attentionSet, effortSet]);
  const store = new SqliteStore({ url: file, registry, clock });
  try {
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task' });
    const raw = new Database(file);
    const t0 = performance.now();
    const ins = raw.prepare(`INSERT INTO items (id, workspace_id, collection_id, ref, title, content, fields, seq, created_at, updated_at)
                             VALUES (?, ?, ?, ?, ?, '', '{"status":"open"}', 1, ?, ?)`);
    raw.transaction(() => {
      for (let i = 0; i < n; i++) {
        const id = `it-${i.toString().padStart(8, '0')}`;
        ins.run(id, ws.id, col.id, `T-${i}`, `item ${i}`, clock.now(), clock.now());
      }
    })();
    raw.close();
    console.log(`${n.toLocaleString('en')} items written in ${((performance.now() - t0) / 1000).toFixed(1)} s (setup, not measured)`);

    clock.advance(1_000);
    const d0 = performance.now();
    const r = await store.updateCollection(col.id, { slug: 'tasks' });
    const doorMs = performance.now() - d0;
    console.log(`rename door: 1 transaction, ${doorMs.toFixed(1)} ms, ${r.owed.toLocaleString('en')} job rows owed in it`);

    const advance = (store as unknown as { advanceCollectionOwes?: () => Promise<{ collectionId: string | null; items: number; owed: number; pending: number }> }).advanceCollectionOwes;
    let maxMs = doorMs;
    if (advance) {
      let chunks = 0;
      let owed = 0;
      let longest = 0;
      let total = 0;
      for (;;) {
        const s0 = performance.now();
        const step = await advance.call(store);
        const ms = performance.now() - s0;
        if (step.collectionId === null) break;
        chunks++;
        owed += step.owed;
        total += ms;
        longest = Math.max(longest, ms);
        if (step.pending === 0) break;
      }
      maxMs = Math.max(maxMs, longest);
      console.log(`continuation: ${chunks} chunk transactions, longest ${longest.toFixed(1)} ms, mean ${(total / Math.max(chunks, 1)).toFixed(1)} ms, total ${(total / 1000).toFixed(1)} s, ${owed.toLocaleString('en')} job rows owed`);
    } else {
      console.log('continuation: none (this store owes the whole collection in the door)');
    }
    const jobs = new Database(file, { readonly: true });
    const c = jobs.prepare('SELECT count(*) AS n, count(DISTINCT item_id) AS items, max(generation) AS g FROM decision_jobs').get() as { n: number; items: number; g: number };
    jobs.close();
    console.log(`jobs: ${c.n.toLocaleString('en')} rows over ${c.items.toLocaleString('en')} items, max generation ${c.g}`);
    console.log(`longest write transaction: ${maxMs.toFixed(1)} ms (rule: <= 250 ms)`);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
