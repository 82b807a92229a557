import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireBuiltCli } from '../harness/built-cli.js';
import { runCli } from '../harness/cli-in-process.js';
import { ROOT, spawnCli } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * Errors that sent the user the wrong way: a driver built for another Node.js reported as an
 * unopenable database and a closed stdout crashing with a stack trace, through the built CLI (or
 * the built library) as a real process, since the preload and the pipe are what is tested; a
 * misspelled global option without a suggestion, a parse error ending in a dangling colon, a
 * missing database that did not say which ones are there, through the same program in process
 * (test/harness/cli-in-process.ts), since only the command's output is.
 */

const t = tempDir();
const db = join(t.dir, 'verdict.db');
const MISMATCH = join(ROOT, 'test/harness/dlopen-mismatch-preload.mjs');

beforeAll(async () => {
  requireBuiltCli();
  const jsonl = join(t.dir, 'tiny.jsonl');
  writeFileSync(
    jsonl,
    `${JSON.stringify({ id: 'bd-1', title: 'One', status: 'open', priority: 2, issue_type: 'task' })}\n`,
  );
  await runCli(['import', 'beads', jsonl, '--database-url', db, '--provider', 'fake']);
}, 60_000);
afterAll(() => t.cleanup());

/** The built CLI as a process, with `preload` modules imported first. */
async function cli(args: string[], preload: string[] = []): Promise<{ code: number | null; out: string; err: string }> {
  const p = spawnCli(args, {}, preload);
  const { code } = await p.exited;
  return { code, out: p.stdout(), err: p.stderr() };
}

/** The same program in this process: its exit code and output. */
async function inProcess(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  try {
    const r = await runCli(args);
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const f = e as { code?: number; stdout?: string; stderr?: string };
    if (typeof f.code !== 'number') throw e;
    return { code: f.code, out: f.stdout ?? '', err: f.stderr ?? '' };
  }
}

describe('better-sqlite3 built for another Node.js (ERR_DLOPEN_FAILED)', () => {
  it('the CLI names the addon and the fix, not the database', async () => {
    const r = await cli(['status', '--database-url', db, '--provider', 'fake'], [MISMATCH]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /^verdict: better-sqlite3's native addon does not load, so no SQLite database can be opened: it was built for another Node\.js version \(NODE_MODULE_VERSION 115, this Node\.js v[\d.]+ needs \d+\) \(ERR_DLOPEN_FAILED\); run `npm rebuild better-sqlite3`/,
    );
    expect(r.err).not.toContain('cannot open the database');
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });

  it('doctor says the same, and does not send the user to a backup', async () => {
    const r = await cli(['doctor', '--database-url', db, '--provider', 'fake', '--json'], [MISMATCH]);
    expect(r.code).toBe(1);
    const database = (
      JSON.parse(r.out) as { checks: Array<{ name: string; ok: boolean; detail: string; fix?: string }> }
    ).checks.find((c) => c.name === 'database')!;
    expect(database.ok).toBe(false);
    expect(database.detail).toMatch(/native addon does not load.*NODE_MODULE_VERSION 115/);
    expect(database.fix).toMatch(/^run `npm rebuild better-sqlite3`/);
    expect(`${database.detail} ${database.fix}`).not.toMatch(/backup|corrupt/);
  });

  it('the library throws DatabaseUnavailable with the cause and the fix', async () => {
    const script = `
      const { createVerdict } = await import(${JSON.stringify(join(ROOT, 'dist/index.js'))});
      try { await createVerdict({ database: ${JSON.stringify(db)}, provider: 'none' }); console.log('opened'); }
      catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); }`;
    const child = spawn(process.execPath, ['--import', MISMATCH, '--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await new Promise((r) => child.on('exit', r));
    const e = JSON.parse(out.trim()) as { name: string; code: string; message: string };
    expect(e).toMatchObject({ name: 'DatabaseUnavailable', code: 'database_unavailable' });
    expect(e.message).toMatch(
      /native addon does not load.*NODE_MODULE_VERSION 115.*; run `npm rebuild better-sqlite3`/,
    );
  });
});

describe('a closed stdout', () => {
  it('`verdict review --help | head`: the command ends quietly, no EPIPE stack', async () => {
    const p = spawnCli(['review', '--help']);
    // The reader goes away before the command writes: every write meets a closed pipe (EPIPE).
    p.child.stdout!.destroy();
    const { code, signal } = await p.exited;
    expect(p.stderr()).toBe('');
    expect({ code, signal }).toEqual({ code: 0, signal: null });
  });
});

describe('parse errors in the `verdict: <what>; <how to fix>` form', () => {
  it.each([
    [['status', '--databse-url', 'x.db'], "verdict: unknown option '--databse-url'; did you mean --database-url?"],
    [['--databse-url', 'x.db', 'status'], "verdict: unknown option '--databse-url'; did you mean --database-url?"],
    [['worker', '--concurency', '3'], "verdict: unknown option '--concurency'; did you mean --concurrency?"],
    [['statsu'], "verdict: unknown command 'statsu'; did you mean status?"],
    [
      ['status', '--frobnicate'],
      "verdict: unknown option '--frobnicate'; run with --help for the command's options, and `verdict help options` for the global ones",
    ],
  ])('%j', async (args, line) => {
    const r = await inProcess(args);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`${line}\n`);
  });
});

describe('import conventions on a file that is not YAML', () => {
  it('says where the parser stopped and what the file should be, no dangling colon', async () => {
    const bad = join(t.dir, 'notes.txt');
    writeFileSync(bad, 'hello: [\n');
    const r = await inProcess(['import', 'conventions', bad, '--database-url', db, '--provider', 'fake']);
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `verdict: conventions file ${bad}: not valid YAML: Flow sequence in block collection must be sufficiently indented and end with a ] at line 2, column 1; a conventions file is JSON or YAML with a \`conventions:\` list, as examples/beads-conventions.yaml shows\n`,
    );
  });
});

describe('a read of a database that is not there', () => {
  it('says which databases the folder holds', async () => {
    const dir = join(t.dir, 'data');
    mkdirSync(dir);
    writeFileSync(join(dir, 'demo.db'), '');
    writeFileSync(join(dir, 'notes.txt'), '');
    const r = await inProcess(['show', 'bd-1', '--database-url', join(dir, 'verdict.db'), '--provider', 'fake']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(
      new RegExp(`^verdict: no database at ${dir}/verdict\\.db \\(${dir} holds ${dir}/demo\\.db\\); pass the path`),
    );
  });
});

describe('estimate --model under the fake provider', () => {
  it("prices the named model, never at the fake's $0; a model with no price is refused with the reason", async () => {
    const priced = await inProcess([
      'estimate',
      '--database-url',
      db,
      '--provider',
      'fake',
      '--model',
      'claude-haiku-4-5',
    ]);
    expect(priced.code).toBe(0);
    expect(priced.out).toMatch(/^estimate for anthropic:claude-haiku-4-5 \(prices from Verdict's price table/);
    const unknown = await inProcess(['estimate', '--database-url', db, '--provider', 'fake', '--model', 'nonesuch-1']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(
      /^verdict: --model nonesuch-1 with --provider fake: the fake provider calls no model and would price it at \$0.*; name the model's provider/,
    );
  });
});
