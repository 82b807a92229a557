import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { runCli } from '../harness/cli-in-process.js';
import { ROOT, spawnCli, waitFor } from '../harness/cli-process.js';
import { tempDir, TASK_SCHEMA } from '../harness/store-fixture.js';

/**
 * Real worker processes on one real SQLite file, with the system clock: leases here are real
 * time, so they are kept short (a little over the fake provider's worst case).
 */

let dir: { dir: string; cleanup: () => void };
let file: string;
beforeEach(() => {
  dir = tempDir();
  file = join(dir.dir, 'verdict.db');
});
afterEach(() => dir.cleanup());

async function seed(titles: string[]): Promise<string[]> {
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  const ws = await store.createWorkspace({ slug: 'acme' });
  const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  const ids: string[] = [];
  for (const [i, title] of titles.entries()) {
    const r = await store.createItem(
      {
        workspaceId: ws.id,
        collectionId: col.id,
        ref: `T-${i + 1}`,
        title,
        content: 'body',
        fields: { status: 'open' },
      },
      { quietPeriod: false },
    );
    ids.push(r.row.id);
  }
  await store.close();
  return ids;
}

function db() {
  return new Database(file, { readonly: true, fileMustExist: true });
}

function q<T>(sql: string, ...params: unknown[]): T[] {
  const d = db();
  try {
    return d.prepare(sql).all(...params) as T[];
  } finally {
    d.close();
  }
}

/** A clock offset past a 2.6 s lease taken just before, ms. */
const LEASE_OUT_MS = 3_000;

const common = (latency: number, lease: number) => [
  '--database-url',
  file,
  '--provider',
  'fake',
  '--fake-latency-ms',
  String(latency),
  '--lease-ms',
  String(lease),
  '--tick-ms',
  '50',
  '--concurrency',
  '1',
];

describe('worker processes', () => {
  it('a worker killed with SIGKILL mid-evaluation: after the lease another completes the job, one answer per key', async () => {
    const [itemId] = await seed(['only item']);
    const a = spawnCli(['worker', ...common(1_500, 2_600)]);
    // Wait until A's call is under way (the fake records nothing to the db, so watch the claim).
    await waitFor(
      () =>
        q<{ t: string | null }>(
          'SELECT claim_token AS t FROM decision_jobs WHERE item_id = ? AND question_set = ?',
          itemId,
          'attention',
        )[0]?.t,
    );
    await new Promise((r) => setTimeout(r, 300));
    a.child.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');
    expect(q('SELECT 1 FROM item_decisions WHERE question_set = ?', 'attention')).toHaveLength(0);
    // B's clock runs past A's lease (test/harness/clock-offset-preload.mjs) instead of the test
    // waiting the lease out: B claims the job at once, and only because A's lease has run out.
    const b = spawnCli(['worker', ...common(0, 2_600)], { VERDICT_TEST_CLOCK_OFFSET_MS: String(LEASE_OUT_MS) }, [
      join(ROOT, 'test/harness/clock-offset-preload.mjs'),
    ]);
    await waitFor(() => q('SELECT 1 FROM decision_jobs').length === 0, 30_000);
    b.child.kill('SIGTERM');
    expect((await b.exited).code).toBe(0);
    const rows = q<{ k: string; n: number }>(
      'SELECT question_key AS k, count(*) AS n FROM item_decisions WHERE item_id = ? GROUP BY question_set, question_key, state_hash',
      itemId,
    );
    expect(rows).toHaveLength(4); // three attention keys and one effort key
    expect(rows.every((r) => r.n === 1)).toBe(true);
    // The worker pins its provider for readers in other processes.
    expect(q<{ value: string }>("SELECT value FROM verdict_meta WHERE key = 'provider:pinned'")[0]?.value).toContain(
      '"model":"fake-model-1"',
    );
  }, 60_000);

  it('SIGTERM mid-call: exits 0 within the grace period and releases the job without an attempt', async () => {
    const [itemId] = await seed(['slow item']);
    const a = spawnCli(['worker', ...common(20_000, 30_000), '--grace-ms', '5000']);
    await waitFor(
      () =>
        q<{ t: string | null }>(
          'SELECT claim_token AS t FROM decision_jobs WHERE item_id = ? AND claim_token IS NOT NULL',
          itemId,
        )[0]?.t,
    );
    const t0 = Date.now();
    a.child.kill('SIGTERM');
    const { code } = await a.exited;
    expect(code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
    const jobs = q<{ attempts: number; claim_token: string | null }>(
      'SELECT attempts, claim_token FROM decision_jobs WHERE item_id = ?',
      itemId,
    );
    expect(jobs.length).toBeGreaterThan(0);
    for (const j of jobs) expect(j).toEqual({ attempts: 0, claim_token: null });
    // The aborted call is spend of its own kind, not a provider failure (DESIGN §10 shutdown).
    expect(
      q<{ outcome: string; calls: number }>('SELECT outcome, sum(calls) AS calls FROM decision_spend GROUP BY outcome'),
    ).toEqual([{ outcome: 'aborted', calls: 1 }]);
    // The last log line says what the stop cut short.
    const lines = a
      .stderr()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    // attention and effort were co-asked in the one call (DESIGN §7.2): two jobs, one call.
    expect(lines[lines.length - 1]).toMatchObject({
      msg: 'worker stopped',
      claimed: 2,
      calls: 1,
      answersStored: 0,
      releasedAtStop: 2,
      abortedCalls: 1,
    });
    const status = JSON.parse((await runCli(['status', '--json', '--database-url', file])).stdout) as {
      spend: { last24h: { abortedCalls: number; bySet: Array<{ failedCalls: number; abortedCalls: number }> } };
    };
    expect(status.spend.last24h.abortedCalls).toBe(1);
    expect(status.spend.last24h.bySet.map((s) => [s.failedCalls, s.abortedCalls])).toEqual([
      [0, 1],
      [0, 0],
    ]);
  }, 60_000);

  it('a poison item that kills the worker every time parks after the abandon limit; every other job completes', async () => {
    const ids = await seed(['POISON pill', 'fine one', 'fine two', 'fine three']);
    const runs: Array<number | null> = [];
    // A limit of 3 keeps this test short (2 poisoned jobs × 3 deaths); the default of 8 is
    // covered against the store in test/runner/evaluate.test.ts.
    const owed = () =>
      q<{ n: number; due: number | null }>(
        "SELECT count(*) AS n, max(not_before) AS due FROM decision_jobs WHERE state = 'owed'",
      )[0];
    let offsetMs = 0;
    for (let i = 0; i < 16; i++) {
      // Each run's clock is moved ahead (test/harness/clock-offset-preload.mjs) instead of the test
      // waiting: past the dead run's 30 s lease, so the next claim counts an abandon, and past the
      // backoff of a job put back after an abandon (DESIGN §3, "Abandons"). Without the moved clock
      // no abandon is ever counted, since no process start outlasts the lease.
      const w = spawnCli(
        ['worker', '--until-idle', '--abandon-limit', '3', ...common(0, 30_000)],
        { VERDICT_TEST_CLOCK_OFFSET_MS: String(offsetMs) },
        [join(ROOT, 'test/harness/poison-preload.mjs'), join(ROOT, 'test/harness/clock-offset-preload.mjs')],
      );
      const { code } = await w.exited;
      runs.push(code);
      if (code === 0 && owed().n === 0) break;
      offsetMs = Math.max(offsetMs + 31_000, (owed().due ?? 0) - Date.now() + 1_000);
    }
    expect(runs[runs.length - 1]).toBe(0);
    const jobs = q<{ item_id: string; question_set: string; state: string; abandons: number }>(
      'SELECT item_id, question_set, state, abandons FROM decision_jobs',
    );
    // Both sets of the poison item are parked at the abandon limit; nothing else is left.
    expect(jobs.map((j) => [j.item_id, j.state, j.abandons])).toEqual([
      [ids[0], 'parked', 3],
      [ids[0], 'parked', 3],
    ]);
    for (const id of ids.slice(1)) expect(q('SELECT 1 FROM item_decisions WHERE item_id = ?', id)).toHaveLength(4);
  }, 120_000);
});
