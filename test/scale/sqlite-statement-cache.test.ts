import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqlite, STATEMENT_CACHE_SIZE } from '../../src/store/sqlite/open.js';
import { tempDir } from '../harness/store-fixture.js';

/** The per-connection statement cache of the SQLite store (src/store/sqlite/open.ts). */

let dir: { dir: string; cleanup: () => void };
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.cleanup());

describe('SQLite statement cache', () => {
  it('hands back the prepared statement for a repeated text, reset to object rows', () => {
    const db = openSqlite(join(dir.dir, 'c.db'));
    try {
      const c = db.$client;
      const first = c.prepare('SELECT 1 AS one');
      expect(first.raw(true).get()).toEqual([1]); // drizzle reads some rows this way
      const again = c.prepare('SELECT 1 AS one');
      expect(again).toBe(first);
      expect(again.get()).toEqual({ one: 1 });
      // writers are cached too (they have no row mode to reset)
      expect(c.prepare('CREATE TABLE IF NOT EXISTS t (x)')).toBe(c.prepare('CREATE TABLE IF NOT EXISTS t (x)'));
    } finally {
      db.$client.close();
    }
  });

  it('stops caching new texts at the bound, so texts with inlined values cannot grow it without end', () => {
    const db = openSqlite(join(dir.dir, 'c.db'));
    try {
      const c = db.$client;
      for (let i = 0; i < STATEMENT_CACHE_SIZE + 10; i++) c.prepare(`SELECT ${i} AS n`);
      const late = `SELECT ${STATEMENT_CACHE_SIZE + 5} AS n`;
      expect(c.prepare(late)).not.toBe(c.prepare(late));
      expect(c.prepare('SELECT 0 AS n')).toBe(c.prepare('SELECT 0 AS n'));
    } finally {
      db.$client.close();
    }
  });
});
