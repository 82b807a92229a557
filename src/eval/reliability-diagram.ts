import type { Spec } from 'vega';
import { InvalidInput } from '../errors.js';
import type { CalibrationBin } from './metrics.js';

/**
 * The reliability diagram of `verdict eval` (DESIGN §8.3; the plot of DeGroot & Fienberg 1983,
 * as drawn by Niculescu-Mizil & Caruana 2005 and Guo et al. 2017): per calibration bin, the mean
 * predicted probability (x) against the observed fraction positive (y). A calibrated model lies
 * on the diagonal; below it, the model is over-confident. Each point's area grows with the bin's
 * row count, and the count is printed beside it, so a far-off point resting on two rows is seen
 * for what it is.
 *
 * Drawn by Vega (a declarative Vega spec) rendered headless with `renderer: 'none'` and
 * `toSVG()`: no canvas package, no DOM, no network (the loader refuses every external resource;
 * the data are inline). Vega is imported on first use only, so commands that never draw a
 * diagram do not pay for loading it.
 */

/** One series of a reliability diagram: one model's calibration bins (see `calibrate`). */
export interface ReliabilitySeries {
  /** Legend label, e.g. the model id. Distinct per series. */
  name: string;
  /** The bins; empty bins (count 0) are not drawn. */
  bins: readonly CalibrationBin[];
}

/** Options of `reliabilityDiagramSvg`. */
export interface ReliabilityDiagramOptions {
  /** Chart title. @defaultValue 'Reliability diagram' */
  title?: string;
  /** Plot width, px. @defaultValue 360 */
  width?: number;
  /** Plot height, px. @defaultValue 360 */
  height?: number;
  /** X-axis title. @defaultValue 'mean predicted probability' */
  xTitle?: string;
  /** Y-axis title. @defaultValue 'observed fraction positive' */
  yTitle?: string;
}

/** At most two series: a model, or model A against model B (`--compare`). */
const MAX_SERIES = 2;

/** Mark name of the bin points; the SVG's `<g>` for them carries it as a class. */
export const POINT_MARK_NAME = 'bin_points';

/** Builds the Vega spec of a reliability diagram (pure; exported for tests and for `--json`). */
export function reliabilityDiagramSpec(
  series: readonly ReliabilitySeries[],
  options: ReliabilityDiagramOptions = {},
): Spec {
  if (series.length < 1 || series.length > MAX_SERIES) {
    throw new InvalidInput(`a reliability diagram has 1 to ${MAX_SERIES} series; got ${series.length}`);
  }
  if (new Set(series.map((s) => s.name)).size !== series.length) {
    throw new InvalidInput('the series of a reliability diagram need distinct names');
  }
  const points = series.flatMap((s) =>
    s.bins
      .filter((b) => b.count > 0 && b.meanPredicted !== null && b.fractionPositive !== null)
      .map((b) => ({
        series: s.name,
        lower: b.lower,
        upper: b.upper,
        count: b.count,
        x: b.meanPredicted as number,
        y: b.fractionPositive as number,
      })),
  );
  const maxCount = Math.max(1, ...points.map((p) => p.count));
  return {
    $schema: 'https://vega.github.io/schema/vega/v6.json',
    description: 'Reliability diagram: mean predicted probability against observed fraction positive, per bin.',
    width: options.width ?? 360,
    height: options.height ?? 360,
    padding: 8,
    background: 'white',
    title: { text: options.title ?? 'Reliability diagram' },
    data: [
      { name: 'points', values: points },
      {
        name: 'diagonal',
        values: [
          { x: 0, y: 0 },
          { x: 1, y: 1 },
        ],
      },
    ],
    scales: [
      { name: 'x', type: 'linear', domain: [0, 1], range: 'width', nice: false, zero: true },
      { name: 'y', type: 'linear', domain: [0, 1], range: 'height', nice: false, zero: true },
      { name: 'size', type: 'sqrt', domain: [0, maxCount], range: [16, 484], zero: true },
      {
        name: 'color',
        type: 'ordinal',
        domain: series.map((s) => s.name),
        range: ['#1f77b4', '#d62728'],
      },
    ],
    axes: [
      {
        orient: 'bottom',
        scale: 'x',
        title: options.xTitle ?? 'mean predicted probability',
        tickCount: 10,
        grid: true,
      },
      { orient: 'left', scale: 'y', title: options.yTitle ?? 'observed fraction positive', tickCount: 10, grid: true },
    ],
    legends: [
      { fill: 'color', stroke: 'color', title: 'model', symbolType: 'circle', labelLimit: 320 },
      {
        size: 'size',
        title: 'rows in bin',
        symbolType: 'circle',
        symbolFillColor: '#888',
        format: 'd',
        values: [...new Set([1, Math.ceil(maxCount / 2), maxCount])],
      },
    ],
    marks: [
      {
        type: 'line',
        name: 'perfect_calibration',
        from: { data: 'diagonal' },
        encode: {
          enter: {
            x: { scale: 'x', field: 'x' },
            y: { scale: 'y', field: 'y' },
            stroke: { value: '#999' },
            strokeDash: { value: [4, 4] },
            strokeWidth: { value: 1 },
          },
        },
      },
      {
        type: 'group',
        name: 'series_lines',
        from: { facet: { name: 'series_points', data: 'points', groupby: 'series' } },
        marks: [
          {
            type: 'line',
            from: { data: 'series_points' },
            sort: { field: 'datum.x' },
            encode: {
              enter: {
                x: { scale: 'x', field: 'x' },
                y: { scale: 'y', field: 'y' },
                stroke: { scale: 'color', field: 'series' },
                strokeWidth: { value: 1.5 },
                strokeOpacity: { value: 0.7 },
              },
            },
          },
        ],
      },
      {
        type: 'symbol',
        name: POINT_MARK_NAME,
        from: { data: 'points' },
        encode: {
          enter: {
            x: { scale: 'x', field: 'x' },
            y: { scale: 'y', field: 'y' },
            size: { scale: 'size', field: 'count' },
            shape: { value: 'circle' },
            fill: { scale: 'color', field: 'series' },
            fillOpacity: { value: 0.6 },
            stroke: { scale: 'color', field: 'series' },
            tooltip: {
              signal:
                "{'model': datum.series, 'bin': format(datum.lower, '.1f') + '–' + format(datum.upper, '.1f'), 'rows': datum.count, 'mean predicted': format(datum.x, '.3f'), 'fraction positive': format(datum.y, '.3f')}",
            },
          },
        },
      },
      {
        type: 'text',
        name: 'bin_counts',
        from: { data: POINT_MARK_NAME },
        encode: {
          enter: {
            x: { field: 'x', offset: 8 },
            y: { field: 'y', offset: -6 },
            text: { field: 'datum.count' },
            fontSize: { value: 9 },
            fill: { value: '#333' },
          },
        },
      },
    ],
  };
}

/**
 * Renders a reliability diagram of one series, or two for `--compare`, as a standalone SVG
 * document (UTF-8 text, root `<svg xmlns="http://www.w3.org/2000/svg">`).
 * @throws InvalidInput for no series, more than two, or two with the same name.
 */
export async function reliabilityDiagramSvg(
  series: readonly ReliabilitySeries[],
  options: ReliabilityDiagramOptions = {},
): Promise<string> {
  return renderVegaSvg(reliabilityDiagramSpec(series, options));
}

/**
 * Renders a Vega spec headless to a standalone SVG document (the reliability diagram's renderer,
 * and the dashboard's). Every datum is inline: a spec that asks for a URL or file is a bug, never a
 * fetch. @throws InvalidInput when the spec asks for an external resource.
 */
export async function renderVegaSvg(spec: Spec): Promise<string> {
  const vega = await import('vega');
  const loader = vega.loader();
  loader.sanitize = async (uri: string) => {
    throw new InvalidInput(`charts load no external resource; asked for ${uri}`);
  };
  const view = new vega.View(vega.parse(spec), { renderer: 'none', loader });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
