/**
 * Server time of dashboard pages on the demo database with a realistic spend history (DESIGN
 * §16.4): `npx tsx scripts/measure-dashboard-pages.ts [--runs N] [--page /ui/spend]`.
 *
 * The demo (`verdict demo`, the bundled sample drained by the fake provider) has a few minutes of
 * spend; a server that has run for a month has a row per (hour, set, provider, model, outcome).
 * The script adds 30 days of it: every hour, each of the demo's sets, two models (one priced, one
 * batch), the outcomes `ok` every hour and a failure every sixth hour, with token counts of the
 * sizes the demo's own calls billed. Then it builds the HTTP server in this process and times
 * GET of each page through `inject` (the HTTP parsing of a socket is left out: it is the same for
 * every page), a warm-up first, and prints the median and the slowest of the runs. A figure to
 * report, not an assertion: run it on a quiet machine, `nice -n 10` on a shared one.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { createApiServer, createVerdict } from '../src/index.js';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '7' }, page: { type: 'string', multiple: true } },
});
const runs = Math.max(1, Number(values.runs));
const pages = values.page?.length ? values.page : ['/ui/spend', '/ui/queue', '/ui/flags', '/ui/items'];

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
    `demo database plus ${added} spend rows (30 days × ${sets.length} sets); ${runs} runs per page after a warm-up\n`,
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
} finally {
  rmSync(dir, { recursive: true, force: true });
}
