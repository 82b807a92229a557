import type { Command } from 'commander';
import { defaultSpoolDir, readSpoolDir } from '../runner/spend-spool.js';
import { actionStatusLines } from './actions.js';
import { formatUsd, PRICES_CHECKED } from '../providers/pricing.js';
import { priceSpend, type SpendWindow } from '../compose/spend-view.js';
import type { BackfillCursor } from '../backfill/backfill.js';
import type { SetJobCounts } from '../store/queue-store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { BatchStore } from '../store/batch-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { SpendStore } from '../store/spend-store.js';
import type { StorageHealth } from '../store/whole-store.js';
import {
  batchesInFlight,
  failingSets,
  PARKED_READ_LIMIT,
  parkedJobViews,
  parkedReasons,
  workerViews,
  type BatchesView,
  type FailingSet,
  type ParkedJobView,
  type WorkerView,
} from '../compose/queue-view.js';
import { WAL_WARN_BYTES } from '../maintenance/wal-upkeep.js';
import { buildRegistry, configFrom, formatBytes, formatDuration, loggerFor, openStore } from './common.js';

/**
 * `verdict status` (DESIGN §10–12): jobs by state and by set, the oldest owed age, parked jobs with
 * their reasons, failing sets, workers and their provider state, backfills in progress, and
 * provider calls, tokens and estimated cost for the last hour and the last 24 hours from the
 * spend table, so it works without a metrics scraper. Ids, refs, counts, codes and times only:
 * never item text, question text or provider text.
 */

/** Parked jobs listed one by one; the rest are counted. */
const PARKED_SHOWN = 20;

/** The status document (`--json` prints it as is). Times are epoch ms; ages and durations ms. */
export interface StatusReport {
  now: number;
  queue: { due: number; waiting: number; inFlight: number; parked: number; batched: number };
  oldestOwedAgeMs: number | null;
  nextDueAt: number | null;
  bySet: Array<SetJobCounts & { oldestOwedAgeMs: number | null }>;
  parked: { count: number; reasons: Array<{ reason: string; count: number }>; jobs: ParkedJobView[] };
  /**
   * Sets with failing jobs (parked, or failed after an attempt or refusal: a provider outage
   * counts), and sets cooling off after a rejected answer schema (DESIGN §3.8) with the reason and,
   * while the period runs, its end (epoch ms).
   */
  failingSets: FailingSet[];
  workers: WorkerView[];
  backfills: Array<{
    set: string;
    workspace: string;
    owedItems: number;
    chunks: number;
    pending: number;
    lastStepAgoMs: number;
  }>;
  spend: { lastHour: SpendWindow; last24h: SpendWindow };
  answersStored: number;
  /**
   * Provider batches not yet done (DESIGN §7.3): how many, their requests, the jobs still batched
   * in them, and how long ago the oldest was created (ms); `unconfirmed` counts those whose submit
   * was not confirmed (the sweep looks for them in the provider's list).
   */
  batches: BatchesView;
  /** Size of the SQLite write-ahead log, bytes (DESIGN §10.2); null on Postgres. */
  walBytes: number | null;
  /**
   * The spend spool on this host (DESIGN §10.5): records of paid calls not yet in the database, in
   * how many files, and those of workers still running; null when no spool directory applies.
   */
  spendSpool: { dir: string; records: number; files: number; ofRunningWorkers: number } | null;
}

/** Builds the status document from the store. */
export async function statusReport(
  store: TrackerStore & BatchStore & DecisionStore & QueueStore & MetaStore & SpendStore & StorageHealth,
  spoolDir: string | null = null,
): Promise<StatusReport> {
  const now = await store.now();
  const q = await store.queueStats();
  const bySet = (await store.jobCountsBySet()).map((s) => ({
    ...s,
    oldestOwedAgeMs: s.oldestOwedAt === null ? null : now - s.oldestOwedAt,
  }));
  const parkedRows = await store.listJobs({ state: 'parked', limit: PARKED_READ_LIMIT });
  const backfills = [];
  for (const row of await store.listMeta('backfill:')) {
    try {
      const c = JSON.parse(row.value) as BackfillCursor;
      const ws = c.workspaceId ? await store.getWorkspace(c.workspaceId) : null;
      backfills.push({
        set: c.set,
        workspace: c.workspaceId ? (ws?.slug ?? c.workspaceId) : 'all workspaces',
        owedItems: c.owedItems,
        chunks: c.chunks,
        pending: c.pending.length,
        lastStepAgoMs: now - row.updatedAt,
      });
    } catch {
      /* not a cursor */
    }
  }
  const hour = await store.spendRowsSince(3_600_000);
  const day = await store.spendRowsSince(86_400_000);
  return {
    now,
    queue: { due: q.owedDue, waiting: q.owedWaiting, inFlight: q.inFlight, parked: q.parked, batched: q.batched },
    oldestOwedAgeMs: q.oldestOwedAgeMs,
    nextDueAt: q.nextDueAt,
    bySet,
    parked: {
      count: parkedRows.length,
      reasons: parkedReasons(parkedRows),
      jobs: await parkedJobViews(store, parkedRows, PARKED_SHOWN),
    },
    failingSets: await failingSets(store, bySet, now),
    workers: await workerViews(store, now),
    backfills,
    spend: { lastHour: priceSpend(hour.sinceHour, hour.rows), last24h: priceSpend(day.sinceHour, day.rows) },
    answersStored: await store.countDecisions(),
    batches: await batchesInFlight(store, now),
    walBytes: await store.walBytes(),
    spendSpool: spoolDir === null ? null : spoolView(spoolDir),
  };
}

function spoolView(dir: string): NonNullable<StatusReport['spendSpool']> {
  const c = readSpoolDir(dir);
  return {
    dir,
    records: c.records,
    files: c.files.length,
    ofRunningWorkers: c.files.filter((f) => f.ownerAlive).reduce((a, f) => a + f.records, 0),
  };
}

const n = (x: number) => x.toLocaleString('en-US');
const utcHour = (ms: number) => new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';

function spendLine(label: string, w: SpendWindow): string[] {
  const cost = w.unpriced.length
    ? `${formatUsd(w.costUsd)} + unpriced (${w.unpriced.join(', ')})`
    : formatUsd(w.costUsd);
  const lines = [
    `spend, ${label} (since ${utcHour(w.sinceHour)}): ${n(w.calls)} calls, ${n(w.inputTokens)} input / ${n(w.outputTokens)} output tokens` +
      `${w.cacheReadTokens || w.cacheWriteTokens ? `, cache ${n(w.cacheReadTokens)} read / ${n(w.cacheWriteTokens)} write` : ''}, estimated cost ${cost}` +
      `${w.abortedCalls ? ` (${n(w.abortedCalls)} of the calls aborted by a worker stop or reload)` : ''}` +
      `${w.evalCalls ? ` (${n(w.evalCalls)} of the calls made by \`verdict eval\`)` : ''}`,
  ];
  for (const m of w.byModel) {
    lines.push(
      `  ${`${m.provider}:${m.model}`.padEnd(32)} ${n(m.calls).padStart(7)} calls  ${formatUsd(m.costUsd).padStart(9)}${m.note ? `  (${m.note})` : ''}`,
    );
  }
  return lines;
}

/** The status document as text for humans. */
export function formatStatus(s: StatusReport): string {
  const age = (ms: number | null) => (ms === null ? '-' : formatDuration(ms));
  const lines = [
    `jobs: ${n(s.queue.due)} due, ${n(s.queue.waiting)} waiting (backoff, debounce or deferral), ${n(s.queue.inFlight)} in flight, ${n(s.queue.parked)} parked${s.queue.batched ? `, ${n(s.queue.batched)} batched` : ''}`,
    `oldest owed: ${s.oldestOwedAgeMs === null ? 'none' : formatDuration(s.oldestOwedAgeMs)}${s.nextDueAt !== null ? `; next waiting job due in ${formatDuration(Math.max(0, s.nextDueAt - s.now))}` : ''}`,
  ];
  if (s.bySet.length) {
    lines.push(
      `  ${'set'.padEnd(24)} ${'due'.padStart(7)} ${'waiting'.padStart(8)} ${'in flight'.padStart(9)} ${'parked'.padStart(7)} ${'failing'.padStart(8)}  oldest owed`,
    );
    for (const b of s.bySet) {
      lines.push(
        `  ${b.questionSet.padEnd(24)} ${n(b.due).padStart(7)} ${n(b.waiting).padStart(8)} ${n(b.inFlight).padStart(9)} ${n(b.parked).padStart(7)} ${n(b.failing).padStart(8)}  ${age(b.oldestOwedAgeMs)}`,
      );
    }
  }
  if (s.failingSets.length) {
    const ago = (t: number) => formatDuration(Math.max(0, s.now - t));
    const one = (f: StatusReport['failingSets'][number]) => {
      const parts: string[] = [];
      if (f.jobs > 0)
        parts.push(
          `${f.jobs} job${f.jobs === 1 ? '' : 's'} with errors${f.lastErrorAt !== null ? `, last ${ago(f.lastErrorAt)} ago` : ''}`,
        );
      const r = f.schemaRejected;
      if (r) {
        parts.push(
          `answer schema rejected: ${r.reason}, ${ago(r.at)} ago; ` +
            (r.coolingOffUntil !== null
              ? `not claimed for another ${formatDuration(Math.max(0, r.coolingOffUntil - s.now))}`
              : 'cooling-off over, retried at the next claim'),
        );
      }
      return `${f.set} (${parts.join('; ')})`;
    };
    lines.push(`failing sets: ${s.failingSets.map(one).join(', ')}`);
  } else lines.push('failing sets: none');
  if (s.parked.count) {
    lines.push(`parked: ${s.parked.count} (\`verdict jobs retry\` re-owes them)`);
    for (const r of s.parked.reasons.slice(0, 10)) lines.push(`  ${String(r.count).padStart(5)} × ${r.reason}`);
    for (const j of s.parked.jobs)
      lines.push(`  ${(j.ref ?? j.itemId).padEnd(14)} ${j.set.padEnd(20)} ${j.reason ?? ''}`);
    if (s.parked.count > s.parked.jobs.length)
      lines.push(`  … and ${s.parked.count - s.parked.jobs.length} more: verdict jobs list --state parked`);
  }
  if (s.workers.length) {
    for (const w of s.workers) {
      lines.push(
        `worker ${w.workerId}: ${w.alive ? 'alive' : 'not seen'} (last beat ${formatDuration(Math.max(0, w.lastSeenAgoMs))} ago), provider ${w.provider}:${w.model}${w.providerProblem ? `, PROVIDER MISCONFIGURED: ${w.providerProblem} (cooling off)` : ''}`,
      );
    }
  } else lines.push('workers: none running');
  for (const b of s.backfills) {
    lines.push(
      `backfill ${b.set} (${b.workspace}): ${n(b.owedItems)} items owed in ${b.chunks} chunk${b.chunks === 1 ? '' : 's'}, last chunk ${b.pending} item${b.pending === 1 ? '' : 's'}; last step ${formatDuration(Math.max(0, b.lastStepAgoMs))} ago (rerun \`verdict backfill --set ${b.set}\` to resume if it stopped)`,
    );
  }
  if (s.batches.inFlight > 0) {
    const b = s.batches;
    lines.push(
      `batches in flight: ${n(b.inFlight)} (${n(b.requests)} requests, ${n(b.jobs)} jobs batched; oldest created ${age(b.oldestAgeMs)} ago${b.unconfirmed ? `; ${n(b.unconfirmed)} submit not confirmed, being looked for` : ''}); results within 24 h`,
    );
  } else lines.push('batches in flight: none');
  for (const u of s.batches.unavailable)
    lines.push(
      `batching unavailable at ${u.host}: asking directly (${u.provider}'s batch route answered HTTP ${u.status}; \`--batch on\` tries it again)`,
    );
  lines.push(`answers stored: ${n(s.answersStored)}`);
  if (s.walBytes !== null) {
    lines.push(
      `write-ahead log: ${formatBytes(s.walBytes)}${s.walBytes > WAL_WARN_BYTES ? ` (above ${formatBytes(WAL_WARN_BYTES)}: a long reader may be holding it; see \`verdict doctor\`)` : ''}`,
    );
  }
  lines.push(...spendLine('last hour', s.spend.lastHour), ...spendLine('last 24 h', s.spend.last24h));
  if (s.spendSpool && s.spendSpool.records > 0)
    lines.push(
      `spend spooled, not yet in the database: ${n(s.spendSpool.records)} records of paid calls in ${s.spendSpool.dir} (${s.spendSpool.ofRunningWorkers} of running workers; the rest the next worker to start writes)`,
    );
  lines.push(
    `  (prices from Verdict's price table, checked ${PRICES_CHECKED}; spend is kept per hour, so a window starts on the hour)`,
  );
  return lines.join('\n');
}

export function registerStatusCommand(program: Command): void {
  program
    .command('status')
    .description(
      'jobs by state and set, the oldest owed age, parked jobs, failing sets, workers, backfills and provider spend',
    )
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const registry = buildRegistry(cfg);
      const store = openStore(cfg, registry, { access: 'read' });
      try {
        const s = await statusReport(store, cfg.spendSpoolDir ?? defaultSpoolDir(cfg.databaseUrl));
        const a = await actionStatusLines(cfg, store, registry, loggerFor(cfg));
        process.stdout.write(
          opts.json
            ? `${JSON.stringify(a.json.length ? { ...s, actions: a.json } : s, null, 2)}\n`
            : `${[formatStatus(s), ...a.lines].join('\n')}\n`,
        );
      } finally {
        await store.close();
      }
    });
}
