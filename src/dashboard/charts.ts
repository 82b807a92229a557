import type { Spec, View } from 'vega';
import { InvalidInput } from '../errors.js';
import { renderVegaSvg } from '../eval/reliability-diagram.js';
import { html, type Html } from './html.js';

/**
 * The dashboard's charts, drawn by Vega (declarative specs rendered headless to SVG with
 * `renderer: 'none'`, as the reliability diagram of `verdict eval` is): the page ships static SVG,
 * so it reads without JavaScript and loads no chart library in the browser. No spec loads a URL
 * or file: every datum is inline and the loader refuses any fetch. vega-lite is not used: its 6.x
 * releases need Node 22 (checked 2026-12-01), and Verdict runs on Node 20.
 */

/** Renders a Vega spec to SVG (eval/reliability-diagram.ts `renderVegaSvg`): a new view per call. */
export const renderSvg = renderVegaSvg;

/** A parsed view kept for a chart, and the render it is busy with (renders of one view run one at a time). */
interface KeptView {
  view: View;
  busy: Promise<unknown>;
}

/**
 * Views kept, by chart (its spec without its data and signal values), oldest first. Parsing a spec
 * and building its view and scenegraph is most of a render: a 31-bar chart measured 28–42 ms CPU
 * new and 3–6 ms with its view kept and only the data and signals set (the spend page draws six,
 * the queue page one every 5 s while open). A page's charts are a handful of fixed kinds, so a few
 * views serve every request; the cap bounds a caller that builds many.
 */
const keptViews = new Map<string, KeptView>();
const KEPT_VIEWS_MAX = 16;

/** Chart specs parsed into views since the process started (a test reads it to see that a page parsed none). */
let viewsParsed = 0;
export function chartViewsParsed(): number {
  return viewsParsed;
}

/**
 * Renders a `stackedBarsSpec` to SVG, reusing the chart's parsed view: the same SVG as
 * `renderSvg(spec)` (checked by test/dashboard/charts.test.ts), at a fraction of the CPU.
 */
export async function renderStackedBars(spec: Spec): Promise<string> {
  const signals = (spec.signals ?? []) as Array<{ name: string; value?: unknown }>;
  const data = (spec.data ?? []) as Array<{ name: string; values?: unknown }>;
  const key = JSON.stringify({
    ...spec,
    signals: signals.map((s) => ({ ...s, value: null })),
    data: data.map((d) => ({ ...d, values: null })),
  });
  let kept = keptViews.get(key);
  if (!kept) {
    const vega = await import('vega');
    // Another render of this chart (the parse at start, a concurrent request) may have parsed it
    // while Vega loaded: parsing it twice would cost the CPU again and leave a view never finalized.
    kept = keptViews.get(key);
    if (!kept) {
      const loader = vega.loader();
      loader.sanitize = async (uri: string) => {
        throw new InvalidInput(`charts load no external resource; asked for ${uri}`);
      };
      kept = { view: new vega.View(vega.parse(spec), { renderer: 'none', loader }), busy: Promise.resolve() };
      viewsParsed++;
      keptViews.set(key, kept);
      if (keptViews.size > KEPT_VIEWS_MAX) {
        const [oldest, old] = keptViews.entries().next().value as [string, KeptView];
        keptViews.delete(oldest);
        void old.busy.finally(() => old.view.finalize());
      }
    }
  }
  const k = kept;
  const render = k.busy.then(async () => {
    // Empty first: items Vega keeps from the last render (axis ticks of buckets in both) would
    // otherwise come before the new ones in the SVG, in another order than a new view draws them.
    for (const d of data) if (Array.isArray(d.values)) k.view.data(d.name, []);
    for (const s of signals) if (Array.isArray(s.value)) k.view.signal(s.name, []);
    await k.view.runAsync();
    for (const s of signals) k.view.signal(s.name, s.value);
    // Copies: Vega adds its own fields (the stack's y0, y1) to the objects it is given.
    for (const d of data)
      if (Array.isArray(d.values))
        k.view.data(
          d.name,
          d.values.map((x: object) => ({ ...x })),
        );
    // Lay the chart out again: `pad` sizes the SVG to its axes' labels, which the new data changes.
    return k.view.resize().toSVG();
  });
  k.busy = render.catch(() => undefined);
  return render;
}

/** Colours of series, in order (Vega's category10); colour-blind readers get the legend's labels too. */
const PALETTE = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
];

/** Each series' colour, as `stackedBarsSpec` draws it with the same `series` list: the page's one legend uses it. */
function seriesColours(series: readonly string[]): Array<{ series: string; colour: string }> {
  return series.map((x, i) => ({ series: x, colour: PALETTE[i % PALETTE.length] }));
}

/**
 * One legend for every chart of a page: a swatch and a label per series, in the charts' colour
 * order (`seriesColours` of the charts' `series`); `shown` limits it to the series drawn.
 */
export function chartLegend(title: string, series: readonly string[], shown: readonly string[] = series): Html {
  const keys = seriesColours(series).filter((x) => shown.includes(x.series));
  if (!keys.length) return html``;
  return html`<p class="legend" aria-label="${`Legend: ${title}`}">
    <span class="muted">${title}:</span>
    ${keys.map((x) => html`<span class="key"><i style="background:${x.colour}"></i><bdi>${x.series}</bdi></span>`)}
  </p>`;
}

/** One bar segment: `x` is the bucket label, `series` the stack it belongs to. */
export interface StackedDatum {
  x: string;
  series: string;
  value: number;
}

/**
 * A stacked bar chart over ordered buckets (spend per hour or day, stacked by model).
 * @param buckets every x label, in order (empty buckets keep their place).
 */
export function stackedBarsSpec(o: {
  title: string;
  yTitle: string;
  buckets: readonly string[];
  data: readonly StackedDatum[];
  width?: number;
  height?: number;
  format?: string;
  /** `hour`: x values are `MM-DD HHh` and the axis prints the `HHh` part. @defaultValue 'as is' */
  xLabel?: 'hour' | 'as is';
  /**
   * Every series of the page's charts, in colour order: given, the charts share their colours and
   * the page draws one legend for all of them (`seriesColours`), so the chart draws none.
   * @defaultValue the chart's own series, sorted, with a legend in the chart
   */
  series?: readonly string[];
}): Spec {
  const own = [...new Set(o.data.map((d) => d.series))].sort();
  const series = o.series ?? own;
  // Padding, not `fit`: fit lays the chart out twice to shrink it into the width, which doubled
  // the render time of a chart; the page scales the SVG to its column instead (viewBox).
  // What changes from one request to the next (the title, the buckets, the colour domain) are
  // signals and the data is inline: `renderStackedBars` keeps a parsed view per chart and sets them.
  return {
    $schema: 'https://vega.github.io/schema/vega/v6.json',
    width: o.width ?? 560,
    height: o.height ?? 180,
    padding: 6,
    autosize: { type: 'pad' },
    background: 'white',
    signals: [
      { name: 'chartTitle', value: o.title },
      { name: 'buckets', value: [...o.buckets] },
      { name: 'seriesDomain', value: series.length ? [...series] : ['none'] },
    ],
    title: { text: { signal: 'chartTitle' }, anchor: 'start', fontSize: 13 },
    data: [
      {
        name: 'table',
        values: o.data.map((d) => ({ ...d })),
        transform: [{ type: 'stack', groupby: ['x'], sort: { field: 'series' }, field: 'value' }],
      },
    ],
    scales: [
      { name: 'x', type: 'band', range: 'width', domain: { signal: 'buckets' }, padding: 0.15 },
      { name: 'y', type: 'linear', range: 'height', nice: true, zero: true, domain: { data: 'table', field: 'y1' } },
      { name: 'color', type: 'ordinal', range: PALETTE, domain: { signal: 'seriesDomain' } },
    ],
    axes: [
      {
        orient: 'bottom',
        scale: 'x',
        labelOverlap: true,
        labelAngle: 0,
        labelFontSize: 9,
        ...(o.xLabel === 'hour'
          ? { encode: { labels: { update: { text: { signal: 'slice(datum.value, 6)' } } } } }
          : {}),
      },
      { orient: 'left', scale: 'y', title: o.yTitle, format: o.format ?? '~s', tickCount: 4, grid: true },
    ],
    legends:
      !o.series && own.length
        ? [{ fill: 'color', title: 'model', orient: 'bottom', direction: 'vertical', labelLimit: 320 }]
        : [],
    marks: [
      {
        type: 'rect',
        from: { data: 'table' },
        encode: {
          enter: {
            x: { scale: 'x', field: 'x' },
            width: { scale: 'x', band: 1 },
            y: { scale: 'y', field: 'y0' },
            y2: { scale: 'y', field: 'y1' },
            fill: { scale: 'color', field: 'series' },
            tooltip: { signal: "datum.x + ' · ' + datum.series + ': ' + format(datum.value, ',')" },
          },
        },
      },
    ],
  };
}

/** A horizontal bar chart of named probabilities (a choice's options, a score's levels), the picked one darker. */
export function probabilityBarsSpec(o: {
  bars: ReadonlyArray<{ label: string; p: number; picked: boolean }>;
  width?: number;
}): Spec {
  return {
    $schema: 'https://vega.github.io/schema/vega/v6.json',
    width: o.width ?? 260,
    height: Math.max(1, o.bars.length) * 20,
    padding: 4,
    background: 'white',
    data: [{ name: 'bars', values: o.bars.map((b) => ({ ...b })) }],
    scales: [
      { name: 'y', type: 'band', range: 'height', domain: o.bars.map((b) => b.label), padding: 0.2 },
      { name: 'x', type: 'linear', range: 'width', domain: [0, 1], zero: true },
    ],
    axes: [
      { orient: 'left', scale: 'y', labelLimit: 140, labelFontSize: 11 },
      { orient: 'bottom', scale: 'x', format: '.0%', tickCount: 4, grid: true, labelFontSize: 9 },
    ],
    marks: [
      {
        type: 'rect',
        from: { data: 'bars' },
        encode: {
          enter: {
            y: { scale: 'y', field: 'label' },
            height: { scale: 'y', band: 1 },
            x: { scale: 'x', value: 0 },
            x2: { scale: 'x', field: 'p' },
            fill: { signal: "datum.picked ? '#1f4e8c' : '#8fb3de'" },
          },
        },
      },
      {
        type: 'text',
        from: { data: 'bars' },
        encode: {
          enter: {
            y: { scale: 'y', field: 'label', band: 0.5 },
            x: { scale: 'x', field: 'p', offset: 4 },
            baseline: { value: 'middle' },
            fontSize: { value: 10 },
            text: { signal: "format(datum.p, '.0%')" },
          },
        },
      },
    ],
  };
}
