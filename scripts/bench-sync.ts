import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attentionSet, effortSet } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { FakeProvider } from '../src/providers/fake.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { Worker } from '../src/worker/worker.js';
import { BENCH_DRAIN, seedBenchItems } from './bench-seed.js';

/**
 * `synchronous = FULL` against NORMAL under group commit (DESIGN §10.6): the real Worker drains the
 * same seeded database (production sets attention and effort, fake provider at 0 ms, co-asking on)
 * at `concurrency` slots, once with the store as it opens (FULL) and once switched to NORMAL right
 * after opening, in pairs that alternate which goes first, each run on its own copy of one file.
 * Reports jobs/s and process CPU µs per job (`process.cpuUsage`, user + system) per run and the
 * medians, and FULL ÷ NORMAL. Usage: `nice -n 10 npx tsx scripts/bench-sync.ts [items=1000] [pairs=3] [concurrency=16]`.
 */

const items = Number(process.argv[2] ?? 1000);
const pairs = Number(process.argv[3] ?? 3);
const concurrency = Number(process.argv[4] ?? 16);
const sets = () => new Registry([attentionSet, effortSet]);

const dir = mkdtempSync(join(tmpdir(), 'verdict-bench-sync-'));
const template = join(dir, 'template.db');

async function seed(): Promise<void> {
  const store = new SqliteStore({ url: template, registry: sets() });
  await seedBenchItems(store, items);
  await store.close();
}

interface Run {
  sync: 'FULL' | 'NORMAL';
  jobs: number;
  perSecond: number;
  cpuUsPerJob: number;
}

let n = 0;
async function run(sync: Run['sync']): Promise<Run> {
  const file = join(dir, `run-${++n}.db`);
  copyFileSync(template, file);
  const registry = sets();
  const store = new SqliteStore({ url: file, registry });
  if (sync === 'NORMAL') store.ctx.db.$client.pragma('synchronous = NORMAL');
  const got = store.ctx.db.$client.pragma('synchronous', { simple: true });
  if (got !== (sync === 'FULL' ? 2 : 1)) throw new Error(`synchronous is ${String(got)}, wanted ${sync}`);
  const worker = new Worker({
    store,
    registry,
    provider: new FakeProvider({ latencyMs: 0 }),
    ...BENCH_DRAIN,
    workerId: 'bench',
    concurrency,
    coAsk: true,
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const summary = await worker.run();
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await store.close();
  rmSync(file, { force: true });
  if (summary.claimed !== items * 2) throw new Error(`${sync}: ran ${summary.claimed} of ${items * 2} jobs`);
  return {
    sync,
    jobs: summary.claimed,
    perSecond: summary.claimed / seconds,
    cpuUsPerJob: (cpu.user + cpu.system) / summary.claimed,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

try {
  await seed();
  const runs: Run[] = [];
  for (let p = 0; p < pairs; p++) {
    const order: Array<Run['sync']> = p % 2 === 0 ? ['FULL', 'NORMAL'] : ['NORMAL', 'FULL'];
    for (const s of order) {
      const r = await run(s);
      runs.push(r);
      console.log(
        `pair ${p + 1} ${s.padEnd(6)} ${r.perSecond.toFixed(0).padStart(6)} jobs/s ${r.cpuUsPerJob.toFixed(0).padStart(6)} CPU µs/job`,
      );
    }
  }
  const of = (s: Run['sync']) => runs.filter((r) => r.sync === s);
  const full = { rate: median(of('FULL').map((r) => r.perSecond)), cpu: median(of('FULL').map((r) => r.cpuUsPerJob)) };
  const normal = {
    rate: median(of('NORMAL').map((r) => r.perSecond)),
    cpu: median(of('NORMAL').map((r) => r.cpuUsPerJob)),
  };
  console.log(
    `medians at concurrency ${concurrency}, ${items * 2} jobs: FULL ${full.rate.toFixed(0)} jobs/s ${full.cpu.toFixed(0)} CPU µs/job; NORMAL ${normal.rate.toFixed(0)} jobs/s ${normal.cpu.toFixed(0)} CPU µs/job`,
  );
  console.log(
    `FULL ÷ NORMAL: jobs/s ${(full.rate / normal.rate).toFixed(2)}×, CPU/job ${(full.cpu / normal.cpu).toFixed(2)}×`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
