import pg from 'pg';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Counting the statements a Verdict worker sends to PostgreSQL (`npm run bench` part d): the
 * workers log in as a role of their own, so pg_stat_statements' rows for that role in the bench
 * database are theirs alone (the bench's seeding and polling run as the admin role). Statements
 * include BEGIN/COMMIT (pg_stat_statements tracks utility statements by default): each is a round
 * trip.
 */

/** The role the workers log in as while their statements are counted. */
export const WORKER_ROLE = 'verdict_bench_worker';

async function withClient<T>(url: string, f: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await f(c);
  } finally {
    await c.end();
  }
}

/**
 * Prepares `dbUrl` (a fresh bench database, admin credentials) for counting: the extension and
 * the worker role (LOGIN SUPERUSER, so migrations run as they do for the admin).
 * @returns the URL the workers connect with, or the reason counting is not possible on this server
 * (pg_stat_statements not in shared_preload_libraries, or the role cannot be made).
 */
export async function prepareCounting(dbUrl: string): Promise<{ workerUrl: string } | { reason: string }> {
  try {
    return await withClient(dbUrl, async (c) => {
      const preload = (await c.query<{ v: string }>("SELECT current_setting('shared_preload_libraries') AS v")).rows[0]
        .v;
      if (
        !preload
          .split(',')
          .map((s) => s.trim())
          .includes('pg_stat_statements')
      ) {
        return {
          reason: `pg_stat_statements is not in shared_preload_libraries ("${preload}"); scripts/pg-test-server.sh start loads it`,
        };
      }
      await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      await c.query(
        `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${WORKER_ROLE}') THEN CREATE ROLE ${WORKER_ROLE} LOGIN SUPERUSER; END IF; END $$`,
      );
      const u = new URL(dbUrl);
      u.username = WORKER_ROLE;
      u.password = '';
      return { workerUrl: u.toString() };
    });
  } catch (err) {
    return { reason: `preparing the count failed: ${(err as Error).message}` };
  }
}

/** Forgets every count so far (server-wide). */
export async function resetCounts(dbUrl: string): Promise<void> {
  await withClient(dbUrl, (c) => c.query('SELECT pg_stat_statements_reset()'));
}

/**
 * Statements of the worker's background loops, not of a job (the drift and expiry sweeps' markers
 * and cursors, the heartbeat, the collection-owe look, their "now" reads): counted apart so the
 * per-job figure of the job path can be told from them. Matched on the normalised text.
 */
const BACKGROUND = [
  /verdict_meta/,
  /from "workspaces" order by/i,
  /from "collections" where/i,
  /^SELECT \(floor\(extract\(\$1 from now\(\)\) \* \$2\)::bigint \+ \$3\) AS now$/,
];

/** The worker role's statements in this database since the last reset: the total, the background loops' part of it, and the most frequent normalised texts (no parameter values). */
export async function countStatements(dbUrl: string): Promise<{
  total: number;
  background: number;
  top: Array<{ calls: number; query: string; buffersPerCall: number; msPerCall: number }>;
}> {
  return withClient(dbUrl, async (c) => {
    const rows = (
      await c.query<{ calls: string; query: string; hit: string; ms: string }>(
        `SELECT s.calls::text AS calls, s.query, (s.shared_blks_hit + s.shared_blks_read)::text AS hit, s.total_exec_time::text AS ms
         FROM pg_stat_statements s
           JOIN pg_roles r ON r.oid = s.userid JOIN pg_database d ON d.oid = s.dbid
         WHERE r.rolname = $1 AND d.datname = current_database() ORDER BY s.calls DESC`,
        [WORKER_ROLE],
      )
    ).rows;
    const total = rows.reduce((n, r) => n + Number(r.calls), 0);
    const background = rows
      .filter((r) => BACKGROUND.some((b) => b.test(r.query.replace(/\s+/g, ' ').trim())))
      .reduce((n, r) => n + Number(r.calls), 0);
    return {
      total,
      background,
      top: rows.slice(0, 14).map((r) => ({
        calls: Number(r.calls),
        query: r.query.replace(/\s+/g, ' ').trim(),
        buffersPerCall: Number(r.hit) / Math.max(1, Number(r.calls)),
        msPerCall: Number(r.ms) / Math.max(1, Number(r.calls)),
      })),
    };
  });
}

/** What `sampleServer` saw: wait events of the bench database's active backends, and CPU. */
export interface ServerSample {
  /** Samples taken (one every `everyMs`). */
  samples: number;
  /** Why sampling stopped before `stop()` (its connection failed), if it did. */
  lost?: string;
  /** "type/event" (or "CPU" for an active backend waiting on nothing) → backend-samples, most first. */
  waits: Array<{ wait: string; n: number }>;
  /**
   * Each lock wait seen, as "waiter ← blocker": the waiting statement (`statementLabel`), the
   * relation of the row it waits for (the tuple lock it holds while it waits on the holder's
   * transaction; "?" when it holds none, e.g. a unique-index insert waiting on the inserter), and
   * the blocking backend's statement and state ("idle in transaction" when the holder's process has
   * not yet sent its next statement). Backend-samples, most first.
   */
  blocked: Array<{ what: string; n: number }>;
  /** CPU seconds of the server (postmaster and its children) and of this process's descendants (the workers) over the sampling; null where /proc cannot tell. */
  serverCpuS: number | null;
  workersCpuS: number | null;
}

/**
 * A short name for a worker's statement: the job path's statement names (job-statements.ts)
 * where the text is one of them, else its first words.
 */
export function statementLabel(q: string | null): string {
  if (!q) return '-';
  const t = q.replace(/\s+/g, ' ').trim();
  const has = (s: string) => t.includes(s);
  if (has('locked AS (SELECT id FROM items')) return 'lock_for_surfacing';
  if (has('chg AS ( INSERT INTO surfacing_changes')) return 'finish_tail';
  if (has('mem AS (') && has('nxt AS (')) return 'finish_claim';
  if (has('mem AS (')) return 'finish';
  if (has('nxt AS (')) return 'claim';
  if (has('unnest($2::text[], $3::text[]) WITH ORDINALITY u(item_id')) return 'check_claims';
  if (has('FROM items i JOIN collections c')) return 'load_state';
  return t.slice(0, 48);
}

/** utime + stime of every process, with its parent, from /proc (Linux); empty elsewhere. */
function processTicks(): Map<number, { ppid: number; ticks: number }> {
  const out = new Map<number, { ppid: number; ticks: number }>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces): state ppid … utime(14) stime(15).
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(pid), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) });
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return out;
}

/** Ticks of `root` and every descendant of it. */
function treeTicks(all: Map<number, { ppid: number; ticks: number }>, root: number, skip = -1): number {
  let sum = 0;
  const stack = [root];
  while (stack.length) {
    const pid = stack.pop()!;
    if (pid === skip) continue;
    sum += all.get(pid)?.ticks ?? 0;
    for (const [child, p] of all) if (p.ppid === pid) stack.push(child);
  }
  return sum;
}

/**
 * Samples the server while the workers run (bench part d's "what bounds 4 processes"): every
 * `everyMs`, the wait event of each active backend of `dbUrl`'s database (`pg_stat_activity`),
 * and the CPU of the server and of this process's children (the worker processes) between start
 * and `stop()`. The server's CPU is found from the postmaster's pid (`pg_postmaster_pid` is not a
 * function; `data_directory`'s postmaster.pid is read), so it needs the server on this machine.
 */
export function sampleServer(dbUrl: string, everyMs = 50): { stop(): Promise<ServerSample> } {
  const waits = new Map<string, number>();
  const blocked = new Map<string, number>();
  let samples = 0;
  let running = true;
  let postmaster: number | null = null;
  let before: Map<number, { ppid: number; ticks: number }> | null = null;
  const hz = 100; // USER_HZ on Linux
  let lost: string | undefined;
  const loop = withClient(dbUrl, async (c) => {
    try {
      const dir = (await c.query<{ d: string }>("SELECT current_setting('data_directory') AS d")).rows[0].d;
      postmaster = Number(readFileSync(join(dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch {
      postmaster = null;
    }
    before = processTicks();
    while (running) {
      const rows = (
        await c.query<{ w: string }>(
          `SELECT coalesce(wait_event_type || '/' || wait_event, 'CPU') AS w FROM pg_stat_activity
           WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`,
        )
      ).rows;
      samples++;
      for (const r of rows) waits.set(r.w, (waits.get(r.w) ?? 0) + 1);
      if (rows.some((r) => r.w.startsWith('Lock/'))) {
        const locks = (
          await c.query<{ q: string; rel: string | null; bq: string | null; bstate: string | null }>(
            `SELECT a.query AS q,
                    (SELECT string_agg(DISTINCT l.relation::regclass::text, ',') FROM pg_locks l
                      WHERE l.pid = a.pid AND l.locktype = 'tuple' AND l.granted) AS rel,
                    b.query AS bq, b.state AS bstate
             FROM pg_stat_activity a CROSS JOIN LATERAL unnest(pg_blocking_pids(a.pid)) bp(pid)
               LEFT JOIN pg_stat_activity b ON b.pid = bp.pid
             WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid()`,
          )
        ).rows;
        for (const l of locks) {
          const what = `${statementLabel(l.q)} [${l.rel ?? '?'}] ← ${statementLabel(l.bq)} (${l.bstate ?? 'gone'})`;
          blocked.set(what, (blocked.get(what) ?? 0) + 1);
        }
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }).catch((err: unknown) => {
    // A sampler that loses its connection ends the sampling, not the bench.
    lost = (err as Error).message;
  });
  return {
    async stop() {
      running = false;
      await loop;
      const after = processTicks();
      const b = before;
      const delta = (root: number, skip?: number, own = true) =>
        b && after.size
          ? (treeTicks(after, root, skip) -
              treeTicks(b, root, skip) -
              (own ? 0 : (after.get(root)?.ticks ?? 0) - (b.get(root)?.ticks ?? 0))) /
            hz
          : null;
      return {
        samples,
        lost,
        waits: [...waits].map(([wait, n]) => ({ wait, n })).sort((a, b) => b.n - a.n),
        blocked: [...blocked].map(([what, n]) => ({ what, n })).sort((a, b) => b.n - a.n),
        serverCpuS: postmaster ? delta(postmaster) : null,
        // This process's descendants (not itself) less the server, should the bench have started it as a child.
        workersCpuS: delta(process.pid, postmaster ?? -1, false),
      };
    },
  };
}
