/**
 * DESIGN §10.1 measurement: a real worker process records evaluations while
 * another process holds `BEGIN IMMEDIATE` for --lock-ms (25 s); /healthz is probed --probes times
 * (25, one a second, each with a --probe-timeout-ms 2 s timeout) during the lock. Reports how many
 * probes were answered, the largest latency, the statuses, what /healthz says after the release,
 * and whether anything was lost (every job completed once).
 *
 * With --disk-full (needs root: mounts a tmpfs), the database sits on a small tmpfs that a filler
 * file then fills for --full-ms; the same probes run, and the worker's error lines per second are
 * counted.
 *
 *   npx tsx scripts/fault-held-lock.ts [--root DIR] [--lock-ms 25000] [--probes 25] [--probe-timeout-ms 2000]
 *                                      [--items 1000] [--latency-ms 50] [--disk-full] [--full-ms 10000]
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { checkDrain, seedJobs } from './bench-drain.js';
import {
  holdWriteLock,
  jobCounts,
  metricsPortOf,
  probeHealth,
  ROOT,
  spawnDist,
  type HealthProbe,
  startedOrExited,
} from './fault-support.js';

const { values: a } = parseArgs({
  options: {
    root: { type: 'string', default: ROOT },
    'lock-ms': { type: 'string', default: '25000' },
    probes: { type: 'string', default: '25' },
    'probe-timeout-ms': { type: 'string', default: '2000' },
    items: { type: 'string', default: '1000' },
    'latency-ms': { type: 'string', default: '50' },
    'disk-full': { type: 'boolean', default: false },
    'full-ms': { type: 'string', default: '10000' },
  },
});
const root = resolve(a.root!);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const work = mkdtempSync(join(tmpdir(), 'verdict-fault-lock-'));

/** Probes /healthz `count` times, one every `everyMs`, each with its own timeout (they overlap when one hangs). */
async function probeSeries(port: number, count: number, everyMs: number, timeoutMs: number): Promise<HealthProbe[]> {
  const all: Array<Promise<HealthProbe>> = [];
  for (let i = 0; i < count; i++) {
    all.push(probeHealth(port, timeoutMs));
    await sleep(everyMs);
  }
  return Promise.all(all);
}

function summarise(label: string, probes: HealthProbe[]): void {
  const answered = probes.filter((p) => p.http !== null);
  const statuses = new Map<string, number>();
  for (const p of probes) {
    const k =
      p.http === null ? 'no answer' : `${p.http} ${p.status}${p.reasons.length ? ` [${p.reasons.join('; ')}]` : ''}`;
    statuses.set(k, (statuses.get(k) ?? 0) + 1);
  }
  console.log(
    `${label}: ${answered.length}/${probes.length} probes answered; max latency ${Math.max(...probes.map((p) => p.ms))} ms; statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
  );
}

async function untilOk(port: number, timeoutMs: number): Promise<number | null> {
  const from = Date.now();
  while (Date.now() - from < timeoutMs) {
    const p = await probeHealth(port, 2_000);
    if (p.status === 'ok') return Date.now() - from;
    await sleep(100);
  }
  return null;
}

async function heldLock(): Promise<void> {
  const file = join(work, 'verdict.db');
  await seedJobs(file, Number(a.items));
  const jobs = Number(a.items) * 2;
  const w = spawnDist(root, [
    'worker',
    '--database-url',
    file,
    '--provider',
    'fake',
    '--fake-latency-ms',
    a['latency-ms']!,
    '--tick-ms',
    '200',
    '--metrics-port',
    '0',
  ]);
  await startedOrExited(w);
  let port: number | null;
  while (!(port = metricsPortOf(w))) await sleep(20);
  while (jobCounts(file).jobs > jobs - 20) await sleep(20); // recording under way
  const lock = holdWriteLock(file);
  const lockedAt = Date.now();
  const count = Number(a.probes);
  const lockMs = Number(a['lock-ms']);
  const probes = await probeSeries(port, count, Math.floor(lockMs / count), Number(a['probe-timeout-ms']));
  await sleep(Math.max(0, lockMs - (Date.now() - lockedAt)));
  lock.release();
  console.log(
    `root ${root}\nlock held ${Date.now() - lockedAt} ms by another process while the worker recorded (${jobs} jobs, fake latency ${a['latency-ms']} ms)`,
  );
  summarise('during the lock', probes);
  const okAfter = await untilOk(port, 30_000);
  console.log(`after the release: /healthz ok ${okAfter === null ? 'not within 30 s' : `after ${okAfter} ms`}`);
  const drainFrom = Date.now();
  while (jobCounts(file).jobs > 0 && Date.now() - drainFrom < 300_000) await sleep(200);
  w.child.kill('SIGTERM');
  const ex = await w.exited;
  const check = await checkDrain(file);
  const lines = (w.stderr() + w.stdout()).split('\n');
  const bad = lines.filter((l) => /outcome not recorded|claim failed/.test(l)).length;
  console.log(
    `nothing lost: ${check.jobsLeft} jobs left, ${check.calls} calls for ${jobs} jobs, ${check.duplicateKeys} duplicate answers, ${check.answers} answers; ` +
      `${bad} "outcome not recorded"/"claim failed" lines; exit ${ex.code}`,
  );
}

async function diskFull(): Promise<void> {
  const mnt = join(work, 'tmpfs');
  mkdirSync(mnt);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', mnt]);
  try {
    const seeded = join(work, 'seed.db');
    await seedJobs(seeded, Number(a.items));
    const file = join(mnt, 'verdict.db');
    copyFileSync(seeded, file);
    const w = spawnDist(root, [
      'worker',
      '--database-url',
      file,
      '--provider',
      'fake',
      '--fake-latency-ms',
      a['latency-ms']!,
      '--tick-ms',
      '200',
      '--metrics-port',
      '0',
    ]);
    await startedOrExited(w);
    let port: number | null = null;
    while (!(port = metricsPortOf(w))) await sleep(20);
    const filler = join(mnt, 'filler');
    try {
      writeFileSync(filler, Buffer.alloc(64 * 1024 * 1024));
    } catch {
      /* ENOSPC: the disk is full now */
    }
    const fullAt = Date.now();
    const errBefore = w
      .stderr()
      .split('\n')
      .filter((l) => /"level":50/.test(l)).length;
    const fullMs = Number(a['full-ms']);
    const count = Number(a.probes);
    const probes = await probeSeries(port, count, Math.floor(fullMs / count), Number(a['probe-timeout-ms']));
    await sleep(Math.max(0, fullMs - (Date.now() - fullAt)));
    const errLines =
      w
        .stderr()
        .split('\n')
        .filter((l) => /"level":50/.test(l)).length - errBefore;
    unlinkSync(filler);
    console.log(`root ${root}\ndisk full for ${Date.now() - fullAt} ms (tmpfs of 64 MiB filled)`);
    summarise('while full', probes);
    console.log(
      `error lines logged while full: ${errLines} (${(errLines / ((Date.now() - fullAt) / 1000)).toFixed(1)} a second)`,
    );
    const okAfter = await untilOk(port, 30_000);
    console.log(`after freeing space: /healthz ok ${okAfter === null ? 'not within 30 s' : `after ${okAfter} ms`}`);
    w.child.kill('SIGTERM');
    const ex = await w.exited;
    console.log(`exit ${ex.code}; jobs left ${jobCounts(file).jobs}`);
  } finally {
    execFileSync('umount', ['-l', mnt]);
  }
}

try {
  if (a['disk-full']) await diskFull();
  else await heldLock();
} finally {
  rmSync(work, { recursive: true, force: true });
}
