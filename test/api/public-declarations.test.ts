import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

/**
 * The package's declarations name no drizzle-orm type (DESIGN §16.5): drizzle-orm's own
 * declarations fail to compile without `skipLibCheck` (its gel, mysql-core and singlestore
 * builders, 70 errors), so a consumer compiling `strict` without `skipLibCheck` must never reach
 * them. This walks the built declarations (`dist/`, built by the test setup) from both entries
 * through their relative imports and collects every package they import. scripts/pack-check.sh
 * compiles examples/embed.ts against the packed tarball without `skipLibCheck`, the whole proof;
 * this is its fast guard.
 */

const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

function packagesReachedFrom(entries: string[]): Map<string, string> {
  const seen = new Set<string>();
  const packages = new Map<string, string>(); // package → the first declaration file importing it
  const queue = entries.map((e) => join(DIST, e));
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from|import\()\s*['"]([^'"]+)['"]/g)) {
      const spec = m[1]!;
      if (spec.startsWith('.')) {
        const target = normalize(join(dirname(file), spec.replace(/\.js$/, '.d.ts')));
        if (existsSync(target)) queue.push(target);
      } else {
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        if (!packages.has(name)) packages.set(name, file.slice(DIST.length));
      }
    }
  }
  return packages;
}

it('the declarations of `verdict` and `verdict/testing` import no drizzle-orm module', () => {
  const reached = packagesReachedFrom(['index.d.ts', 'testing.d.ts']);
  expect(reached.size).toBeGreaterThan(0); // the walk found the packages the public types do use (fastify, zod…)
  expect(reached.get('drizzle-orm')).toBeUndefined();
});
