/**
 * DESIGN §10.2 measurement: an outside reader holds a read transaction while
 * three imports of the bundled sample (three workspaces) run and a real worker process (fake
 * provider, 0 ms) drains what they owe. Reports the WAL's peak, its size when the reader lets go,
 * when it first falls under 64 MiB, and its size --after-ms (60 s) later; and the database size.
 *
 *   npx tsx scripts/fault-wal.ts [--root DIR] [--after-ms 60000] [--drain-cap-ms 300000] [--sample sample/beads-issues.jsonl]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { holdReadSnapshot, jobCounts, ROOT, runDist, spawnDist, walBytes, startedOrExited } from './fault-support.js';

const { values: a } = parseArgs({
  options: {
    root: { type: 'string', default: ROOT },
    'after-ms': { type: 'string', default: '60000' },
    'drain-cap-ms': { type: 'string', default: '300000' },
    sample: { type: 'string', default: join(ROOT, 'sample/beads-issues.jsonl') },
  },
});
const root = resolve(a.root!);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;
const work = mkdtempSync(join(tmpdir(), 'verdict-fault-wal-'));
const file = join(work, 'verdict.db');

let peak = 0;
const sampler = setInterval(() => (peak = Math.max(peak, walBytes(file))), 100);
try {
  console.log(`root ${root}`);
  const w = spawnDist(root, ['worker', '--database-url', file, '--provider', 'fake', '--tick-ms', '1000']);
  await startedOrExited(w);
  const reader = holdReadSnapshot(file);
  const started = Date.now();
  for (const ws of ['ws-a', 'ws-b', 'ws-c']) {
    const r = await runDist(root, ['import', 'beads', a.sample!, '--workspace', ws, '--database-url', file]);
    if (r.code !== 0) throw new Error(`import ${ws} failed: ${r.stderr.slice(-400)}`);
  }
  console.log(`three imports done in ${Date.now() - started} ms; WAL ${mib(walBytes(file))}`);
  // Keep reading until the worker has drained what the imports owed (their quiet period is 30 s).
  while (jobCounts(file).jobs > 0 && Date.now() - started < Number(a['drain-cap-ms'])) await sleep(500);
  const c = jobCounts(file);
  const atRelease = walBytes(file);
  console.log(
    `drained after ${Date.now() - started} ms (${c.jobs} jobs left, ${c.answers} answers); WAL peak ${mib(peak)}, at release ${mib(atRelease)}`,
  );
  reader.release();
  const releasedAt = Date.now();
  let under64: number | null = null;
  const afterMs = Number(a['after-ms']);
  while (Date.now() - releasedAt < afterMs) {
    if (under64 === null && walBytes(file) < 64 * 1024 * 1024) under64 = Date.now() - releasedAt;
    await sleep(250);
  }
  console.log(
    `after the reader let go: WAL under 64 MiB ${under64 === null ? `not within ${afterMs} ms` : `after ${under64} ms`}; ` +
      `WAL ${afterMs} ms later: ${mib(walBytes(file))} (${walBytes(file)} bytes)`,
  );
  const status = await runDist(root, ['status', '--database-url', file]);
  console.log(
    `verdict status: ${status.stdout.split('\n').find((l) => /write-ahead/.test(l)) ?? '(no write-ahead log line)'}`,
  );
  const doctor = await runDist(root, ['doctor', '--database-url', file, '--provider', 'none']);
  console.log(
    `verdict doctor: ${doctor.stdout
      .split('\n')
      .find((l) => /^\s*(ok|FAIL)\s+database/.test(l))
      ?.trim()}`,
  );
  console.log(`database file ${mib(statSync(file).size)}`);
  w.child.kill('SIGTERM');
  await w.exited;
} finally {
  clearInterval(sampler);
  rmSync(work, { recursive: true, force: true });
}
