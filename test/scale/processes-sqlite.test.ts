import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  BUILT_CLI,
  checkDrain,
  JOBS_PER_ITEM,
  runWorkerProcesses,
  seedJobs,
  troubleLines,
} from '../../scripts/bench-drain.js';
import { tempDir } from '../harness/store-fixture.js';
import { SCALE_ITEMS } from './scale-size.js';

/**
 * Several real worker processes on one SQLite file (DESIGN §13): every job is completed exactly
 * once and no SQLITE_BUSY reaches the job layer. Exactly once is read from three sides: the
 * processes' own claim counts add up to the jobs owed (no job claimed twice, none lost to an
 * expired lease), the provider was called once per job (decision_spend), and every
 * (item, set, key) has one answer row.
 */

let dir: { dir: string; cleanup: () => void };
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.cleanup());

describe('four worker processes on one SQLite file', () => {
  it(`drain ${SCALE_ITEMS * JOBS_PER_ITEM} jobs, each completed exactly once, with no SQLITE_BUSY logged`, async () => {
    const file = join(dir.dir, 'verdict.db');
    const owed = await seedJobs(file, SCALE_ITEMS);
    expect(owed).toBe(SCALE_ITEMS * JOBS_PER_ITEM);
    // 100 ms calls keep the drain longer than the four processes' start-up spread: at 0 ms, group
    // commit let the first ones drain 500 jobs before a process started late under CI's load had
    // claimed any (a CI run failed "all four took part").
    const { runs } = await runWorkerProcesses(file, 4, ['--concurrency', '4', '--fake-latency-ms', '100'], BUILT_CLI);
    expect(runs.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    expect(runs.every((r) => r.claimed > 0)).toBe(true); // all four took part
    expect(runs.reduce((a, r) => a + r.claimed, 0)).toBe(owed);
    expect(troubleLines(runs)).toEqual([]);
    // An item's jobs are co-asked when one claim takes both (DESIGN §7.2); another process may
    // take the second between the claim's two statements, so between one and two calls an item.
    const check = await checkDrain(file);
    expect(check).toMatchObject({ jobsLeft: 0, answers: SCALE_ITEMS * 4, duplicateKeys: 0 });
    expect(check.calls).toBeGreaterThanOrEqual(SCALE_ITEMS);
    expect(check.calls).toBeLessThanOrEqual(owed);
  }, 180_000);
});
