#!/usr/bin/env node
// Builds dist/ without ever leaving a moment with no dist/ or a half-written one: tsc writes into a
// new folder beside it (dist.build-<pid>), the bin is made executable there, and only then is the
// new folder renamed into place (the old one is renamed aside first and deleted after). A CLI
// process already running from dist/ keeps the modules it has loaded; one started during the build
// runs the old dist/ until the two renames, which are microseconds apart. A failed compile
// leaves dist/ as it was and removes its own folder.
//
// Usage: node scripts/build.mjs [--project tsconfig.build.json] [--out dist]
// (the options exist so that test/build.test.ts can build a tiny project into a temporary folder).
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { project: { type: 'string', default: 'tsconfig.build.json' }, out: { type: 'string', default: 'dist' } },
});
const project = resolve(values.project);
const out = resolve(values.out);
const fresh = join(dirname(out), `${out.split('/').pop()}.build-${process.pid}`);
const aside = join(dirname(out), `${out.split('/').pop()}.old-${process.pid}`);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(fresh, { recursive: true, force: true });
try {
  execFileSync(process.execPath, [tsc, '-p', project, '--outDir', fresh], { stdio: 'inherit' });
  chmodSync(join(fresh, 'cli/main.js'), 0o755);
} catch (err) {
  rmSync(fresh, { recursive: true, force: true });
  process.stderr.write(`build: failed; ${values.out} is left as it was\n`);
  process.exit(typeof err?.status === 'number' && err.status !== 0 ? err.status : 1);
}
const hadOld = existsSync(out);
if (hadOld) renameSync(out, aside);
renameSync(fresh, out);
if (hadOld) rmSync(aside, { recursive: true, force: true });
