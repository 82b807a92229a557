/**
 * Import-graph check for `src/` (DESIGN §16.1).
 *
 * Prints the folder → folder import arrows (with how many file-level imports make each arrow) and
 * exits non-zero on any file-level cycle, any folder-level cycle, any arrow against the layering
 * below, or any import of `src/cli/` from outside `src/cli/`. test/import-graph.test.ts runs the
 * same check.
 *
 * Layering (top imports bottom, never the reverse; `LAYERING` below is the same list as data):
 *
 *   cli                          the command line; the only user of everything below, used by nothing
 *   index, testing               the package's public entries (`verdict`, `verdict/testing`)
 *   server                       the HTTP API (`verdict serve`): a user of compose's Verdict
 *   dashboard                    the web dashboard under /ui of `verdict serve`: pages over compose's reads
 *   mcp                          the MCP server (`verdict mcp`, /mcp of `verdict serve`): tools over compose's reads
 *   compose                      createVerdict and the wiring of a worker, a store and a reader
 *   actions                      acting in a tracker on decisions (DESIGN §17): labels, the gate
 *   eval                         `verdict eval`: gold sets, metrics, the reliability diagram (DESIGN §8.3)
 *   backfill                     owing a set's existing items (DESIGN §11) and what asking them would
 *                                cost (the estimates): runner, store, providers
 *   maintenance                  the background passes, a file each: drift and expiry sweeps,
 *                                retention, WAL upkeep, and the loop that runs them
 *   worker                       the long-running process: slots, limiter, batches, event delivery
 *   runner                       one job's life: claim to commit (job-life.ts), decision, store,
 *                                providers
 *   integrations                 GitHub import and webhooks, outbound event signatures: importers,
 *                                access, decision, store
 *   importers, reads             importing a tracker; reading decisions: decision, store
 *   access                       HTTP API tokens: store
 *   store                        persistence (SQLite, Postgres): decision; never providers
 *   providers                    model access: decision; config only to name and build providers
 *   decision                     questions, sets, eligibility, states: nothing of ours but the root
 *                                files below
 *   clock, config, errors, log,  root utilities and shared shapes: nothing of ours (config names
 *   version, duration, usage,    errors' base class); tracker-rows holds the collection and item rows
 *   tracker-rows                 the store returns and decision/ reads, usage one call's tokens
 *
 * The check fails on a cycle, on an arrow between two folders of this list that the list does not
 * allow, and on an import of cli/ from outside it. A folder the list does not name (a new one) is
 * only reported, so adding a folder fails nothing but the cycle check until it is placed here.
 *
 * A "folder" is the first path segment under `src/` (`store/sqlite/x.ts` is in `store`); a file
 * directly in `src/` is its own node named after the file (`config`). Type-only imports count: a
 * cycle through types is still a layering fault. Specifiers are resolved relative to the importing
 * file with `.js` mapped to `.ts` (NodeNext style); bare specifiers (packages, `node:`) are ignored.
 *
 * Usage: `npx tsx scripts/import-graph.ts [srcDir]`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** A directed graph: node → the nodes it imports. */
export type Graph = Map<string, Set<string>>;

/** The result of {@link checkImportGraph}. File names are relative to the src dir, `/`-separated. */
export interface ImportGraphReport {
  /** File → files it imports (only files inside src). */
  files: Graph;
  /** `from → to` folder arrows with the number of file-level imports behind each. */
  folderArrows: Array<{ from: string; to: string; count: number }>;
  /** Each strongly connected component of more than one file (or a file importing itself). */
  fileCycles: string[][];
  /** Each strongly connected component of more than one folder. */
  folderCycles: string[][];
  /** `importer -> imported` pairs where a file outside `cli/` imports one inside it. */
  cliImports: string[];
  /** Folder arrows between two folders of the layering that it does not allow (`from -> to`). */
  layerViolations: string[];
  /** Folders the layering does not name (reported, not failed). */
  unplaced: string[];
}

/**
 * The layering as data: each folder → the folders it may import. `cli` may import everything
 * (`'*'`) but nothing may import `cli`. See the comment at the top of this file.
 */
export const LAYERING: Readonly<Record<string, readonly string[] | '*'>> = {
  cli: '*',
  index: [
    'server',
    'mcp',
    'compose',
    'actions',
    'eval',
    'worker',
    'runner',
    'integrations',
    'reads',
    'importers',
    'access',
    'store',
    'providers',
    'decision',
    'clock',
    'config',
    'errors',
    'log',
  ],
  server: [
    'dashboard',
    'mcp',
    'compose',
    'actions',
    'integrations',
    'access',
    'store',
    'decision',
    'clock',
    'config',
    'errors',
    'log',
  ],
  dashboard: [
    'compose',
    'actions',
    'eval',
    'reads',
    'access',
    'store',
    'decision',
    'clock',
    'config',
    'duration',
    'errors',
    'log',
  ],
  mcp: ['compose', 'actions', 'access', 'store', 'decision', 'clock', 'config', 'errors', 'log', 'version'],
  testing: ['providers', 'decision', 'errors', 'log'],
  compose: [
    'actions',
    'eval',
    'backfill',
    'maintenance',
    'worker',
    'runner',
    'integrations',
    'reads',
    'importers',
    'access',
    'store',
    'providers',
    'decision',
    'clock',
    'config',
    'errors',
    'log',
  ],
  actions: [
    'eval',
    'worker',
    'runner',
    'integrations',
    'reads',
    'store',
    'providers',
    'decision',
    'clock',
    'config',
    'errors',
    'log',
  ],
  maintenance: [
    'worker',
    'runner',
    'reads',
    'access',
    'store',
    'providers',
    'decision',
    'clock',
    'config',
    'errors',
    'log',
  ],
  worker: [
    'runner',
    'integrations',
    'reads',
    'importers',
    'access',
    'store',
    'providers',
    'decision',
    'clock',
    'config',
    'errors',
    'log',
  ],
  integrations: ['importers', 'access', 'decision', 'store', 'clock', 'config', 'errors', 'log'],
  access: ['store', 'errors', 'log'],
  eval: ['backfill', 'runner', 'reads', 'store', 'providers', 'decision', 'clock', 'config', 'errors', 'log'],
  backfill: ['runner', 'store', 'providers', 'decision', 'clock', 'config', 'errors', 'log'],
  runner: ['decision', 'store', 'providers', 'clock', 'config', 'errors', 'log'],
  importers: ['decision', 'store', 'clock', 'config', 'errors', 'log'],
  reads: ['decision', 'store', 'clock', 'config', 'errors', 'log', 'tracker-rows'],
  store: ['decision', 'clock', 'config', 'errors', 'log', 'tracker-rows', 'usage'],
  providers: ['decision', 'clock', 'config', 'errors', 'log', 'usage'],
  decision: ['clock', 'duration', 'errors', 'log', 'tracker-rows'],
  clock: [],
  config: ['errors'],
  errors: [],
  log: [],
  version: [],
  duration: [],
  usage: [],
  'tracker-rows': [],
};

/** Recursively lists the `.ts` files under `dir` (skipping `.d.ts`). */
function listTs(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listTs(p));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Maps a relative specifier to the `.ts` file it names, or undefined when it names none. */
function resolveSpecifier(fromFile: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(fromFile), spec);
  const candidates = [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

/**
 * Builds the file-level graph of `srcDir` from every `import`/`export … from`/`import()`/`require`
 * (via `ts.preProcessFile`, so comments and strings are not mistaken for imports).
 */
export function buildFileGraph(srcDir: string): Graph {
  const root = resolve(srcDir);
  const rel = (p: string) => relative(root, p).split(sep).join('/');
  const graph: Graph = new Map();
  for (const file of listTs(root)) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const deps = new Set<string>();
    for (const ref of info.importedFiles) {
      const target = resolveSpecifier(file, ref.fileName);
      if (target !== undefined && target.startsWith(root + sep)) deps.add(rel(target));
    }
    graph.set(rel(file), deps);
  }
  return graph;
}

/** The folder node of a src-relative file: its first path segment, or its base name for a root file. */
export function folderOf(file: string): string {
  const parts = file.split('/');
  return parts.length > 1 ? parts[0]! : parts[0]!.replace(/\.ts$/, '');
}

/**
 * Strongly connected components that are cycles: size > 1, or a single node importing itself
 * (Tarjan's algorithm, iterative so deep graphs cannot overflow the stack). Each component is
 * sorted; the list is sorted by first member.
 */
export function findCycles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  let next = 0;
  const nodes = new Set<string>(graph.keys());
  for (const deps of graph.values()) for (const d of deps) nodes.add(d);
  for (const start of [...nodes].sort()) {
    if (index.has(start)) continue;
    const work: Array<{ node: string; it: Iterator<string> }> = [];
    const enter = (n: string) => {
      index.set(n, next);
      low.set(n, next);
      next++;
      stack.push(n);
      onStack.add(n);
      work.push({ node: n, it: [...(graph.get(n) ?? [])].sort()[Symbol.iterator]() });
    };
    enter(start);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const step = top.it.next();
      if (!step.done) {
        const d = step.value;
        if (!index.has(d)) enter(d);
        else if (onStack.has(d)) low.set(top.node, Math.min(low.get(top.node)!, index.get(d)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) === index.get(top.node)) {
        const comp: string[] = [];
        let n: string;
        do {
          n = stack.pop()!;
          onStack.delete(n);
          comp.push(n);
        } while (n !== top.node);
        if (comp.length > 1 || graph.get(top.node)?.has(top.node)) out.push(comp.sort());
      }
    }
  }
  return out.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** Collapses a file graph to folder arrows with counts (self-arrows dropped). */
export function folderArrows(files: Graph): Array<{ from: string; to: string; count: number }> {
  const counts = new Map<string, number>();
  for (const [file, deps] of files) {
    for (const d of deps) {
      const from = folderOf(file);
      const to = folderOf(d);
      if (from === to) continue;
      const key = `${from}\u0000${to}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  }
  return [...counts]
    .map(([k, count]) => {
      const [from, to] = k.split('\u0000') as [string, string];
      return { from, to, count };
    })
    .sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to));
}

/** Runs every check over a file graph (see {@link ImportGraphReport}); `layering` defaults to {@link LAYERING}. */
export function checkGraph(
  files: Graph,
  layering: Readonly<Record<string, readonly string[] | '*'>> = LAYERING,
): ImportGraphReport {
  const arrows = folderArrows(files);
  const layerViolations: string[] = [];
  const unplaced = new Set<string>();
  for (const f of files.keys()) if (!(folderOf(f) in layering)) unplaced.add(folderOf(f));
  for (const a of arrows) {
    const allowed = layering[a.from];
    if (allowed === undefined || !(a.to in layering)) continue;
    if (allowed !== '*' && !allowed.includes(a.to)) layerViolations.push(`${a.from} -> ${a.to}`);
  }
  const folders: Graph = new Map();
  for (const a of arrows) {
    if (!folders.has(a.from)) folders.set(a.from, new Set());
    folders.get(a.from)!.add(a.to);
  }
  const cliImports: string[] = [];
  for (const [file, deps] of files) {
    if (folderOf(file) === 'cli') continue;
    for (const d of deps) if (folderOf(d) === 'cli') cliImports.push(`${file} -> ${d}`);
  }
  return {
    files,
    folderArrows: arrows,
    fileCycles: findCycles(files),
    folderCycles: findCycles(folders),
    cliImports: cliImports.sort(),
    layerViolations,
    unplaced: [...unplaced].sort(),
  };
}

/** Builds the graph of `srcDir` and runs every check on it. */
export function checkImportGraph(srcDir: string): ImportGraphReport {
  return checkGraph(buildFileGraph(srcDir));
}

/** True when the report has no cycle of either kind, no arrow against the layering and nothing outside cli imports cli. */
export function isClean(r: ImportGraphReport): boolean {
  return (
    r.fileCycles.length === 0 &&
    r.folderCycles.length === 0 &&
    r.cliImports.length === 0 &&
    r.layerViolations.length === 0
  );
}

function main(): void {
  const here = dirname(fileURLToPath(import.meta.url));
  const srcDir = process.argv[2] ?? join(here, '..', 'src');
  const r = checkImportGraph(srcDir);
  console.log('folder -> folder (file-level imports):');
  for (const a of r.folderArrows) console.log(`  ${a.from} -> ${a.to} (${a.count})`);
  for (const c of r.fileCycles) console.log(`FILE CYCLE: ${c.join(' <-> ')}`);
  for (const c of r.folderCycles) console.log(`FOLDER CYCLE: ${c.join(' <-> ')}`);
  for (const c of r.cliImports) console.log(`IMPORTS CLI FROM OUTSIDE: ${c}`);
  for (const c of r.layerViolations) console.log(`AGAINST THE LAYERING: ${c}`);
  for (const c of r.unplaced) console.log(`note: folder "${c}" is not in LAYERING (scripts/import-graph.ts); place it`);
  if (isClean(r)) console.log('ok: no cycles; every arrow follows the layering; nothing outside cli imports cli');
  process.exitCode = isClean(r) ? 0 : 1;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
