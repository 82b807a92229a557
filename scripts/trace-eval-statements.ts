import Database from 'better-sqlite3';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attentionSet, effortSet } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { FakeProvider } from '../src/providers/fake.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { Worker } from '../src/worker/worker.js';
import { drainLean, type LeanSet } from './bench-lean.js';
import { BENCH_DRAIN, seedBenchItems } from './bench-seed.js';

/**
 * `npx tsx scripts/trace-eval-statements.ts [items] [concurrency] [on|off]`: bench part f's drain
 * (the production sets attention and effort, fake provider at 0 ms) through Verdict's Worker and
 * through the lean reference's group variant, each on a copy of one seeded file, with every
 * better-sqlite3 statement run counted by its SQL text: runs per job, process CPU µs per job
 * (`process.cpuUsage` around each run), the largest run and the runs over 5 ms, and the bytes the
 * process wrote per job (`/proc/self/io` wchar: WAL frames and checkpoints; the lean drain's close
 * checkpoints too). Process CPU counts every thread: a COMMIT that waits on its fsync is charged
 * whatever V8's GC and compiler threads ran meanwhile, so read COMMIT's figure with that in mind
 * (`perf record` per thread tells them apart). TRACE_ONLY=verdict|lean runs one side;
 * TRACE_KEEP=1 keeps the files. A private measure, not part of `npm run bench`.
 */
const items = Number(process.argv[2] ?? 1000);
const concurrency = Number(process.argv[3] ?? 16);
const coAsk = (process.argv[4] ?? 'on') === 'on';
const sets = [attentionSet, effortSet];

interface Tally {
  runs: number;
  us: number;
  max: number;
  /** Runs over 5 ms of process CPU, and their CPU µs. */
  big: number;
  bigUs: number;
}
const tallies = new Map<string, Tally>();
const proto = (Database.prototype.prepare.call(new Database(':memory:'), 'SELECT 1') as object).constructor
  .prototype as Record<string, (...a: unknown[]) => unknown>;
for (const m of ['run', 'get', 'all'] as const) {
  const real = proto[m]!;
  proto[m] = function (this: { source: string }, ...a: unknown[]) {
    const c0 = process.cpuUsage();
    try {
      return real.apply(this, a);
    } finally {
      const c = process.cpuUsage(c0);
      const key = this.source.replace(/\s+/g, ' ').trim().slice(0, 110);
      const t = tallies.get(key) ?? { runs: 0, us: 0, max: 0, big: 0, bigUs: 0 };
      if (c.user + c.system > 5000) {
        t.big++;
        t.bigUs += c.user + c.system;
      }
      t.max = Math.max(t.max, c.user + c.system);
      t.runs++;
      t.us += c.user + c.system;
      tallies.set(key, t);
    }
  };
}

function report(who: string, jobs: number, cpuUs: number, walBytes: number): void {
  const rows = [...tallies].sort((a, b) => b[1].us - a[1].us);
  let runs = 0;
  let us = 0;
  for (const [, t] of rows) {
    runs += t.runs;
    us += t.us;
  }
  process.stdout.write(
    `\n${who}: ${jobs} jobs, ${Math.round(cpuUs / jobs)} CPU µs/job, ${(runs / jobs).toFixed(2)} statements/job, ${Math.round(us / jobs)} µs/job in statements, written ${Math.round(walBytes / jobs)} B/job\n`,
  );
  for (const [k, t] of rows)
    process.stdout.write(
      `  ${(t.runs / jobs).toFixed(3).padStart(7)} /job ${(t.us / jobs).toFixed(1).padStart(7)} µs/job ${(t.us / t.runs).toFixed(1).padStart(7)} µs/run ${String(Math.round(t.max)).padStart(6)} max ${t.big ? `(${t.big} runs > 5 ms: ${Math.round(t.bigUs / jobs)} µs/job) ` : ''} ${k}\n`,
    );
  tallies.clear();
}

/** Average stored bytes per answer row, by column, and the rows of the other tables a drain writes. */
function rowSizes(file: string): void {
  const db = new Database(file, { readonly: true });
  try {
    const cols = (
      db.prepare('SELECT name FROM pragma_table_info(?)').all('item_decisions') as Array<{ name: string }>
    ).map((c) => c.name);
    const avg = db
      .prepare(`SELECT count(*) AS n, ${cols.map((c) => `avg(length(${c})) AS "${c}"`).join(', ')} FROM item_decisions`)
      .get() as Record<string, number>;
    const parts = cols.map((c) => `${c} ${Math.round(avg[c] ?? 0)}`).join(', ');
    const count = (t: string) => (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
    const pages = db.pragma('page_count', { simple: true });
    process.stdout.write(
      `  answer rows ${avg.n}, bytes per column: ${parts}\n  surfacing_changes ${count('surfacing_changes')}, decision_events ${count('decision_events')}, pages ${pages}\n`,
    );
  } finally {
    db.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'verdict-trace-'));
const template = join(dir, 'template.db');
try {
  const seed = new SqliteStore({ url: template, registry: new Registry(sets) });
  await seedBenchItems(seed, items);
  await seed.close();
  // Bytes handed to write(2) by this process (the WAL's pages and headers): /proc/self/io `wchar`.
  const wchar = () => Number(/wchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))![1]);

  const only = process.env.TRACE_ONLY;
  if (only !== 'lean') {
    const vFile = join(dir, 'verdict.db');
    copyFileSync(template, vFile);
    const registry = new Registry(sets);
    const store = new SqliteStore({ url: vFile, registry });
    await store.now();
    tallies.clear();
    const worker = new Worker({
      store,
      registry,
      provider: new FakeProvider({ latencyMs: 0 }),
      ...BENCH_DRAIN,
      workerId: 'trace',
      concurrency,
      coAsk,
    });
    const w0 = wchar();
    const cpu0 = process.cpuUsage();
    const summary = await worker.run();
    const cpu = process.cpuUsage(cpu0);
    const vWal = wchar() - w0;
    report(`verdict c${concurrency} co-ask ${coAsk ? 'on' : 'off'}`, summary.claimed, cpu.user + cpu.system, vWal);
    await store.close();
    rowSizes(vFile);
  }
  if (only === 'verdict') process.exit(0);

  const lFile = join(dir, 'lean.db');
  copyFileSync(template, lFile);
  const leanSets: LeanSet[] = sets.map((set) => ({
    name: set.name,
    keys: Object.entries(set.questions ?? {}).map(([key, q]) => ({ key, kind: q.kind })),
  }));
  const lw0 = wchar();
  const r = await drainLean(lFile, leanSets, { variant: 'group', slots: concurrency, coAsk });
  report(`lean group${concurrency} co-ask ${coAsk ? 'on' : 'off'}`, r.jobs, r.cpuUs, wchar() - lw0);
  rowSizes(lFile);
} finally {
  // TRACE_KEEP=1 keeps the files (template.db, verdict.db, lean.db) for a look at their plans and rows.
  if (process.env.TRACE_KEEP) process.stdout.write(`kept ${dir}\n`);
  else rmSync(dir, { recursive: true, force: true });
}
