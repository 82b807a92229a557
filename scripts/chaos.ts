import Database from 'better-sqlite3';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDatabase } from './bench-drain.js';

/**
 * Chaos run (DESIGN §1 principles 4–6, §3): SIGKILL real worker processes mid-drain, several at
 * once on one database, and check that nothing owed is lost, nothing is answered twice, nothing
 * is paid for twice, and (on PostgreSQL) no claim deadlocks.
 *
 * 1. the clean run: a fresh database, the tracker file imported with the built CLI (`--copies`
 *    times, each into its own workspace: the same real items, more work to drain), one
 *    `worker --until-idle` with the fake provider at no latency: its provider calls are the
 *    figure the chaos run must bill exactly;
 * 2. the chaos run: another fresh database with the same import; `--workers` slots (default 4)
 *    each run `node dist/cli/main.js worker` (the node process itself) with the fake provider at
 *    `--latency-ms` (default 20) per call; each slot waits until its worker has recorded its
 *    first outcome (at most 120 s, or until no job is owed), then a random 100–1,500 ms, SIGKILLs it (its claims are left with live leases,
 *    `--lease-ms` default 4,000) and starts the next, until it has killed `--kills` workers
 *    (default 20); a kill counts as mid-drain when jobs were still owed just before it;
 * 3. wait out the last leases and the abandon backoffs they start (DESIGN §3, "Abandons"), then
 *    `worker --until-idle` to the end;
 * 4. query the database: owed and parked jobs, duplicate answers (rows sharing the idempotency
 *    key, which the unique index forbids; and keys answered more than once at the same state hash
 *    and question hash whatever the state version), the provider calls against the clean run's,
 *    and on PostgreSQL the `deadlock detected` lines the server logged during the run
 *    (`--pg-log FILE`, the server's log) and the workers' failed completions by error code.
 *
 * SQLite by default (a temp file); `--pg URL` (an admin URL: a database is made and dropped per
 * run) for PostgreSQL. `--data FILE` the tracker file (default the bundled sample). `--cli FILE`
 * runs another build's main.js (to measure a fault on an older build). Needs the build:
 * `npm run build` first. `npx tsx scripts/chaos.ts [--workers 4] [--kills 20] [--latency-ms 20] [--copies 1]
 * [--lease-ms 4000] [--seed 1] [--pg URL --pg-log FILE] [--keep] [--log-dir DIR]`. Real time: minutes
 * (run it `nice`). When a check fails, `--keep` leaves both databases to query and `--log-dir`
 * holds every worker's log (a `spend` line per call names the item and set; the calls by set are
 * printed beside the clean run's).
 * On a fast build a drain of one copy at 20 ms ends within the first few kills; for 50 kills a
 * slot, lengthen the work (`--copies 4 --latency-ms 200`, say) until the mid-drain count is
 * near the kills. Not a test (it waits in real time). Exit 1 when any check fails.
 *
 * The lease must outlast the longest stall of a live worker (DESIGN §3, "One job at a time"): on a
 * 2-core machine at load 20–30 a worker that has just started can sit still for seconds, and a
 * live worker then finds its 4-second claim lost (`(lost)` in the outcome tally). Should the stall
 * fall after its last liveness read (mid-call) and last past the lease and the abandon backoff,
 * the job's next claimant asks again before the first answers land, and both calls are billed
 * (paid answers are kept, DESIGN §7): the provider-call check then fails by one for a stall, not
 * a kill. On such a machine pass a longer lease (`--lease-ms 15000`).
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** How long a worker's life waits for its first recorded outcome before the kill, ms (its start-up on a loaded machine, with a wide margin). */
const FIRST_OUTCOME_WAIT_MS = 120_000;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}
function argText(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

/** mulberry32: a seeded source, so a run's kill times can be repeated. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A database for one run: its URL, a count query and a list query, and how to drop it. */
interface RunDb {
  url: string;
  count(q: string): Promise<number>;
  all<T>(q: string): Promise<T[]>;
  drop(): Promise<void>;
}

async function freshDb(pgAdmin: string | undefined, dir: string, name: string): Promise<RunDb> {
  if (pgAdmin) {
    const made = await createDatabase(pgAdmin, `verdict_chaos_${name}`);
    const all = async <T>(q: string) => {
      const c = new pg.Client({ connectionString: made.url });
      await c.connect();
      try {
        return (await c.query(q)).rows as T[];
      } finally {
        await c.end();
      }
    };
    return { url: made.url, all, count: async (q) => Number((await all<{ n: unknown }>(q))[0].n), drop: made.drop };
  }
  const file = join(dir, `${name}.db`);
  const all = async <T>(q: string) => {
    const d = new Database(file, { readonly: true });
    try {
      return d.prepare(q).all() as T[];
    } finally {
      d.close();
    }
  };
  return {
    url: file,
    all,
    count: async (q) => Number((await all<{ n: unknown }>(q))[0].n),
    drop: async () => undefined,
  };
}

async function main(): Promise<void> {
  const main = resolve(argText('cli') ?? join(ROOT, 'dist', 'cli', 'main.js'));
  if (!existsSync(main)) throw new Error(`${main} is missing: run \`npm run build\` first`);
  const workers = arg('workers', 4);
  const kills = arg('kills', 20);
  const latencyMs = arg('latency-ms', 20);
  const copies = arg('copies', 1);
  if (!Number.isInteger(copies) || copies < 1) throw new Error(`--copies: got ${copies}, expected an integer from 1`);
  const leaseMs = arg('lease-ms', 4_000);
  const random = seeded(arg('seed', 1));
  const data = resolve(argText('data') ?? join(ROOT, 'sample', 'beads-issues.jsonl'));
  const pgAdmin = argText('pg');
  const pgLog = argText('pg-log');
  // Evidence for a failed check: `--keep` leaves both databases (and the temp folder) in place,
  // `--log-dir DIR` writes every worker's whole log there (ids and counts only: DESIGN §13).
  const keep = process.argv.includes('--keep');
  const logDir = argText('log-dir');
  if (logDir) mkdirSync(logDir, { recursive: true });
  const keepLog = (name: string, text: string) => {
    if (logDir) writeFileSync(join(logDir, `${name}.log`), text);
  };
  const deadlocksLogged = () => (pgLog ? (readFileSync(pgLog, 'utf8').match(/deadlock detected/g) ?? []).length : 0);
  const dir = mkdtempSync(join(tmpdir(), 'verdict-chaos-'));
  const envFor = (url: string, latency: number) => ({
    ...process.env,
    NO_COLOR: '1',
    CI: '1',
    ANTHROPIC_API_KEY: '',
    VERDICT_DATABASE_URL: url,
    VERDICT_PROVIDER: 'fake',
    VERDICT_FAKE_LATENCY_MS: String(latency),
    VERDICT_LEASE_MS: String(leaseMs),
    VERDICT_TICK_MS: '50',
    // Debug logs every job outcome (ids and counts only): the tally below reads them.
    VERDICT_LOG_LEVEL: 'debug',
  });
  const dbs: RunDb[] = [];
  const imported = async (name: string): Promise<RunDb> => {
    const db = await freshDb(pgAdmin, dir, name);
    dbs.push(db);
    for (let copy = 1; copy <= copies; copy++) {
      const workspace = copy === 1 ? 'beads' : `beads-${copy}`;
      const imp = spawnSync(process.execPath, [main, 'import', 'beads', data, '--workspace', workspace], {
        cwd: ROOT,
        env: envFor(db.url, 0),
        encoding: 'utf8',
        maxBuffer: 1 << 30,
      });
      if (imp.status !== 0)
        throw new Error(
          `import failed (exit ${imp.status}): ${imp.stderr
            .split('\n')
            .filter((l) => !l.startsWith('{'))
            .join('\n')}`,
        );
    }
    return db;
  };
  const callsOf = async (db: RunDb) => db.count(`SELECT coalesce(sum(calls), 0) AS n FROM decision_spend`);
  try {
    // 1. the clean run
    const clean = await imported('clean');
    const owedAtStart = await clean.count(`SELECT count(*) AS n FROM decision_jobs`);
    const cleanDrain = spawnSync(process.execPath, [main, 'worker', '--until-idle'], {
      cwd: ROOT,
      env: envFor(clean.url, 0),
      encoding: 'utf8',
      maxBuffer: 1 << 30,
    });
    keepLog('clean-drain', cleanDrain.stdout + cleanDrain.stderr);
    if (cleanDrain.status !== 0) throw new Error(`clean drain failed (exit ${cleanDrain.status})`);
    const cleanCalls = await callsOf(clean);
    console.log(
      `${pgAdmin ? 'PostgreSQL' : 'SQLite'}; ${data} imported ${copies}×; ${owedAtStart} jobs owed after the import; chaos workers' fake provider latency ${latencyMs} ms`,
    );
    console.log(`clean run (one worker --until-idle, no kill): ${cleanCalls} provider calls`);

    // 2. the chaos run
    const db = await imported('chaos');
    const deadlocksBefore = deadlocksLogged();
    const outcomes = new Map<string, number>();
    const failedCompletions = new Map<string, number>();
    const tally = (logText: string) => {
      for (const line of logText.split('\n')) {
        const completion = line.includes('completion with answers failed');
        if (!completion && !line.includes('"job outcome"')) continue;
        try {
          const o = JSON.parse(line) as { outcome: string; reason?: string; recorded?: string; err?: string };
          if (completion) {
            failedCompletions.set(o.err ?? '(no code)', (failedCompletions.get(o.err ?? '(no code)') ?? 0) + 1);
            continue;
          }
          const k = `${o.outcome}${o.reason ? `/${o.reason}` : ''}${o.recorded && o.recorded !== 'applied' ? ` (${o.recorded})` : ''}`;
          outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
        } catch {
          // a line cut by the SIGKILL
        }
      }
    };
    const env = envFor(db.url, latencyMs);
    let killed = 0;
    // Kills that landed after the worker recorded an outcome (mid-drain), and how long each took to record its first.
    let killedAfterOutcome = 0;
    // Kills that landed while jobs were still owed (read just before the kill): mid-drain.
    let killedMidDrain = 0;
    const firstOutcomeTimes: number[] = [];
    const t0 = Date.now();
    const slot = async (s: number) => {
      for (let r = 1; r <= kills; r++) {
        const child = spawn(process.execPath, [main, 'worker'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
        let logs = '';
        let draining!: () => void;
        const started = new Promise<void>((res) => (draining = res));
        const onData = (d: Buffer) => {
          logs += d;
          if (logs.includes('"job outcome"')) draining();
        };
        child.stdout!.on('data', onData);
        child.stderr!.on('data', onData);
        const exited = new Promise<NodeJS.Signals | null>((res) => child.on('close', (_c, sig) => res(sig)));
        // The kill lands during the drain: a random moment after the worker recorded its first
        // outcome. Start-up takes 10–20 s when four workers start at once on a loaded 2-core
        // machine, so a fixed 20 s wait would kill most workers before their first claim: the
        // wait is for the outcome, up to
        // FIRST_OUTCOME_WAIT_MS, and ends early only once no job is owed (the kill then lands on
        // an idle worker, counted apart below).
        const bornAt = Date.now();
        let lifeOver = false;
        const drainedMeanwhile = (async () => {
          while (!lifeOver) {
            await sleep(2_000);
            if (
              !lifeOver &&
              (await db.count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'`).catch(() => 1)) === 0
            )
              return false;
          }
          return false;
        })();
        const sawOutcome = await Promise.race([
          started.then(() => true),
          sleep(FIRST_OUTCOME_WAIT_MS, undefined, { ref: false }).then(() => false),
          drainedMeanwhile,
        ]);
        lifeOver = true;
        const firstOutcomeMs = Date.now() - bornAt;
        await sleep(Math.round(100 + random() * 1_400));
        const owedAtKill = await db
          .count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'`)
          .catch(() => 0);
        child.kill('SIGKILL');
        const signal = await exited;
        if (signal === 'SIGKILL') {
          killed++;
          if (owedAtKill > 0) killedMidDrain++;
          if (sawOutcome) {
            killedAfterOutcome++;
            firstOutcomeTimes.push(firstOutcomeMs);
          }
        }
        tally(logs);
        keepLog(`slot${s}-life${r}`, logs);
      }
      console.log(`slot ${s}: ${kills} workers killed (${Math.round((Date.now() - t0) / 1000)} s)`);
    };
    await Promise.all(Array.from({ length: workers }, (_, s) => slot(s + 1)));
    const owedAfterKills = await db.count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'`);
    const outcomesBeforeDrain = [...outcomes.values()].reduce((a, b) => a + b, 0);
    const median = [...firstOutcomeTimes].sort((a, b) => a - b)[Math.floor(firstOutcomeTimes.length / 2)] ?? 0;
    console.log(`${killed} workers SIGKILLed (${workers} at once); ${owedAfterKills} jobs still owed`);
    console.log(`kills that landed mid-drain (jobs still owed just before the kill): ${killedMidDrain} of ${killed}`);
    console.log(
      `kills after the worker's first recorded outcome: ${killedAfterOutcome} of ${killed} (first outcome a median ${median} ms after the start); outcomes recorded by the killed workers: ${outcomesBeforeDrain}`,
    );

    // 3. the drain, after the killed workers' leases end and the abandon backoffs they started
    // (DESIGN §3, "Abandons": a job whose claimant died is due again only lease × 2^(abandons − 1)
    // after its dead lease ended) have run out, so the drain finds them due.
    await sleep(leaseMs + 500);
    const backingOff = await db.count(
      `SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed' AND abandons > 0 AND claim_token IS NULL`,
    );
    const lastDue = await db.count(`SELECT coalesce(max(not_before), 0) AS n FROM decision_jobs WHERE state = 'owed'`);
    // A row still under a dead claim gets its backoff from the drain's claim: wait for that too.
    const dead = await db.all<{ lease: unknown; abandons: unknown }>(
      `SELECT lease_expires_at AS lease, abandons FROM decision_jobs WHERE state = 'owed' AND claim_token IS NOT NULL`,
    );
    const abandonedDue = Math.max(
      0,
      ...dead.map((r) => Number(r.lease) + Math.min(3_600_000, leaseMs * 2 ** Math.min(Number(r.abandons), 7))),
    );
    const waitMs = Math.max(0, Math.min(Math.max(lastDue, abandonedDue) - Date.now(), 3_600_000));
    console.log(
      `before the drain: ${backingOff} owed jobs put back after an abandon, ${dead.length} under a dead worker's claim; waiting ${Math.round(waitMs / 1000)} s for the last of them to come due`,
    );
    await sleep(waitMs + 500);
    const drain = spawnSync(process.execPath, [main, 'worker', '--until-idle'], {
      cwd: ROOT,
      env,
      encoding: 'utf8',
      maxBuffer: 1 << 30,
    });
    console.log(`final worker --until-idle: exit ${drain.status}`);
    tally(drain.stdout + drain.stderr);
    keepLog('final-drain', drain.stdout + drain.stderr);
    process.stdout.write(
      drain.stdout
        .split('\n')
        .filter((l) => l && !l.startsWith('{'))
        .map((l) => `  ${l}\n`)
        .join(''),
    );

    // 4. the checks
    const owed = await db.count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'`);
    const parked = await db.count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'parked'`);
    const abandoned = await db.count(`SELECT coalesce(sum(abandons), 0) AS n FROM decision_jobs`);
    const dupKey = await db.count(`SELECT count(*) AS n FROM (SELECT 1 AS one FROM item_decisions
      GROUP BY item_id, question_set, question_key, state_hash, question_hash, state_version HAVING count(*) > 1) d`);
    const dupAnyVersion = await db.count(`SELECT count(*) AS n FROM (SELECT 1 AS one FROM item_decisions
      GROUP BY item_id, question_set, question_key, state_hash, question_hash HAVING count(*) > 1) d`);
    const answers = await db.count(`SELECT count(*) AS n FROM item_decisions`);
    const cleanAnswers = await clean.count(`SELECT count(*) AS n FROM item_decisions`);
    const calls = await callsOf(db);
    const byOutcome = await db.all<{ outcome: string; calls: unknown }>(
      `SELECT outcome, sum(calls) AS calls FROM decision_spend GROUP BY outcome ORDER BY outcome`,
    );
    // Calls by set beside the clean run's: which set a surplus (or a shortfall) belongs to.
    const bySetQ = `SELECT question_set AS qs, sum(calls) AS calls FROM decision_spend GROUP BY question_set ORDER BY question_set`;
    const bySet = await db.all<{ qs: string; calls: unknown }>(bySetQ);
    const cleanBySet = new Map(
      (await clean.all<{ qs: string; calls: unknown }>(bySetQ)).map((r) => [r.qs, Number(r.calls)]),
    );
    const deadlocks = deadlocksLogged() - deadlocksBefore;
    console.log('--- after the chaos');
    console.log(`owed jobs: ${owed}`);
    console.log(`parked jobs: ${parked}${parked ? ` (abandons counted on them: ${abandoned})` : ''}`);
    console.log(`answers: ${answers} (clean run: ${cleanAnswers})`);
    console.log(`duplicate answers on the idempotency key: ${dupKey}`);
    console.log(`keys answered more than once at the same state hash + question hash (any version): ${dupAnyVersion}`);
    console.log(
      `provider calls: ${calls} (clean run: ${cleanCalls}); by outcome: ${byOutcome.map((o) => `${o.outcome} ${Number(o.calls)}`).join(', ') || 'none'}`,
    );
    console.log(
      `provider calls by set (clean run's in brackets): ${bySet.map((r) => `${r.qs} ${Number(r.calls)} [${cleanBySet.get(r.qs) ?? 0}]`).join(', ') || 'none'}`,
    );
    if (pgLog) console.log(`"deadlock detected" in the server log during the run: ${deadlocks}`);
    console.log(
      `failed completions logged, by error code: ${[...failedCompletions].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
    );
    console.log('job outcomes logged by every worker, killed ones included (outcome/reason):');
    for (const [k, n] of [...outcomes].sort((a, b) => b[1] - a[1])) console.log(`  ${k}: ${n}`);
    if (owed || parked || dupKey || dupAnyVersion || calls !== cleanCalls || answers !== cleanAnswers || deadlocks)
      process.exitCode = 1;
  } finally {
    if (keep) console.log(`kept (--keep): ${dbs.map((d) => d.url).join(', ')}`);
    else {
      for (const db of dbs) await db.drop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

await main();
