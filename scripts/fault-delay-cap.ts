import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../src/clock.js';
import { attentionSet } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { silentLogger } from '../src/log.js';
import { FakeProvider } from '../src/providers/fake.js';
import { runOnce } from '../src/runner/job-life.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

/**
 * Fault measurement for DESIGN §3.4 (the delay cap): one item edited without pause, every
 * `--step-ms` (default 10 s) for `--hours` (default 3) of manual-clock time, with a runner trying a
 * claim after every edit and an edit landing during every evaluation (the editor does not stop for
 * the provider). Prints the evaluations (provider calls) in each hour. The rule: at most one per
 * hour of constant editing per (item, set), the first one at the 2-hour delay cap.
 *
 *   npx tsx scripts/fault-delay-cap.ts [--hours 3] [--step-ms 10000]
 *
 * The attention set's defaults: quietPeriod 30 s, reaskDebounce 1 h, maxDelay 2 h.
 */

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

async function main(): Promise<void> {
  const hours = arg('hours', 3);
  const stepMs = arg('step-ms', 10_000);
  const dir = mkdtempSync(join(tmpdir(), 'verdict-delay-cap-'));
  const clock = new ManualClock();
  const registry = new Registry([attentionSet]);
  const store = new SqliteStore({ url: join(dir, 'verdict.db'), registry, clock });
  try {
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task' });
    const item = (
      await store.createItem({
        workspaceId: ws.id,
        collectionId: col.id,
        ref: 'T-1',
        title: 'edited without pause',
        content: 'edit 0',
      })
    ).row;
    let elapsed = 0;
    let edits = 0;
    const perHour = new Array<number>(hours).fill(0);
    const provider = new FakeProvider({
      handler: async (req) => {
        perHour[Math.floor(elapsed / 3_600_000)]++;
        await store.updateItem(item.id, { content: `edit ${++edits}` }); // lands while the call is out
        return Object.fromEntries(req.keys.map((k) => [k, { probability: 0.4 }]));
      },
    });
    const opts = {
      store,
      registry,
      provider,
      logger: silentLogger,
      workerId: 'fault',
      leaseMs: 60_000,
      random: () => 0.5,
    };
    const signal = new AbortController().signal;
    for (elapsed = stepMs; elapsed < hours * 3_600_000; elapsed += stepMs) {
      clock.advance(stepMs);
      await store.updateItem(item.id, { content: `edit ${++edits}` });
      await runOnce(opts, signal);
    }
    console.log(
      `constant editing every ${stepMs / 1000} s for ${hours} h (manual clock), a write during every evaluation`,
    );
    perHour.forEach((n, h) => console.log(`hour ${h + 1}: ${n} evaluation${n === 1 ? '' : 's'}`));
    console.log(`max per hour: ${Math.max(...perHour)} (rule: <= 1)`);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
