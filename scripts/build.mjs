#!/usr/bin/env node
// Builds dist/ without ever leaving a moment with no dist/ or a half-written one: the compiler writes
// into a new folder beside it (dist.build-<pid>), the bin is made executable there, and only then is
// the new folder renamed into place (the old one is renamed aside first and deleted after). A CLI
// process already running from dist/ keeps the modules it has loaded; one started during the build
// runs the old dist/ until the two renames, which are microseconds apart. A failed compile (any
// error tsc -p would report) leaves dist/ as it was and removes its own folder.
//
// Usage: node scripts/build.mjs [--project tsconfig.build.json] [--out dist] [--check-also tsconfig.json]
// (--project and --out exist so that test/build.test.ts can build a tiny project into a temporary folder).
//
// --check-also CONFIG: the program is CONFIG's files (tsconfig.json: src, test, scripts and the
// configs) with the build config's options, every file is type-checked, and only the build config's
// files are written. One program instead of `npm run build` and then `tsc --noEmit -p .`, which
// parsed and checked src/ twice: 59 s of CPU against 37 + 38 s, back to back at a load average of 20
// to 25 (`.ci/run` uses it). The output is the same files, byte for byte (compared with diff -r); a
// type error anywhere fails the build.
// Without it, a type error in a test does not stop `npm run build` (nor the tests' build-once).
import { chmodSync, existsSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    project: { type: 'string', default: 'tsconfig.build.json' },
    out: { type: 'string', default: 'dist' },
    'check-also': { type: 'string' },
  },
});
const ts = createRequire(import.meta.url)('typescript');
const out = resolve(values.out);
const fresh = join(dirname(out), `${out.split('/').pop()}.build-${process.pid}`);
const aside = join(dirname(out), `${out.split('/').pop()}.old-${process.pid}`);

/** A tsconfig file read as `tsc -p` reads it (extends, include, exclude); unreadable: throws. */
function parseConfig(path) {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    resolve(path),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  return parsed;
}

/** Compiles into `fresh`; returns the diagnostics (an empty list: compiled). */
function compile() {
  const build = parseConfig(values.project);
  const checked = values['check-also'] ? parseConfig(values['check-also']) : build;
  const options = { ...build.options, outDir: fresh };
  // Files outside the build's rootDir (tests) are checked, never written: the rootDir stays the
  // build's so the written paths are too; the "not under rootDir" errors the tests raise are dropped.
  const host = ts.createCompilerHost(options);
  const program = ts.createProgram({
    rootNames: checked.fileNames,
    options,
    host,
    configFileParsingDiagnostics: [...build.errors, ...(checked === build ? [] : checked.errors)],
  });
  const written = new Set(build.fileNames.map((f) => resolve(f)));
  const diagnostics = [
    ...program.getConfigFileParsingDiagnostics(),
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...program.getSyntacticDiagnostics(),
    ...program.getSemanticDiagnostics(),
  ].filter((d) => checked === build || d.code !== NOT_UNDER_ROOT_DIR);
  if (checked !== build) diagnostics.push(...outsideRootDir(build, options, host, program));
  if (diagnostics.some((d) => d.category === ts.DiagnosticCategory.Error)) return diagnostics;
  for (const sf of program.getSourceFiles()) {
    if (!written.has(resolve(sf.fileName))) continue;
    // Declaration errors (a type that cannot be named in a .d.ts) come from the emit.
    diagnostics.push(...program.emit(sf).diagnostics);
  }
  return diagnostics;
}
/** TS6059: "File is not under 'rootDir'": test/ and scripts/ raise it; outsideRootDir reports the build's own. */
const NOT_UNDER_ROOT_DIR = 6059;

/**
 * The build's own rootDir errors (src/ importing a file of scripts/ or test/), which `tsc -p` of the
 * build config reports as TS6059: the files the build's program holds, not a declaration file nor a
 * package's, outside rootDir. The program on the build's files alone reuses the first's parsed files.
 */
function outsideRootDir(build, options, host, oldProgram) {
  if (!options.rootDir) return [];
  const buildProgram = ts.createProgram({ rootNames: build.fileNames, options, host, oldProgram });
  const root = resolve(options.rootDir) + '/';
  return buildProgram
    .getSourceFiles()
    .filter((sf) => !sf.isDeclarationFile && !buildProgram.isSourceFileFromExternalLibrary(sf))
    .filter((sf) => !resolve(sf.fileName).startsWith(root))
    .map((sf) => ({
      category: ts.DiagnosticCategory.Error,
      code: NOT_UNDER_ROOT_DIR,
      file: undefined,
      start: undefined,
      length: undefined,
      messageText: `File '${sf.fileName}' is not under 'rootDir' '${options.rootDir}' of ${values.project}: a file of the build imports it.`,
    }));
}

rmSync(fresh, { recursive: true, force: true });
let diagnostics;
try {
  diagnostics = compile();
} catch (err) {
  diagnostics = [];
  process.stderr.write(`${err?.message ?? err}\n`);
  diagnostics.failed = true;
}
const errors = diagnostics.filter((d) => d.category === ts.DiagnosticCategory.Error);
if (diagnostics.length > 0) {
  const formatHost = {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => process.cwd(),
    getNewLine: () => '\n',
  };
  const format = process.stdout.isTTY ? ts.formatDiagnosticsWithColorAndContext : ts.formatDiagnostics;
  process.stdout.write(format(diagnostics, formatHost));
}
if (diagnostics.failed || errors.length > 0) {
  rmSync(fresh, { recursive: true, force: true });
  process.stderr.write(`build: failed; ${values.out} is left as it was (${errors.length} errors)\n`);
  process.exit(2);
}
chmodSync(join(fresh, 'cli/main.js'), 0o755);
const hadOld = existsSync(out);
if (hadOld) renameSync(out, aside);
renameSync(fresh, out);
if (hadOld) rmSync(aside, { recursive: true, force: true });
