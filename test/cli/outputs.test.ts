import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../harness/cli-process.js';
import { runCli } from '../harness/cli-in-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * What the CLI says (issue 11, "The CLI a newcomer meets"), through the CLI (its commander program, in process)
 * (its commander program, in process) on a real SQLite file: the first 40 items of
 * the bundled sample of the beads tracker plus examples/beads-conventions.yaml, drained with the
 * fake provider.
 */

let dir: string;
let cleanup: () => void;
let base: string;

const cli = (db: string, ...args: string[]) =>
  runCli([...args, '--database-url', db], { VERDICT_PROVIDER: 'fake', VERDICT_LOG_LEVEL: 'warn' });

/** A fresh copy of the drained fixture database. */
function copy(name: string): string {
  const file = join(dir, `${name}.db`);
  copyFileSync(base, file);
  return file;
}

beforeAll(async () => {
  ({ dir, cleanup } = tempDir());
  const sample = join(dir, 'sample.jsonl');
  writeFileSync(
    sample,
    readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8').split('\n').slice(0, 40).join('\n') + '\n',
  );
  base = join(dir, 'base.db');
  await cli(base, 'import', 'beads', sample, '--workspace', 'beads');
  await cli(base, 'import', 'conventions', join(ROOT, 'examples/beads-conventions.yaml'), '--workspace', 'beads');
  await cli(base, 'worker', '--until-idle');
  // Fold the WAL into the file so copies are whole.
  const db = new Database(base);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}, 60_000);
afterAll(() => cleanup?.());

describe('flags says how many it shows', () => {
  it('a --limit below the count says "showing N of M (--limit)"', async () => {
    const db = copy('flags');
    const all = (await cli(db, 'flags', '--set', 'conventions', '--limit', '1000')).stdout.split('\n');
    const total = Number(/^(\d+) items flagged/.exec(all[0])![1]);
    expect(total).toBeGreaterThan(2);
    expect(all[0]).not.toContain('showing');
    const out = (await cli(db, 'flags', '--set', 'conventions', '--limit', '2')).stdout.split('\n').filter(Boolean);
    expect(out[0]).toBe(`${total} items flagged by conventions in beads; showing 2 of ${total} (--limit)`);
    expect(out).toHaveLength(3);
  }, 30_000);
});

describe('show', () => {
  it('a closed item says which sets will not ask it and why, not "none yet"', async () => {
    const db = copy('closed');
    const out = (await cli(db, 'show', 'bd-0088')).stdout;
    expect(out).not.toContain('none yet');
    expect(out).toContain('not asked now: attention, effort: item is terminal (status: closed)');
  }, 30_000);

  it('an item no set applies to says so in the heading, and why', async () => {
    const db = copy('noset');
    // bd-06px is a tombstone in the sample: imported deleted, never asked.
    const out = (await cli(db, 'show', 'bd-06px')).stdout;
    expect(out).toMatch(
      /^decisions: none: no set applies \(attention, conventions, conventions_comments, effort: item is deleted\)$/m,
    );
  }, 30_000);

  it('a stale answer says its reason once: [stale: question_changed], no trailing "; stale"', async () => {
    const db = copy('stale');
    await cli(db, 'edit', 'CONV-2', '--append', 'Name the split items.');
    const out = (await cli(db, 'show', 'bd-0088')).stdout;
    expect(out).toMatch(/conventions\/conv:CONV-2 {2}p=\d\.\d\d {2}\[stale: question_changed\] {2}fake:/);
    expect(out).not.toContain('; stale]');
    expect(out).toMatch(/conventions\/conv:CONV-1 {2}p=\d\.\d\d {2}\[current(, surfaced|, below threshold)\]/);
  }, 30_000);
});

describe('edit says how many answers it made stale', () => {
  it('a convention edit counts the answers asked its old wording, not only the jobs it owes', async () => {
    const db = copy('conv');
    const d = new Database(db, { readonly: true });
    const expected = (
      d
        .prepare(
          `SELECT count(*) AS n FROM (SELECT DISTINCT d.item_id, d.question_set, d.question_key FROM item_decisions d JOIN items i ON i.id = d.item_id
           WHERE (d.question_key = 'conv:CONV-2' OR d.question_key LIKE 'conv:CONV-2@%') AND i.ref <> 'CONV-2')`,
        )
        .get() as { n: number }
    ).n;
    d.close();
    expect(expected).toBeGreaterThan(10);
    const out = (await cli(db, 'edit', 'CONV-2', '--append', 'Name the split items.')).stdout;
    expect(out).toMatch(/^CONV-2: changed; \d+ jobs owed\n/);
    expect(out).toContain(
      `  ${expected} answers about other items went stale: their question changed (conventions/conv:CONV-2, conventions_comments/conv:CONV-2); the drift sweep re-asks them\n`,
    );
  }, 30_000);

  it('an item edit counts its own answers that went stale', async () => {
    const db = copy('item');
    const before = (await cli(db, 'show', 'bd-0088', '--json')).stdout;
    const current = (JSON.parse(before) as { decisions: Array<{ current: boolean }> }).decisions.filter(
      (x) => x.current,
    ).length;
    expect(current).toBeGreaterThan(0);
    const out = (await cli(db, 'edit', 'bd-0088', '--append', 'Update: landed.')).stdout;
    expect(out).toMatch(
      new RegExp(
        `^bd-0088: changed; \\d+ jobs owed\\n  ${current} answers about bd-0088 went stale \\(its state changed\\); the jobs owed re-ask them\\n$`,
      ),
    );
  }, 30_000);
});
