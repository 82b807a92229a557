import { sql } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { bind, one, read, shape, shapeFamily, type SqlContext } from '../../src/store/sql/steps.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Statement shapes (src/store/sql/steps.ts `Shape`, issue 13): on SQLite a shape is built and
 * prepared once per connection, and each later run only binds its values.
 */

let fx: Fixture;
let c: SqlContext;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
  c = (fx.store as unknown as { c: SqlContext }).c;
});
afterEach(async () => fx.cleanup());

describe('prepared statement shapes on SQLite', () => {
  it('a shape is built once, however many times it runs, and binds each run its own values', async () => {
    let builds = 0;
    const echo = shape<'a' | 'b'>('echo', (_d, p) => {
      builds++;
      return sql`SELECT ${p.a} AS a, ${p.b} AS b`;
    });
    for (let i = 0; i < 5; i++) {
      expect(await read(c, one(bind(echo, { a: i, b: `v${i}` })))).toEqual({ a: i, b: `v${i}` });
    }
    expect(builds).toBe(1);
  });

  it('a family gives one shape per variant', () => {
    const family = shapeFamily((n: number) => shape('n', () => sql`SELECT ${n}`));
    expect(family(2)).toBe(family(2));
    expect(family(2)).not.toBe(family(3));
  });

  it('an SQL expression as a value is refused: a placeholder binds plain values only', async () => {
    const echo = shape<'a'>('echo one', (_d, p) => sql`SELECT ${p.a} AS a`);
    await expect(read(c, one(bind(echo, { a: sql`1 + 1` })))).rejects.toThrow(
      /statement echo one: parameter a is an expression/,
    );
  });
});
