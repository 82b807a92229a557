import { describe, expect, it } from 'vitest';
import { renderStackedBars, renderSvg, stackedBarsSpec, type StackedDatum } from '../../src/dashboard/charts.js';

/**
 * The dashboard's kept chart views (charts.ts `renderStackedBars`): a chart drawn on a view kept
 * from an earlier request, with other data, buckets, title and series, is byte for byte the SVG a
 * new view draws, so keeping views changes the cost of a page, never what it shows.
 */

const chart = (o: { title: string; buckets: string[]; series: string[]; data: StackedDatum[] }) =>
  stackedBarsSpec({ ...o, yTitle: 'calls', width: 1040, height: 160, xLabel: 'hour' });

const day = (first: number, n: number) =>
  Array.from(
    { length: n },
    (_, i) => `12-0${1 + Math.floor((first + i) / 24)} ${String((first + i) % 24).padStart(2, '0')}h`,
  );

describe('renderStackedBars', () => {
  it('draws, on a kept view, exactly what a new view draws, whatever the chart drew before', async () => {
    const a = chart({
      title: 'Calls per hour (UTC)',
      buckets: day(0, 24),
      series: ['anthropic:claude-haiku-4-5', 'fake:fake-1'],
      data: day(0, 24).flatMap((x, i) => [
        { x, series: 'anthropic:claude-haiku-4-5', value: 3 + i },
        ...(i % 3 ? [] : [{ x, series: 'fake:fake-1', value: 40 - i }]),
      ]),
    });
    const b = chart({
      title: 'Tokens per hour (UTC)',
      buckets: day(5, 24),
      series: ['anthropic:claude-haiku-4-5', 'anthropic:claude-sonnet-4-5', 'fake:fake-1'],
      data: day(5, 24).flatMap((x, i) => [{ x, series: 'anthropic:claude-sonnet-4-5', value: 1_900 * i }]),
    });
    const empty = chart({ title: 'Nothing', buckets: day(7, 24), series: [], data: [] });
    const fresh = [await renderSvg(a), await renderSvg(b), await renderSvg(empty)];
    // The same kind of chart three times over one kept view, then back to the first, concurrently too.
    expect(await renderStackedBars(a)).toBe(fresh[0]);
    expect(await renderStackedBars(b)).toBe(fresh[1]);
    expect(await renderStackedBars(empty)).toBe(fresh[2]);
    expect(await Promise.all([renderStackedBars(a), renderStackedBars(b), renderStackedBars(a)])).toEqual([
      fresh[0],
      fresh[1],
      fresh[0],
    ]);
    // The data given is left as it was (Vega's stack writes y0 and y1 into the objects it draws).
    const given = JSON.stringify(a.data);
    await renderStackedBars(a);
    expect(JSON.stringify(a.data)).toBe(given);
  });
});
