import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { requireBuiltCli } from '../harness/built-cli.js';
import { ROOT } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * A power cut may not take back what was acknowledged (DESIGN §3.9), checked by simulation.
 *
 * The child (harness/power-cut-child.mjs) runs the built library's HTTP write doors and worker
 * drains under strace, which records, in order, every write, truncate and fsync of the database
 * files and every acknowledgement the child writes to its acks file. A power cut at any point of
 * that record is rebuilt as the files a disk would hold: for each file, only the operations before
 * its last fsync preceding the cut; every write not yet fsynced is dropped (the worst a disk may
 * do, as SQLite's own crash-test VFS does). The rebuilt files are reopened by SQLite (which
 * recovers the WAL) and every item acknowledged before the cut (201) and every answer read back
 * before it must be there.
 *
 * Cuts: one just after each acknowledgement (the moment a lost commit would show) and 40 more at
 * seeded random points. The control run opens the same file through a host handle with
 * `synchronous = NORMAL` (the old setting): the same simulation finds acknowledged writes lost
 * there, so the check can fail.
 */

const { dir, cleanup } = tempDir('verdict-power-cut-');
afterAll(cleanup);

interface Op {
  file: string;
  kind: 'write' | 'sync' | 'truncate' | 'ack';
  offset?: number;
  data?: Buffer;
  length?: number;
  text?: string;
}

/** `"\x2f\x74…"` (strace -xx) as bytes. */
function unhex(quoted: string): Buffer {
  const hex = quoted.replace(/\\x/g, '');
  return Buffer.from(hex, 'hex');
}

/** The ordered file operations of a trace, for the files named in `names` (basename → role). */
function parseTrace(trace: string, names: Record<string, string>): Op[] {
  const fds = new Map<number, string>();
  const ops: Op[] = [];
  for (const line of trace.split('\n')) {
    let m = /^openat\(AT_FDCWD, "([^"]*)", [^)]*\)\s+= (\d+)$/.exec(line);
    if (m) {
      const base = unhex(m[1]).toString('utf8').split('/').pop()!;
      if (names[base]) fds.set(Number(m[2]), names[base]);
      continue;
    }
    m = /^close\((\d+)\)/.exec(line);
    if (m) {
      fds.delete(Number(m[1]));
      continue;
    }
    m = /^(pwrite64|write)\((\d+), "([^"]*)"(?:\.\.\.)?, (\d+)(?:, (\d+))?\)\s+= (\d+)$/.exec(line);
    if (m && fds.has(Number(m[2]))) {
      const file = fds.get(Number(m[2]))!;
      const data = unhex(m[3]);
      expect(data.length).toBe(Number(m[6])); // strace printed the whole buffer
      if (file === 'acks') ops.push({ file, kind: 'ack', text: data.toString('utf8').trim() });
      else ops.push({ file, kind: 'write', offset: Number(m[5]), data });
      continue;
    }
    m = /^f(?:data)?sync\((\d+)\)/.exec(line);
    if (m && fds.has(Number(m[1]))) {
      ops.push({ file: fds.get(Number(m[1]))!, kind: 'sync' });
      continue;
    }
    m = /^ftruncate\((\d+), (\d+)\)/.exec(line);
    if (m && fds.has(Number(m[1]))) ops.push({ file: fds.get(Number(m[1]))!, kind: 'truncate', length: Number(m[2]) });
  }
  return ops;
}

/** The files a disk holds after a cut before `ops[cut]`: per file, what was done up to its last fsync. */
function filesAtCut(ops: Op[], cut: number, files: string[]): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const file of files) {
    let lastSync = -1;
    for (let i = 0; i < cut; i++) if (ops[i].file === file && ops[i].kind === 'sync') lastSync = i;
    let size = 0;
    for (let i = 0; i < lastSync; i++)
      if (ops[i].file === file && ops[i].kind === 'write') size = Math.max(size, ops[i].offset! + ops[i].data!.length);
    const buf = Buffer.alloc(size);
    let length = 0;
    for (let i = 0; i < lastSync; i++) {
      const op = ops[i];
      if (op.file !== file) continue;
      if (op.kind === 'truncate' && op.length! < length) {
        buf.fill(0, op.length!, length);
        length = op.length!;
      }
      if (op.kind === 'write') {
        op.data!.copy(buf, op.offset!);
        length = Math.max(length, op.offset! + op.data!.length);
      }
    }
    out.set(file, buf.subarray(0, length));
  }
  return out;
}

/** A seeded generator (mulberry32): the cuts are the same on every run. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Runs the child under strace, then every cut; returns the figures. */
function simulate(
  mode: 'own' | 'host-normal',
  writes: number,
): { cuts: number; checked: number; lost: number; acks: number } {
  const run = join(dir, mode);
  mkdirSync(run, { recursive: true });
  const db = join(run, 'v.db');
  const tracePath = join(run, 'trace');
  execFileSync(
    'strace',
    [
      '-qq',
      '-o',
      tracePath,
      '-e',
      'trace=openat,pwrite64,write,fsync,fdatasync,ftruncate,close',
      '-s',
      '1000000',
      '-xx',
      process.execPath,
      join(ROOT, 'test/harness/power-cut-child.mjs'),
      db,
      join(run, 'acks'),
      String(writes),
      mode,
    ],
    { cwd: ROOT, env: { ...process.env, VERDICT_LOG_LEVEL: 'silent' }, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const ops = parseTrace(readFileSync(tracePath, 'latin1'), { 'v.db': 'db', 'v.db-wal': 'wal', acks: 'acks' });
  const ackAt = ops.flatMap((op, i) => (op.kind === 'ack' ? [i] : []));
  const ready = ackAt.find((i) => ops[i].text === 'ready')!;
  expect(ops[ackAt.at(-1)!].text).toBe('done');
  const rnd = seeded(20261202);
  const cuts = [
    ...ackAt.filter((i) => i > ready).map((i) => i + 1),
    ...Array.from({ length: 40 }, () => ready + 1 + Math.floor(rnd() * (ops.length - ready))),
  ];
  let checked = 0;
  let lost = 0;
  for (const [n, cut] of cuts.entries()) {
    const at = join(run, `cut-${n}`);
    mkdirSync(at);
    for (const [file, bytes] of filesAtCut(ops, cut, ['db', 'wal']))
      writeFileSync(join(at, file === 'db' ? 'v.db' : 'v.db-wal'), bytes);
    const sqlite = new Database(join(at, 'v.db'));
    // With the schema itself never synced, nothing acknowledged is there.
    const schemaThere =
      sqlite.prepare("SELECT count(*) FROM sqlite_master WHERE name IN ('items', 'item_decisions')").pluck().get() ===
      2;
    if (!schemaThere) {
      const acked = ackAt.filter((i) => i < cut && /^(item|answer) /.test(ops[i].text!)).length;
      checked += acked;
      lost += acked;
      sqlite.close();
      rmSync(at, { recursive: true, force: true });
      continue;
    }
    const hasItem = sqlite.prepare('SELECT count(*) AS n FROM items WHERE ref = ?').pluck();
    const hasAnswer = sqlite.prepare('SELECT count(*) AS n FROM item_decisions WHERE id = ?').pluck();
    for (const i of ackAt) {
      if (i >= cut) break;
      const [what, id] = ops[i].text!.split(' ');
      if (what !== 'item' && what !== 'answer') continue;
      checked++;
      if ((what === 'item' ? hasItem.get(id) : hasAnswer.get(Number(id))) !== 1) lost++;
    }
    sqlite.close();
    rmSync(at, { recursive: true, force: true });
  }
  return { cuts: cuts.length, checked, lost, acks: ackAt.length };
}

describe('a power cut keeps every acknowledged write and stored answer', () => {
  it('with Verdict opening the file (synchronous = FULL): lost 0 over every cut; the NORMAL control loses writes', () => {
    requireBuiltCli();
    const full = simulate('own', 24);
    console.log(
      `power cut (synchronous = FULL): ${full.cuts} cuts, ${full.checked} acknowledged writes and answers checked, lost: ${full.lost}`,
    );
    expect(full.checked).toBeGreaterThan(500);
    expect(full.lost).toBe(0);
    const normal = simulate('host-normal', 24);
    console.log(
      `power cut (control, synchronous = NORMAL): ${normal.cuts} cuts, ${normal.checked} checked, lost: ${normal.lost}`,
    );
    expect(normal.lost).toBeGreaterThan(0);
  }, 600_000);
});
