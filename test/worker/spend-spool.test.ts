import Database from 'better-sqlite3';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet, productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { SpendBacklog } from '../../src/runner/spend-backlog.js';
import { readSpool, readSpoolDir, SpendSpool } from '../../src/runner/spend-spool.js';
import type { SpendRecord } from '../../src/store/store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { runBuiltCli } from '../harness/built-cli.js';
import { spawnCli, waitFor } from '../harness/cli-process.js';
import { captureLog } from '../harness/log-capture.js';
import { makeFixture, tempDir, TASK_SCHEMA, type Fixture } from '../harness/store-fixture.js';

/**
 * DESIGN §10.5: the spend of a paid call that cannot be written is spooled (fsynced, in a file
 * beside the database) and written exactly once by the next worker, whatever kills the process
 * in between.
 */

const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
const spend = (set: string, calls: number, input: number): SpendRecord => ({
  questionSet: set,
  provider: 'fake',
  model: 'fake-model-1',
  outcome: 'ok',
  calls,
  usage: { inputTokens: input, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 },
});

describe('the spend spool, in one process', () => {
  let fx: Fixture;
  let spoolDir: string;
  beforeEach(async () => {
    fx = await makeFixture([attentionSet]);
    spoolDir = `${fx.file}.spend-spool`;
  });
  afterEach(async () => fx.cleanup());

  it('replayed after a crash between the database write and the clearing, each record is added once', async () => {
    const log = captureLog('info');
    const first = SpendSpool.open(spoolDir);
    const b1 = new SpendBacklog(log.logger, first);
    b1.keep(spend('attention', 1, 100), full);
    b1.keep(spend('attention', 1, 200), full);
    b1.keep(spend('readiness', 0, 300), full);
    expect(b1.spooled).toBe(3);
    // The database takes writes again and the first two go in; the process dies before its spool is
    // cleared (close leaves a file that holds records, as a SIGKILL does).
    const entries = readSpool(first.path).entries;
    expect(entries.map((e) => e.spend.usage.inputTokens)).toEqual([100, 200, 300]);
    for (const e of entries.slice(0, 2)) expect(await fx.store.recordSpooledSpend(e.id, e.spend)).toBe(true);
    first.close();
    expect(readSpoolDir(spoolDir)).toMatchObject({ records: 3, files: [{ records: 3, ownerAlive: false }] });

    // The next worker takes the file and writes what is not in yet.
    const b2 = new SpendBacklog(log.logger, SpendSpool.open(spoolDir));
    expect(b2.adoptOrphans(spoolDir)).toBe(3);
    expect(await b2.flush(fx.store)).toBe(3);
    expect(await fx.store.spendSince(3_600_000)).toMatchObject({ calls: 2, inputTokens: 600, outputTokens: 30 });
    expect(log.records().find((l) => l.msg === 'kept spend written')).toMatchObject({
      written: 3,
      alreadyWritten: 2,
      kept: 0,
    });
    // Cleared, the taken file gone, and the markers with it.
    expect(readSpoolDir(spoolDir).records).toBe(0);
    expect(await fx.store.listMeta('spend-spooled:')).toEqual([]);
    b2.close();
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  it("a running worker's spool is never taken, however many start beside it", async () => {
    const log = captureLog('info');
    const running = new SpendBacklog(log.logger, SpendSpool.open(spoolDir));
    running.keep(spend('attention', 1, 100), full);
    const next = new SpendBacklog(log.logger, SpendSpool.open(spoolDir));
    expect(next.adoptOrphans(spoolDir)).toBe(0);
    expect(readSpoolDir(spoolDir)).toMatchObject({ records: 1, files: [{ records: 1, ownerAlive: true }] });
    // Its owner writes it once the database takes writes.
    expect(await running.flush(fx.store)).toBe(1);
    expect((await fx.store.spendSince(3_600_000)).calls).toBe(1);
    running.close();
    next.close();
    expect(readdirSync(spoolDir)).toEqual([]);
  });
});

describe('the spend spool and the real worker', () => {
  let dir: { dir: string; cleanup: () => void };
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => dir.cleanup());

  async function seed(file: string, n: number): Promise<void> {
    const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
    for (let i = 0; i < n; i++)
      await store.createItem(
        {
          workspaceId: ws.id,
          collectionId: col.id,
          ref: `T-${i + 1}`,
          title: `item ${i + 1}`,
          content: 'waiting for legal sign-off',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
    await store.close();
  }

  function q<T>(file: string, sql: string): T[] {
    const d = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return d.prepare(sql).all() as T[];
    } finally {
      d.close();
    }
  }
  const spendCalls = (file: string) =>
    Number(q<{ n: number | null }>(file, 'SELECT sum(calls) AS n FROM decision_spend')[0].n ?? 0);
  const owed = (file: string) =>
    q<{ n: number }>(file, "SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'")[0].n;
  const workerArgs = (file: string) => [
    'worker',
    '--database-url',
    file,
    '--provider',
    'fake',
    '--tick-ms',
    '50',
    '--lease-ms',
    '60000',
  ];
  const lastLine = (text: string) =>
    JSON.parse(
      text
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .at(-1)!,
    ) as Record<string, unknown>;

  it('a full disk, a stop, a SIGKILL and a restart: every paid call is recorded once', async () => {
    const file = join(dir.dir, 'verdict.db');
    const cleanFile = join(dir.dir, 'clean.db');
    const spoolDir = `${file}.spend-spool`;
    await seed(file, 8);
    await seed(cleanFile, 8);
    await runBuiltCli([...workerArgs(cleanFile), '--until-idle']);
    const cleanCalls = spendCalls(cleanFile);
    expect(cleanCalls).toBeGreaterThan(2);

    // The database refuses every spend row, as a full disk would (the answers still go in).
    const raw = new Database(file);
    raw.exec(`CREATE TRIGGER refuse_spend BEFORE INSERT ON decision_spend BEGIN SELECT RAISE(ABORT, 'full'); END`);

    // A worker keeps two records or more, and is stopped: its last line counts them as spooled.
    const w1 = spawnCli(workerArgs(file));
    await waitFor(() => readSpoolDir(spoolDir).records >= 2, 120_000);
    w1.child.kill('SIGTERM');
    expect((await w1.exited).code).toBe(0);
    const r1 = readSpoolDir(spoolDir).records;
    expect(lastLine(w1.stdout() + w1.stderr())).toMatchObject({
      msg: 'worker stopped',
      spendSpooled: r1,
      spendLost: 0,
    });

    // doctor and status say so.
    const doctor = await runBuiltCli(['doctor', '--database-url', file, '--provider', 'fake']);
    expect(doctor.stdout).toContain(
      `WARN  spend     ${r1} paid call records not yet in the database (0 of running workers)`,
    );
    const status = await runBuiltCli(['status', '--database-url', file, '--provider', 'fake']);
    expect(status.stdout).toContain(`spend spooled, not yet in the database: ${r1} records of paid calls`);

    // The next worker takes that spool, drains everything still refused, and is SIGKILLed.
    const w2 = spawnCli(workerArgs(file));
    await waitFor(() => owed(file) === 0, 120_000);
    // The worker logs taking the spool before its first claim, but the pipe can hand the line to
    // this process after the database already shows the drain: wait for it a while, then assert.
    const took = 'spend spooled by a stopped worker taken';
    await waitFor(() => (w2.stdout() + w2.stderr()).includes(took), 10_000).catch(() => undefined);
    expect(w2.stdout() + w2.stderr()).toContain(took);
    w2.child.kill('SIGKILL');
    expect((await w2.exited).signal).toBe('SIGKILL');
    expect(spendCalls(file)).toBe(0);
    const spooled = readSpoolDir(spoolDir);
    expect(spooled.files).toHaveLength(1);
    const entries = readSpool(spooled.files[0].path).entries;
    expect(entries.reduce((a, e) => a + e.spend.calls, 0)).toBe(cleanCalls);

    // Room again: the next start writes the spool, once.
    raw.exec('DROP TRIGGER refuse_spend');
    raw.close();
    const drain = await runBuiltCli([...workerArgs(file), '--until-idle']);
    expect(spendCalls(file)).toBe(cleanCalls);
    expect(readSpoolDir(spoolDir).records).toBe(0);
    expect(q(file, "SELECT key FROM verdict_meta WHERE key LIKE 'spend-spooled:%'")).toEqual([]);
    expect(lastLine(drain.stdout + drain.stderr)).toMatchObject({ msg: 'worker stopped', spendSpooled: 0 });
    // A second start finds nothing to write.
    await runBuiltCli([...workerArgs(file), '--until-idle']);
    expect(spendCalls(file)).toBe(cleanCalls);
  }, 300_000);
});
