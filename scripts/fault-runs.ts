import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Reliability runs (DESIGN §3.6, §10.3) with real parts: a real SQLite file, real tracker
 * items (the first open tasks of the full beads export at `REAL_DATA`, outside the repository,
 * imported by the build under test), and real `node dist/cli/main.js worker` processes with the
 * fake provider. `root` names the checkout whose built `dist/` runs, so the same run measures old
 * and new code. Used by scripts/fault-lease-limiter.ts, scripts/fault-token-cap.ts and the
 * process tests in test/worker/.
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The real tracker export (README there: a public project's issues, e-mail addresses replaced). */
export const REAL_DATA = '/work/shared/data/beads-issues.jsonl';
/** The committed sample of the same tracker, used when the shared data is not on this machine. */
export const SAMPLE_DATA = join(ROOT, 'sample/beads-issues.jsonl');

export interface FaultDb {
  dir: string;
  file: string;
  /** Open tasks imported. */
  items: number;
  cleanup(): void;
}

/**
 * Imports `items` tasks of the real tracker export (open ones first, then closed ones re-opened) into a fresh SQLite file with
 * the `import` command of the build at `root` (so the schema is that build's own).
 * @throws when the import fails or the data has fewer open tasks.
 */
export async function seedRealTasks(root: string, items: number): Promise<FaultDb> {
  const dir = mkdtempSync(join(tmpdir(), 'verdict-fault-'));
  const file = join(dir, 'verdict.db');
  let source: string;
  try {
    source = readFileSync(REAL_DATA, 'utf8');
  } catch {
    source = readFileSync(SAMPLE_DATA, 'utf8');
  }
  // The export holds 47 open tasks (not ephemeral, which the importer skips): after them, closed
  // tasks are taken with their status set back to open, so the question sets apply to them. Their
  // text is untouched.
  type Row = { status?: string; issue_type?: string; ephemeral?: boolean | null; closed_at?: unknown };
  const rows = source
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Row);
  const tasks = rows.filter((r) => r.issue_type === 'task' && r.ephemeral !== true);
  const picked = [
    ...tasks.filter((r) => r.status === 'open'),
    ...tasks.filter((r) => r.status === 'closed').map((r) => ({ ...r, status: 'open', closed_at: null })),
  ]
    .slice(0, items)
    .map((r) => JSON.stringify(r));
  if (picked.length < items) throw new Error(`only ${picked.length} tasks in the data, ${items} asked for`);
  const jsonl = join(dir, 'tasks.jsonl');
  writeFileSync(jsonl, picked.join('\n') + '\n');
  const r = await runCli(root, ['import', 'beads', jsonl, '--database-url', file, '--provider', 'fake']);
  if (r.code !== 0) throw new Error(`import failed (exit ${r.code}): ${r.stderr.slice(0, 500)}`);
  return { dir, file, items, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A running `verdict worker` of the build at `root`. */
export interface WorkerProcess {
  child: ChildProcess;
  /** Everything it wrote so far (pino JSON lines). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnDist(root: string, args: string[]): WorkerProcess {
  const child = spawn(process.execPath, [join(root, 'dist/cli/main.js'), ...args], {
    cwd: root,
    env: { ...process.env, NO_COLOR: '1', CI: '1', VERDICT_LOG_LEVEL: 'debug', ANTHROPIC_API_KEY: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => out, exited };
}

async function runCli(root: string, args: string[]): Promise<{ code: number | null; stderr: string }> {
  const p = spawnDist(root, args);
  const { code } = await p.exited;
  return { code, stderr: p.output() };
}

/** Starts `n` worker processes of the build at `root` on `file` with the fake provider. */
export function startWorkers(root: string, file: string, n: number, flags: string[]): WorkerProcess[] {
  return Array.from({ length: n }, () =>
    spawnDist(root, ['worker', '--database-url', file, '--provider', 'fake', '--tick-ms', '100', ...flags]),
  );
}

/** SIGTERMs the workers and waits for them to exit. */
export async function stopWorkers(ws: WorkerProcess[]): Promise<void> {
  for (const w of ws) w.child.kill('SIGTERM');
  await Promise.all(ws.map((w) => w.exited));
}

/** Reads the file with a fresh read-only connection (another process's view). */
export function query<T>(file: string, sql: string, ...params: unknown[]): T[] {
  const d = new Database(file, { readonly: true, fileMustExist: true });
  try {
    d.pragma('busy_timeout = 5000');
    return d.prepare(sql).all(...params) as T[];
  } finally {
    d.close();
  }
}

/**
 * Polls every 250 ms until `done` says so or `timeoutMs` passes.
 * @returns true when `done` held, false on timeout.
 */
export async function until(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    let ok: boolean;
    try {
      ok = done();
    } catch {
      ok = false; // a read that met a lock: try again
    }
    if (ok) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** What a run left behind: the figures DESIGN §3.6 and §10.3 bound. */
export interface RunFigures {
  /** Jobs parked. */
  parked: number;
  /** Park reasons, counted. */
  parkReasons: Record<string, number>;
  /** Owed jobs left. */
  owed: number;
  /** Worker log lines of a claim lost (`claim lost before send`, `lease lost before a call`). */
  claimLostLines: number;
  /** Worker log lines of a deferred job. */
  deferLines: number;
  /** Stored answers per (item, set, key, state): how many keys have 0 (missing), 1, or more rows. */
  answerKeys: number;
  keysAnsweredTwice: number;
  /** Calls billed and every billed token (input, output, cache read and write) in decision_spend. */
  calls: number;
  billedTokens: number;
  /** The largest single call's usage (tokens), summed from its answer rows' shares. */
  maxCallTokens: number;
}

/** Reads the figures of a finished run from the file and the workers' logs. */
export function figures(file: string, logs: string[]): RunFigures {
  const parked = query<{ reason: string | null; n: number }>(
    file,
    "SELECT last_error AS reason, count(*) AS n FROM decision_jobs WHERE state = 'parked' GROUP BY last_error",
  );
  const owed = query<{ n: number }>(file, "SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'")[0].n;
  const perKey = query<{ n: number }>(
    file,
    'SELECT count(*) AS n FROM item_decisions GROUP BY item_id, question_set, question_key, state_hash, question_hash, state_version',
  );
  const spend = query<{ calls: number; tokens: number }>(
    file,
    'SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0) AS tokens FROM decision_spend',
  )[0];
  const maxCall = query<{ t: number | null }>(
    file,
    `SELECT max(t) AS t FROM (SELECT sum(input_tokens + output_tokens) AS t FROM item_decisions
       GROUP BY item_id, question_set, state_hash, evaluated_at)`,
  )[0].t;
  let claimLost = 0;
  let defers = 0;
  for (const log of logs) {
    for (const line of log.split('\n')) {
      if (!line.startsWith('{')) continue;
      let o: { reason?: unknown; outcome?: unknown; msg?: unknown };
      try {
        o = JSON.parse(line);
      } catch {
        continue;
      }
      if (o.msg !== 'job outcome') continue;
      if (o.outcome === 'lost' || (typeof o.reason === 'string' && o.reason.includes('lost before'))) claimLost++;
      if (o.outcome === 'defer') defers++;
    }
  }
  return {
    parked: parked.reduce((a, r) => a + r.n, 0),
    parkReasons: Object.fromEntries(parked.map((r) => [r.reason ?? '(none)', r.n])),
    owed,
    claimLostLines: claimLost,
    deferLines: defers,
    answerKeys: perKey.length,
    keysAnsweredTwice: perKey.filter((r) => r.n > 1).length,
    calls: spend.calls,
    billedTokens: spend.tokens,
    maxCallTokens: maxCall ?? 0,
  };
}

/** Keys the production sets ask about one open task: three attention keys and one effort key. */
export const KEYS_PER_TASK = 4;

/**
 * Fault 2 (DESIGN §3.6): two workers with `--lease-ms 4000` (the fake provider's 3 s latency
 * plus its 1 s margin: the shortest lease accepted) and `--requests-per-minute 7`, until every
 * job is answered or parked, or `timeoutMs` passes.
 */
export async function runLeaseLimiter(
  root: string,
  o: { items: number; timeoutMs: number; processes?: number },
): Promise<RunFigures & { finished: boolean; items: number }> {
  const db = await seedRealTasks(root, o.items);
  try {
    const ws = startWorkers(root, db.file, o.processes ?? 2, [
      '--fake-latency-ms',
      '3000',
      '--lease-ms',
      '4000',
      '--requests-per-minute',
      '7',
      '--concurrency',
      '4',
    ]);
    const finished = await until(
      () => query<{ n: number }>(db.file, "SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'")[0].n === 0,
      o.timeoutMs,
    );
    await stopWorkers(ws);
    return {
      ...figures(
        db.file,
        ws.map((w) => w.output()),
      ),
      finished,
      items: o.items,
    };
  } finally {
    db.cleanup();
  }
}

/**
 * Fault 3 (DESIGN §10.3): `processes` workers, 4 slots each, 200 ms provider latency and
 * `--daily-token-cap cap`, until the cap stops them (nothing billed for `quietMs`, 5 s by default,
 * and no lease live) or every job is done, or `timeoutMs` passes.
 */
export async function runTokenCap(
  root: string,
  o: { items: number; processes: number; cap: number; timeoutMs: number; quietMs?: number },
): Promise<RunFigures & { finished: boolean; cap: number; processes: number; slots: number }> {
  const db = await seedRealTasks(root, o.items);
  const slots = 4;
  try {
    const ws = startWorkers(root, db.file, o.processes, [
      '--fake-latency-ms',
      '200',
      '--daily-token-cap',
      String(o.cap),
      '--concurrency',
      String(slots),
    ]);
    // Done when calls have been billed, none for `quietMs`, and no lease is live: the cap (or the
    // work running out) has stopped every slot. Not before the first call: under load (the test
    // suite's parallel files) the workers took longer than the quiet window to start, and a run
    // that had billed nothing yet read as finished. The test sets a shorter window: its calls
    // take 200 ms, four slots a process, so a pause of its length is the cap's.
    const quietMs = o.quietMs ?? 5_000;
    let last = { calls: -1, at: Date.now() };
    const finished = await until(() => {
      const now = Date.now();
      const r = query<{ calls: number; live: number }>(
        db.file,
        `SELECT (SELECT coalesce(sum(calls), 0) FROM decision_spend) AS calls,
                (SELECT count(*) FROM decision_jobs WHERE lease_expires_at > ?) AS live`,
        now,
      )[0];
      if (r.calls !== last.calls) last = { calls: r.calls, at: now };
      return r.calls > 0 && r.live === 0 && now - last.at >= quietMs;
    }, o.timeoutMs);
    await stopWorkers(ws);
    return {
      ...figures(
        db.file,
        ws.map((w) => w.output()),
      ),
      finished,
      cap: o.cap,
      processes: o.processes,
      slots,
    };
  } finally {
    db.cleanup();
  }
}
