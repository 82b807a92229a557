import type { DailyCapView, SpendSeries } from '../compose/spend-view.js';
import { chartLegend, renderStackedBars, stackedBarsSpec } from './charts.js';
import { html, trusted, type Html } from './html.js';
import { duration, n, usd } from './layout.js';

/**
 * A bucket's x value: `MM-DD HHh` for hours (a 24-hour window spans two days, so the hour alone
 * would put today's 23h on yesterday's), `MM-DD` for days. The hour axis shows the hour only.
 */
export function bucketLabel(at: number, bucket: 'hour' | 'day'): string {
  const iso = new Date(at).toISOString();
  return bucket === 'hour' ? `${iso.slice(5, 10)} ${iso.slice(11, 13)}h` : iso.slice(5, 10);
}

/** Width the spend charts are drawn at, px: the page's column at desktop width; the SVG scales to narrower ones. */
const SPEND_CHART_WIDTH = 1040;

/** The three charts of a window (calls, tokens, estimated cost), coloured by the page's `series`. */
async function spendFigures(
  s: Pick<SpendSeries, 'bucket' | 'buckets' | 'points'>,
  series: readonly string[],
): Promise<Html> {
  const buckets = s.buckets.map((b) => bucketLabel(b, s.bucket));
  const calls = s.points.map((p) => ({ x: bucketLabel(p.at, s.bucket), series: p.model, value: p.calls }));
  const tokens = s.points.map((p) => ({
    x: bucketLabel(p.at, s.bucket),
    series: p.model,
    value: p.inputTokens + p.outputTokens,
  }));
  const cost = s.points
    .filter((p) => p.costUsd !== null)
    .map((p) => ({ x: bucketLabel(p.at, s.bucket), series: p.model, value: p.costUsd as number }));
  const per = s.bucket === 'hour' ? 'per hour (UTC)' : 'per day (UTC)';
  const svg = async (title: string, yTitle: string, data: typeof calls, format?: string) =>
    html`<figure class="chart wide">${trusted(await renderStackedBars(stackedBarsSpec({ title, yTitle, buckets, data, format, series, width: SPEND_CHART_WIDTH, height: 160, xLabel: s.bucket === 'hour' ? 'hour' : 'as is' })))}</figure>`;
  return html`${await svg(`Calls ${per}`, 'calls', calls)}${await svg(`Tokens ${per}`, 'tokens', tokens)}${await svg(`Estimated cost ${per}, US dollars`, 'USD', cost, '$.2~f')}`;
}

/**
 * Draws the page's six charts once, empty, so that their parsed views are kept (charts.ts
 * `renderStackedBars`) and the first spend page a person opens only sets their data. The same
 * `spendFigures` as the page, so the kept views are the page's own.
 */
export async function warmSpendCharts(): Promise<void> {
  for (const bucket of ['hour', 'day'] as const) await spendFigures({ bucket, buckets: [], points: [] }, []);
}

async function charts(s: SpendSeries, heading: string, series: readonly string[]): Promise<Html> {
  const t = s.totals;
  return html`<h2>${heading}</h2>
<div class="stats"><div><span class="muted">calls</span><b>${n(t.calls)}</b></div><div><span class="muted">input tokens</span><b>${n(t.inputTokens)}</b></div><div><span class="muted">output tokens</span><b>${n(t.outputTokens)}</b></div><div><span class="muted">estimated cost</span><b>${usd(t.costUsd)}</b></div></div>
${t.unpriced.length ? html`<p class="muted">Without a price (not in the cost): ${t.unpriced.join(', ')}.</p>` : ''}
${await spendFigures(s, series)}
${
  t.byModel.length
    ? html`<div class="table-wrap"><table><thead><tr><th>Model</th><th class="num">Calls</th><th class="num">Input tokens</th><th class="num">Output tokens</th><th class="num">Cost</th></tr></thead><tbody>${t.byModel.map(
        (m) =>
          html`<tr><td>${m.provider}:${m.model}${m.note ? html` <span class="muted">(${m.note})</span>` : ''}</td><td class="num">${n(m.calls)}</td><td class="num">${n(m.inputTokens)}</td><td class="num">${n(m.outputTokens)}</td><td class="num">${usd(m.costUsd)}</td></tr>`,
      )}</tbody></table></div>`
    : html`<p class="muted">No provider calls in this window.</p>`
}`;
}

function capBlock(c: DailyCapView): Html {
  if (c.capTokens === null)
    return html`<p>Daily token cap: <b>none</b> set on the live workers (<code>--daily-token-cap</code>). Billed today (UTC): ${n(c.usedTokens)} tokens.</p>`;
  const used = Math.min(1, c.usedTokens / c.capTokens);
  return html`<p>Daily token cap: <b>${n(c.capTokens)}</b> tokens; billed today (UTC) <b>${n(c.usedTokens)}</b> (${(used * 100).toFixed(1)}%), resets in ${duration(c.resetsInMs)}.</p>
<p><meter min="0" max="1" low="0.7" high="0.9" optimum="0" value="${used.toFixed(4)}" aria-label="daily cap used">${(used * 100).toFixed(1)}%</meter></p>`;
}

/** The spend page body (admin: spend is the server's, across workspaces). */
export async function spendBody(o: { day: SpendSeries; month: SpendSeries; cap: DailyCapView }): Promise<Html> {
  // Every chart colours a model alike, so one legend serves them all.
  const series = [...new Set([...o.day.points, ...o.month.points].map((p) => p.model))].sort();
  return html`<h1>Spend</h1><p class="muted">Provider spend of the whole server (it is kept per hour, set and model, not per workspace). Prices from Verdict's pricing table, checked ${o.day.pricesChecked}; batch results at the batch discount.</p>
${capBlock(o.cap)}${chartLegend('model', series)}${await charts(o.day, 'Last 24 hours', series)}${await charts(o.month, 'Last 30 days', series)}`;
}

/** What a read or write token sees instead. */
export function spendRefused(): Html {
  return html`<h1>Spend</h1><p>Spend is kept for the whole server, across workspaces, so it is shown to admin tokens only.</p>`;
}
