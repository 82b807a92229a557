/**
 * DESIGN §10.1 measurement: how long a real worker process holds its event loop
 * while it drains, and how long SIGTERM takes to end a drain. A 20 ms timer is preloaded into the
 * worker (test/harness/loop-probe.mjs); its largest gap after "worker started" is reported, in wall
 * time and in the process's CPU time within the gap (a loaded machine stretches wall gaps).
 *
 *   npx tsx scripts/fault-event-loop.ts [--root DIR] [--fresh 20000] [--answered 10000] [--sigterm 100000]
 *                                       [--cache DIR] [--only fresh,answered,sigterm]
 *
 * --root: the tree whose built dist/cli/main.js runs (default this one; an older build for "before").
 * Job counts are jobs (two per item: the attention and effort sets). Set-up databases (seeded,
 * drained once so the answers are stored) are kept in --cache so a second run (other --root) reuses them.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { seedJobs } from './bench-drain.js';
import { jobCounts, probeMaxGap, reoweAll, ROOT, spawnDist, withDb, startedOrExited } from './fault-support.js';

const { values: a } = parseArgs({
  options: {
    root: { type: 'string', default: ROOT },
    fresh: { type: 'string', default: '20000' },
    answered: { type: 'string', default: '10000' },
    sigterm: { type: 'string', default: '100000' },
    cache: { type: 'string', default: join(tmpdir(), 'verdict-fault-cache') },
    only: { type: 'string', default: 'fresh,answered,sigterm' },
  },
});
const root = resolve(a.root!);
const only = new Set(a.only!.split(','));
mkdirSync(a.cache!, { recursive: true });
const work = mkdtempSync(join(tmpdir(), 'verdict-fault-el-'));
const args = (file: string, extra: string[]) => [
  'worker',
  '--database-url',
  file,
  '--provider',
  'fake',
  '--fake-latency-ms',
  '0',
  '--tick-ms',
  '100',
  ...extra,
];

/** A database with `jobs` fresh jobs (seeded once into the cache, copied per run). */
async function freshDb(jobs: number): Promise<string> {
  const cached = join(a.cache!, `fresh-${jobs}.db`);
  if (!existsSync(cached)) await seedJobs(cached, jobs / 2);
  const file = join(work, `fresh-${jobs}.db`);
  copyFileSync(cached, file);
  return file;
}

/** A database with `jobs` owed jobs whose answers are stored: seeded, drained once (by this tree's build), re-owed. */
async function answeredDb(jobs: number): Promise<string> {
  const cached = join(a.cache!, `answered-${jobs}.db`);
  if (!existsSync(cached)) {
    await seedJobs(cached, jobs / 2);
    const w = spawnDist(ROOT, args(cached, ['--until-idle']));
    const ex = await w.exited;
    if (ex.code !== 0) throw new Error(`set-up drain failed: ${w.stderr().slice(-500)}`);
    await reoweAll(cached);
    withDb(cached, (d) => d.pragma('wal_checkpoint(TRUNCATE)'));
  }
  const file = join(work, `answered-${jobs}.db`);
  copyFileSync(cached, file);
  return file;
}

async function drain(name: string, file: string, jobs: number): Promise<void> {
  const probeFile = join(work, `${name}.probe.json`);
  const w = spawnDist(root, args(file, ['--until-idle']), { probeFile });
  const ex = await w.exited;
  const started = await startedOrExited(w);
  const g = probeMaxGap(probeFile, started);
  const left = jobCounts(file).jobs;
  console.log(
    `${name}: ${jobs} jobs drained in ${ex.at - started} ms (exit ${ex.code}, ${left} left); 20 ms timer: ${g.ticks} ticks in the whole run, ` +
      `largest gap after start ${g.maxGapMs} ms wall (${g.maxCpuGapMs} ms CPU inside it)`,
  );
}

async function sigterm(jobs: number): Promise<void> {
  const file = await answeredDb(jobs);
  const probeFile = join(work, 'sigterm.probe.json');
  const w = spawnDist(root, args(file, []), { probeFile });
  const started = await startedOrExited(w);
  // Signal once the drain is under way: 1% of the jobs done.
  for (;;) {
    if (jobCounts(file).jobs <= jobs * 0.99) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const sentAt = Date.now();
  w.child.kill('SIGTERM');
  const ex = await w.exited;
  const c = jobCounts(file);
  const g = probeMaxGap(probeFile, started);
  console.log(
    `sigterm: ${jobs} already-answered jobs; SIGTERM ${sentAt - started} ms after start; exit ${ex.code} ${ex.at - sentAt} ms after the signal; ` +
      `${jobs - c.jobs} jobs done, ${c.jobs} left owed, ${c.claimed} left claimed; largest timer gap ${g.maxGapMs} ms wall (${g.maxCpuGapMs} ms CPU)`,
  );
}

try {
  console.log(`root ${root}`);
  if (only.has('answered')) await drain('answered', await answeredDb(Number(a.answered)), Number(a.answered));
  if (only.has('fresh')) await drain('fresh', await freshDb(Number(a.fresh)), Number(a.fresh));
  if (only.has('sigterm')) await sigterm(Number(a.sigterm));
} finally {
  rmSync(work, { recursive: true, force: true });
}
