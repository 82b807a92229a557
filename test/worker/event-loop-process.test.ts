import { describe, expect, it } from 'vitest';
import { jobCounts, probeMaxGap, reoweAll, ROOT, spawnDist } from '../../scripts/fault-support.js';
import { waitFor } from '../harness/cli-process.js';
import { seededWorkerFixture } from '../harness/seeded-worker-fixture.js';

/**
 * DESIGN §10.1: a drain never holds the event loop. Real `verdict worker`
 * processes from the built dist, with the event-loop probe (test/harness/loop-probe.mjs)
 * preloaded: its 20 ms timer must never wait through more than 200 ms of the worker's own work
 * while the worker drains jobs that resolve without a real wait (a 0 ms fake provider; answers
 * already stored). On the old code the timer did not run once during the drain, so the gap was the
 * whole drain (seconds). The gap is counted in the process's CPU time, not wall time, so a loaded
 * machine that deschedules the process cannot fail the test; scripts/fault-event-loop.ts reports
 * the wall-clock gaps.
 * Needs `npm run build`.
 */

const ITEMS = 1_000; // 2,000 jobs: about 1.5 s of drain, far above the limit when nothing yields
// 200 ms: the gaps measured here are 60–90 ms of CPU time, and a clean-clone CI run saw 102 ms
// (a GC pause on a busy machine) against the old 100 ms limit. A drain that does not yield shows
// the whole drain, seconds; DESIGN §10.1 asks /healthz to answer within 1 s.
const MAX_GAP_MS = 200;

const fx = seededWorkerFixture(ITEMS);
const children = fx.children;

const workerArgs = (extra: string[] = []) => [
  'worker',
  '--database-url',
  fx.file(),
  '--provider',
  'fake',
  '--fake-latency-ms',
  '0',
  '--tick-ms',
  '50',
  '--concurrency',
  '4',
  ...extra,
];

async function drainWithProbe(name: string): Promise<number> {
  const probeFile = `${fx.file()}.${name}.probe.json`;
  const w = spawnDist(ROOT, workerArgs(['--until-idle']), { probeFile });
  children.push(w.child);
  const ex = await w.exited;
  expect(ex.code, w.stderr()).toBe(0);
  const started = await w.started;
  return probeMaxGap(probeFile, started).maxCpuGapMs;
}

describe('a drain keeps the event loop live (real worker process)', () => {
  it('fresh jobs at 0 ms, then the same jobs with their answers stored: no timer gap above 200 ms', async () => {
    const fresh = await drainWithProbe('fresh');
    expect(jobCounts(fx.file()).jobs).toBe(0);
    expect(fresh).toBeLessThanOrEqual(MAX_GAP_MS);

    expect(await reoweAll(fx.file())).toBe(ITEMS * 2);
    const answersBefore = jobCounts(fx.file()).answers;
    const answered = await drainWithProbe('answered');
    expect(jobCounts(fx.file())).toMatchObject({ jobs: 0, answers: answersBefore }); // no new call, no new answer
    expect(answered).toBeLessThanOrEqual(MAX_GAP_MS);
  }, 60_000);

  it('SIGTERM during a drain of already-answered jobs stops it mid-way; the rest stays owed, none left claimed', async () => {
    await drainWithProbe('first');
    const total = await reoweAll(fx.file());
    const w = spawnDist(ROOT, workerArgs());
    children.push(w.child);
    await w.started;
    // The drain is under way once some jobs are gone; the signal must be handled before it ends.
    await waitFor(() => jobCounts(fx.file()).jobs < total, 20_000, 5);
    w.child.kill('SIGTERM');
    const ex = await w.exited;
    expect(ex.code, w.stderr()).toBe(0);
    const left = jobCounts(fx.file());
    expect(left.jobs).toBeGreaterThan(0); // the old code drained every job before it saw the signal
    expect(left.claimed).toBe(0); // in-flight jobs were released, not stranded
    expect(w.stderr()).toContain('"msg":"shutting down"');
  }, 60_000);
});
