import { describe, expect, it } from 'vitest';
import { checkDrain } from '../../scripts/bench-drain.js';
import {
  holdWriteLock,
  jobCounts,
  metricsPortOf,
  probeHealth,
  ROOT,
  spawnDist,
  type HealthProbe,
} from '../../scripts/fault-support.js';
import { waitFor } from '../harness/cli-process.js';
import { seededWorkerFixture } from '../harness/seeded-worker-fixture.js';

/**
 * DESIGN §10.1: another process holds `BEGIN IMMEDIATE` while a real worker
 * process (built dist) records evaluations. /healthz answers every probe within 1 s, says
 * `degraded` (503) with the reason while the lock is held and `ok` after it; every job completes,
 * every answer is stored once. On the old code the worker sat in SQLite's 10 s busy handler, so
 * probes got no answer and none said degraded. Needs `npm run build`.
 */

const ITEMS = 100; // 200 jobs at 20 ms each over 4 slots: about 1 s of work, around a 3 s lock
const LOCK_MS = 3_000;

const fx = seededWorkerFixture(ITEMS);
const children = fx.children;

describe('a write lock held by another process (real worker process)', () => {
  it('/healthz answers every probe within 1 s: degraded with the reason while locked, then ok; nothing lost', async () => {
    const w = spawnDist(ROOT, [
      'worker',
      '--database-url',
      fx.file(),
      '--provider',
      'fake',
      '--fake-latency-ms',
      '20',
      '--tick-ms',
      '100',
      '--concurrency',
      '4',
      '--metrics-port',
      '0',
    ]);
    children.push(w.child);
    await w.started;
    const port = (await waitFor(() => metricsPortOf(w), 10_000))!;
    await waitFor(() => jobCounts(fx.file()).jobs < ITEMS * 2 - 10, 20_000, 10); // recording under way

    const probes: HealthProbe[] = [];
    let probing = true;
    const prober = (async () => {
      while (probing) {
        probes.push(await probeHealth(port, 1_000));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const lock = holdWriteLock(fx.file());
    const lockedAt = Date.now();
    await new Promise((r) => setTimeout(r, LOCK_MS));
    const releasedAt = Date.now();
    lock.release();
    await waitFor(() => probes.some((p) => p.at > releasedAt && p.status === 'ok'), 15_000);
    probing = false;
    await prober;
    await waitFor(() => jobCounts(fx.file()).jobs === 0, 30_000);
    w.child.kill('SIGTERM');
    expect((await w.exited).code, w.stderr()).toBe(0);

    const unanswered = probes.filter((p) => p.http === null);
    expect(unanswered, JSON.stringify(unanswered)).toEqual([]); // the old code: no answer while the busy handler slept
    const whileLocked = probes.filter((p) => p.at > lockedAt + 500 && p.at + p.ms < releasedAt);
    expect(whileLocked.length).toBeGreaterThan(5);
    for (const p of whileLocked)
      expect(p, JSON.stringify(p)).toMatchObject({ http: 503, status: 'degraded', reasons: ['database locked'] });
    expect(probes.filter((p) => p.at > releasedAt).at(-1)).toMatchObject({ http: 200, status: 'ok' });

    // Nothing lost: every job completed exactly once, no outcome left unrecorded.
    const check = await checkDrain(fx.file());
    // One call per item: attention and effort co-asked (DESIGN §7.2).
    expect(check).toMatchObject({ jobsLeft: 0, duplicateKeys: 0, calls: ITEMS });
    expect(w.stderr()).not.toMatch(/outcome not recorded|claim failed/);
  }, 90_000);
});
