import Database from 'better-sqlite3';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { Worker } from '../../src/worker/worker.js';
import { spawnCli, waitFor } from '../harness/cli-process.js';
import { tempDir, TASK_SCHEMA } from '../harness/store-fixture.js';

/**
 * Group commit (DESIGN §10.6) and a crash: the real built worker, four slots, its committer held
 * by a test seam (committer-hold-preload.mjs) once three group commits ran, so every slot hands in
 * its finish and waits; SIGKILLed there. Then a drain in this process, with a clock past the dead
 * worker's leases: nothing lost, nothing doubled, and the calls counted.
 */

const ITEMS = 30;
const SLOTS = 4;
const LEASE_MS = 2_600;
const preload = new URL('../harness/committer-hold-preload.mjs', import.meta.url).pathname;

let dir: { dir: string; cleanup: () => void };
let file: string;
beforeEach(() => {
  dir = tempDir();
  file = join(dir.dir, 'verdict.db');
});
afterEach(() => dir.cleanup());

async function seed(n: number): Promise<void> {
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  const ws = await store.createWorkspace({ slug: 'acme' });
  const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  for (let i = 0; i < n; i++) {
    await store.createItem(
      {
        workspaceId: ws.id,
        collectionId: col.id,
        ref: `T-${i + 1}`,
        title: `item ${i + 1}`,
        content: 'body',
        fields: { status: 'open' },
      },
      { quietPeriod: false },
    );
  }
  await store.close();
}

function q<T>(sql: string, ...params: unknown[]): T[] {
  const d = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return d.prepare(sql).all(...params) as T[];
  } finally {
    d.close();
  }
}

const spendCalls = () => q<{ n: number | null }>('SELECT sum(calls) AS n FROM decision_spend')[0].n ?? 0;

describe('group commit and a crash', () => {
  it('killed between the slots handing in and the commit: the drain loses nothing and doubles nothing', async () => {
    await seed(ITEMS);
    const jobsAtStart = q<{ n: number }>('SELECT count(*) AS n FROM decision_jobs')[0].n;
    const held = join(dir.dir, 'held.json');
    const w = spawnCli(
      [
        'worker',
        '--database-url',
        file,
        '--provider',
        'fake',
        '--fake-latency-ms',
        '0',
        '--lease-ms',
        String(LEASE_MS),
        '--tick-ms',
        '50',
        '--concurrency',
        String(SLOTS),
      ],
      { COMMIT_HOLD_FILE: held, COMMIT_HOLD_SLOTS: String(SLOTS), COMMIT_HOLD_AFTER: '3' },
      [preload],
    );
    await waitFor(() => existsSync(held), 60_000);
    w.child.kill('SIGKILL');
    expect((await w.exited).signal).toBe('SIGKILL');

    // Every slot handed in a paid-for finish, and none of it was written.
    const waiting = JSON.parse(readFileSync(held, 'utf8')) as Array<{
      itemId: string;
      questionSet: string;
      claimToken: string;
      answers: number;
    }>;
    expect(waiting.length).toBeGreaterThanOrEqual(SLOTS);
    // (A co-asked call's answers travel with one of its jobs' finishes.)
    expect(waiting.some((e) => e.answers > 0)).toBe(true);
    for (const e of waiting) {
      expect(
        q<{ t: string }>(
          'SELECT claim_token AS t FROM decision_jobs WHERE item_id = ? AND question_set = ?',
          e.itemId,
          e.questionSet,
        ),
      ).toEqual([{ t: e.claimToken }]);
      if (e.answers > 0)
        expect(
          q('SELECT 1 FROM item_decisions WHERE item_id = ? AND question_set = ?', e.itemId, e.questionSet),
        ).toEqual([]);
    }
    // No slot acted past its uncommitted finish: every job still under a claim is one of a waiting
    // finish's items (its own job, or a job co-asked with it whose finish comes after).
    const heldItems = new Set(waiting.map((e) => e.itemId));
    const claimedNow = q<{ item: string }>(
      'SELECT DISTINCT item_id AS item FROM decision_jobs WHERE claim_token IS NOT NULL',
    );
    expect(claimedNow.filter((r) => !heldItems.has(r.item))).toEqual([]);
    // Some work was committed before the hold (three group commits), not all of it.
    const left = q<{ item: string }>('SELECT DISTINCT item_id AS item FROM decision_jobs');
    const jobsLeft = q<{ n: number }>('SELECT count(*) AS n FROM decision_jobs')[0].n;
    expect(jobsLeft).toBeLessThan(jobsAtStart);
    const callsBefore = spendCalls();
    expect(callsBefore).toBeGreaterThan(0);

    // The drain, in this process: its clock is past the dead worker's leases and past the abandon
    // backoff its own claims would give them (the drain's 60 s lease × 2^0, DESIGN §3 "Abandons"),
    // so nothing is waited on.
    const registry = new Registry(productionSets());
    const store = new SqliteStore({
      url: file,
      registry,
      clock: { now: () => Date.now() + 10 * LEASE_MS + 2 * 60_000 },
    });
    const fake = new FakeProvider();
    const summary = await new Worker({
      store,
      registry,
      provider: fake,
      logger: silentLogger,
      workerId: 'drain',
      concurrency: SLOTS,
      tickMs: 20,
      leaseMs: 60_000,
      passLimit: 1_000,
      abandonLimit: 8,
      untilIdle: true,
    }).run();
    await store.close();

    // Nothing lost: no job owed or parked, every item answered on every key.
    expect(q('SELECT 1 FROM decision_jobs')).toEqual([]);
    expect(summary.claimed).toBe(jobsLeft);
    const perKey = q<{ n: number }>(
      'SELECT count(*) AS n FROM item_decisions GROUP BY item_id, question_set, question_key, state_hash',
    );
    expect(perKey).toHaveLength(ITEMS * 4); // three attention keys and one effort key per item
    // Nothing doubled: one answer per idempotency key.
    expect(perKey.every((r) => r.n === 1)).toBe(true);
    // Calls counted: the drain asked once per item it had left (an item's sets share one call),
    // and every call of both processes that committed is in the spend rows once.
    expect(fake.requests).toHaveLength(left.length);
    expect(summary.calls).toBe(left.length);
    expect(spendCalls()).toBe(callsBefore + left.length);
  }, 180_000);
});
