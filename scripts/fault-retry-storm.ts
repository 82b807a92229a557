/**
 * A retry storm (DESIGN §3.7): the real worker process (`node dist/cli/main.js
 * worker`, the real AnthropicProvider and SDK) against a fake Anthropic server that answers every
 * request `529 overloaded_error` (or `503 api_error`) with `retry-after: 1`, for ever, on a real
 * SQLite file holding 5 open items of the bundled beads sample (real tracker data).
 *
 *   npx tsx scripts/fault-retry-storm.ts [--duration-s 75] [--status 529|503] [--root DIR] [--until-idle-timeout-s 30]
 *
 * `--root` is the checkout whose built CLI (`DIR/dist/cli/main.js`) is run, so the same script
 * measures an old build (`git worktree add /tmp/old 72d0f7e && (cd /tmp/old && npm run build)`).
 * A sixth item is imported at a third of the run, to see whether a later item is ever claimed.
 *
 * Prints: requests total, requests per job pass (requests / recorded job outcomes, and the most
 * requests any one outcome line covered), attempts and due times per job over time (each change of
 * a job row, sampled every 250 ms), answers stored, whether `worker --until-idle` exits on its own
 * afterwards, and the `status` failing-sets line. Real time: this is a measurement, not a test.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { FakeAnthropicServer } from '../src/testing/fake-anthropic-server.js';

const { values } = parseArgs({
  options: {
    'duration-s': { type: 'string', default: '75' },
    status: { type: 'string', default: '529' },
    root: { type: 'string', default: '.' },
    'until-idle-timeout-s': { type: 'string', default: '30' },
  },
});
const durationMs = Number(values['duration-s']) * 1000;
const status = Number(values.status);
if (!(durationMs > 0) || (status !== 529 && status !== 503)) {
  process.stderr.write('usage: fault-retry-storm.ts [--duration-s N>0] [--status 529|503] [--root DIR]\n');
  process.exit(2);
}
const cli = resolve(values.root!, 'dist/cli/main.js');
const untilIdleTimeoutMs = Number(values['until-idle-timeout-s']) * 1000;

// ---------------------------------------------------------------- the outage and the data
const server = await FakeAnthropicServer.start();
server.setFallback((req) => {
  if (req.method === 'GET') return server.defaultReply(req);
  return status === 529
    ? FakeAnthropicServer.errorReply(529, 'overloaded_error', 'Overloaded', { 'retry-after': '1' })
    : FakeAnthropicServer.errorReply(503, 'api_error', 'Service unavailable', { 'retry-after': '1' });
});

const dir = mkdtempSync(join(tmpdir(), 'verdict-storm-'));
const db = join(dir, 'verdict.db');
const rows = readFileSync(new URL('../sample/beads-issues.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .map((l) => JSON.parse(l) as { status?: string; issue_type?: string; dependencies?: unknown[] })
  .filter(
    (r) => r.status === 'open' && (r.issue_type === 'task' || r.issue_type === 'bug') && !(r.dependencies ?? []).length,
  );
if (rows.length < 6) throw new Error('the sample has fewer than 6 open tasks without dependencies');
const first = join(dir, 'five.jsonl');
const later = join(dir, 'six.jsonl');
writeFileSync(
  first,
  rows
    .slice(0, 5)
    .map((r) => JSON.stringify(r))
    .join('\n') + '\n',
);
writeFileSync(
  later,
  rows
    .slice(0, 6)
    .map((r) => JSON.stringify(r))
    .join('\n') + '\n',
);

const env = {
  ...process.env,
  NO_COLOR: '1',
  CI: '1',
  VERDICT_DATABASE_URL: db,
  VERDICT_PROVIDER: 'anthropic',
  ANTHROPIC_API_KEY: 'sk-test-storm',
  ANTHROPIC_BASE_URL: server.url,
  VERDICT_LOG_LEVEL: 'debug',
  VERDICT_TICK_MS: '1000',
};

function run(
  args: string[],
  timeoutMs: number,
): Promise<{ code: number | null; out: string; err: string; ms: number; timedOut: boolean }> {
  return new Promise((done) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [cli, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let timedOut = false;
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      done({ code, out, err, ms: performance.now() - t0, timedOut });
    });
  });
}

const imp = await run(['import', 'beads', first], 60_000);
if (imp.code !== 0) throw new Error(`import failed: ${imp.err}`);

// ---------------------------------------------------------------- the worker, sampled
const reader = new Database(db, { readonly: true, fileMustExist: true });
const refOf = new Map<string, string>(
  (reader.prepare('SELECT id, ref FROM items').all() as Array<{ id: string; ref: string }>).map((r) => [r.id, r.ref]),
);
type JobSample = {
  attempts: number;
  defers: number | null;
  notBefore: number;
  lastError: string | null;
  claimed: boolean;
  gone?: boolean;
};
const history = new Map<string, Array<{ t: number } & JobSample>>();
const t0 = Date.now();
let laterImported = false;
let laterRef: string | null = null;

function sample(): void {
  const now = Date.now();
  const jobs = reader.prepare('SELECT * FROM decision_jobs').all() as Array<Record<string, unknown>>;
  const present = new Set<string>();
  for (const j of jobs) {
    const key = `${refOf.get(j.item_id as string) ?? (j.item_id as string)}/${j.question_set as string}`;
    const s: JobSample = {
      attempts: j.attempts as number,
      defers: (j.defers as number | undefined) ?? null,
      notBefore: j.not_before as number,
      lastError: (j.last_error as string | null) ?? null,
      claimed: j.claim_token !== null,
    };
    present.add(key);
    const h = history.get(key) ?? [];
    const prev = h.at(-1);
    if (
      !prev ||
      prev.attempts !== s.attempts ||
      prev.notBefore !== s.notBefore ||
      prev.defers !== s.defers ||
      prev.claimed !== s.claimed
    )
      h.push({ t: now - t0, ...s });
    history.set(key, h);
  }
  // A row that went away was completed or dropped (nothing to ask: the conventions sets here).
  for (const [key, h] of history) {
    const last = h.at(-1)!;
    if (!present.has(key) && !last.gone) h.push({ ...last, t: now - t0, claimed: false, gone: true });
  }
}

const worker = spawn(process.execPath, [cli, 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
let log = '';
worker.stdout.on('data', (d) => (log += d));
worker.stderr.on('data', (d) => (log += d));
const workerExit = new Promise<number | null>((r) => worker.on('exit', (c) => r(c)));
while (Date.now() - t0 < durationMs) {
  await new Promise((r) => setTimeout(r, 250));
  sample();
  if (!laterImported && Date.now() - t0 > durationMs / 3) {
    laterImported = true;
    const r = await run(['import', 'beads', later], 60_000);
    if (r.code !== 0) throw new Error(`second import failed: ${r.err}`);
    for (const row of reader.prepare('SELECT id, ref FROM items').all() as Array<{ id: string; ref: string }>) {
      if (!refOf.has(row.id)) laterRef = row.ref;
      refOf.set(row.id, row.ref);
    }
  }
}
const requestsDuringRun = server.messages.length;
worker.kill('SIGTERM');
const workerCode = await workerExit;
sample();

// ---------------------------------------------------------------- afterwards: --until-idle and status
const before = server.messages.length;
const idle = await run(['worker', '--until-idle'], untilIdleTimeoutMs);
const idleRequests = server.messages.length - before;
const st = await run(['status'], 30_000);
const answers = (reader.prepare('SELECT count(*) AS n FROM item_decisions').get() as { n: number }).n;

// ---------------------------------------------------------------- report
const lines = log.split('\n').filter((l) => l.startsWith('{'));
const outcomes = lines
  .map((l) => JSON.parse(l) as { msg?: string; outcome?: string; reason?: string; attempts?: number })
  .filter((l) => l.msg === 'job outcome');
const byKind = new Map<string, number>();
for (const o of outcomes) byKind.set(`${o.outcome} (${o.reason})`, (byKind.get(`${o.outcome} (${o.reason})`) ?? 0) + 1);
const fmtS = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const out: string[] = [];
out.push(
  `fault-retry-storm: ${status} + retry-after: 1 for ever; build ${cli}; worker ran ${fmtS(durationMs)}; 5 items, a 6th (${laterRef ?? '?'}) imported at ${fmtS(durationMs / 3)}`,
);
out.push(`requests total during the run: ${requestsDuringRun}`);
out.push(
  `job outcomes recorded during the run: ${outcomes.length}; requests per job pass: ${outcomes.length ? (requestsDuringRun / outcomes.length).toFixed(2) : 'n/a'}`,
);
for (const [k, n] of [...byKind].sort()) out.push(`  ${String(n).padStart(5)} × ${k}`);
out.push(
  'attempts and due times per job (each change of the row, sampled every 250 ms; t from the worker start; "due in" = not_before − sample time):',
);
for (const [key, h] of [...history].sort()) {
  const steps = h.map((s) =>
    s.gone
      ? `t=${fmtS(s.t)} row gone (completed: nothing to ask)`
      : `t=${fmtS(s.t)} attempts=${s.attempts}${s.defers !== null ? ` defers=${s.defers}` : ''} ${s.claimed ? 'claimed' : s.notBefore > t0 + s.t ? `due in ${fmtS(s.notBefore - (t0 + s.t))}` : 'due'}`,
  );
  const shown = steps.length > 8 ? [...steps.slice(0, 4), `… ${steps.length - 7} more …`, ...steps.slice(-3)] : steps;
  out.push(`  ${key}: ${h.length} changes; ${shown.join(' | ')}`);
}
const asked = [...history].filter(([, h]) => h.some((x) => x.claimed));
const maxAttempts = Math.max(0, ...asked.map(([, h]) => Math.max(...h.map((x) => x.attempts))));
const waits = asked.flatMap(([, h]) =>
  h
    .filter((x, i) => !x.claimed && i > 0 && h[i - 1].claimed && x.notBefore > t0 + x.t)
    .map((x) => (x.notBefore - (t0 + x.t)) / 1000),
);
out.push(
  `jobs claimed at least once: ${asked.length}; highest attempts count: ${maxAttempts}; waits set after a pass: ${waits.length ? `${Math.min(...waits).toFixed(1)} s to ${Math.max(...waits).toFixed(1)} s` : 'none'}`,
);
const laterClaimed = laterRef
  ? [...history].some(([k, h]) => k.startsWith(`${laterRef}/`) && h.some((s) => s.attempts > 0 || s.lastError !== null))
  : false;
out.push(`later item ${laterRef ?? '?'} claimed during the run: ${laterClaimed ? 'yes' : 'no'}`);
out.push(`answers stored: ${answers}`);
out.push(`worker exit on SIGTERM: ${workerCode}`);
out.push(
  `worker --until-idle afterwards: ${idle.timedOut ? `did NOT exit within ${fmtS(untilIdleTimeoutMs)} (killed)` : `exited with code ${idle.code} after ${fmtS(idle.ms)}`}; ${idleRequests} requests meanwhile`,
);
for (const l of idle.out.split('\n').filter((x) => x.startsWith('drained') || x.startsWith('left'))) out.push(`  ${l}`);
out.push(
  `status: ${st.out.split('\n').find((l) => l.startsWith('failing sets')) ?? `(no failing-sets line; exit ${st.code})`}`,
);
process.stdout.write(`${out.join('\n')}\n`);
reader.close();
await server.close();
