/**
 * Benchmark (DESIGN §11): while a backfill runs, a live write's evaluation completes within two
 * ticks of becoming due (after its quiet period).
 *
 *   npx tsx scripts/bench-live-latency.ts [--items 2000] [--tick-ms 1000] [--samples 20]
 *                                         [--latency-ms 25] [--concurrency 2] [--chunk 20]
 *
 * One real SQLite file (temp dir), the wall clock, the fake provider with a fixed latency per call,
 * and in one process: a Worker (as `verdict worker` runs it) and a Backfill of `effort` over every
 * item (as `verdict backfill` runs it, waiting on the worker, not draining itself). Live writes
 * edit an item's title at random intervals; each owes `attention` (priority 0, its quiet period
 * shortened to 1 s so the run stays short: latency is measured from the due time, so the quiet
 * period's length does not enter the figure). Latency = the worker's recorded `complete` of that
 * live job − the job's not_before right after the write.
 *
 * Two phases in one run, same settings: A without a backfill (the control), B with the backfill
 * running throughout. It prints p50/p95/max in ms and in ticks, the B/A ratios, and whether every
 * sample of B completed within two ticks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attentionSet, effortSet } from '../src/decision/production-sets.js';
import { defineQuestionSet, Registry } from '../src/decision/registry.js';
import { silentLogger } from '../src/log.js';
import { FakeProvider } from '../src/providers/fake.js';
import { Backfill } from '../src/backfill/backfill.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { Worker } from '../src/worker/worker.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

const ITEMS = arg('items', 2000);
const TICK = arg('tick-ms', 1000);
const SAMPLES = arg('samples', 20);
const LATENCY = arg('latency-ms', 25);
const CONCURRENCY = arg('concurrency', 2);
const CHUNK = arg('chunk', 20);
const QUIET_MS = 1_000;

const dir = mkdtempSync(join(tmpdir(), 'verdict-bench-'));
const attention = defineQuestionSet({ ...attentionSet, quietPeriodMs: QUIET_MS });
const registry = new Registry([attention, effortSet]);
const store = new SqliteStore({ url: join(dir, 'bench.db'), registry });

const completedAt = new Map<string, number>();
let backfillJobsRun = 0;
const worker = new Worker({
  store,
  registry,
  provider: new FakeProvider({ latencyMs: LATENCY }),
  logger: silentLogger,
  workerId: 'bench',
  concurrency: CONCURRENCY,
  tickMs: TICK,
  leaseMs: 60_000,
  passLimit: 20,
  abandonLimit: 8,
  onOutcome: (r) => {
    if (r.claim.questionSet === 'attention' && r.claim.priority === 0 && r.outcome.kind === 'complete')
      completedAt.set(`${r.claim.itemId}:${r.claim.generation}`, Date.now());
    if (r.claim.questionSet === 'effort' && r.claim.priority === 1) backfillJobsRun++;
  },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

async function liveWrites(ids: string[], label: string, busy?: () => boolean): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    if (busy && !busy()) throw new Error(`${label}: the backfill ended before sample ${i + 1}; raise --items`);
    const id = ids[Math.floor(Math.random() * ids.length)];
    await store.updateItem(id, { title: `live edit ${label} ${i} ${Date.now()}` });
    const job = (await store.getJob(id, 'attention'))!;
    const key = `${id}:${job.generation}`;
    const due = job.notBefore;
    for (;;) {
      const done = completedAt.get(key);
      if (done !== undefined) {
        out.push(done - due);
        break;
      }
      if (Date.now() - due > 20 * TICK) throw new Error(`${label}: a live job took over 20 ticks`);
      await sleep(5);
    }
    await sleep(200 + Math.random() * TICK); // the next write lands at a random phase of the tick
  }
  return out;
}

function summary(label: string, xs: number[]) {
  const f = (ms: number) => `${ms} ms (${(ms / TICK).toFixed(2)} ticks)`;
  console.log(`${label}: n=${xs.length}  p50 ${f(pct(xs, 50))}  p95 ${f(pct(xs, 95))}  max ${f(Math.max(...xs))}`);
}

async function main() {
  const ws = await store.createWorkspace({ slug: 'bench' });
  const col = await store.createCollection({
    workspaceId: ws.id,
    slug: 'task',
    schema: { fields: [{ key: 'status', type: 'select', options: ['open', 'closed'], terminal_options: ['closed'] }] },
  });
  const ids: string[] = [];
  for (let i = 0; i < ITEMS; i++) {
    ids.push(
      (
        await store.createItem(
          {
            workspaceId: ws.id,
            collectionId: col.id,
            ref: `B-${i}`,
            title: `item ${i}`,
            content: `body of item ${i} `.repeat(20),
            fields: { status: 'open' },
          },
          { quietPeriod: false },
        )
      ).row.id,
    );
  }
  await store.dropJobs({});
  console.log(
    `items ${ITEMS}, tick ${TICK} ms, worker concurrency ${CONCURRENCY}, fake latency ${LATENCY} ms per call, backfill chunk ${CHUNK}, samples ${SAMPLES} per phase`,
  );
  const running = worker.run();

  const a = await liveWrites(ids, 'A');
  summary('A, no backfill      ', a);

  const stop = new AbortController();
  let backfillDone = false;
  const bf = new Backfill({
    store,
    set: effortSet,
    chunkSize: CHUNK,
    tickMs: TICK,
    logger: silentLogger,
    signal: stop.signal,
  });
  const bfRun = bf.run().then((r) => {
    backfillDone = true;
    return r;
  });
  await sleep(TICK); // let the backfill get going
  const startedRun = backfillJobsRun;
  const b = await liveWrites(ids, 'B', () => !backfillDone);
  const duringB = backfillJobsRun - startedRun;
  summary('B, backfill running ', b);
  stop.abort();
  const report = await bfRun;
  worker.stop('bench done');
  await running;

  const maxB = Math.max(...b);
  console.log(
    `backfill during B: ${duringB} backfill jobs run by the worker while the live writes were measured; stopped at ${report.owedThisRun}/${report.total} items owed`,
  );
  console.log(
    `ratios B/A: p50 ${(pct(b, 50) / Math.max(1, pct(a, 50))).toFixed(2)}, max ${(maxB / Math.max(1, Math.max(...a))).toFixed(2)}`,
  );
  console.log(
    `every live write during the backfill completed within two ticks: ${maxB <= 2 * TICK ? 'yes' : 'NO'} (max ${(maxB / TICK).toFixed(2)} ticks)`,
  );
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  if (maxB > 2 * TICK) process.exitCode = 1;
}

await main();
