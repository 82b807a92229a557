import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { effortSet, productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { bundledSamplePath, importBeads } from '../../src/importers/beads.js';
import { backfillCursorKey, type BackfillCursor } from '../../src/backfill/backfill.js';
import { eligibleItems } from '../../src/backfill/eligible-items.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { spawnCli, waitFor } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * `verdict backfill` as a real child process over the bundled beads sample with the fake
 * provider: progress (one log line per chunk off a terminal), Ctrl-C (SIGINT) mid-way, and a
 * rerun that continues from the stored cursor without owing anything twice or losing anything.
 */

let dir: { dir: string; cleanup: () => void };
let file: string;
beforeEach(() => {
  dir = tempDir();
  file = join(dir.dir, 'verdict.db');
});
afterEach(() => dir.cleanup());

function q<T>(sql: string, ...params: unknown[]): T[] {
  const d = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return d.prepare(sql).all(...params) as T[];
  } finally {
    d.close();
  }
}

const cursorNow = (): BackfillCursor | null => {
  const row = q<{ value: string }>(
    'SELECT value FROM verdict_meta WHERE key = ?',
    backfillCursorKey('effort', null),
  )[0];
  return row ? (JSON.parse(row.value) as BackfillCursor) : null;
};

describe('backfill process', () => {
  it('shows progress, stops on SIGINT keeping owed work, and a rerun resumes from the cursor', async () => {
    // The sample, imported and with its import's jobs dropped, so the backfill is the only source of effort jobs.
    const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
    await importBeads(store, bundledSamplePath(), { workspaceSlug: 'beads' });
    await store.dropJobs({});
    const eligible: string[] = [];
    for await (const e of eligibleItems(store, effortSet)) eligible.push(e.item.id);
    await store.close();
    expect(eligible.length).toBeGreaterThan(40);

    const args = [
      'backfill',
      '--set',
      'effort',
      '--drain',
      '--database-url',
      file,
      '--provider',
      'fake',
      '--concurrency',
      '1',
      '--tick-ms',
      '50',
      '--backfill-chunk',
      '10',
    ];
    const first = spawnCli([...args, '--fake-latency-ms', '80']);
    // At least one chunk drained and the next one owed: then Ctrl-C.
    await waitFor(() => (cursorNow()?.chunks ?? 0) >= 2, 30_000);
    first.child.kill('SIGINT');
    const { code } = await first.exited;
    expect(code).toBe(1);
    expect(first.stdout()).toContain('stopped before the end');
    const progress = first
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"backfill chunk drained"'))
      .map((l) => JSON.parse(l));
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(progress[0]).toMatchObject({ set: 'effort', chunk: 1, items: 10, drained: 10, total: eligible.length });

    const cursor = cursorNow()!;
    expect(cursor.owedItems).toBe(cursor.chunks * 10);
    expect(cursor.owedItems).toBeLessThan(eligible.length);
    const owedSoFar = eligible.slice(0, cursor.owedItems);
    expect(cursor.afterId).toBe(owedSoFar[owedSoFar.length - 1]);
    // Nothing owed is lost: every item owed so far is answered or still owed; nothing after the cursor is owed.
    const answered = new Set(
      q<{ id: string }>("SELECT DISTINCT item_id AS id FROM item_decisions WHERE question_set = 'effort'").map(
        (r) => r.id,
      ),
    );
    const jobs = q<{ id: string; claim: string | null }>(
      "SELECT item_id AS id, claim_token AS claim FROM decision_jobs WHERE question_set = 'effort'",
    );
    const stillOwed = new Set(jobs.map((j) => j.id));
    for (const id of owedSoFar) expect(answered.has(id) || stillOwed.has(id)).toBe(true);
    expect([...stillOwed].every((id) => cursor.pending.includes(id))).toBe(true);
    expect(jobs.every((j) => j.claim === null)).toBe(true); // the in-process runner released what it held
    expect(stillOwed.size).toBeGreaterThan(0);

    const second = spawnCli([...args, '--json']);
    expect((await second.exited).code).toBe(0);
    const report = JSON.parse(second.stdout());
    expect(report).toMatchObject({
      finished: true,
      resumedAfter: { afterId: cursor.afterId, owedItems: cursor.owedItems, pending: 10 },
      owedThisRun: eligible.length - cursor.owedItems,
      total: eligible.length,
    });
    expect(cursorNow()).toBeNull();
    // Every eligible item answered exactly once, and each asked exactly once (no call repeated).
    const perItem = q<{ id: string; n: number }>(
      "SELECT item_id AS id, count(*) AS n FROM item_decisions WHERE question_set = 'effort' GROUP BY item_id",
    );
    expect(perItem.map((r) => r.id).sort()).toEqual([...eligible].sort());
    expect(perItem.every((r) => r.n === 1)).toBe(true);
    // The import's collection changes owe attention too; an item's attention and effort jobs that
    // are due together are co-asked (DESIGN §7.2), the call counted once, under the job claimed
    // first. So no call repeated means: at most one call per job, at least one per item, and the
    // effort answers' tokens are exactly the effort spend.
    const ok = q<{ calls: number; input: number; set: string }>(
      'SELECT question_set AS "set", sum(calls) AS calls, sum(input_tokens) AS input FROM decision_spend WHERE outcome = \'ok\' GROUP BY question_set',
    );
    const okCalls = ok.reduce((n, r) => n + r.calls, 0);
    expect(okCalls).toBeLessThanOrEqual(2 * eligible.length);
    expect(okCalls).toBeGreaterThanOrEqual(eligible.length);
    const effortInput = q<{ n: number }>(
      "SELECT coalesce(sum(input_tokens), 0) AS n FROM item_decisions WHERE question_set = 'effort'",
    )[0].n;
    expect(ok.find((r) => r.set === 'effort')?.input).toBe(effortInput);
    expect(q('SELECT 1 FROM decision_jobs')).toHaveLength(0);
  }, 90_000);
});
