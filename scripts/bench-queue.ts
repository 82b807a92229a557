import Database from 'better-sqlite3';
import { buildDBClient, SqliteQueue } from 'liteque';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { better, defineQueue } from 'plainjob';
import { noul } from '../src/decision/questions.js';
import { defineQuestionSet, Registry } from '../src/decision/registry.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

/**
 * Benchmark a: the queue path alone. Enqueue, claim and complete N no-op jobs, one call each (no
 * batching), on a fresh SQLite file in WAL mode, for Verdict's store and for two SQLite job
 * queues on npm, plainjob and liteque, in the same process. Each library's own API:
 * - Verdict: `oweJobs` (the enqueue behind every write door, with its debounce and fair-tag
 *   reads), `claimNextJob` (lease, attempt count, fair order), `completeJob` (fenced delete);
 * - plainjob: `add`, `getAndMarkJobAsProcessing`, `markJobAsDone`;
 * - liteque: `enqueue`, `attemptDequeue`, `finalize('completed')`.
 * Verdict's jobs are about items, so the N items exist before the clock starts (without jobs).
 */

export interface QueueResult {
  name: string;
  jobs: number;
  /** Whole path, jobs per second. */
  perSecond: number;
  enqueueUs: number;
  claimCompleteUs: number;
  /** CPU (user + system, `process.cpuUsage`) of the claim-and-complete loop per job, µs: steady on a loaded machine, where wall time is not. */
  claimCompleteCpuUs: number;
}

function tmpFile(): { file: string; done: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'verdict-bench-q-'));
  return { file: join(dir, 'q.db'), done: () => rmSync(dir, { recursive: true, force: true }) };
}

function result(name: string, jobs: number, enqMs: number, runMs: number, runCpu: NodeJS.CpuUsage): QueueResult {
  return {
    name,
    jobs,
    perSecond: jobs / ((enqMs + runMs) / 1000),
    enqueueUs: (enqMs * 1000) / jobs,
    claimCompleteUs: (runMs * 1000) / jobs,
    claimCompleteCpuUs: (runCpu.user + runCpu.system) / jobs,
  };
}

/** `batch` > 1 owes that many jobs per call (the backfill door: one transaction, one statement per 500). */
export async function benchVerdict(jobs: number, batch = 1): Promise<QueueResult> {
  const t = tmpFile();
  const noop = defineQuestionSet({ name: 'noop', questions: { q: noul('no-op') }, quietPeriodMs: 0 });
  const store = new SqliteStore({ url: t.file, registry: new Registry([]) });
  try {
    const ws = await store.createWorkspace({ slug: 'bench' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task' });
    const ids: string[] = [];
    // Setup, untimed: the items, created with no sets registered so none is owed yet.
    store.ctx.db.$client.transaction(() => {
      const ins = store.ctx.db.$client.prepare(
        "INSERT INTO items (id, workspace_id, collection_id, ref, title, content, fields, seq, created_at, updated_at) VALUES (?, ?, ?, ?, 't', '', '{}', 1, 0, 0)",
      );
      for (let i = 0; i < jobs; i++) {
        const id = `item-${String(i).padStart(8, '0')}`;
        ins.run(id, ws.id, col.id, `R-${i}`);
        ids.push(id);
      }
    })();
    store.setRegistry(new Registry([noop]));
    let t0 = performance.now();
    for (let i = 0; i < ids.length; i += batch) {
      await store.oweJobs(
        ids.slice(i, i + batch).map((itemId) => ({ itemId, questionSet: 'noop' })),
        { quietPeriod: false },
      );
    }
    const enq = performance.now() - t0;
    t0 = performance.now();
    const cpu0 = process.cpuUsage();
    let done = 0;
    for (let c = await store.claimNextJob('bench', 60_000, 8); c; c = await store.claimNextJob('bench', 60_000, 8)) {
      if ((await store.completeJob(c)) === 'applied') done++;
    }
    const run = performance.now() - t0;
    const runCpu = process.cpuUsage(cpu0);
    if (done !== jobs) throw new Error(`verdict: completed ${done} of ${jobs}`);
    return result(batch > 1 ? `verdict, enqueue ${batch} per call` : 'verdict', jobs, enq, run, runCpu);
  } finally {
    await store.close();
    t.done();
  }
}

/** `batch` > 1 adds that many jobs per call (`addMany`, one transaction). */
export async function benchPlainjob(jobs: number, batch = 1): Promise<QueueResult> {
  const t = tmpFile();
  const db = new Database(t.file);
  const queue = defineQueue({
    connection: better(db),
    logger: { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined },
  });
  try {
    let t0 = performance.now();
    if (batch > 1) {
      for (let i = 0; i < jobs; i += batch)
        queue.addMany(
          'noop',
          Array.from({ length: Math.min(batch, jobs - i) }, (_, k) => ({ i: i + k })),
        );
    } else {
      for (let i = 0; i < jobs; i++) queue.add('noop', { i });
    }
    const enq = performance.now() - t0;
    t0 = performance.now();
    const cpu0 = process.cpuUsage();
    let done = 0;
    for (let j = queue.getAndMarkJobAsProcessing('noop'); j; j = queue.getAndMarkJobAsProcessing('noop')) {
      queue.markJobAsDone(j.id);
      done++;
    }
    const run = performance.now() - t0;
    const runCpu = process.cpuUsage(cpu0);
    if (done !== jobs) throw new Error(`plainjob: completed ${done} of ${jobs}`);
    return result(batch > 1 ? `plainjob, addMany ${batch}` : 'plainjob', jobs, enq, run, runCpu);
  } finally {
    queue.close();
    db.close();
    t.done();
  }
}

/**
 * liteque 0.8.0 hands an async callback to better-sqlite3's `transaction()`, which better-sqlite3
 * 12 refuses ("Transaction function cannot return a promise"), so its `attemptDequeue` cannot run
 * as published here. This shim gives that one connection a `transaction()` that runs BEGIN, awaits
 * the callback, and COMMITs (ROLLBACK on error): liteque's own statements, in a real transaction.
 */
function allowAsyncTransactions(sqlite: Database.Database): void {
  const wrap =
    (begin: string) =>
    (fn: (...a: unknown[]) => unknown) =>
    async (...args: unknown[]) => {
      sqlite.exec(begin);
      try {
        const r = await fn(...args);
        sqlite.exec('COMMIT');
        return r;
      } catch (err) {
        if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
        throw err;
      }
    };
  (sqlite as unknown as { transaction: unknown }).transaction = (fn: (...a: unknown[]) => unknown) =>
    Object.assign(wrap('BEGIN')(fn), {
      deferred: wrap('BEGIN DEFERRED')(fn),
      immediate: wrap('BEGIN IMMEDIATE')(fn),
      exclusive: wrap('BEGIN EXCLUSIVE')(fn),
    });
}

export async function benchLiteque(jobs: number): Promise<QueueResult> {
  const t = tmpFile();
  const db = buildDBClient(t.file, { runMigrations: true });
  const raw = db as unknown as { $client?: Database.Database; session: { client: Database.Database } };
  allowAsyncTransactions(raw.$client ?? raw.session.client);
  const queue = new SqliteQueue<{ i: number }>('noop', db, {
    defaultJobArgs: { numRetries: 0 },
    keepFailedJobs: false,
  });
  try {
    let t0 = performance.now();
    for (let i = 0; i < jobs; i++) await queue.enqueue({ i });
    const enq = performance.now() - t0;
    t0 = performance.now();
    const cpu0 = process.cpuUsage();
    let done = 0;
    for (
      let j = await queue.attemptDequeue({ timeoutSecs: 60 });
      j;
      j = await queue.attemptDequeue({ timeoutSecs: 60 })
    ) {
      await queue.finalize(j.id, j.allocationId, 'completed');
      done++;
    }
    const run = performance.now() - t0;
    const runCpu = process.cpuUsage(cpu0);
    if (done !== jobs) throw new Error(`liteque: completed ${done} of ${jobs}`);
    return result('liteque', jobs, enq, run, runCpu);
  } finally {
    (raw.$client ?? raw.session.client).close();
    t.done();
  }
}

/**
 * Runs the three one call per job, plus Verdict and plainjob with enqueues batched 500 per call
 * (for comparison only), `rounds` times interleaved, keeping each one's best round (the machine is
 * shared, so the best round is the least disturbed one).
 */
export async function benchQueuePath(jobs: number, rounds = 3): Promise<QueueResult[]> {
  const best = new Map<string, QueueResult>();
  for (let r = 0; r < rounds; r++) {
    const runs: Array<() => Promise<QueueResult>> = [
      () => benchVerdict(jobs),
      () => benchPlainjob(jobs),
      () => benchLiteque(jobs),
      () => benchVerdict(jobs, 500),
      () => benchPlainjob(jobs, 500),
    ];
    for (const f of runs) {
      const res = await f();
      const prev = best.get(res.name);
      if (!prev || res.perSecond > prev.perSecond) best.set(res.name, res);
    }
  }
  return [...best.values()];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const jobs = Number(process.argv[2] ?? 5000);
  console.table(await benchQueuePath(jobs, 1));
}
