import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { productionSets } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { isPostgresUrl } from '../src/store/postgres/open.js';
import { PgStore } from '../src/store/postgres/pg-store.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { PRIORITY_BACKFILL } from '../src/store/queue-store.js';
import type { Store } from '../src/store/whole-store.js';

/**
 * Several real `verdict worker --until-idle` processes draining one database, SQLite or Postgres,
 * and the exactly-once check afterwards. Used by test/scale/processes-*.test.ts and by the
 * benchmarks (scripts/bench.ts, part d).
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * How a worker process is started: node arguments before the subcommand. From the sources under
 * tsx by default (the bench runs what is checked out, no build needed); the tests pass
 * `BUILT_CLI`, the built `dist/cli/main.js` (npm ci builds it), which starts without compiling
 * the sources in every child.
 */
export const SOURCE_CLI: readonly string[] = ['--import', 'tsx', 'src/cli/main.ts'];
export const BUILT_CLI: readonly string[] = [join(ROOT, 'dist/cli/main.js')];

/** Jobs per item: the production sets (attention and effort) both cover a `task` item. */
/**
 * The sets the drain owes: the fixed-question production sets, each one provider call per open
 * item. The resolved conventions sets would complete without a call (no conventions in the bench
 * workspace), which would measure claims, not calls.
 */
export const BENCH_SETS = ['attention', 'effort'] as const;
export const JOBS_PER_ITEM = BENCH_SETS.length;

function openAny(url: string): Store {
  const registry = new Registry(productionSets());
  return isPostgresUrl(url) ? PgStore.connect(url, { registry, poolSize: 16 }) : new SqliteStore({ url, registry });
}

/**
 * Creates one workspace with `items` open tasks and owes their jobs at once (no quiet period), so
 * `items × JOBS_PER_ITEM` jobs are claimable. The items are inserted in bulk (setup), the jobs are
 * owed through the store's own enqueue (`oweJobs`, the backfill door), 500 items per transaction.
 * @returns the number of jobs owed.
 */
export async function seedJobs(url: string, items: number): Promise<number> {
  const store = openAny(url);
  try {
    const ws = await store.createWorkspace({ slug: `bench-${Date.now()}` });
    const col = await store.createCollection({
      workspaceId: ws.id,
      slug: 'task',
      schema: {
        fields: [{ key: 'status', type: 'select', options: ['open', 'closed'], terminal_options: ['closed'] }],
      },
    });
    const now = await store.now();
    const ids = Array.from({ length: items }, (_, i) => `${ws.id}-item-${String(i).padStart(7, '0')}`);
    const rows = ids.map(
      (id, i) => [id, ws.id, col.id, `B-${i}`, `bench item ${i}`, `body ${i}`, '{"status":"open"}', now] as const,
    );
    const owe = async (q: Pick<Store, 'oweJobs'>) => {
      let owed = 0;
      for (let i = 0; i < ids.length; i += 500) {
        const chunk = ids.slice(i, i + 500);
        owed += await q.oweJobs(
          chunk.flatMap((itemId) => BENCH_SETS.map((questionSet) => ({ itemId, questionSet }))),
          { priority: PRIORITY_BACKFILL, quietPeriod: false },
        );
      }
      return owed;
    };
    if (!isPostgresUrl(url)) {
      await insertItems(url, rows);
      return await owe(store);
    }
    // On PostgreSQL the items and their jobs commit together, as a write door's do: workers are
    // running while this seeds, and a drift sweep that saw the items without their jobs owed them
    // itself (a new key with no answer has drifted), a slot claimed them, and this owe then bumped
    // their generation, so those completions were superseded and came due a quiet period (30 s)
    // later: the drain idled, its slots polling, and the statements per job counted that idling.
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query('BEGIN');
      await insertItemsPg(c, rows);
      const owed = await owe((store as PgStore).joinTransaction(c) as unknown as Pick<Store, 'oweJobs'>);
      await c.query('COMMIT');
      return owed;
    } finally {
      await c.end();
    }
  } finally {
    await store.close();
  }
}

type ItemTuple = readonly [
  id: string,
  ws: string,
  col: string,
  ref: string,
  title: string,
  content: string,
  fields: string,
  now: number,
];

const INSERT_ITEMS =
  'INSERT INTO items (id, workspace_id, collection_id, ref, title, content, fields, seq, created_at, updated_at) VALUES ';

/** The items in bulk on a PostgreSQL client (the caller's transaction). */
async function insertItemsPg(c: pg.Client, rows: ItemTuple[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 1_000) {
    const part = rows.slice(i, i + 1_000);
    const values = part.map(
      (_, j) =>
        `($${j * 8 + 1}, $${j * 8 + 2}, $${j * 8 + 3}, $${j * 8 + 4}, $${j * 8 + 5}, $${j * 8 + 6}, $${j * 8 + 7}, 1, $${j * 8 + 8}, $${j * 8 + 8})`,
    );
    await c.query(INSERT_ITEMS + values.join(', '), part.flat());
  }
}

/** The items in bulk in a SQLite file, one transaction. */
async function insertItems(url: string, rows: ItemTuple[]): Promise<void> {
  const d = new Database(url);
  try {
    const ins = d.prepare(`${INSERT_ITEMS}(?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`);
    d.transaction(() => {
      for (const r of rows) ins.run(...r, r[7]);
    })();
  } finally {
    d.close();
  }
}

export interface WorkerRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** From the `drained: N jobs claimed` line. */
  claimed: number;
}

/**
 * Runs `processes` worker processes with `--until-idle` against `url` and waits for all of them.
 * `args` are extra CLI flags (concurrency, fake latency ...); `cli` how each process starts.
 */
export async function runWorkerProcesses(
  url: string,
  processes: number,
  args: string[] = [],
  cli: readonly string[] = SOURCE_CLI,
): Promise<{ runs: WorkerRun[]; wallMs: number }> {
  const started = Date.now();
  const runs = await Promise.all(
    Array.from({ length: processes }, () => {
      const child = spawn(
        process.execPath,
        [...cli, 'worker', '--until-idle', '--database-url', url, '--provider', 'fake', '--tick-ms', '50', ...args],
        {
          cwd: ROOT,
          env: { ...process.env, NO_COLOR: '1', CI: '1', VERDICT_LOG_LEVEL: 'info', ANTHROPIC_API_KEY: '' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      return new Promise<WorkerRun>((resolve) =>
        child.on('exit', (code, signal) =>
          resolve({
            code,
            signal,
            stdout,
            stderr,
            claimed: Number(/drained: (\d+) jobs claimed/.exec(stdout)?.[1] ?? NaN),
          }),
        ),
      );
    }),
  );
  return { runs, wallMs: Date.now() - started };
}

/** Long-running worker processes (no --until-idle), for measuring a steady drain without start-up. */
export interface RunningWorkers {
  /** Resolves once every process has logged `worker started`. */
  ready: Promise<void>;
  /** SIGTERM to all; resolves with their runs once they have exited. */
  stop(): Promise<WorkerRun[]>;
}

export function startWorkers(
  url: string,
  processes: number,
  args: string[] = [],
  cli: readonly string[] = SOURCE_CLI,
): RunningWorkers {
  const kids = Array.from({ length: processes }, () => {
    const child = spawn(
      process.execPath,
      [
        ...cli,
        'worker',
        '--database-url',
        url,
        '--provider',
        'fake',
        '--tick-ms',
        '50',
        '--log-level',
        'info',
        ...args,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, NO_COLOR: '1', CI: '1', ANTHROPIC_API_KEY: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const run = { stdout: '', stderr: '' };
    const ready = new Promise<void>((resolve) => {
      const onData = (d: Buffer) => {
        run.stderr += d;
        if (run.stderr.includes('"msg":"worker started"')) resolve();
      };
      child.stderr.on('data', onData);
    });
    child.stdout.on('data', (d) => (run.stdout += d));
    const exited = new Promise<WorkerRun>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal, ...run, claimed: NaN })),
    );
    return { child, ready, exited };
  });
  return {
    ready: Promise.all(kids.map((k) => k.ready)).then(() => undefined),
    stop: async () => {
      for (const k of kids) k.child.kill('SIGTERM');
      return Promise.all(kids.map((k) => k.exited));
    },
  };
}

/**
 * Polls until no job row is left (every owed job completed), or throws after `timeoutMs`. One
 * cheap statement a poll on one connection (the first row of decision_jobs, or none), every 250 ms:
 * the drain under measurement shares the server's CPU with it (`checkDrain`'s counts over every
 * answer, each poll, took 5.7 s of server time in a 50 s drain of 4 processes).
 */
export async function waitUntilDrained(url: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  const left = 'SELECT EXISTS (SELECT 1 FROM decision_jobs) AS left';
  if (!isPostgresUrl(url)) {
    while ((await checkDrain(url)).jobsLeft > 0) {
      if (Date.now() > until) throw new Error('waitUntilDrained: timed out');
      await new Promise((r) => setTimeout(r, 100));
    }
    return;
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    while ((await c.query<{ left: boolean }>(left)).rows[0].left) {
      if (Date.now() > until) throw new Error('waitUntilDrained: timed out');
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await c.end();
  }
}

/**
 * A fresh, empty database on the server of `adminUrl` (a test file's or a benchmark run's own);
 * `drop` removes it, closing any connection still open on it. `icuLocale` (e.g. `en-US`) makes its
 * default collation linguistic, as most installed servers' is, instead of the test server's C.
 */
export async function createDatabase(
  adminUrl: string,
  prefix = 'verdict_t',
  opts: { icuLocale?: string } = {},
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = async (text: string) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(text);
    } finally {
      await c.end();
    }
  };
  await admin(
    opts.icuLocale
      ? `CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '${opts.icuLocale.replace(/'/g, '')}'`
      : `CREATE DATABASE ${name}`,
  );
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/**
 * Steady-state jobs per second of a drain, from the answers' own times (database clock): each
 * job's first answer time, and between the 10th and the 90th percentile of those times (the steady
 * window), jobs per second. The ramp-up (slots filling) and the tail (slots running dry) are left
 * out. `windowFromMs`/`windowToMs` are the window's ends after the first answer, `windowJobs` the
 * jobs answered in it.
 */
export async function answerRate(url: string): Promise<{
  jobs: number;
  spanMs: number;
  perSecond: number;
  windowFromMs: number;
  windowToMs: number;
  windowJobs: number;
}> {
  const sqlText = 'SELECT min(evaluated_at) AS t FROM item_decisions GROUP BY item_id, question_set ORDER BY 1';
  let times: number[];
  if (isPostgresUrl(url)) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      times = (await c.query(sqlText)).rows.map((r: { t: string }) => Number(r.t));
    } finally {
      await c.end();
    }
  } else {
    const d = new Database(url, { readonly: true, fileMustExist: true });
    try {
      times = (d.prepare(sqlText).all() as Array<{ t: number }>).map((r) => r.t);
    } finally {
      d.close();
    }
  }
  const spanMs = times[times.length - 1] - times[0];
  const i10 = Math.floor(times.length * 0.1);
  const i90 = Math.floor(times.length * 0.9);
  const dt = times[i90] - times[i10];
  return {
    jobs: times.length,
    spanMs,
    perSecond: dt > 0 ? ((i90 - i10) * 1000) / dt : 0,
    windowFromMs: times[i10] - times[0],
    windowToMs: times[i90] - times[0],
    windowJobs: i90 - i10,
  };
}

/** What the database says after a drain. */
export interface DrainCheck {
  /** decision_jobs rows left. */
  jobsLeft: number;
  /** Answer rows, and (item, set, key) triples answered more than once. */
  answers: number;
  duplicateKeys: number;
  /** Provider calls recorded in decision_spend (one per job when each job ran once). */
  calls: number;
}

export async function checkDrain(url: string): Promise<DrainCheck> {
  const q = {
    jobsLeft: 'SELECT count(*) AS n FROM decision_jobs',
    answers: 'SELECT count(*) AS n FROM item_decisions',
    duplicateKeys:
      'SELECT count(*) AS n FROM (SELECT item_id, question_set, question_key FROM item_decisions GROUP BY item_id, question_set, question_key HAVING count(*) > 1) d',
    calls: 'SELECT coalesce(sum(calls), 0) AS n FROM decision_spend',
  };
  const out: Record<string, number> = {};
  if (isPostgresUrl(url)) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      for (const [k, sql] of Object.entries(q)) out[k] = Number((await c.query(sql)).rows[0].n);
    } finally {
      await c.end();
    }
  } else {
    const d = new Database(url, { readonly: true, fileMustExist: true });
    try {
      for (const [k, sql] of Object.entries(q)) out[k] = Number((d.prepare(sql).get() as { n: number }).n);
    } finally {
      d.close();
    }
  }
  return out as unknown as DrainCheck;
}

/** Log lines that must never appear: a busy database reaching the job layer, or an outcome lost. */
export function troubleLines(runs: WorkerRun[]): string[] {
  return runs
    .flatMap((r) => `${r.stdout}\n${r.stderr}`.split('\n'))
    .filter((l) =>
      /SQLITE_BUSY|database is locked|claim failed|outcome not recorded|deadlock|could not serialize/i.test(l),
    );
}
