import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The public surface is what the docs say (DESIGN §16.1): the names exported from `verdict`
 * (src/index.ts) and `verdict/testing` (src/testing.ts), values and types, sorted, equal the lists
 * in the guide's "Embedding Verdict in your tracker". Adding or removing an export fails here until the guide says so.
 */

const GUIDE = readFileSync(new URL('../../docs/guide.md', import.meta.url), 'utf8');

function documented(entry: string): string[] {
  const at = GUIDE.indexOf(`<!-- public-api:${entry} -->`);
  expect(at, `docs/guide.md has no <!-- public-api:${entry} --> block`).toBeGreaterThan(-1);
  const block = GUIDE.slice(at).split('```')[1];
  return block
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .sort();
}

/**
 * One program over both entry files, with every file under node_modules read as empty and no lib:
 * which names are exported, and whether each is a value, is settled by the project's own files
 * (neither entry re-exports a package), and parsing the packages' declarations made this test take
 * 50 s of a loaded machine instead of 10.
 */
const program = (() => {
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noLib: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (file, language, ...rest) =>
    /[\\/]node_modules[\\/]/.test(file) ? ts.createSourceFile(file, '', language) : read(file, language, ...rest);
  return ts.createProgram(['src/index.ts', 'src/testing.ts'], options, host);
})();

/** Every export of the module, `type X` for type-only ones, sorted (the compiler's view, types included). */
function exported(file: string): string[] {
  const checker = program.getTypeChecker();
  const mod = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  return checker
    .getExportsOfModule(mod)
    .map((s) => {
      const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
      return `${target.flags & ts.SymbolFlags.Value ? '' : 'type '}${s.getName()}`;
    })
    .sort();
}

/**
 * What a user's `import` of the built package sees, by the package's own name in a plain Node
 * (test setup builds dist/ when src/ is newer): the value names, and for each error class whether
 * it extends VerdictError. Loading the library through the test runner's transform took 10 s of
 * a loaded machine; a plain Node loads dist/ in under one second of CPU.
 */
const loads = new Map<string, { names: string[]; errors: Array<[string, boolean]> }>();
function loaded(entry: string): { names: string[]; errors: Array<[string, boolean]> } {
  const done = loads.get(entry);
  if (done) return done;
  const script = `
    const api = await import(${JSON.stringify(entry)});
    const Base = api.VerdictError;
    const errors = Object.entries(api)
      .filter(([name, v]) => typeof v === 'function' && v.prototype instanceof Error && name !== 'VerdictError')
      .map(([name, v]) => [name, Base !== undefined && v.prototype instanceof Base]);
    process.stdout.write(JSON.stringify({ names: Object.keys(api).sort(), errors }));`;
  const got = JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: new URL('../..', import.meta.url),
      encoding: 'utf8',
    }),
  ) as {
    names: string[];
    errors: Array<[string, boolean]>;
  };
  loads.set(entry, got);
  return got;
}

describe('public API', () => {
  it.each([
    ['verdict', 'src/index.ts'],
    ['verdict/testing', 'src/testing.ts'],
  ])('%s exports exactly the names the guide documents', (entry, file) => {
    const names = exported(file);
    expect(names).toEqual(documented(entry));
    // And at run time, the value exports are exactly the non-type names.
    expect(loaded(entry).names).toEqual(names.filter((n) => !n.startsWith('type ')));
  });

  it('every exported error class extends VerdictError', () => {
    const { errors } = loaded('verdict');
    expect(errors.length).toBe(28);
    for (const [name, extendsBase] of errors) expect(extendsBase, name).toBe(true);
  });
});
