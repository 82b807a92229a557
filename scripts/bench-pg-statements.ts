import pg from 'pg';

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
export async function countStatements(
  dbUrl: string,
): Promise<{ total: number; background: number; top: Array<{ calls: number; query: string }> }> {
  return withClient(dbUrl, async (c) => {
    const rows = (
      await c.query<{ calls: string; query: string }>(
        `SELECT s.calls::text AS calls, s.query FROM pg_stat_statements s
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
      top: rows.slice(0, 14).map((r) => ({ calls: Number(r.calls), query: r.query.replace(/\s+/g, ' ').trim() })),
    };
  });
}
