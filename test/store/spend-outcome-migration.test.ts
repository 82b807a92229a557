import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Registry } from '../../src/decision/registry.js';
import { PG_MIGRATIONS } from '../../src/store/postgres/open.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { openSqlite, SQLITE_MIGRATIONS } from '../../src/store/sqlite/open.js';
import { tempDir } from '../harness/store-fixture.js';
import { freshPglite } from '../harness/pglite-fresh.js';

/**
 * Migration 0012 renames a failed call's spend outcome to its job outcome's word (`refused` →
 * `refuse`, `unavailable` → `fail`, DESIGN §3), on both dialects, keeping every call and token:
 * rows from before it are inserted here and the migration's own statements run on real SQLite
 * and on PGlite (the statements change nothing a second time, so a migrated database can take them).
 */
const MIGRATION = '0012_spend-outcome-words.sql';
const statements = (folder: string) =>
  readFileSync(join(folder, MIGRATION), 'utf8')
    .split('--> statement-breakpoint')
    .map((s) => s.trim())
    .filter(Boolean);

const COLS =
  'hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens';
const BEFORE = `INSERT INTO decision_spend (${COLS}) VALUES
  (0, 'attention', 'fake', 'm', 'refused', 2, 10, 1, 0, 0),
  (0, 'attention', 'fake', 'm', 'refuse', 1, 5, 1, 1, 1),
  (0, 'attention', 'fake', 'm', 'unavailable', 3, 30, 0, 0, 0),
  (0, 'attention', 'fake', 'm', 'ok', 4, 40, 4, 0, 0)`;
const READ = `SELECT outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens FROM decision_spend ORDER BY outcome`;
const AFTER = [
  { outcome: 'fail', calls: 3, input_tokens: 30, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0 },
  { outcome: 'ok', calls: 4, input_tokens: 40, output_tokens: 4, cache_read_tokens: 0, cache_write_tokens: 0 },
  { outcome: 'refuse', calls: 3, input_tokens: 15, output_tokens: 2, cache_read_tokens: 1, cache_write_tokens: 1 },
];

const t = tempDir();
afterAll(() => t.cleanup());

describe('migration 0012: spend outcomes take the job outcome words', () => {
  it('SQLite: refused and unavailable rows become refuse and fail, added into a row already there', () => {
    const db = openSqlite(join(t.dir, 'spend.db'));
    try {
      db.$client.exec(BEFORE);
      for (const s of statements(SQLITE_MIGRATIONS)) db.$client.exec(s);
      expect(db.$client.prepare(READ).all()).toEqual(AFTER);
    } finally {
      db.$client.close();
    }
  });

  it('PostgreSQL (PGlite): the same', { timeout: 180_000 }, async () => {
    const client = await freshPglite();
    const store = await PgStore.onPglite(client, { registry: new Registry([]), closeClient: false });
    try {
      await client.exec(BEFORE);
      for (const s of statements(PG_MIGRATIONS)) await client.exec(s);
      const rows = (await client.query<Record<string, unknown>>(READ)).rows.map((r) =>
        Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])),
      );
      expect(rows).toEqual(AFTER);
    } finally {
      await store.close();
      await client.close();
    }
  });
});
