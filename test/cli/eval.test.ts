import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../harness/cli-in-process.js';
import { ROOT } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * `verdict eval` as a user runs it (DESIGN §8.3), through the CLI (its commander program, in process): the demo into a temp
 * database, then `eval --stored` against the committed gold set, `--compare`, and a bad gold file.
 *
 * The demo is run on the sample's lines for the gold set's 80 items (`--sample`), which keeps it
 * to about 2 s instead of 18 s: the attention state reads only an item's own title, body, fields
 * and comments, so those items' states, and the fake's answers, are the full demo's.
 */

const GOLD = join(ROOT, 'sample/gold/attention.jsonl');
const goldRows = readFileSync(GOLD, 'utf8')
  .split('\n')
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l) as { ref: string; set: string; key: string; label: boolean });

let dir: { dir: string; cleanup: () => void };
let db: string;
const env = { VERDICT_PROVIDER: 'fake', VERDICT_LOG_LEVEL: 'warn' };

beforeAll(async () => {
  dir = tempDir('verdict-eval-cli-');
  db = join(dir.dir, 'demo.db');
  const refs = new Set(goldRows.map((r) => r.ref));
  const lines = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() && refs.has((JSON.parse(l) as { id: string }).id));
  const sample = join(dir.dir, 'sample.jsonl');
  writeFileSync(sample, `${lines.join('\n')}\n`);
  await runCli(['demo', '--sample', sample, '--database-url', db], env);
}, 60_000);
afterAll(() => dir?.cleanup());

interface Group {
  n: number;
  answered: number;
  correct: number;
  accuracy: number | null;
  precision: number | null;
  recall: number | null;
  f1: number | null;
  brier: number | null;
  ece: number | null;
  calls: number;
  costUsd: number | null;
}

describe('verdict eval on the demo database', () => {
  it('--stored --json: every gold row resolved and answered, figures in [0, 1] and equal to a count from the database, an SVG written', async () => {
    const svg = join(dir.dir, 'reliability.svg');
    const { stdout } = await runCli(
      ['eval', '--stored', '--gold', GOLD, '--json', '--svg', svg, '--database-url', db],
      env,
    );
    const r = JSON.parse(stdout) as {
      gold: { rows: number; resolved: number; unresolved: unknown[] };
      a: {
        mode: string;
        byKey: Array<Group & { key: string }>;
        bySet: Group[];
        overall: Group;
        unanswered: { count: number };
      };
      b: null;
      svg: string;
    };
    expect(r.gold).toMatchObject({ rows: goldRows.length, resolved: goldRows.length, unresolved: [] });
    expect(r.a.mode).toBe('stored');
    expect(r.a.overall).toMatchObject({ n: goldRows.length, answered: goldRows.length, calls: 0, costUsd: 0 });
    expect(r.a.unanswered.count).toBe(0);
    expect(r.a.byKey.map((k) => k.key)).toEqual(['blocked', 'needs_human_decision', 'waiting_on_external']);
    expect(r.a.byKey.reduce((s, k) => s + k.n, 0)).toBe(goldRows.length);
    for (const g of [...r.a.byKey, ...r.a.bySet, r.a.overall]) {
      for (const v of [g.accuracy, g.precision, g.recall, g.f1, g.brier, g.ece]) {
        if (v === null) continue;
        expect(v).toBeGreaterThanOrEqual(0);
        expect(v).toBeLessThanOrEqual(1);
      }
    }
    // Counted by hand from the stored answers (attention's threshold 0.7): correct decisions and the Brier score per key.
    const conn = new Database(db, { readonly: true });
    const stored = new Map(
      (
        conn
          .prepare(
            `SELECT i.ref AS ref, d.question_key AS key, d.answer AS answer FROM item_decisions d JOIN items i ON i.id = d.item_id WHERE d.question_set = 'attention'`,
          )
          .all() as Array<{ ref: string; key: string; answer: string }>
      ).map((x) => [`${x.ref}/${x.key}`, (JSON.parse(x.answer) as { noul: number }).noul]),
    );
    conn.close();
    for (const k of r.a.byKey) {
      const rows = goldRows.filter((g) => g.key === k.key);
      const ps = rows.map((g) => ({ p: stored.get(`${g.ref}/${g.key}`)!, y: g.label }));
      expect(k.correct).toBe(ps.filter(({ p, y }) => p >= 0.7 === y).length);
      expect(k.brier).toBeCloseTo(ps.reduce((s, { p, y }) => s + (p - (y ? 1 : 0)) ** 2, 0) / ps.length, 12);
    }
    expect(r.svg).toBe(svg);
    expect(readFileSync(svg, 'utf8').startsWith('<svg')).toBe(true);
  });

  it('--compare fake-model-2 prints A and B side by side, the differing decisions and the re-ask price', async () => {
    const svg = join(dir.dir, 'compare.svg');
    const { stdout } = await runCli(
      ['eval', '--stored', '--compare', 'fake-model-2', '--gold', GOLD, '--svg', svg, '--database-url', db],
      env,
    );
    expect(stdout).toMatch(/^A: stored answers current under fake:fake-model-1; no calls$/m);
    expect(stdout).toMatch(
      /^B: asked fake:fake-model-2 now \(estimated before asking: 80 calls, .*\); fake provider: no model is called, it costs nothing$/m,
    );
    expect(stdout).toMatch(/^ {2}attention\/blocked +A +79 +79 /m);
    expect(stdout).toMatch(/^ +B +79 +79 /m);
    expect(stdout).toMatch(/^decisions that differ: \d+ of the rows both answered$/m);
    expect(stdout).toMatch(/^ {2}bd-\S+ +attention\/\S+ +(true|false) +(true|false) \(p=/m);
    expect(stdout).toMatch(/^price of re-asking every live item with fake:fake-model-2 /m);
    expect(stdout).toMatch(/^ {2}attention: 80 items, 80 calls, ~[\d,]+ input \/ ~[\d,]+ output tokens, \$0\.0000$/m);
    expect(stdout).toMatch(/spend is recorded in decision_spend as outcome "eval": fake:fake-model-2 80 calls/);
    expect(stdout).toContain(`reliability diagram: wrote ${svg}`);
    expect(readFileSync(svg, 'utf8').startsWith('<svg')).toBe(true);
  });

  it('a bad gold line is an input error naming the line; unknown refs are listed, not fatal', async () => {
    const bad = join(dir.dir, 'bad.jsonl');
    writeFileSync(bad, '{"ref":"bd-077e","set":"attention","key":"blocked","label":false}\n{"ref": oops}\n');
    const err = (await runCli(['eval', '--stored', '--gold', bad, '--database-url', db], env).catch(
      (e: unknown) => e,
    )) as { code: number; stderr: string };
    expect(err.code).toBe(1);
    expect(err.stderr).toMatch(/^verdict: .*bad\.jsonl:2: not JSON/m);
    const unknown = join(dir.dir, 'unknown.jsonl');
    writeFileSync(
      unknown,
      '{"ref":"bd-077e","set":"attention","key":"blocked","label":false}\n{"ref":"bd-none","set":"attention","key":"blocked","label":true}\n',
    );
    const { stdout } = await runCli(
      ['eval', '--stored', '--gold', unknown, '--svg', join(dir.dir, 'u.svg'), '--database-url', db],
      env,
    );
    expect(stdout).toMatch(/^eval of 2 gold rows from .*: 1 resolved, 1 not \(1 unknown_ref\)$/m);
    expect(stdout).toMatch(/line +2: bd-none attention\/blocked: unknown_ref/);
  });
});
