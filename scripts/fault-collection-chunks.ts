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
 * Fault measurement for DESIGN §3.3: the longest write transaction (the SQLite write lock is
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

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
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
    const ins =
      raw.prepare(`INSERT INTO items (id, workspace_id, collection_id, ref, title, content, fields, seq, created_at, updated_at)
                             VALUES (?, ?, ?, ?, ?, '', '{"status":"open"}', 1, ?, ?)`);
    raw.transaction(() => {
      for (let i = 0; i < n; i++) {
        const id = `it-${i.toString().padStart(8, '0')}`;
        ins.run(id, ws.id, col.id, `T-${i}`, `item ${i}`, clock.now(), clock.now());
      }
    })();
    raw.close();
    console.log(
      `${n.toLocaleString('en')} items written in ${((performance.now() - t0) / 1000).toFixed(1)} s (setup, not measured)`,
    );

    clock.advance(1_000);
    const d0 = performance.now();
    const r = await store.updateCollection(col.id, { slug: 'tasks' });
    const doorMs = performance.now() - d0;
    console.log(
      `rename door: 1 transaction, ${doorMs.toFixed(1)} ms, ${r.owed.toLocaleString('en')} job rows owed in it`,
    );

    const advance = (
      store as unknown as {
        advanceCollectionOwes?: () => Promise<{
          collectionId: string | null;
          items: number;
          owed: number;
          pending: number;
        }>;
      }
    ).advanceCollectionOwes;
    let maxMs = doorMs;
    if (advance) {
      let owed = 0;
      const wall: number[] = [];
      const cpu: number[] = [];
      for (;;) {
        const c0 = process.cpuUsage();
        const s0 = performance.now();
        const step = await advance.call(store);
        const ms = performance.now() - s0;
        const c = process.cpuUsage(c0);
        if (step.collectionId === null) break;
        wall.push(ms);
        cpu.push((c.user + c.system) / 1000);
        owed += step.owed;
        if (step.pending === 0) break;
      }
      const sorted = [...wall].sort((a, b) => a - b);
      const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
      const total = wall.reduce((a, b) => a + b, 0);
      maxMs = Math.max(maxMs, sorted[sorted.length - 1] ?? 0);
      console.log(
        `continuation: ${wall.length} chunk transactions, ${owed.toLocaleString('en')} job rows owed, total ${(total / 1000).toFixed(1)} s`,
      );
      console.log(
        `  wall per chunk: mean ${(total / Math.max(wall.length, 1)).toFixed(1)} ms, p50 ${pct(50).toFixed(1)}, p99 ${pct(99).toFixed(1)}, max ${(sorted[sorted.length - 1] ?? 0).toFixed(1)} ms; over 250 ms: ${wall.filter((w) => w > 250).length}`,
      );
      console.log(
        `  CPU per chunk (this process, user + system): max ${Math.max(0, ...cpu).toFixed(1)} ms; first 10 chunks mean ${mean(cpu.slice(0, 10)).toFixed(1)} ms, last 10 mean ${mean(cpu.slice(-10)).toFixed(1)} ms`,
      );
    } else {
      console.log('continuation: none (this store owes the whole collection in the door)');
    }
    const jobs = new Database(file, { readonly: true });
    const c = jobs
      .prepare('SELECT count(*) AS n, count(DISTINCT item_id) AS items, max(generation) AS g FROM decision_jobs')
      .get() as { n: number; items: number; g: number };
    jobs.close();
    console.log(
      `jobs: ${c.n.toLocaleString('en')} rows over ${c.items.toLocaleString('en')} items, max generation ${c.g}`,
    );
    console.log(`longest write transaction: ${maxMs.toFixed(1)} ms (rule: <= 250 ms)`);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
