import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  buildFileGraph,
  checkGraph,
  checkImportGraph,
  findCycles,
  isClean,
  type Graph,
} from '../scripts/import-graph.js';

/** DESIGN §16.1: src/ has no import cycle, follows the layering, and cli/ is on top. */

const SRC = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

function graph(edges: Record<string, string[]>): Graph {
  const g: Graph = new Map();
  for (const [from, to] of Object.entries(edges)) g.set(from, new Set(to));
  return g;
}

describe('src/ import graph', () => {
  const report = checkImportGraph(SRC);

  it('has no file-level and no folder-level cycle', () => {
    expect(report.fileCycles).toEqual([]);
    expect(report.folderCycles).toEqual([]);
  });

  it('keeps cli on top: nothing outside cli imports it, and cli imports the layers below', () => {
    expect(report.cliImports).toEqual([]);
    expect(report.folderArrows.filter((a) => a.to === 'cli')).toEqual([]);
    expect(report.folderArrows.some((a) => a.from === 'cli')).toBe(true);
  });

  it('follows the layering: store and decision import no providers, decision imports no store or runner', () => {
    expect(report.layerViolations).toEqual([]);
    const to = (from: string) => report.folderArrows.filter((a) => a.from === from).map((a) => a.to);
    expect(to('store')).not.toContain('providers');
    expect(to('decision')).toEqual(expect.not.arrayContaining(['store', 'runner', 'providers', 'reads', 'worker']));
    expect(isClean(report)).toBe(true);
  });

  it('sees the real imports (a graph of nothing would pass everything)', () => {
    expect(report.files.size).toBeGreaterThan(50);
    expect(report.files.get('runner/evaluate.ts')?.has('decision/eligibility.ts')).toBe(true);
    expect(report.files.get('store/store.ts')?.has('usage.ts')).toBe(true);
  });
});

describe('cycle detector on synthetic graphs', () => {
  it('finds a three-file cycle and leaves the acyclic rest out', () => {
    const g = graph({ 'a/x.ts': ['b/y.ts'], 'b/y.ts': ['c/z.ts'], 'c/z.ts': ['a/x.ts'], 'd/w.ts': ['a/x.ts'] });
    expect(findCycles(g)).toEqual([['a/x.ts', 'b/y.ts', 'c/z.ts']]);
  });

  it('finds a self-import and two separate cycles', () => {
    const g = graph({ p: ['p'], q: ['r'], r: ['q'], s: ['t'], t: [] });
    expect(findCycles(g)).toEqual([['p'], ['q', 'r']]);
  });

  it('finds nothing in a diamond', () => {
    expect(findCycles(graph({ a: ['b', 'c'], b: ['d'], c: ['d'], d: [] }))).toEqual([]);
  });

  it('finds a cycle thousands of files deep without overflowing the stack', () => {
    const edges: Record<string, string[]> = {};
    const n = 20_000;
    for (let i = 0; i < n; i++) edges[`f${i}`] = [`f${(i + 1) % n}`];
    const cycles = findCycles(graph(edges));
    expect(cycles).toHaveLength(1);
    expect(cycles[0]).toHaveLength(n);
  });

  it('reports a folder cycle made of files that form no file cycle', () => {
    const r = checkGraph(
      graph({
        'store/a.ts': ['decision/b.ts'],
        'decision/c.ts': ['store/d.ts'],
        'decision/b.ts': [],
        'store/d.ts': [],
      }),
    );
    expect(r.fileCycles).toEqual([]);
    expect(r.folderCycles).toEqual([['decision', 'store']]);
    expect(r.layerViolations).toEqual(['decision -> store']);
    expect(isClean(r)).toBe(false);
  });

  it('reports an import of cli from outside it and counts folder arrows', () => {
    const r = checkGraph(
      graph({
        'cli/main.ts': ['worker/w.ts', 'worker/v.ts'],
        'worker/w.ts': ['cli/flags.ts'],
        'worker/v.ts': [],
        'cli/flags.ts': [],
      }),
    );
    expect(r.cliImports).toEqual(['worker/w.ts -> cli/flags.ts']);
    expect(r.folderArrows).toEqual([
      { from: 'cli', to: 'worker', count: 2 },
      { from: 'worker', to: 'cli', count: 1 },
    ]);
    expect(isClean(r)).toBe(false);
  });

  it('reports, without failing, a folder the layering does not name', () => {
    const r = checkGraph(
      graph({ 'cli/main.ts': ['newfolder/x.ts'], 'newfolder/x.ts': ['decision/q.ts'], 'decision/q.ts': [] }),
    );
    expect(r.unplaced).toEqual(['newfolder']);
    expect(isClean(r)).toBe(true);
  });
});

describe('graph builder on a synthetic src/', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  function write(files: Record<string, string>): string {
    dir = mkdtempSync(join(tmpdir(), 'verdict-import-graph-'));
    for (const [p, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, p)), { recursive: true });
      writeFileSync(join(dir, p), text);
    }
    return dir;
  }

  it('follows import, import type, export-from and import(); ignores packages, comments and strings', () => {
    const src = write({
      'decision/q.ts':
        "import { z } from 'zod';\n// import { x } from '../store/s.js';\nconst s = \"from '../runner/r.js'\";\nexport const q = 1;\n",
      'store/s.ts': "import type { q } from '../decision/q.js';\nexport * from './t.js';\n",
      'store/t.ts': 'export const t = 1;\n',
      'runner/r.ts': "export { q } from '../decision/q.js';\nconst m = await import('../store/s.js');\n",
      'log.ts': "import { pino } from 'pino';\n",
    });
    const g = buildFileGraph(src);
    expect(Object.fromEntries([...g].map(([k, v]) => [k, [...v].sort()]))).toEqual({
      'decision/q.ts': [],
      'store/s.ts': ['decision/q.ts', 'store/t.ts'],
      'store/t.ts': [],
      'runner/r.ts': ['decision/q.ts', 'store/s.ts'],
      'log.ts': [],
    });
    expect(isClean(checkGraph(g))).toBe(true);
  });

  it('fails when a cycle is introduced, at file and folder level', () => {
    const src = write({
      'decision/questions.ts': "import { AnswerDefect } from '../providers/errors.js';\n",
      'providers/errors.ts': "import type { Usage } from './provider.js';\n",
      'providers/provider.ts': "import type { Question } from '../decision/questions.js';\n",
    });
    const r = checkImportGraph(src);
    expect(r.fileCycles).toEqual([['decision/questions.ts', 'providers/errors.ts', 'providers/provider.ts']]);
    expect(r.folderCycles).toEqual([['decision', 'providers']]);
    expect(isClean(r)).toBe(false);
  });
});
