import { DOMParser, type Element } from '@xmldom/xmldom';
import { describe, expect, it } from 'vitest';
import { InvalidInput } from '../../src/errors.js';
import { calibrate } from '../../src/eval/metrics.js';
import { POINT_MARK_NAME, reliabilityDiagramSpec, reliabilityDiagramSvg } from '../../src/eval/reliability-diagram.js';

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Parses strictly: any warning or error of the XML parser fails the test. */
function parseSvg(text: string) {
  const doc = new DOMParser({
    onError: (level, message) => {
      throw new Error(`XML ${level}: ${message}`);
    },
  }).parseFromString(text, 'image/svg+xml');
  return doc.documentElement as Element;
}

function elementsWithClass(root: Element, cls: string): Element[] {
  const out: Element[] = [];
  const all = root.getElementsByTagNameNS(SVG_NS, 'g');
  for (let i = 0; i < all.length; i++) {
    const g = all.item(i)!;
    if ((g.getAttribute('class') ?? '').split(/\s+/).includes(cls)) out.push(g);
  }
  return out;
}

function childPaths(g: Element): number {
  let n = 0;
  for (let c = g.firstChild; c; c = c.nextSibling) if (c.nodeType === 1 && (c as Element).localName === 'path') n++;
  return n;
}

// Non-empty bins: a has 0, 7 (two rows), 9; b has 3 and 5.
const a = calibrate([
  { p: 0.05, y: 0 },
  { p: 0.75, y: 1 },
  { p: 0.72, y: 0 },
  { p: 0.95, y: 1 },
]).bins;
const b = calibrate([
  { p: 0.35, y: 0 },
  { p: 0.55, y: 1 },
]).bins;

describe('reliabilityDiagramSvg', () => {
  it('renders one series as a standalone SVG document with one point per non-empty bin', async () => {
    const svg = await reliabilityDiagramSvg([{ name: 'fake-model', bins: a }], { title: 'attention' });
    const root = parseSvg(svg);
    expect(root.localName).toBe('svg');
    expect(root.namespaceURI).toBe(SVG_NS);
    expect(root.getAttribute('xmlns')).toBe(SVG_NS);
    const [points] = elementsWithClass(root, POINT_MARK_NAME);
    expect(childPaths(points)).toBe(3);
    const texts = root.getElementsByTagNameNS(SVG_NS, 'text');
    const words = Array.from({ length: texts.length }, (_, i) => texts.item(i)!.textContent);
    expect(words).toEqual(
      expect.arrayContaining([
        'attention',
        'fake-model',
        'mean predicted probability',
        'observed fraction positive',
        '2',
      ]),
    );
  });

  it('draws two series with a legend entry each (--compare)', async () => {
    const svg = await reliabilityDiagramSvg([
      { name: 'model-a', bins: a },
      { name: 'model-b', bins: b },
    ]);
    const root = parseSvg(svg);
    const [points] = elementsWithClass(root, POINT_MARK_NAME);
    expect(childPaths(points)).toBe(5);
    const fills = new Set<string>();
    for (let c = points.firstChild; c; c = c.nextSibling)
      if (c.nodeType === 1) fills.add((c as Element).getAttribute('fill')!);
    expect(fills.size).toBe(2);
    expect(svg).toContain('>model-a<');
    expect(svg).toContain('>model-b<');
  });

  it('draws an empty diagram (axes and diagonal) when every bin is empty', async () => {
    const root = parseSvg(await reliabilityDiagramSvg([{ name: 'm', bins: calibrate([]).bins }]));
    expect(root.localName).toBe('svg');
    expect(elementsWithClass(root, 'perfect_calibration')).toHaveLength(1);
    const points = elementsWithClass(root, POINT_MARK_NAME);
    expect(points.length === 0 || childPaths(points[0]) === 0).toBe(true);
  });

  it('refuses no series, three, or duplicate names; the spec loads no data from outside', () => {
    expect(() => reliabilityDiagramSpec([])).toThrow(InvalidInput);
    expect(() =>
      reliabilityDiagramSpec([
        { name: 'x', bins: a },
        { name: 'y', bins: a },
        { name: 'z', bins: a },
      ]),
    ).toThrow(/1 to 2/);
    expect(() =>
      reliabilityDiagramSpec([
        { name: 'x', bins: a },
        { name: 'x', bins: b },
      ]),
    ).toThrow(/distinct/);
    const spec = reliabilityDiagramSpec([{ name: 'x', bins: a }]);
    for (const d of spec.data ?? []) expect(d).not.toHaveProperty('url');
  });
});
