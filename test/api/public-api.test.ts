import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The public surface is what the docs say (DESIGN §16.21): the names exported from `verdict`
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

/** Every export of the module, `type X` for type-only ones, sorted (the compiler's view, types included). */
function exported(file: string): string[] {
  const program = ts.createProgram([file], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    skipLibCheck: true,
    types: ['node'],
  });
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

describe('public API', () => {
  it.each([
    ['verdict', 'src/index.ts', '../../src/index.js'],
    ['verdict/testing', 'src/testing.ts', '../../src/testing.js'],
  ])('%s exports exactly the names the guide documents', async (entry, file, specifier) => {
    const names = exported(file);
    expect(names).toEqual(documented(entry));
    // And at run time, the value exports are exactly the non-type names.
    const mod = (await import(specifier)) as Record<string, unknown>;
    expect(Object.keys(mod).sort()).toEqual(names.filter((n) => !n.startsWith('type ')));
  });

  it('every exported error class extends VerdictError', async () => {
    const api = (await import('../../src/index.js')) as Record<string, unknown>;
    const Base = api.VerdictError as abstract new () => Error;
    const errors = Object.entries(api).filter(([name, v]) => typeof v === 'function' && (v as { prototype?: unknown }).prototype instanceof Error && name !== 'VerdictError');
    expect(errors.length).toBe(27);
    for (const [name, cls] of errors) expect((cls as { prototype: unknown }).prototype instanceof Base, name).toBe(true);
  });
});
