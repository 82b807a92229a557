import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `npx tsx scripts/cpu-profile-categories.ts <file.cpuprofile | dir>`: a V8 CPU profile (`node
 * --cpu-prof`, e.g. of `scripts/cpu-per-job.ts`) summarised by where the samples fall, as the share
 * of the busy samples (idle and unattributed `(program)` samples left out) per category:
 * - SQLite native: better-sqlite3's native calls (its JS wrapper and the C++ functions it exposes);
 * - statement layer: drizzle-orm and Verdict's statement driver (src/store/sql/steps.ts, the
 *   dialects' dialect.ts and context.ts);
 * - Verdict code: everything else under src/;
 * - GC: `(garbage collector)`;
 * - Node and other: node internals, tsx, other packages.
 * A sample is charged to its own (self) frame. Given a directory, reads its largest profile (the main
 * thread's; tsx's loader thread writes a small one beside it).
 */
const arg = process.argv[2];
if (!arg) throw new Error('usage: cpu-profile-categories.ts <file.cpuprofile | dir>');
const file = statSync(arg).isDirectory()
  ? join(
      arg,
      readdirSync(arg)
        .filter((f) => f.endsWith('.cpuprofile'))
        .sort((a, b) => statSync(join(arg, b)).size - statSync(join(arg, a)).size)[0]!,
    )
  : arg;

interface Node {
  id: number;
  callFrame: { functionName: string; url: string };
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[] };

/** better-sqlite3's C++ methods as the profile names them (frames with no script URL). */
const SQLITE_NATIVE = new Set([
  'all',
  'run',
  'get',
  'iterate',
  'exec',
  'prepare',
  'pragma',
  'raw',
  'pluck',
  'expand',
  'bind',
  'columns',
  'safeIntegers',
  'transaction',
  'close',
]);

function category(n: Node): string | null {
  const { functionName: fn, url } = n.callFrame;
  if (fn === '(garbage collector)') return 'GC';
  if (fn === '(idle)' || fn === '(program)' || fn === '(root)') return null;
  if (url.includes('better-sqlite3') || (url === '' && SQLITE_NATIVE.has(fn))) return 'SQLite native';
  if (
    url.includes('drizzle-orm') ||
    /src\/store\/sql\/steps\.ts|src\/store\/(sqlite|postgres)\/(dialect|context)\.ts/.test(url)
  )
    return 'statement layer';
  if (url.includes('/src/')) return 'Verdict code';
  return 'Node and other';
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const counts = new Map<string, number>();
let busy = 0;
for (const id of profile.samples) {
  const c = category(byId.get(id)!);
  if (c === null) continue;
  busy++;
  counts.set(c, (counts.get(c) ?? 0) + 1);
}
process.stdout.write(`${file}: ${busy} busy samples\n| category | share of busy samples |\n|---|---|\n`);
for (const c of ['SQLite native', 'statement layer', 'Verdict code', 'GC', 'Node and other']) {
  process.stdout.write(`| ${c} | ${(((counts.get(c) ?? 0) / Math.max(busy, 1)) * 100).toFixed(1)} % |\n`);
}
