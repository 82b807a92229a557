import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';

/**
 * Vitest global setup: the process tests spawn the built CLI (`dist/cli/main.js`), not the sources
 * under tsx, so the build has to be the sources' own. One build for the whole run, before any test
 * file starts: `npm run build` when dist/ is missing or older than any file under src/ (or the
 * build config); nothing when it is current (CI's `npm ci` has just built it in `prepare`).
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BUILT_MAIN = join(ROOT, 'dist/cli/main.js');

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

/** Why dist/ needs a build, or null when it is current. */
export function staleBuild(): string | null {
  if (!existsSync(BUILT_MAIN)) return 'dist/cli/main.js is missing';
  const built = statSync(BUILT_MAIN).mtimeMs;
  const sources = Math.max(
    newestMtime(join(ROOT, 'src')),
    ...['tsconfig.build.json', 'tsconfig.json', 'package.json'].map((f) => statSync(join(ROOT, f)).mtimeMs),
  );
  return sources > built ? 'src/ is newer than dist/' : null;
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** A folder that lives as long as this run of vitest (shared by its projects): fixtures built once and copied by several files (test/harness/demo-db.ts). */
    runFixtures: string;
  }
}

/**
 * Builds dist/ when stale, and gives every project's files one folder for fixtures shared within
 * this run (inject('runFixtures')); the returned teardown removes it when the run ends. Each
 * project runs this setup in the one vitest process: the folder is named by that process (its id
 * and its start time, /proc/self/stat field 22, so a later run given the same id gets a new name).
 */
export default function setup(project: TestProject): () => void {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  const fixtures = join(tmpdir(), `verdict-test-run-${process.pid}-${started}`);
  mkdirSync(fixtures, { recursive: true });
  project.provide('runFixtures', fixtures);
  build();
  return () => rmSync(fixtures, { recursive: true, force: true });
}

function build(): void {
  const why = staleBuild();
  if (why === null) return;
  process.stderr.write(`test setup: ${why}; running npm run build once for the process tests\n`);
  try {
    execFileSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(
      `test setup: npm run build failed; the process tests spawn dist/cli/main.js\n${e.stdout ?? ''}${e.stderr ?? ''}`,
      { cause: err },
    );
  }
}
