import { truncateSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  holdReadSnapshot,
  jobCounts,
  metricsPortOf,
  ROOT,
  runDist,
  spawnDist,
  walBytes,
} from '../../scripts/fault-support.js';
import { checkDatabase } from '../../src/cli/doctor.js';
import { loadConfig } from '../../src/config.js';
import { WAL_WARN_BYTES } from '../../src/maintenance/wal-upkeep.js';
import { waitFor } from '../harness/cli-process.js';
import { parsePromText, sampleValue } from '../harness/prom-text.js';
import { seededWorkerFixture } from '../harness/seeded-worker-fixture.js';

/**
 * DESIGN §10.2: with an outside reader holding a read transaction, a real worker
 * process (built dist) drains and its write-ahead log grows; once the reader lets go, the worker's
 * `wal_checkpoint(TRUNCATE)` (here every 500 ms via --wal-checkpoint-ms, 60 s by default) brings
 * the fx.file() back down. The old code never truncated it: the fx.file() kept its peak until the worker
 * exited. The size is in /metrics, `verdict status` and `verdict doctor`; doctor warns above
 * 256 MiB. Needs `npm run build`.
 */

const ITEMS = 500;

const fx = seededWorkerFixture(ITEMS);
const children = fx.children;

describe('the write-ahead log stays bounded (real worker process)', () => {
  it('grows behind an outside reader, is truncated once the reader lets go, and is shown in /metrics, status and doctor', async () => {
    const reader = holdReadSnapshot(fx.file());
    const w = spawnDist(
      ROOT,
      [
        'worker',
        '--database-url',
        fx.file(),
        '--provider',
        'fake',
        '--tick-ms',
        '100',
        '--wal-checkpoint-ms',
        '500',
        '--metrics-port',
        '0',
      ],
      {
        env: { VERDICT_LOG_LEVEL: 'debug' }, // each checkpoint logs a "wal checkpoint" line at debug
      },
    );
    const checkpoints = () =>
      w
        .stderr()
        .split('\n')
        .filter((l) => l.includes('"msg":"wal checkpoint"')).length;
    children.push(w.child);
    await w.started;
    const port = (await waitFor(() => metricsPortOf(w), 10_000))!;
    await waitFor(() => jobCounts(fx.file()).jobs === 0, 60_000);
    // Three checkpoints after the drain while the reader still holds its snapshot.
    const drainedAt = checkpoints();
    await waitFor(() => checkpoints() >= drainedAt + 3, 30_000);
    const peak = walBytes(fx.file());
    expect(peak).toBeGreaterThan(4 * 1024 * 1024); // the reader kept every frame of the drain

    const scraped = sampleValue(
      parsePromText(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()),
      'verdict_sqlite_wal_bytes',
    );
    expect(scraped).toBeGreaterThan(4 * 1024 * 1024);
    const status = await runDist(ROOT, ['status', '--database-url', fx.file()]);
    expect(status.stdout).toMatch(/^write-ahead log: \d+(\.\d)? MiB$/m);
    const statusJson = JSON.parse((await runDist(ROOT, ['status', '--json', '--database-url', fx.file()])).stdout);
    expect(statusJson.walBytes).toBeGreaterThan(4 * 1024 * 1024);

    reader.release();
    // The worker is idle and checkpoints every 500 ms here: the fx.file() goes back to (nearly) nothing.
    await waitFor(() => walBytes(fx.file()) < 1024 * 1024, 10_000, 50);
    const doctor = await runDist(ROOT, ['doctor', '--database-url', fx.file(), '--provider', 'none']);
    expect(doctor.stdout).toMatch(/ok\s+database\s+.*write-ahead log \d+/);
    expect(doctor.stdout).not.toMatch(/WARN/);

    w.child.kill('SIGTERM');
    expect((await w.exited).code, w.stderr()).toBe(0);
  }, 120_000);

  it('doctor warns when the write-ahead log is above 256 MiB', async () => {
    const cfg = loadConfig({ databaseUrl: fx.file(), provider: 'none' }, {});
    expect((await checkDatabase(cfg)).warning).toBeUndefined();
    truncateSync(`${fx.file()}-wal`, WAL_WARN_BYTES + 4096); // sparse: a WAL of that size without writing it
    const checked = await checkDatabase(cfg);
    expect(checked, JSON.stringify(checked)).toMatchObject({
      ok: true,
      warning: expect.stringMatching(/write-ahead log is 256 MiB .*above 256 MiB/),
    });
  });
});
