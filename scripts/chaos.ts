import Database from 'better-sqlite3';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

/**
 * Chaos run (DESIGN §1 principles 4–6, §3): SIGKILL real worker processes mid-drain and check that
 * nothing owed is lost and nothing is paid for twice.
 *
 * 1. a fresh SQLite database; the bundled beads sample imported with the built CLI;
 * 2. `--rounds` times (default 20): spawn `node dist/cli/main.js worker` (the node process itself)
 *    with the fake provider at `--latency-ms` (default 20) per call, wait until it has recorded its
 *    first outcome and then a random 100–1,500 ms, SIGKILL it (its claims are left with live
 *    leases, `--lease-ms` default 4,000);
 * 3. wait out the last leases, then `worker --until-idle` to the end;
 * 4. query the database: owed and parked jobs, duplicate answers (rows sharing the idempotency
 *    key, which the unique index forbids; and keys answered more than once at the same state hash
 *    and question hash whatever the state version), and the provider calls by outcome.
 *
 * Needs the build: `npm run build` first. `npx tsx scripts/chaos.ts [--rounds 20] [--latency-ms 20]
 * [--lease-ms 4000] [--seed 1]`. Real time: about a minute. Not a test (it waits in real time).
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
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

async function main(): Promise<void> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` first`);
  const rounds = arg('rounds', 20);
  const latencyMs = arg('latency-ms', 20);
  const leaseMs = arg('lease-ms', 4_000);
  const random = seeded(arg('seed', 1));
  const dir = mkdtempSync(join(tmpdir(), 'verdict-chaos-'));
  const db = join(dir, 'chaos.db');
  const env = {
    ...process.env,
    NO_COLOR: '1',
    ANTHROPIC_API_KEY: '',
    VERDICT_DATABASE_URL: db,
    VERDICT_PROVIDER: 'fake',
    VERDICT_FAKE_LATENCY_MS: String(latencyMs),
    VERDICT_LEASE_MS: String(leaseMs),
    VERDICT_TICK_MS: '50',
    VERDICT_LOG_LEVEL: 'error',
  };
  const read = <T>(f: (d: Database.Database) => T): T => {
    const d = new Database(db, { readonly: true });
    try {
      return f(d);
    } finally {
      d.close();
    }
  };
  const count = (q: string) => read((d) => (d.prepare(q).get() as { n: number }).n);
  try {
    const imp = spawnSync(process.execPath, [MAIN, 'import', 'beads', join(ROOT, 'sample', 'beads-issues.jsonl')], { cwd: ROOT, env, encoding: 'utf8' });
    if (imp.status !== 0) throw new Error(`import failed (exit ${imp.status}): ${imp.stderr}`);
    const owedAtStart = count(`SELECT count(*) AS n FROM decision_jobs`);
    console.log(`imported the bundled sample: ${owedAtStart} jobs owed; fake provider ${latencyMs} ms a call, lease ${leaseMs} ms`);

    // Job outcomes as the workers log them (debug level logs every outcome, ids and counts only).
    const outcomes = new Map<string, number>();
    const tally = (logText: string) => {
      for (const line of logText.split('\n')) {
        if (!line.includes('"job outcome"')) continue;
        try {
          const o = JSON.parse(line) as { outcome: string; reason?: string; recorded?: string };
          const k = `${o.outcome}${o.reason ? `/${o.reason}` : ''}${o.recorded && o.recorded !== 'applied' ? ` (${o.recorded})` : ''}`;
          outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
        } catch {
          // a line cut by the SIGKILL
        }
      }
    };
    const logEnv = { ...env, VERDICT_LOG_LEVEL: 'debug' };

    for (let r = 1; r <= rounds; r++) {
      const child = spawn(process.execPath, [MAIN, 'worker'], { cwd: ROOT, env: logEnv, stdio: ['ignore', 'pipe', 'pipe'] });
      let logs = '';
      let draining!: () => void;
      const started = new Promise<void>((res) => (draining = res));
      const onData = (d: Buffer) => {
        logs += d;
        if (logs.includes('"job outcome"')) draining();
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      const exited = new Promise<NodeJS.Signals | null>((res) => child.on('close', (_c, s) => res(s)));
      // The kill lands during the drain: a random moment after the worker recorded its first outcome
      // (process start-up and migrations take a second or more on a busy machine).
      const t0 = Date.now();
      await Promise.race([started, sleep(15_000)]);
      const waitMs = Math.round(100 + random() * 1_400);
      await sleep(waitMs);
      child.kill('SIGKILL');
      const signal = await exited;
      tally(logs);
      const left = count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'`);
      const leased = count(`SELECT count(*) AS n FROM decision_jobs WHERE claim_token IS NOT NULL`);
      const answers = count(`SELECT count(*) AS n FROM item_decisions`);
      console.log(`round ${String(r).padStart(2)}: worker pid ${child.pid} killed (${signal}) ${waitMs} ms into its drain (${Date.now() - t0} ms after spawn); owed ${left}, claims left behind ${leased}, answers ${answers}`);
    }

    // The killed workers' claims stay leased until their leases end; the drain must not skip them.
    await sleep(leaseMs + 500);
    const drain = spawnSync(process.execPath, [MAIN, 'worker', '--until-idle'], { cwd: ROOT, env: logEnv, encoding: 'utf8', maxBuffer: 1 << 30 });
    console.log(`final worker --until-idle: exit ${drain.status}`);
    tally(drain.stdout + drain.stderr);
    process.stdout.write(drain.stdout.split('\n').filter((l) => l && !l.startsWith('{')).map((l) => `  ${l}\n`).join(''));

    const owed = count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'owed'`);
    const parked = count(`SELECT count(*) AS n FROM decision_jobs WHERE state = 'parked'`);
    const abandoned = count(`SELECT coalesce(sum(abandons), 0) AS n FROM decision_jobs`);
    const dupKey = count(`SELECT count(*) AS n FROM (SELECT 1 FROM item_decisions
      GROUP BY item_id, question_set, question_key, state_hash, question_hash, state_version HAVING count(*) > 1)`);
    const dupAnyVersion = count(`SELECT count(*) AS n FROM (SELECT 1 FROM item_decisions
      GROUP BY item_id, question_set, question_key, state_hash, question_hash HAVING count(*) > 1)`);
    const answers = count(`SELECT count(*) AS n FROM item_decisions`);
    const keys = count(`SELECT count(*) AS n FROM (SELECT DISTINCT item_id, question_set, question_key FROM item_decisions)`);
    const calls = read((d) => d.prepare(`SELECT outcome, sum(calls) AS calls FROM decision_spend GROUP BY outcome ORDER BY outcome`).all() as Array<{ outcome: string; calls: number }>);
    console.log('--- after the chaos');
    console.log(`owed jobs: ${owed}`);
    console.log(`parked jobs: ${parked}${parked ? ` (abandons counted on them: ${abandoned})` : ''}`);
    console.log(`answers: ${answers} rows over ${keys} (item, set, key)`);
    console.log(`duplicate answers on the idempotency key: ${dupKey}`);
    console.log(`keys answered more than once at the same state hash + question hash (any version): ${dupAnyVersion}`);
    console.log(`provider calls by outcome (decision_spend): ${calls.map((o) => `${o.outcome} ${o.calls}`).join(', ') || 'none'}`);
    console.log('job outcomes logged by every worker, killed ones included (outcome/reason):');
    for (const [k, n] of [...outcomes].sort((a, b) => b[1] - a[1])) console.log(`  ${k}: ${n}`);
    if (owed || parked || dupKey || dupAnyVersion) process.exitCode = 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
