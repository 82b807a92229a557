import { InvalidInput } from '../errors.js';
import { JOB_OUTCOME_ORDER, type ThroughputStore } from '../store/throughput.js';

/**
 * Jobs per minute by outcome (DESIGN §2 job_throughput, §16.4), as `VerdictReader.throughput`
 * returns it for the queue page's chart and `GET /v1/jobs/throughput`. The count is kept for the
 * whole database, not per workspace, as spend is. Times are epoch ms.
 */

const MINUTE_MS = 60_000;

/** Longest window `throughput` reads, minutes: a day (the queue page shows the last hour). */
const THROUGHPUT_MAX_MINUTES = 1440;

/** What `VerdictReader.throughput` reads. */
export interface ThroughputOptions {
  /** Minutes shown, the current (partial) one last: 1 to 1,440. @defaultValue 60 */
  minutes?: number;
}

/** Jobs per minute by outcome over a window. */
export interface ThroughputSeries {
  /** Every minute of the window, oldest first; a minute without outcomes has empty `counts`. */
  minutes: Array<{ startAt: number; counts: Record<string, number> }>;
  /** The outcomes counted in the window, in the chart's stacking order (src/store/throughput.ts `JOB_OUTCOMES`, then any other word in byte order). */
  outcomes: string[];
  /** Jobs per outcome over the whole window. */
  totals: Record<string, number>;
}

/**
 * Reads the window's minutes (see `ThroughputSeries`).
 * @throws InvalidInput (param `minutes`) for a window that is not an integer from 1 to 1,440.
 */
export async function throughputSeries(
  store: Pick<ThroughputStore, 'throughputSince'>,
  o: ThroughputOptions = {},
): Promise<ThroughputSeries> {
  const n = o.minutes ?? 60;
  if (!Number.isInteger(n) || n < 1 || n > THROUGHPUT_MAX_MINUTES)
    throw new InvalidInput(`minutes must be an integer from 1 to ${THROUGHPUT_MAX_MINUTES}; got ${String(n)}`, {
      param: 'minutes',
    });
  // The current minute and the n - 1 before it.
  const { sinceMinute, rows } = await store.throughputSince((n - 1) * MINUTE_MS);
  const minutes = Array.from({ length: n }, (_, i) => ({
    startAt: sinceMinute + i * MINUTE_MS,
    counts: {} as Record<string, number>,
  }));
  const totals: Record<string, number> = {};
  for (const r of rows) {
    const m = minutes[(r.minute - sinceMinute) / MINUTE_MS];
    // A row past the last minute: the store's clock moved on between the two reads of "now"; the next read shows it.
    if (!m) continue;
    m.counts[r.outcome] = (m.counts[r.outcome] ?? 0) + r.jobs;
    totals[r.outcome] = (totals[r.outcome] ?? 0) + r.jobs;
  }
  const known = JOB_OUTCOME_ORDER.filter((x) => x in totals);
  const other = Object.keys(totals)
    .filter((x) => !(JOB_OUTCOME_ORDER as readonly string[]).includes(x))
    .sort();
  return { minutes, outcomes: [...known, ...other], totals };
}
