import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './bench-drain.js';

/**
 * Part j of `npm run bench`: the HTTP API under load. `verdict demo` builds its database (the
 * bundled beads sample, drained by the fake provider), `verdict tokens create` makes a write token
 * for its workspace, and `verdict serve` serves it in a child process; autocannon then sends, at
 * `connections` connections for `seconds` each, `GET /v1/items/{ref}` over the sample's refs, and
 * `POST /v1/items` creating a new item per request. The rate limit is raised to its maximum for the
 * run (the default, 600 a minute per token, would answer most requests 429); the log level is the
 * default (info: a line per request), written to /dev/null.
 */

/** One autocannon run: requests per second (mean), latency percentiles in ms, and what went wrong. */
export interface LoadResult {
  name: string;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  /** The server process's CPU (user + system, from /proc) per request, µs: steady on a loaded machine, where req/s is not. Null off Linux. */
  serverCpuUsPerRequest: number | null;
  non2xx: number;
  errors: number;
  timeouts: number;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function cli(cliArgs: readonly string[], args: string[]): string {
  const r = spawnSync(process.execPath, [...cliArgs, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1' },
    maxBuffer: 16 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`verdict ${args[0]} exited ${r.status}: ${r.stderr.slice(-2000)}`);
  return r.stdout;
}

function firstLines(from: string, n: number, to: string): string {
  writeFileSync(to, readFileSync(from, 'utf8').split('\n').slice(0, n).join('\n') + '\n');
  return to;
}

/** CPU µs (user + system) a process has used, from /proc/PID/stat (clock ticks of 10 ms); null where there is no /proc. */
function processCpuUs(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the command name.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return null;
  }
}

function run(name: string, pid: number, opts: autocannon.Options): Promise<LoadResult> {
  const cpu0 = processCpuUs(pid);
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, r) => {
      if (err) return reject(err);
      const cpu1 = processCpuUs(pid);
      resolve({
        serverCpuUsPerRequest: cpu0 === null || cpu1 === null ? null : (cpu1 - cpu0) / Math.max(1, r.requests.total),
        name,
        requestsPerSecond: r.requests.mean,
        p50Ms: r.latency.p50,
        p99Ms: r.latency.p99,
        requests: r.requests.total,
        non2xx: r.non2xx,
        errors: r.errors,
        timeouts: r.timeouts,
      });
    });
  });
}

/**
 * Builds the demo database, serves it, and loads it.
 * @param cliArgs how the CLI is started (node arguments before the subcommand, scripts/bench-drain.ts SOURCE_CLI or BUILT_CLI)
 * @param opts.sampleLines build the demo from the bundled sample's first lines only (the smoke's size)
 * @param opts.serveArgs more `verdict serve` flags (e.g. `--log-level warn` to see what logging costs)
 * @param opts.nodeArgs node flags for the server (e.g. `--cpu-prof --cpu-prof-dir=DIR` to see where its time goes)
 * @throws Error when the demo, the token or the server fails, or a run answered anything but 2xx.
 */
export async function benchHttp(
  cliArgs: readonly string[],
  connections: number,
  seconds: number,
  opts: { sampleLines?: number; serveArgs?: string[]; nodeArgs?: string[] } = {},
): Promise<LoadResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'verdict-bench-http-'));
  const dbFile = join(dir, 'demo.db');
  let server: ChildProcess | undefined;
  try {
    // The smoke's demo drains the sample's first lines only: the whole sample takes minutes on a small machine.
    const sample =
      opts.sampleLines === undefined
        ? []
        : [
            '--sample',
            firstLines(join(ROOT, 'sample/beads-issues.jsonl'), opts.sampleLines, join(dir, 'sample.jsonl')),
          ];
    cli(cliArgs, ['demo', '--database-url', dbFile, ...sample]);
    const token = (
      JSON.parse(
        cli(cliArgs, [
          'tokens',
          'create',
          '--database-url',
          dbFile,
          '--workspace',
          'beads',
          '--role',
          'write',
          '--name',
          'bench',
          '--json',
        ]),
      ) as { token: string }
    ).token;
    const db = new Database(dbFile, { readonly: true });
    const rows = db
      .prepare(
        'SELECT i.ref, c.slug FROM items i JOIN collections c ON c.id = i.collection_id WHERE i.deleted_at IS NULL ORDER BY i.id LIMIT 500',
      )
      .all() as Array<{ ref: string; slug: string }>;
    db.close();
    if (rows.length === 0) throw new Error('j: the demo database has no items');
    const port = await freePort();
    server = spawn(
      process.execPath,
      [
        ...(opts.nodeArgs ?? []),
        ...cliArgs,
        'serve',
        '--database-url',
        dbFile,
        '--http-host',
        '127.0.0.1',
        '--http-port',
        String(port),
        '--http-rate-limit-per-minute',
        '1000000',
        '--provider',
        'fake',
        ...(opts.serveArgs ?? []),
      ],
      { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'ignore'] },
    );
    await new Promise<void>((resolve, reject) => {
      let out = '';
      server!.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('listening on')) resolve();
      });
      server!.on('exit', (code) => reject(new Error(`j: verdict serve exited ${code} before listening`)));
    });
    server.stdout!.resume();
    const url = `http://127.0.0.1:${port}`;
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    let n = 0;
    const read = await run('GET /v1/items/{ref}', server.pid!, {
      url,
      connections,
      duration: seconds,
      headers,
      requests: [
        {
          method: 'GET',
          setupRequest: (req) => ({ ...req, path: `/v1/items/${encodeURIComponent(rows[n++ % rows.length].ref)}` }),
        },
      ],
    });
    const collection = rows[0].slug;
    let w = 0;
    const stamp = Date.now().toString(36);
    const write = await run('POST /v1/items', server.pid!, {
      url,
      connections,
      duration: seconds,
      headers,
      requests: [
        {
          method: 'POST',
          path: '/v1/items',
          setupRequest: (req) => ({
            ...req,
            body: JSON.stringify({
              collection,
              ref: `bench-${stamp}-${++w}`,
              title: `bench item ${w}`,
              content: 'created by the bench',
            }),
          }),
        },
      ],
    });
    for (const r of [read, write]) {
      if (r.non2xx > 0 || r.errors > 0 || r.requests === 0)
        throw new Error(
          `j: ${r.name}: ${r.requests} requests, ${r.non2xx} not 2xx, ${r.errors} errors, ${r.timeouts} timeouts`,
        );
    }
    return [read, write];
  } finally {
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.on('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
