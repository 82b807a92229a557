import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attentionSet, effortSet } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { FakeProvider } from '../src/providers/fake.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { Worker } from '../src/worker/worker.js';
import { BENCH_DRAIN, seedBenchItems } from './bench-seed.js';

/**
 * `npx tsx scripts/cpu-per-job.ts [items] [concurrency]`: CPU microseconds per job (user + system,
 * `process.cpuUsage`, which stays steady on a loaded machine where wall time does not) of a drain
 * of `items` open items owing the production sets attention and effort (two jobs each, co-asked in
 * one call), the real Worker, the fake provider at 0 ms, one SQLite file; and the store calls per
 * job by method, counted on the store object. A private measure of the runner's own work, not
 * part of `npm run bench`. Defaults: 1,000 items, concurrency 4. A third argument `off` turns
 * co-asking off (each job its own call). The measured drain follows an untimed warm-up drain of
 * `items` / 4 other items, as bench parts f and g do: a process's first drain pays V8's warm-up. With
 * `CPU_PROF=<file>`, a V8 CPU profile of the measured drain alone is written there, for
 * scripts/cpu-profile-categories.ts.
 */
const items = Number(process.argv[2] ?? 1000);
const concurrency = Number(process.argv[3] ?? 4);
const coAsk = process.argv[4] !== 'off';
const dir = mkdtempSync(join(tmpdir(), 'verdict-cpu-'));
const registry = new Registry([attentionSet, effortSet]);
const store = new SqliteStore({ url: join(dir, 'cpu.db'), registry });
try {
  const drainOpts = {
    store,
    registry,
    provider: new FakeProvider({ latencyMs: 0 }),
    ...BENCH_DRAIN,
    workerId: 'cpu',
    concurrency,
    coAsk,
  };
  await seedBenchItems(store, Math.max(1, Math.round(items / 4)), { workspace: 'warm', ref: 'W', word: 'warm' });
  await new Worker(drainOpts).run();
  await seedBenchItems(store, items, { workspace: 'cpu', ref: 'C', word: 'cpu' });
  const calls = new Map<string, number>();
  for (const name of [
    'claimNextJob',
    'renewLease',
    'checkLiveness',
    'checkClaim',
    'loadItemForEvaluation',
    'answeredKeys',
    'finishJob',
    'completeJob',
    'insertDecisions',
  ] as const) {
    const s = store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
    if (typeof s[name] !== 'function') continue;
    const real = s[name].bind(store);
    s[name] = (...a: unknown[]) => {
      calls.set(name, (calls.get(name) ?? 0) + 1);
      return real(...a);
    };
  }
  const worker = new Worker(drainOpts);
  const profileTo = process.env.CPU_PROF;
  const inspector = profileTo ? new Session() : null;
  if (inspector) {
    inspector.connect();
    await inspector.post('Profiler.enable');
    await inspector.post('Profiler.start');
  }
  // With PERF_CTL=<fifo> (perf record -D -1 --control fifo:<fifo>), perf samples the measured drain alone;
  // with CALLGRIND=1 (valgrind --tool=callgrind --instr-atstart=no), callgrind counts its instructions
  // alone: a count that stays put on a loaded machine, where CPU time does not.
  const perfCtl = process.env.PERF_CTL;
  const callgrind = (on: boolean) =>
    process.env.CALLGRIND && execFileSync('callgrind_control', ['-i', on ? 'on' : 'off', String(process.pid)]);
  if (perfCtl) writeFileSync(perfCtl, 'enable\n');
  callgrind(true);
  const cpu0 = process.cpuUsage();
  const summary = await worker.run();
  const cpu = process.cpuUsage(cpu0);
  callgrind(false);
  if (perfCtl) writeFileSync(perfCtl, 'disable\n');
  if (inspector && profileTo) {
    const { profile } = await inspector.post('Profiler.stop');
    writeFileSync(profileTo, JSON.stringify(profile));
    inspector.disconnect();
  }
  const jobs = summary.claimed;
  const perJob = Object.fromEntries([...calls].map(([k, v]) => [k, Number((v / jobs).toFixed(2))]));
  process.stdout.write(
    `${jobs} jobs, concurrency ${concurrency}, co-asking ${coAsk ? 'on' : 'off'}: ${Math.round((cpu.user + cpu.system) / jobs)} CPU µs per job (user ${Math.round(cpu.user / jobs)}, system ${Math.round(cpu.system / jobs)}); store calls per job ${JSON.stringify(perJob)}\n`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
