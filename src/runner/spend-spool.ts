import { randomUUID } from 'node:crypto';
import {
  closeSync,
  fdatasyncSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import type { SpendRecord } from '../store/store.js';

/**
 * Bytes of zeros a spool file is given when it is opened, so that appending a kept record
 * overwrites blocks the file already has instead of asking a full disk for new ones. A record line
 * is about 250 bytes, so this holds some 250 records; past it a record is appended and needs new
 * blocks (and may fail on a full disk: it is then kept in memory only). 64 KiB is one allocation
 * a full disk of any real size has never been short of by the time a worker starts.
 */
const SPOOL_PREALLOCATED_BYTES = 64 * 1024;

/** A spool file's name: `spend-<host>-<pid>-<random>.spool`; the host and pid tell whether its owner still runs. */
const FILE_RE = /^spend-(.+)-(\d+)-([0-9a-f]{8})\.spool$/;

/** One kept record in a spool: its id (the `recordSpooledSpend` marker), when it was kept (epoch ms), and the spend. */
export interface SpooledSpend {
  id: string;
  at: number;
  spend: SpendRecord;
}

/** What a spool directory holds, for `verdict doctor` and `status`. */
export interface SpoolContents {
  /** Files holding at least one record, with their record count and whether their owner runs. */
  files: Array<{ path: string; records: number; ownerAlive: boolean }>;
  /** Records in every file together. */
  records: number;
  /** Lines that could not be read (a record torn by a crash mid-write; its spend was never confirmed kept). */
  torn: number;
}

/** Spool files of this process that are open now: a process may run more than one worker. */
const openHere = new Set<string>();

/**
 * Where a database's spend spool lives when none is configured (DESIGN §10.5): beside a SQLite
 * file, `<file>.spend-spool/`; for PostgreSQL `./data/spend-spool` under the working directory
 * (the spool must be a local disk, not the database); none for an in-memory SQLite database.
 */
export function defaultSpoolDir(database: string): string | null {
  if (/^postgres(ql)?:\/\//.test(database)) return join('data', 'spend-spool');
  const path = database.startsWith('file:') ? database.slice('file:'.length).replace(/\?.*$/, '') : database;
  if (path === ':memory:' || path === '') return null;
  return `${path}.spend-spool`;
}

/**
 * A worker's durable spool of spend records that could not be written to the database (DESIGN
 * §10.5): one file per worker in the spool directory, preallocated with zeros at open, each kept
 * record written as one JSON line over the zeros and fdatasynced before `append` returns. The file
 * ends at its first zero byte. `clear` zeroes what was written (the blocks stay the file's) once
 * every record in it is in the database; `close` deletes an empty file and leaves one that still
 * holds records for the next worker to start (`readOrphans`).
 */
export class SpendSpool {
  private end = 0;
  private size: number;

  private constructor(
    /** The spool file's path. */
    readonly path: string,
    private fd: number | null,
  ) {
    this.size = SPOOL_PREALLOCATED_BYTES;
  }

  /**
   * Creates the directory and this worker's file, and preallocates it.
   * @throws the file system's error (ENOSPC, EACCES, EROFS) when the file cannot be made; the
   *   worker then keeps records in memory only.
   */
  static open(dir: string): SpendSpool {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `spend-${safeHost()}-${process.pid}-${randomUUID().slice(0, 8)}.spool`);
    const fd = openSync(path, 'wx+');
    try {
      writeSync(fd, Buffer.alloc(SPOOL_PREALLOCATED_BYTES), 0, SPOOL_PREALLOCATED_BYTES, 0);
      fsyncSync(fd);
      syncDir(dir);
    } catch (err) {
      closeSync(fd);
      unlinkSync(path);
      throw err;
    }
    openHere.add(path);
    return new SpendSpool(path, fd);
  }

  /** Records written and not cleared. */
  get bytes(): number {
    return this.end;
  }

  /**
   * Writes `entry` as one line after the last and fdatasyncs it.
   * @throws the file system's error (the record is then not in the spool; nothing after `end` counts).
   */
  append(entry: SpooledSpend): void {
    if (this.fd === null) throw new Error('spend spool closed');
    const line = Buffer.from(`${JSON.stringify(entry)}\n`);
    writeSync(this.fd, line, 0, line.length, this.end);
    fdatasyncSync(this.fd);
    this.end += line.length;
    if (this.end > this.size) this.size = this.end;
  }

  /**
   * Zeroes every written line and fdatasyncs: the spool is empty and keeps its blocks.
   * @throws the file system's error (the lines stay; their markers keep a replay from adding them twice).
   */
  clear(): void {
    if (this.fd === null || this.end === 0) return;
    writeSync(this.fd, Buffer.alloc(this.end), 0, this.end, 0);
    fdatasyncSync(this.fd);
    this.end = 0;
  }

  /** Closes the file; deletes it when it holds no record. Never throws. */
  close(): void {
    if (this.fd === null) return;
    try {
      closeSync(this.fd);
    } catch {
      // closing a file we only wrote and synced cannot lose anything
    }
    this.fd = null;
    openHere.delete(this.path);
    if (this.end === 0) {
      try {
        unlinkSync(this.path);
      } catch {
        // left behind empty: the next start reads it as holding nothing and deletes it
      }
    }
  }
}

/**
 * The records of one spool file, in the order they were kept. A line that does not parse is a
 * record torn by a crash mid-write (counted, skipped).
 * @throws the file system's error when the file cannot be read.
 */
export function readSpool(path: string): { entries: SpooledSpend[]; torn: number } {
  const buf = readFileSync(path);
  const zero = buf.indexOf(0);
  const text = buf.subarray(0, zero < 0 ? buf.length : zero).toString('utf8');
  const entries: SpooledSpend[] = [];
  let torn = 0;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    try {
      const e = JSON.parse(line) as SpooledSpend;
      if (typeof e.id === 'string' && typeof e.at === 'number' && e.spend && typeof e.spend === 'object')
        entries.push(e);
      else torn++;
    } catch {
      torn++;
    }
  }
  return { entries, torn };
}

/**
 * Whether a spool file's owner may still be running: a file of this process that is open, or of
 * another live process on this host (`kill(pid, 0)`), or of another host (which cannot be asked,
 * so it is never taken). A dead owner's pid taken since by another program reads as alive: its
 * file waits until that program ends, and `doctor` names it meanwhile.
 */
function ownerAlive(path: string): boolean {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const taker = /\.taken-(\d+)$/.exec(name);
  if (taker) return Number(taker[1]) === process.pid || pidAlive(Number(taker[1]));
  const m = FILE_RE.exec(name);
  if (!m) return true;
  if (m[1] !== safeHost()) return true;
  const pid = Number(m[2]);
  if (pid === process.pid) return openHere.has(path);
  return pidAlive(pid);
}

/** Spool files in `dir` (none when it does not exist). */
function spoolFiles(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((f) => FILE_RE.test(f))
      .sort()
      .map((f) => join(dir, f));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/**
 * Takes the spool files in `dir` whose owner is gone (a worker that crashed or was killed with
 * records kept): each is renamed to `<name>.taken-<pid>` first, so two workers starting together
 * never both take one, and its records are returned oldest first with the taken paths. The
 * caller deletes a taken file (`dropTaken`) once its records are written or in its own spool.
 * @throws the file system's error when the directory cannot be read.
 */
export function takeOrphans(dir: string): { entries: SpooledSpend[]; taken: string[]; torn: number } {
  const entries: SpooledSpend[] = [];
  const taken: string[] = [];
  let torn = 0;
  for (const path of spoolFiles(dir)) {
    if (ownerAlive(path)) continue;
    const mine = `${path}.taken-${process.pid}`;
    try {
      renameSync(path, mine);
    } catch {
      continue; // another worker took it first
    }
    taken.push(mine);
    const r = readSpool(mine);
    entries.push(...r.entries);
    torn += r.torn;
  }
  // Taken files of workers that died while replaying them (their pid is gone) are taken again.
  for (const f of safeReaddir(dir)) {
    const m = /\.taken-(\d+)$/.exec(f);
    if (!m || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue;
    const mine = join(dir, `${f.replace(/\.taken-\d+$/, '')}.taken-${process.pid}`);
    try {
      renameSync(join(dir, f), mine);
    } catch {
      continue;
    }
    taken.push(mine);
    const r = readSpool(mine);
    entries.push(...r.entries);
    torn += r.torn;
  }
  entries.sort((a, b) => a.at - b.at);
  return { entries, taken, torn };
}

/** Deletes taken spool files whose records are all written or re-kept. Never throws. */
export function dropTaken(taken: readonly string[]): void {
  for (const path of taken) {
    try {
      unlinkSync(path);
    } catch {
      // gone already
    }
  }
  if (taken.length) syncDirQuietly(dirname(taken[0]));
}

/**
 * What the spool directory holds now, read without taking anything: for `verdict doctor` and
 * `status`. A missing directory holds nothing.
 * @throws the file system's error when the directory or a file cannot be read.
 */
export function readSpoolDir(dir: string): SpoolContents {
  const files: SpoolContents['files'] = [];
  let records = 0;
  let torn = 0;
  const paths = [
    ...spoolFiles(dir),
    ...safeReaddir(dir)
      .filter((f) => /\.taken-\d+$/.test(f))
      .map((f) => join(dir, f)),
  ];
  for (const path of paths) {
    let r: { entries: SpooledSpend[]; torn: number };
    try {
      r = readSpool(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // taken or deleted meanwhile
      throw err;
    }
    torn += r.torn;
    if (r.entries.length === 0) continue;
    records += r.entries.length;
    files.push({ path, records: r.entries.length, ownerAlive: ownerAlive(path) });
  }
  return { files, records, torn };
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** This host's name as it goes into a file name (no `/` or `-` ambiguity with the pid). */
function safeHost(): string {
  return hostname().replace(/[^A-Za-z0-9_.]/g, '_') || 'host';
}

/** fsyncs a directory, so a created or renamed file's entry survives a power cut. */
function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function syncDirQuietly(dir: string): void {
  try {
    syncDir(dir);
  } catch {
    // a lost directory entry of a deleted file only leaves an already-written file to replay (its markers make that a no-op)
  }
}
