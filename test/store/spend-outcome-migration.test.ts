import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PG_MIGRATIONS } from '../../src/store/postgres/open.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/open.js';
import { tempDir } from '../harness/store-fixture.js';
import { freshPglite } from '../harness/pglite-fresh.js';

/**
 * Migration 0012 renames a failed call's spend outcome to its job outcome's word (`refused` →
 * `refuse`, `unavailable` → `fail`, DESIGN §3), on both dialects, keeping every call and token;
 * migration 0014 then splits the spend and throughput rows by shard (DESIGN §2 decision_spend),
 * keeping every row as shard 0. The tables are made as migrations 0000 and 0013 made them (their
 * own statements), rows from before 0012 are inserted, and the two migrations' own statements run
 * on real SQLite and on PGlite.
 */
const statements = (folder: string, file: string) =>
  readFileSync(join(folder, file), 'utf8')
    .split('--> statement-breakpoint')
    .map((s) => s.trim())
    .filter(Boolean);
/** The tables before 0014: decision_spend as 0000 made it, job_throughput as 0013 did. */
const before = (folder: string) => [
  ...statements(folder, '0000_init.sql').filter((s) => /^CREATE TABLE .decision_spend. \(/.test(s)),
  ...statements(folder, '0013_job-throughput.sql'),
];
const migrations = (folder: string) => [
  ...statements(folder, '0012_spend-outcome-words.sql'),
  ...statements(folder, '0014_shared-row-shards.sql'),
];

const COLS =
  'hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens';
const BEFORE = `INSERT INTO decision_spend (${COLS}) VALUES
  (0, 'attention', 'fake', 'm', 'refused', 2, 10, 1, 0, 0),
  (0, 'attention', 'fake', 'm', 'refuse', 1, 5, 1, 1, 1),
  (0, 'attention', 'fake', 'm', 'unavailable', 3, 30, 0, 0, 0),
  (0, 'attention', 'fake', 'm', 'ok', 4, 40, 4, 0, 0);
  INSERT INTO job_throughput (minute, outcome, jobs) VALUES (0, 'complete', 7)`;
const READ = `SELECT outcome, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, shard FROM decision_spend
  UNION ALL SELECT outcome, jobs, 0, 0, 0, 0, shard FROM job_throughput ORDER BY outcome`;
const AFTER = [
  {
    outcome: 'complete',
    calls: 7,
    input_tokens: 0,
    output_tokens: 0,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    shard: 0,
  },
  {
    outcome: 'fail',
    calls: 3,
    input_tokens: 30,
    output_tokens: 0,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    shard: 0,
  },
  {
    outcome: 'ok',
    calls: 4,
    input_tokens: 40,
    output_tokens: 4,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    shard: 0,
  },
  {
    outcome: 'refuse',
    calls: 3,
    input_tokens: 15,
    output_tokens: 2,
    cache_read_tokens: 1,
    cache_write_tokens: 1,
    shard: 0,
  },
];

const t = tempDir();
afterAll(() => t.cleanup());

describe('migrations 0012 and 0014: spend outcomes take the job outcome words, then the shared rows a shard', () => {
  it('SQLite: refused and unavailable rows become refuse and fail, added into a row already there; every row is shard 0', () => {
    const db = new Database(join(t.dir, 'spend.db'));
    try {
      for (const s of before(SQLITE_MIGRATIONS)) db.exec(s);
      db.exec(BEFORE);
      for (const s of migrations(SQLITE_MIGRATIONS)) db.exec(s);
      expect(db.prepare(READ).all()).toEqual(AFTER);
    } finally {
      db.close();
    }
  });

  it('PostgreSQL (PGlite): the same', { timeout: 180_000 }, async () => {
    const client = await freshPglite();
    try {
      for (const s of before(PG_MIGRATIONS)) await client.exec(s);
      await client.exec(BEFORE);
      for (const s of migrations(PG_MIGRATIONS)) await client.exec(s);
      const rows = (await client.query<Record<string, unknown>>(READ)).rows.map((r) =>
        Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])),
      );
      expect(rows).toEqual(AFTER);
    } finally {
      await client.close();
    }
  });
});
