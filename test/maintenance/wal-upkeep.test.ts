import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Store } from '../../src/store/whole-store.js';
import { startWalUpkeep } from '../../src/maintenance/wal-upkeep.js';
import { captureLog } from '../harness/log-capture.js';

/**
 * DESIGN §10.2: a busy worker (never idle) still checkpoints at least every `everyMs`; an idle one
 * checkpoints when a slot finds nothing, at most once a second. The process test
 * (wal-process.test.ts) ends idle, so only this test notices a missing periodic checkpoint.
 */
describe('startWalUpkeep', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function upkeep(everyMs: number) {
    let checkpoints = 0;
    const store = { checkpoint: async () => (checkpoints++, 0) } as unknown as Store;
    const stop = new AbortController();
    const u = startWalUpkeep({ store, logger: captureLog('info').logger, everyMs, signal: stop.signal });
    return { u, stop, count: () => checkpoints };
  }

  it('checkpoints every everyMs while busy, without any idle call', async () => {
    const { u, count } = upkeep(5_000);
    await vi.advanceTimersByTimeAsync(4_000);
    expect(count()).toBe(0);
    await vi.advanceTimersByTimeAsync(1_500);
    expect(count()).toBe(1);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(count()).toBe(2);
    await u.stop();
    await vi.advanceTimersByTimeAsync(20_000);
    expect(count()).toBe(2); // stopped: no more checkpoints
  });

  it('an idle slot checkpoints at most once a second', async () => {
    const { u, count } = upkeep(60_000);
    await vi.advanceTimersByTimeAsync(1_000);
    u.idle();
    u.idle();
    await vi.advanceTimersByTimeAsync(0);
    expect(count()).toBe(1);
    await vi.advanceTimersByTimeAsync(500);
    u.idle();
    await vi.advanceTimersByTimeAsync(0);
    expect(count()).toBe(1);
    await vi.advanceTimersByTimeAsync(600);
    u.idle();
    await vi.advanceTimersByTimeAsync(0);
    expect(count()).toBe(2);
    await u.stop();
  });
});
