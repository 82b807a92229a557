import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { productionSets } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { isPostgresUrl } from '../src/store/postgres/open.js';
import { PgStore } from '../src/store/postgres/pg-store.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { PRIORITY_BACKFILL, type Store } from '../src/store/store.js';

/**
 * Several real `verdict worker --until-idle` processes draining one database, SQLite or Postgres,
 * and the exactly-once check afterwards. Used by test/scale/processes-*.test.ts and by the
 * benchmarks (scripts/bench.ts, part d).
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Jobs per item: the production sets (attention and effort) both cover a `task` item. */
export const JOBS_PER_ITEM = productionSets().length;

function openAny(url: string): Store {
  const registry = new Registry(productionSets());
  return isPostgresUrl(url) ? PgStore.connect(url, { registry, poolSize: 16 }) : new SqliteStore({ url, registry });
}

/**
 * Creates one workspace with `items` open tasks through the write doors, owed at once (no quiet
 * period), so `items × JOBS_PER_ITEM` jobs are claimable. Writes run 16 at a time on Postgres.
 * @returns the number of jobs owed.
 */
export async function seedJobs(url: string, items: number): Promise<number> {
  const store = openAny(url);
  try {
    const ws = await store.createWorkspace({ slug: `bench-${Date.now()}` });
    const col = await store.createCollection({
      workspaceId: ws.id,
      slug: 'task',
      schema: { fields: [{ key: 'status', type: 'select', options: ['open', 'closed'], terminal_options: ['closed'] }] },
    });
    let owed = 0;
    let next = 0;
    const lanes = isPostgresUrl(url) ? 16 : 1;
    await Promise.all(
      Array.from({ length: lanes }, async () => {
        for (let i = next++; i < items; i = next++) {
          const r = await store.createItem(
            { workspaceId: ws.id, collectionId: col.id, ref: `B-${i}`, title: `bench item ${i}`, content: `body ${i}`, fields: { status: 'open' } },
            { priority: PRIORITY_BACKFILL, quietPeriod: false },
          );
          owed += r.owed;
        }
      }),
    );
    return owed;
  } finally {
    await store.close();
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
 * `args` are extra CLI flags (concurrency, fake latency ...).
 */
export async function runWorkerProcesses(url: string, processes: number, args: string[] = []): Promise<{ runs: WorkerRun[]; wallMs: number }> {
  const started = Date.now();
  const runs = await Promise.all(
    Array.from({ length: processes }, () => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'src/cli/main.ts', 'worker', '--until-idle', '--database-url', url, '--provider', 'fake', '--tick-ms', '50', ...args],
        { cwd: ROOT, env: { ...process.env, NO_COLOR: '1', CI: '1', VERDICT_LOG_LEVEL: 'info', ANTHROPIC_API_KEY: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      return new Promise<WorkerRun>((resolve) =>
        child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr, claimed: Number(/drained: (\d+) jobs claimed/.exec(stdout)?.[1] ?? NaN) })),
      );
    }),
  );
  return { runs, wallMs: Date.now() - started };
}

/**
 * A fresh, empty database on the server of `adminUrl` (a test file's or a benchmark run's own);
 * `drop` removes it, closing any connection still open on it.
 */
export async function createDatabase(adminUrl: string, prefix = 'verdict_t'): Promise<{ url: string; drop(): Promise<void> }> {
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
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/**
 * Steady-state jobs per second of a drain, from the answers' own times (database clock): between
 * the 10th and the 90th percentile of the jobs' answer times, jobs per second. The ramp-up
 * (processes starting one after another) and the tail are left out.
 */
export async function answerRate(url: string): Promise<{ jobs: number; spanMs: number; perSecond: number }> {
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
  return { jobs: times.length, spanMs, perSecond: dt > 0 ? ((i90 - i10) * 1000) / dt : 0 };
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
    .filter((l) => /SQLITE_BUSY|database is locked|claim failed|outcome not recorded|deadlock|could not serialize/i.test(l));
}
