import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { KEYS_PER_TASK, ROOT, runLeaseLimiter, runTokenCap } from '../../scripts/fault-runs.js';

/**
 * The reliability runs of DESIGN §3.6 and §10.3, shortened, with real worker processes of the
 * built CLI (`node dist/cli/main.js worker`, run `npm run build` first) on a real SQLite file of
 * real tracker tasks with the fake provider. The full-size runs and their before/after figures are
 * scripts/fault-lease-limiter.ts and scripts/fault-token-cap.ts. `VERDICT_FAULT_ROOT` points the
 * runs at another built checkout (an old commit's worktree), to see these tests fail there.
 */

const TARGET = process.env.VERDICT_FAULT_ROOT || ROOT;

beforeAll(() => {
  if (!existsSync(join(TARGET, 'dist/cli/main.js'))) throw new Error('dist/ is not built: run `npm run build` first');
});

describe('fault 2: our own limiter never costs a live worker its lease (DESIGN §3.6)', () => {
  it('two workers, --lease-ms 4000, 7 requests/min, more calls than a minute allows: 0 parked, 0 claim lost, one answer per key', async () => {
    // 15 tasks are 15 calls (attention and effort co-asked, DESIGN §7.2): 14 fit the two
    // processes' first minute, the rest wait on the limiter.
    const f = await runLeaseLimiter(TARGET, { items: 15, timeoutMs: 150_000 });
    expect(f.finished).toBe(true);
    expect(f.parked).toBe(0);
    expect(f.claimLostLines).toBe(0);
    expect(f.answerKeys).toBe(15 * KEYS_PER_TASK);
    expect(f.keysAnsweredTwice).toBe(0);
    expect(f.deferLines).toBeGreaterThan(0); // the limiter did hold calls back
  }, 200_000);
});

// The two runs at once, each on a file of its own: the cap is a bound on billed tokens, which no
// timing between the runs moves, and side by side they take the wall time of one.
describe.concurrent('fault 3: the daily token cap holds across processes (DESIGN §10.3)', () => {
  for (const processes of [1, 3]) {
    it(`${processes} process(es) × 4 slots, 200 ms calls: billed stays within the cap plus the calls in flight`, async ({
      expect,
    }) => {
      const cap = 6_000;
      // 2 s without a bill ends the run (5 s in scripts/fault-token-cap.ts): with 200 ms calls
      // on four slots a process, a pause that long is the cap's.
      const f = await runTokenCap(TARGET, { items: 40, processes, cap, timeoutMs: 90_000, quietMs: 2_000 });
      expect(f.finished).toBe(true);
      expect(f.billedTokens).toBeLessThanOrEqual(cap + f.processes * f.slots * f.maxCallTokens);
      // Each call reserved at least its real usage, so the cap itself holds.
      expect(f.billedTokens).toBeLessThanOrEqual(cap);
      expect(f.owed).toBeGreaterThan(0); // the cap, not the work running out, stopped the run
      expect(f.billedTokens).toBeGreaterThan(cap / 2);
      expect(f.keysAnsweredTwice).toBe(0);
    }, 120_000);
  }
});
