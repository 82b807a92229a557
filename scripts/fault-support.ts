import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { productionSets } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { PRIORITY_BACKFILL } from '../src/store/queue-store.js';
import { BENCH_SETS } from './bench-drain.js';

/**
 * Shared by the fault measurement scripts (scripts/fault-*.ts) and the process tests of DESIGN
 * §10.1/§10.2 (test/worker/event-loop-process.test.ts and friends): a real worker process from a
 * BUILT tree (`node <root>/dist/cli/main.js`, so "before" figures can run an older build), the
 * event-loop probe preloaded into it, and small SQLite helpers.
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const LOOP_PROBE = join(ROOT, 'test/harness/loop-probe.mjs');

export interface DistWorker {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Epoch ms (the log line's own time) at which the worker logged "worker started". */
  started: Promise<number>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/**
 * Spawns `node [--import loop-probe] <root>/dist/cli/main.js <args>`. With `probeFile`, the
 * event-loop probe writes its gaps there at exit.
 * @throws when `<root>/dist/cli/main.js` is missing (run `npm run build` first).
 */
export function spawnDist(
  root: string,
  args: string[],
  o: { env?: Record<string, string>; probeFile?: string } = {},
): DistWorker {
  const main = join(root, 'dist/cli/main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build in ${root}`);
  const child = spawn(process.execPath, [...(o.probeFile ? ['--import', LOOP_PROBE] : []), main, ...args], {
    cwd: root,
    env: {
      ...process.env,
      NO_COLOR: '1',
      CI: '1',
      VERDICT_LOG_LEVEL: 'info',
      ANTHROPIC_API_KEY: '',
      ...(o.probeFile ? { LOOP_PROBE_FILE: o.probeFile } : {}),
      ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let onStarted: (t: number) => void = () => undefined;
  const started = new Promise<number>((resolve) => (onStarted = resolve));
  const scan = (text: string) => {
    for (const line of text.split('\n')) {
      if (!line.includes('"msg":"worker started"')) continue;
      const t = /"time":"([^"]+)"/.exec(line)?.[1];
      onStarted(t ? Date.parse(t) : Date.now());
    }
  };
  child.stdout!.on('data', (d) => {
    out += d;
    scan(String(d));
  });
  child.stderr!.on('data', (d) => {
    err += d;
    scan(String(d));
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  return { child, stdout: () => out, stderr: () => err, started, exited };
}

/**
 * The largest time the probe's 20 ms timer could not run after `sinceEpochMs`, ms (a gap that began
 * earlier counts from `sinceEpochMs`), the largest CPU time the process spent inside one such gap
 * (ms; prorated for a gap that began earlier), and the number of ticks. Read after the process exited.
 */
export function probeMaxGap(
  probeFile: string,
  sinceEpochMs: number,
): { maxGapMs: number; maxCpuGapMs: number; ticks: number } {
  const p = JSON.parse(readFileSync(probeFile, 'utf8')) as { ticks: number; gaps: Array<[number, number, number]> };
  let maxGapMs = 0;
  let maxCpuGapMs = 0;
  for (const [end, gap, cpu] of p.gaps) {
    if (end <= sinceEpochMs) continue;
    const counted = end - Math.max(end - gap, sinceEpochMs);
    maxGapMs = Math.max(maxGapMs, counted);
    maxCpuGapMs = Math.max(maxCpuGapMs, Math.round((cpu * counted) / gap));
  }
  return { maxGapMs, maxCpuGapMs, ticks: p.ticks };
}

/**
 * Owes every (item, set) pair of the bench sets again, at backfill priority with no quiet period
 * and no re-ask debounce (as the drift sweep does):
 * after a first drain their answers are stored, so each job completes without a provider call
 * (what a collection settings change or a drift sweep re-owes). @returns jobs owed.
 */
export async function reoweAll(file: string): Promise<number> {
  const ids = withDb(file, (d) =>
    (d.prepare('SELECT id FROM items ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id),
  );
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  try {
    let owed = 0;
    for (let i = 0; i < ids.length; i += 500) {
      owed += await store.oweJobs(
        ids.slice(i, i + 500).flatMap((itemId) => BENCH_SETS.map((questionSet) => ({ itemId, questionSet }))),
        { priority: PRIORITY_BACKFILL, quietPeriod: false, reaskDebounce: false },
      );
    }
    return owed;
  } finally {
    await store.close();
  }
}

/** Runs `fn` on a plain connection to `file` (its own, as another process would have). */
export function withDb<T>(file: string, fn: (d: Database.Database) => T): T {
  const d = new Database(file);
  d.pragma('busy_timeout = 5000');
  try {
    return fn(d);
  } finally {
    d.close();
  }
}

/** decision_jobs rows left, and of them the ones claimed now. */
export function jobCounts(file: string): { jobs: number; claimed: number; answers: number } {
  return withDb(file, (d) => ({
    jobs: (d.prepare('SELECT count(*) AS n FROM decision_jobs').get() as { n: number }).n,
    claimed: (d.prepare('SELECT count(*) AS n FROM decision_jobs WHERE claimed_by IS NOT NULL').get() as { n: number })
      .n,
    answers: (d.prepare('SELECT count(*) AS n FROM item_decisions').get() as { n: number }).n,
  }));
}

/** The size of `<file>-wal` in bytes, 0 when absent. */
export function walBytes(file: string): number {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

/** The port a worker logged in "metrics listening" (started with `--metrics-port 0`), once it has. */
export function metricsPortOf(w: DistWorker): number | null {
  const m = /"port":(\d+)[^\n]*"msg":"metrics listening/.exec(w.stderr() + w.stdout());
  return m ? Number(m[1]) : null;
}

/** One /healthz probe: the HTTP status (null when no answer within `timeoutMs`), the body's status and reasons, and its latency in ms. */
export interface HealthProbe {
  at: number;
  ms: number;
  http: number | null;
  status: string | null;
  reasons: string[];
}

export async function probeHealth(port: number, timeoutMs: number): Promise<HealthProbe> {
  const at = Date.now();
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.json()) as { status?: string; reasons?: string[] };
    return { at, ms: Date.now() - at, http: res.status, status: body.status ?? null, reasons: body.reasons ?? [] };
  } catch {
    return { at, ms: Date.now() - at, http: null, status: null, reasons: [] };
  }
}

/**
 * Holds `BEGIN IMMEDIATE` on `file` from this process (another process than the worker's) until
 * `release()` is called; nothing is written.
 */
export function holdWriteLock(file: string): { release: () => void } {
  const d = new Database(file);
  d.pragma('busy_timeout = 10000');
  d.exec('BEGIN IMMEDIATE');
  return {
    release: () => {
      d.exec('COMMIT');
      d.close();
    },
  };
}

/**
 * Holds a read transaction on `file` from this process (an outside reader, such as a `sqlite3`
 * shell or a backup): its snapshot keeps every checkpoint from resetting the write-ahead log.
 */
export function holdReadSnapshot(file: string): { release: () => void } {
  const d = new Database(file, { readonly: true });
  d.exec('BEGIN');
  d.prepare('SELECT count(*) FROM items').get(); // the snapshot starts at the first read
  return {
    release: () => {
      d.exec('COMMIT');
      d.close();
    },
  };
}

/** Runs a built CLI command to completion: its exit code and output. */
export async function runDist(
  root: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const w = spawnDist(root, args, { env });
  const ex = await w.exited;
  return { code: ex.code, stdout: w.stdout(), stderr: w.stderr() };
}

/** Resolves with the worker's start time; throws when the process exits before it started (a broken build). */
export async function startedOrExited(w: DistWorker): Promise<number> {
  return Promise.race([
    w.started,
    w.exited.then((e) => {
      throw new Error(`the worker exited (code ${e.code}) before it started: ${w.stderr().slice(-600)}`);
    }),
  ]);
}
