import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../harness/cli-in-process.js';
import { ROOT } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * A one-shot drain runs every sweep to its end before it calls itself idle (DESIGN §7.4): after
 * a convention edit, or once answers of a set with maxAge expire, one `worker --until-idle` leaves
 * `show` reading current for everything that applies. The CLI's commands run in process
 * (test/harness/cli-in-process.ts: what is tested is what the commands do, not the process) on a
 * real SQLite file (41 items of the bundled beads sample, examples/beads-conventions.yaml and
 * examples/time-dependent.yaml), with the fake provider, and `Date` moved days ahead for a command
 * instead of waiting, as test/harness/clock-offset-preload.mjs moves a process's clock.
 */

const DAY_MS = 86_400_000;
const CONFIG = join(ROOT, 'examples/time-dependent.yaml');

let dir: string;
let cleanup: () => void;
let base: string;

/**
 * Runs the CLI `days` days from now: `Date` (Date.now and `new Date()`, which the store's clock
 * reads) is moved for the command and restored after it. Resolves with its output, rejects on a
 * non-zero exit.
 */
async function cli(db: string, days: number, ...args: string[]): Promise<{ stdout: string; stderr: string }> {
  const RealDate = Date;
  const offset = days * DAY_MS;
  class MovedDate extends RealDate {
    constructor(...a: unknown[]) {
      if (a.length === 0) super(RealDate.now() + offset);
      else super(...(a as [number]));
    }
    static override now(): number {
      return RealDate.now() + offset;
    }
  }
  globalThis.Date = MovedDate as DateConstructor;
  try {
    return await runCli([...args, '--database-url', db, '--config', CONFIG], {
      VERDICT_PROVIDER: 'fake',
      VERDICT_LOG_LEVEL: 'warn',
    });
  } finally {
    globalThis.Date = RealDate;
  }
}

function copy(name: string): string {
  const file = join(dir, `${name}.db`);
  copyFileSync(base, file);
  return file;
}

beforeAll(async () => {
  ({ dir, cleanup } = tempDir());
  const sample = join(dir, 'sample.jsonl');
  // The first 40 items, and bd-a2f5a (an open task: conventions and staleness both apply to it).
  const lines = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8').split('\n');
  writeFileSync(sample, [...lines.slice(0, 40), lines.find((l) => l.includes('"id":"bd-a2f5a"'))!].join('\n') + '\n');
  base = join(dir, 'base.db');
  await cli(base, 0, 'import', 'beads', sample, '--workspace', 'beads');
  await cli(base, 0, 'import', 'conventions', join(ROOT, 'examples/beads-conventions.yaml'), '--workspace', 'beads');
  await cli(base, 0, 'worker', '--until-idle');
  const db = new Database(base);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}, 120_000);
afterAll(() => cleanup?.());

/** The stale reasons `show --json` gives for an item's latest answers, by set/key. */
async function staleOf(db: string, days: number, ref: string): Promise<Record<string, string | null>> {
  const doc = JSON.parse((await cli(db, days, 'show', ref, '--json')).stdout) as {
    decisions: Array<{
      questionSet: string;
      questionKey: string;
      current: boolean;
      stale?: string | null;
      staleReason?: string | null;
    }>;
  };
  return Object.fromEntries(
    doc.decisions.map((d) => [
      `${d.questionSet}/${d.questionKey}`,
      d.current ? null : (d.staleReason ?? d.stale ?? 'stale'),
    ]),
  );
}

describe('worker --until-idle runs the sweeps to their end first', () => {
  it('after a convention edit, one drain re-asks every answer the edit made stale', async () => {
    const db = copy('conv');
    expect(Object.values(await staleOf(db, 0, 'bd-a2f5a')).filter((s) => s !== null)).toEqual([]);
    await cli(db, 0, 'edit', 'CONV-2', '--append', 'Name the split items.');
    const before = await staleOf(db, 0, 'bd-a2f5a');
    expect(Object.entries(before).filter(([k, s]) => k.endsWith('conv:CONV-2') && s !== null).length).toBeGreaterThan(
      0,
    );
    const drained = (await cli(db, 0, 'worker', '--until-idle')).stdout;
    expect(drained).toMatch(/^drained: \d+ jobs claimed/m);
    expect(await staleOf(db, 0, 'bd-a2f5a')).toEqual(Object.fromEntries(Object.keys(before).map((k) => [k, null])));
  }, 120_000);

  it('at +8 days, reask --dry-run lists the expired answers and one drain re-asks them', async () => {
    const db = copy('expiry');
    const fresh = await staleOf(db, 0, 'bd-a2f5a');
    expect(fresh['staleness/no_progress_14d']).toBeNull();
    const later = await staleOf(db, 8, 'bd-a2f5a');
    expect(later['staleness/no_progress_14d']).toMatch(/expired/);
    const dry = (await cli(db, 8, 'reask', '--set', 'staleness', '--dry-run')).stdout;
    const expired = Number(/(\d+) items expired/.exec(dry)?.[1] ?? 'NaN');
    expect(expired).toBeGreaterThan(0);
    const drained = (await cli(db, 8, 'worker', '--until-idle')).stdout;
    const calls = Number(/(\d+) provider calls/.exec(drained)![1]);
    expect(calls).toBeGreaterThanOrEqual(expired);
    expect((await staleOf(db, 8, 'bd-a2f5a'))['staleness/no_progress_14d']).toBeNull();
    expect((await cli(db, 8, 'reask', '--set', 'staleness', '--dry-run')).stdout).toMatch(/\b0 items expired/);
  }, 120_000);
});
