import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from './harness/cli-process.js';
import { tempDir } from './harness/store-fixture.js';

/**
 * The build never leaves a moment without a working dist/ (scripts/build.mjs): tsc writes a new
 * folder beside it, which is renamed into place only once it compiled. A tiny project stands in for
 * src/ so the test compiles in a second; the script, its tsc and its swap are the real ones.
 * And nothing a user runs builds: the package has no `prepare`, so `npm ci` and `npx verdict` in a
 * checkout leave dist/ alone.
 */

const exec = promisify(execFile);
let t: { dir: string; cleanup: () => void };

/** A project of one `cli/main.ts` in `dir`, with a type error when `broken`. */
function project(dir: string, body: string): string {
  mkdirSync(join(dir, 'src/cli'), { recursive: true });
  writeFileSync(join(dir, 'src/cli/main.ts'), body);
  const tsconfig = join(dir, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        rootDir: 'src',
        types: [],
      },
      include: ['src'],
    }),
  );
  return tsconfig;
}
const build = (tsconfig: string, out: string) =>
  exec(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--project', tsconfig, '--out', out], { cwd: ROOT });

beforeAll(() => {
  t = tempDir();
});
afterAll(() => t?.cleanup());

describe('npm run build (scripts/build.mjs)', () => {
  it('swaps a fresh build in: the old files are gone, the bin is executable, nothing is left beside it', async () => {
    const out = join(t.dir, 'ok/dist');
    mkdirSync(join(out, 'cli'), { recursive: true });
    writeFileSync(join(out, 'cli/main.js'), 'old build');
    writeFileSync(join(out, 'stale.js'), 'a module the sources no longer have');
    await build(project(join(t.dir, 'ok'), 'const n: number = 1;\nconsole.log(n);\n'), out);
    expect(readFileSync(join(out, 'cli/main.js'), 'utf8')).toContain('console.log(n)');
    expect(statSync(join(out, 'cli/main.js')).mode & 0o111).toBe(0o111);
    expect(existsSync(join(out, 'stale.js'))).toBe(false);
    expect(readdirSync(join(t.dir, 'ok')).sort()).toEqual(['dist', 'src', 'tsconfig.json']);
  }, 120_000);

  it('a failed compile leaves the old dist/ as it was and removes its own folder', async () => {
    const out = join(t.dir, 'bad/dist');
    mkdirSync(join(out, 'cli'), { recursive: true });
    writeFileSync(join(out, 'cli/main.js'), 'old build');
    const failed = await build(project(join(t.dir, 'bad'), 'const n: number = "one";\n'), out).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(failed?.code).not.toBe(0);
    expect(failed?.stderr).toMatch(/build: failed; .* is left as it was/);
    expect(readFileSync(join(out, 'cli/main.js'), 'utf8')).toBe('old build');
    expect(readdirSync(join(t.dir, 'bad')).sort()).toEqual(['dist', 'src', 'tsconfig.json']);
  }, 120_000);

  it('no lifecycle script of the package builds on install (no prepare, install or postinstall)', () => {
    const scripts = (
      JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
    ).scripts;
    for (const s of ['prepare', 'preinstall', 'install', 'postinstall']) expect(scripts[s], s).toBeUndefined();
    expect(scripts.build).toBe('node scripts/build.mjs');
  });
});
