import type { Command } from 'commander';
import { JOBS_LIST_DEFAULT_LIMIT, listJobViews, type JobView } from '../compose/operations-reads.js';

export { listJobViews, type JobView };
import type { JobFilter } from '../store/queue-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { Store } from '../store/whole-store.js';
import { buildRegistry, configFrom, formatDuration, openStore, resolveWorkspace, UsageError } from './common.js';

/**
 * `verdict jobs list|retry|drop` (DESIGN §3, §12): the owed-job queue without SQL.
 * - `list` shows jobs, filtered by set, state, workspace and item.
 * - `retry` re-owes jobs (DESIGN §3: state owed, attempts, refusals and abandons 0, not_before
 *   now). It takes parked jobs unless `--state owed` is given (then it makes waiting jobs due now);
 *   `--state batched` takes jobs out of their provider batch (DESIGN §7.4).
 * - `drop` deletes jobs that are not in flight. It needs a filter or `--all`, because dropped work
 *   is not evaluated until the next write owes it again.
 */

interface JobsOptions {
  set?: string;
  state?: string;
  workspace?: string;
  item?: string;
  limit?: string;
  json?: boolean;
  all?: boolean;
}

/**
 * Turns the command's filter flags into a store filter.
 * @throws UsageError for an unknown state, workspace or item ref, or a bad limit.
 */
async function jobFilterFrom(
  store: Pick<TrackerReads, 'getItemByRef' | 'getWorkspaceBySlug' | 'listWorkspaces'>,
  o: JobsOptions,
  defaults: Partial<JobFilter> = {},
): Promise<JobFilter> {
  const f: JobFilter = { ...defaults };
  if (o.set) f.questionSet = o.set;
  if (o.state !== undefined) {
    if (o.state !== 'owed' && o.state !== 'parked' && o.state !== 'batched')
      throw new UsageError(`--state: got ${JSON.stringify(o.state)}, expected owed, parked or batched`);
    f.state = o.state;
  }
  if (o.workspace) f.workspaceId = (await resolveWorkspace(store, o.workspace)).id;
  if (o.item) {
    const ws = await resolveWorkspace(store, o.workspace);
    const item = await store.getItemByRef(ws.id, o.item);
    if (!item) throw new UsageError(`--item: no item ${o.item} in workspace ${ws.slug}`);
    f.itemId = item.id;
  }
  if (o.limit !== undefined) {
    const n = Number(o.limit);
    if (!Number.isInteger(n) || n < 1)
      throw new UsageError(`--limit: got ${JSON.stringify(o.limit)}, expected a positive integer`);
    f.limit = n;
  }
  return f;
}

/** One line per job, for humans. */
export function formatJobs(jobs: JobView[]): string {
  if (jobs.length === 0) return 'no jobs match';
  const head = `${'ref'.padEnd(14)} ${'set'.padEnd(20)} ${'state'.padEnd(9)} prio ${'att'.padStart(3)} ${'ref.'.padStart(4)} ${'abd'.padStart(3)}  ${'due'.padEnd(10)} last error`;
  const rows = jobs.map((j) => {
    const state = j.inFlight ? 'in flight' : j.state;
    const due = j.state !== 'owed' ? '-' : j.dueInMs === 0 ? 'now' : `in ${formatDuration(j.dueInMs)}`;
    return `${(j.ref ?? j.itemId).padEnd(14)} ${j.questionSet.padEnd(20)} ${state.padEnd(9)} ${String(j.priority).padStart(4)} ${String(j.attempts).padStart(3)} ${String(j.refusals).padStart(4)} ${String(j.abandons).padStart(3)}  ${due.padEnd(10)} ${j.lastError ?? ''}`;
  });
  return [head, ...rows].join('\n');
}

function filterOptions(cmd: Command): Command {
  return cmd
    .option('--set <name>', 'only jobs of this question set')
    .option('--state <state>', 'owed, parked or batched (in a provider batch)')
    .option('--workspace <slug>', 'only jobs of this workspace')
    .option('--item <ref>', 'only jobs of this item (its ref; --workspace when there are several)')
    .option('--json', 'print JSON');
}

async function withStore<T>(
  cmd: Command,
  fn: (store: Store) => Promise<T>,
  access: 'read' | 'existing' = 'existing',
): Promise<T> {
  const cfg = configFrom(cmd);
  const store = openStore(cfg, buildRegistry(cfg), { access });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

export function registerJobsCommand(program: Command): void {
  const jobs = program.command('jobs').description('list, retry or drop owed and parked jobs');

  filterOptions(jobs.command('list').description('list jobs (lowest priority and oldest first)'))
    .option('--limit <n>', `at most this many (default ${JOBS_LIST_DEFAULT_LIMIT})`)
    .action(async (o: JobsOptions, cmd: Command) =>
      withStore(
        cmd,
        async (store) => {
          const views = await listJobViews(store, await jobFilterFrom(store, o));
          process.stdout.write(o.json ? `${JSON.stringify(views, null, 2)}\n` : `${formatJobs(views)}\n`);
        },
        'read',
      ),
    );

  filterOptions(
    jobs
      .command('retry')
      .description('re-owe parked jobs now (counters reset); --state owed makes waiting jobs due now'),
  ).action(async (o: JobsOptions, cmd: Command) =>
    withStore(cmd, async (store) => {
      const f = await jobFilterFrom(store, o, { state: 'parked' });
      const changed = await store.retryJobs({ ...f, limit: undefined });
      process.stdout.write(
        o.json
          ? `${JSON.stringify({ retried: changed, filter: f })}\n`
          : `retried ${changed} job${changed === 1 ? '' : 's'}: owed now, attempts, refusals and abandons reset\n`,
      );
    }),
  );

  filterOptions(jobs.command('drop').description('delete jobs that are not in flight (needs a filter or --all)'))
    .option('--all', 'drop every job that matches no filter at all')
    .action(async (o: JobsOptions, cmd: Command) =>
      withStore(cmd, async (store) => {
        if (!o.all && !o.set && !o.state && !o.workspace && !o.item)
          throw new UsageError('jobs drop needs --set, --state, --workspace or --item (or --all to drop every job)');
        const f = await jobFilterFrom(store, o);
        const dropped = await store.dropJobs({ ...f, limit: undefined });
        process.stdout.write(
          o.json
            ? `${JSON.stringify({ dropped, filter: f })}\n`
            : `dropped ${dropped} job${dropped === 1 ? '' : 's'} (jobs in flight are kept; a batch result that comes later for a dropped job is discarded; the next write owes an item again)\n`,
        );
      }),
    );
}
