import { isEvalSpendOutcome } from '../eval/run-eval.js';
import { batchCostOf, costOf, pricingFor, PRICES_CHECKED } from '../providers/pricing.js';
import { SPEND_ABORTED } from '../runner/evaluate.js';
import { SPEND_DAY_MS, spendDayStart } from '../store/spend-rules.js';
import type { SpendHourRow, SpendRow } from '../store/spend-store.js';
import type { Store } from '../store/whole-store.js';
import { SPEND_BATCH } from '../worker/batches.js';
import { workerViews } from './queue-view.js';

/**
 * Provider spend as its readers see it (DESIGN §2 decision_spend, §10, §10.3): priced windows for
 * `verdict status`, and time series per model for the dashboard's spend page
 * (`VerdictReader.spend`). Spend is kept per (hour, set, provider, model, outcome) for the whole
 * database, not per workspace, so these figures are the server's. Prices come from
 * src/providers/pricing.ts; a model without a price has a null cost and is named in `unpriced`.
 */

/** Spend of one window, priced per model with the pricing table. */
export interface SpendWindow {
  /** Start of the oldest hour bucket read (epoch ms); spend is kept per hour. */
  sinceHour: number;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Dollars for the priced and free models; models without a price are listed in `unpriced`. */
  costUsd: number;
  unpriced: string[];
  byModel: Array<{
    provider: string;
    model: string;
    calls: number;
    inputTokens: number;
    outputTokens: number;
    costUsd: number | null;
    note: string | null;
  }>;
  bySet: Array<{
    set: string;
    calls: number;
    inputTokens: number;
    outputTokens: number;
    failedCalls: number;
    abortedCalls: number;
    evalCalls: number;
  }>;
  /** Calls cut off by a worker's own stop or reload (spend outcome `aborted`), counted apart from failures. */
  abortedCalls: number;
  /** Calls made by `verdict eval` (spend outcomes `eval` and `eval_failed`): in the totals, never counted as the worker's failures. */
  evalCalls: number;
}

/** One spend row's dollars from the pricing table, a batch result at the batch discount (DESIGN §7.3); null for a model without a price. */
function rowCostUsd(r: SpendRow): number | null {
  return (r.outcome === SPEND_BATCH ? batchCostOf : costOf)(pricingFor(r.provider, r.model), r);
}

/** A running total of dollars: null once any part has no price. */
function addCost(total: number | null, part: number | null): number | null {
  return total === null || part === null ? null : total + part;
}

/** Prices spend rows per model and per set with the pricing table (a batch result at the batch discount). */
export function priceSpend(sinceHour: number, rows: SpendRow[]): SpendWindow {
  const w: SpendWindow = {
    sinceHour,
    calls: 0,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    costUsd: 0,
    unpriced: [],
    byModel: [],
    bySet: [],
    abortedCalls: 0,
    evalCalls: 0,
  };
  const models = new Map<
    string,
    SpendWindow['byModel'][number] & { cacheReadTokens: number; cacheWriteTokens: number }
  >();
  const sets = new Map<string, SpendWindow['bySet'][number]>();
  for (const r of rows) {
    w.calls += r.calls;
    w.inputTokens += r.inputTokens;
    w.outputTokens += r.outputTokens;
    w.cacheReadTokens += r.cacheReadTokens;
    w.cacheWriteTokens += r.cacheWriteTokens;
    const mk = `${r.provider}:${r.model}`;
    const m = models.get(mk) ?? {
      provider: r.provider,
      model: r.model,
      calls: 0,
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0,
      note: null,
    };
    m.calls += r.calls;
    m.inputTokens += r.inputTokens;
    m.outputTokens += r.outputTokens;
    m.cacheReadTokens += r.cacheReadTokens;
    m.cacheWriteTokens += r.cacheWriteTokens;
    // Priced per row: a batch result's tokens at the batch discount.
    m.costUsd = addCost(m.costUsd, rowCostUsd(r));
    models.set(mk, m);
    const s = sets.get(r.questionSet) ?? {
      set: r.questionSet,
      calls: 0,
      inputTokens: 0,
      outputTokens: 0,
      failedCalls: 0,
      abortedCalls: 0,
      evalCalls: 0,
    };
    s.calls += r.calls;
    s.inputTokens += r.inputTokens;
    s.outputTokens += r.outputTokens;
    if (r.outcome === SPEND_ABORTED) {
      s.abortedCalls += r.calls;
      w.abortedCalls += r.calls;
    } else if (isEvalSpendOutcome(r.outcome)) {
      s.evalCalls += r.calls;
      w.evalCalls += r.calls;
    } else if (r.outcome !== 'ok' && r.outcome !== SPEND_BATCH) s.failedCalls += r.calls;
    sets.set(r.questionSet, s);
  }
  for (const [mk, m] of models) {
    const pricing = pricingFor(m.provider, m.model);
    m.note = pricing.kind === 'priced' ? null : pricing.reason;
    if (m.costUsd === null) w.unpriced.push(mk);
    else w.costUsd += m.costUsd;
    w.byModel.push({
      provider: m.provider,
      model: m.model,
      calls: m.calls,
      inputTokens: m.inputTokens,
      outputTokens: m.outputTokens,
      costUsd: m.costUsd,
      note: m.note,
    });
  }
  w.bySet = [...sets.values()];
  return w;
}

/** One bucket of a spend series, for one model. Tokens are input + output + cache reads + cache writes as billed. */
export interface SpendPoint {
  /** Start of the bucket, epoch ms (the UTC hour or day). */
  at: number;
  /** `provider:model`. */
  model: string;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /** US dollars; null for a model without a price. */
  costUsd: number | null;
}

/** What `VerdictReader.spend` reads: a window and the bucket width. */
export interface SpendSeriesOptions {
  /** How far back, ms. @defaultValue 24 hours */
  windowMs?: number;
  /** `hour` or `day` (UTC). @defaultValue hour */
  bucket?: 'hour' | 'day';
}

/** A spend series and its totals (`VerdictReader.spend`). Times are epoch ms. */
export interface SpendSeries {
  bucket: 'hour' | 'day';
  /** Start of the oldest hour read. */
  since: number;
  /** Every bucket in the window, oldest first (an empty bucket is there with no points). */
  buckets: number[];
  /** Non-empty (bucket, model) points, oldest bucket first. */
  points: SpendPoint[];
  totals: SpendWindow;
  /** When the pricing table was last checked (src/providers/pricing.ts `PRICES_CHECKED`). */
  pricesChecked: string;
}

/** Longest window a series reads, ms: 90 days (the dashboard asks for 24 hours and 30 days). */
const SPEND_SERIES_MAX_WINDOW_MS = 90 * SPEND_DAY_MS;

/**
 * Spend per bucket and model over the window (`SpendSeries`) with the daily cap (`DailyCapView`), as
 * `VerdictReader.spend` returns them: today's use
 * is added up from the series' own rows when its window reaches back to the start of today (the
 * 24-hour and 30-day views do), so the spend table is read once and the clock once.
 */
export async function spendWithDailyCap(
  store: Store,
  o: SpendSeriesOptions = {},
): Promise<SpendSeries & { dailyCap: DailyCapView }> {
  const windowMs = Math.min(Math.max(o.windowMs ?? SPEND_DAY_MS, 3_600_000), SPEND_SERIES_MAX_WINDOW_MS);
  const bucket = o.bucket ?? 'hour';
  const { sinceHour, rows } = await store.spendByHourSince(windowMs, bucket);
  const now = await store.now();
  const dayStart = spendDayStart(now);
  const today = sinceHour <= dayStart ? rows : (await store.spendByHourSince(now - dayStart)).rows;
  return { ...seriesOf(rows, sinceHour, now, bucket), dailyCap: await capOf(store, today, now) };
}

function seriesOf(rows: SpendHourRow[], sinceHour: number, now: number, bucket: 'hour' | 'day'): SpendSeries {
  const width = bucket === 'day' ? SPEND_DAY_MS : 3_600_000;
  const first = Math.floor(sinceHour / width) * width;
  const buckets: number[] = [];
  for (let t = first; t <= now; t += width) buckets.push(t);
  const points = new Map<string, SpendPoint>();
  for (const r of rows) {
    const at = Math.floor(r.hour / width) * width;
    const model = `${r.provider}:${r.model}`;
    const k = `${at}\u0000${model}`;
    const p = points.get(k) ?? { at, model, calls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 };
    p.calls += r.calls;
    p.inputTokens += r.inputTokens;
    p.outputTokens += r.outputTokens;
    p.costUsd = addCost(p.costUsd, rowCostUsd(r));
    points.set(k, p);
  }
  return {
    bucket,
    since: sinceHour,
    buckets,
    points: [...points.values()].sort((a, b) => a.at - b.at || (a.model < b.model ? -1 : a.model > b.model ? 1 : 0)),
    totals: priceSpend(sinceHour, rows),
    pricesChecked: PRICES_CHECKED,
  };
}

/**
 * The daily token cap and how much of today (UTC) it has used (DESIGN §10.3). The cap is a worker
 * setting: `capTokens` is the smallest cap among the live workers that report one (the one that
 * stops first), null when none does. `usedTokens` are today's billed tokens (input + output +
 * cache reads + cache writes, the sum the cap counts), without the reservations of calls in flight.
 */
export interface DailyCapView {
  capTokens: number | null;
  usedTokens: number;
  /** Start of today, UTC, epoch ms. */
  dayStart: number;
  /** Milliseconds until the day's window ends. */
  resetsInMs: number;
}

/** `DailyCapView` from spend rows that cover today (rows before today are left out) and the workers' heartbeats. */
async function capOf(store: Store, rows: readonly SpendHourRow[], now: number): Promise<DailyCapView> {
  const dayStart = spendDayStart(now);
  let used = 0;
  for (const r of rows)
    if (r.hour >= dayStart) used += r.inputTokens + r.outputTokens + r.cacheReadTokens + r.cacheWriteTokens;
  const caps = (await workerViews(store, now))
    .filter((w) => w.alive && w.dailyTokenCap !== null)
    .map((w) => w.dailyTokenCap as number);
  return {
    capTokens: caps.length ? Math.min(...caps) : null,
    usedTokens: used,
    dayStart,
    resetsInMs: dayStart + SPEND_DAY_MS - now,
  };
}
