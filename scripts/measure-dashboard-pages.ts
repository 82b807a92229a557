/**
 * Dashboard pages on the demo database with a realistic spend history (DESIGN §16.4):
 * `npx tsx scripts/measure-dashboard-pages.ts [--runs N] [--page /ui/spend] [--browser]`.
 *
 * The demo (`verdict demo`, the bundled sample drained by the fake provider) has a few minutes of
 * spend; a server that has run for a month has a row per (hour, set, provider, model, outcome).
 * The script adds 30 days of it: every hour, each of the demo's sets, two models (one priced, one
 * batch), the outcomes `ok` every hour and a failure every sixth hour, with token counts of the
 * sizes the demo's own calls billed.
 *
 * Server time (the default): builds the HTTP server in this process and times GET of each page
 * through `inject` (the HTTP parsing of a socket is left out: it is the same for every page), a
 * warm-up first, and prints the median and the slowest of the runs.
 *
 * In the browser (`--browser`): starts the built `verdict serve` (dist/cli/main.js, run
 * `npm run build` first) and opens each page in Chromium (playwright-core, /usr/bin/chromium or
 * VERDICT_CHROMIUM) as a person would, three ways: (1) the server's first page, opened the moment
 * it listens, while it is still parsing its charts (dashboard-routes.ts, the `onListen` hook);
 * (2) on a second start, the first page after the server logged `dashboard charts parsed`, in a
 * new browser context (nothing cached); (3) the same page again, `--runs` times (the stylesheet
 * cached), the median. For each: wall times from the page's own Performance API (first byte,
 * first contentful paint, DOMContentLoaded, load) and the CPU the server process and Chromium's
 * processes spent on it (/proc, 10 ms ticks). `VERDICT_MEASURE_CLI=/other/checkout/dist/cli/main.js`
 * serves with another revision's build, to compare.
 *
 * Figures to report, not assertions: run it on a quiet machine, `nice -n 10` on a shared one.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { chromium, type Page, type Request } from 'playwright-core';
import { createApiServer, createVerdict, type Verdict } from '../src/index.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' },
    page: { type: 'string', multiple: true },
    browser: { type: 'boolean', default: false },
  },
});
const runs = Math.max(1, Number(values.runs));
const pages = values.page?.length ? values.page : ['/ui/spend', '/ui/queue', '/ui/flags', '/ui/items'];

/** The built CLI the browser measurement serves with: VERDICT_MEASURE_CLI names another revision's build. */
const CLI = process.env.VERDICT_MEASURE_CLI ?? 'dist/cli/main.js';

const dir = mkdtempSync(join(tmpdir(), 'verdict-pages-'));
const db = join(dir, 'demo.db');
try {
  execFileSync(process.execPath, ['dist/cli/main.js', 'demo', '--database-url', db], {
    env: { ...process.env, ANTHROPIC_API_KEY: '' },
    stdio: 'ignore',
  });
  const sql = new Database(db);
  const sets = (sql.prepare('SELECT DISTINCT question_set AS s FROM decision_spend').all() as Array<{ s: string }>).map(
    (r) => r.s,
  );
  const HOUR = 3_600_000;
  const now = Math.floor(Date.now() / HOUR) * HOUR;
  const add = sql.prepare(
    `INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
  );
  let added = 0;
  sql.transaction(() => {
    for (let h = 1; h <= 30 * 24; h++) {
      for (const set of sets) {
        for (const [model, outcome] of [
          ['claude-haiku-4-5', 'ok'],
          ['claude-sonnet-4-5', 'ok'],
          ['claude-haiku-4-5', 'batch'],
        ] as const) {
          const calls = 5 + ((h * 7 + set.length) % 40);
          added += add.run(
            now - h * HOUR,
            set,
            'anthropic',
            model,
            outcome,
            calls,
            calls * 1_900,
            calls * 140,
            calls * 1_200,
            0,
          ).changes;
        }
        if (h % 6 === 0)
          added += add.run(
            now - h * HOUR,
            set,
            'anthropic',
            'claude-haiku-4-5',
            'provider_error',
            2,
            3_000,
            0,
            0,
            0,
          ).changes;
      }
    }
  })();
  sql.close();
  const v = await createVerdict({ database: db, provider: 'fake' });
  const token = (await v.tokens.create({ workspace: 'beads', role: 'admin', name: 'measure', createWorkspace: true }))
    .token;
  if (values.browser) {
    await v.close();
    process.stdout.write(
      `demo database plus ${added} spend rows (30 days × ${sets.length} sets); in Chromium, repeat visits: median of ${runs}\n`,
    );
    await measureInBrowser(db, token);
  } else await measureServerTime(v, token, added, sets.length);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/** Server time of each page through `inject` (see the header). */
async function measureServerTime(v: Verdict, token: string, added: number, setCount: number): Promise<void> {
  const server = await createApiServer(v, { rateLimitPerMinute: 1_000_000 });
  await server.ready();
  const login = await server.inject({ method: 'GET', url: '/ui/login' });
  const csrfCookie = login.cookies.find((c) => c.name === 'verdict_csrf')!;
  const csrf = /name="_csrf" value="([^"]+)"/.exec(login.body)![1];
  const session = await server.inject({
    method: 'POST',
    url: '/ui/login',
    cookies: { verdict_csrf: csrfCookie.value },
    payload: { _csrf: csrf, token },
  });
  const cookie = session.cookies.find((c) => c.name === 'verdict_session')!;
  process.stdout.write(
    `demo database plus ${added} spend rows (30 days × ${setCount} sets); ${runs} runs per page after a warm-up\n`,
  );
  for (const url of pages) {
    const times: number[] = [];
    const cpu: number[] = [];
    let bytes = 0;
    for (let i = 0; i <= runs; i++) {
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const r = await server.inject({ method: 'GET', url, cookies: { verdict_session: cookie.value } });
      const c = process.cpuUsage(c0);
      const ms = performance.now() - t0;
      if (r.statusCode !== 200) throw new Error(`${url}: ${r.statusCode}`);
      bytes = r.rawPayload.length;
      if (i > 0) {
        times.push(ms);
        cpu.push((c.user + c.system) / 1000);
      }
    }
    // CPU time of this process during the request as well as wall time: on a shared machine the
    // wall time mostly measures the other processes; the CPU time is the page's own cost.
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    process.stdout.write(
      `${url.padEnd(12)} wall median ${median(times).toFixed(0).padStart(5)} ms, slowest ${Math.max(...times)
        .toFixed(0)
        .padStart(5)} ms; CPU median ${median(cpu).toFixed(0).padStart(5)} ms; ${(bytes / 1024).toFixed(0)} KB\n`,
    );
  }
  await server.close();
  await v.close();
}

/** CPU time of these processes so far, ms (utime + stime of /proc/PID/stat, in USER_HZ ticks of 10 ms). */
function cpuMsOf(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return ticks * 10;
}

/** Every process below `root` (Chromium's browser, GPU and renderer processes are this script's descendants). */
function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone already.
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [pid, pp] of parent)
      if (pp === p) {
        out.push(pid);
        walk(pid);
      }
  };
  walk(root);
  return out;
}

interface Visit {
  firstByteMs: number;
  fcpMs: number | null;
  dclMs: number;
  loadMs: number;
  serverCpuMs: number;
  browserCpuMs: number;
  bytes: number;
}

/** Starts `verdict serve` on the database; resolves with its address once it listens. */
async function startServe(db: string): Promise<{ child: ChildProcess; base: string; log: () => string }> {
  const child = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...process.env,
      VERDICT_DATABASE_URL: db,
      VERDICT_PROVIDER: 'fake',
      VERDICT_HTTP_PORT: '0',
      VERDICT_LOG_LEVEL: 'info',
      ANTHROPIC_API_KEY: '',
      NO_COLOR: '1',
      CI: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout!.on('data', (d) => (log += d));
  child.stderr!.on('data', (d) => (log += d));
  const base = await until(() => /listening on (http:\/\/\S+)/.exec(log)?.[1]);
  return { child, base, log: () => log };
}

async function until<T>(check: () => T | undefined, timeoutMs = 120_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const x = check();
    if (x) return x;
    if (Date.now() > end) throw new Error('measure-dashboard-pages: timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A session cookie for the token: the login form, posted as a browser would. */
async function sessionCookie(base: string, token: string): Promise<string> {
  const login = await fetch(`${base}/ui/login`);
  const csrfCookie = /verdict_csrf=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')![1];
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await login.text())![1];
  const r = await fetch(`${base}/ui/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `verdict_csrf=${csrfCookie}` },
    body: new URLSearchParams({ _csrf: csrf, token }).toString(),
  });
  return /verdict_session=([^;]+)/.exec(r.headers.get('set-cookie') ?? '')![1];
}

/** Opens `url` in `page` (a new tab for a first visit, the same tab again for a repeat). */
async function visit(page: Page, url: string, serverPid: number): Promise<Visit> {
  let bytes = 0;
  const sized: Array<Promise<void>> = [];
  const onFinished = (req: Request) =>
    sized.push(req.sizes().then((s) => void (bytes += s.responseBodySize + s.responseHeadersSize)));
  page.on('requestfinished', onFinished);
  const chrome = descendants(process.pid).filter((p) => p !== serverPid);
  const s0 = cpuMsOf([serverPid]);
  const b0 = cpuMsOf(chrome);
  await page.goto(url, { waitUntil: 'load' });
  // A string: this script's TypeScript has no DOM types. A buffered observer: the paint entry may
  // be recorded after the load event.
  const t = (await page.evaluate(`new Promise((resolve) => {
    const nav = performance.getEntriesByType('navigation')[0];
    const base = { firstByte: nav.responseStart, dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd };
    const timer = setTimeout(() => resolve({ ...base, fcp: null }), 3000);
    new PerformanceObserver((list) => {
      const e = list.getEntriesByName('first-contentful-paint')[0];
      if (e) { clearTimeout(timer); resolve({ ...base, fcp: e.startTime }); }
    }).observe({ type: 'paint', buffered: true });
  })`)) as { firstByte: number; dcl: number; load: number; fcp: number | null };
  await Promise.all(sized);
  page.off('requestfinished', onFinished);
  const v: Visit = {
    firstByteMs: t.firstByte,
    fcpMs: t.fcp,
    dclMs: t.dcl,
    loadMs: t.load,
    serverCpuMs: cpuMsOf([serverPid]) - s0,
    browserCpuMs: cpuMsOf(descendants(process.pid).filter((p) => p !== serverPid)) - b0,
    bytes,
  };
  return v;
}

function row(url: string, what: string, v: Visit): string {
  const ms = (x: number | null) => (x === null ? '    -' : x.toFixed(0).padStart(5));
  return `${url.padEnd(11)} ${what.padEnd(30)} first byte ${ms(v.firstByteMs)} ms, FCP ${ms(v.fcpMs)} ms, DCL ${ms(v.dclMs)} ms, load ${ms(v.loadMs)} ms; CPU server ${ms(v.serverCpuMs)} ms, Chromium ${ms(v.browserCpuMs)} ms; ${(v.bytes / 1024).toFixed(0)} KB\n`;
}

async function measureInBrowser(db: string, token: string): Promise<void> {
  const browser = await chromium.launch({ executablePath: process.env.VERDICT_CHROMIUM ?? '/usr/bin/chromium' });
  try {
    for (const url of pages) {
      // (1) The server's first page, asked for the moment it listens.
      let serve = await startServe(db);
      try {
        const cookie = await sessionCookie(serve.base, token);
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        await context.addCookies([{ name: 'verdict_session', value: cookie, url: serve.base }]);
        process.stdout.write(
          row(url, 'first page, at start', await visit(await context.newPage(), serve.base + url, serve.child.pid!)),
        );
        await context.close();
      } finally {
        serve.child.kill('SIGTERM');
        await new Promise((r) => serve.child.once('exit', r));
      }
      // (2) and (3): a second start, the first page after the charts are parsed, then again.
      serve = await startServe(db);
      try {
        // A build without the parse at start (an older revision, VERDICT_MEASURE_CLI) never logs it.
        const parsed = await until(
          () => /"cpuMs":(\d+)[^\n]*dashboard charts parsed/.exec(serve.log())?.[1],
          30_000,
        ).catch(() => null);
        const cookie = await sessionCookie(serve.base, token);
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        await context.addCookies([{ name: 'verdict_session', value: cookie, url: serve.base }]);
        const tab = await context.newPage();
        process.stdout.write(
          row(url, `first page, charts parsed`, await visit(tab, serve.base + url, serve.child.pid!)),
        );
        const again: Visit[] = [];
        for (let i = 0; i < runs; i++) again.push(await visit(tab, serve.base + url, serve.child.pid!));
        const median = (f: (x: Visit) => number | null) => {
          const xs = again
            .map(f)
            .filter((x): x is number => x !== null)
            .sort((a, b) => a - b);
          return xs.length ? xs[Math.floor(xs.length / 2)] : null;
        };
        process.stdout.write(
          row(url, `same page again, same tab`, {
            firstByteMs: median((x) => x.firstByteMs)!,
            fcpMs: median((x) => x.fcpMs),
            dclMs: median((x) => x.dclMs)!,
            loadMs: median((x) => x.loadMs)!,
            serverCpuMs: median((x) => x.serverCpuMs)!,
            browserCpuMs: median((x) => x.browserCpuMs)!,
            bytes: median((x) => x.bytes)!,
          }),
        );
        process.stdout.write(
          parsed === null
            ? `${''.padEnd(11)} (no 'dashboard charts parsed' within 30 s: this build parses charts on first use)\n`
            : `${''.padEnd(11)} (the server logged 'dashboard charts parsed' at ${parsed} ms CPU)\n`,
        );
        await context.close();
      } finally {
        serve.child.kill('SIGTERM');
        await new Promise((r) => serve.child.once('exit', r));
      }
    }
  } finally {
    await browser.close();
  }
}
