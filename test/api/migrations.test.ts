import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createVerdict } from '../../src/index.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/open.js';
import { tempDir } from '../harness/store-fixture.js';
import pg from 'pg';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { PG_MIGRATIONS } from '../../src/store/postgres/open.js';
import { createTestDatabase, PG_SKIP_REASON, TEST_PG_URL } from '../store/conformance-backends.js';
import { spawnCli } from '../harness/cli-process.js';

/** Migrations keep their own table, `verdict_migrations` (DESIGN §16.1). */

const known = readMigrationFiles({ migrationsFolder: SQLITE_MIGRATIONS });
const rows = (db: Database.Database, table: string) =>
  db.prepare(`SELECT hash, created_at FROM ${table} ORDER BY id`).all() as Array<{ hash: string; created_at: number }>;

describe('SQLite migrations table', () => {
  let t: ReturnType<typeof tempDir>;
  afterEach(() => t?.cleanup());

  it('records in verdict_migrations and leaves a host drizzle table __drizzle_migrations alone', async () => {
    t = tempDir();
    const file = join(t.dir, 'app.db');
    const host = new Database(file);
    // The host's own drizzle migrations, in drizzle's default table, newer than all of Verdict's.
    host.exec('CREATE TABLE __drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)');
    host
      .prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)')
      .run('host-migration-hash', 4_102_444_800_000);
    const v = await createVerdict({ database: { sqlite: host } });
    await v.store.createWorkspace({ slug: 'acme' }); // the tables exist: the host's later row did not make drizzle skip them
    await v.close();
    expect(rows(host, 'verdict_migrations').map((r) => r.hash)).toEqual(known.map((m) => m.hash));
    expect(rows(host, '__drizzle_migrations').map((r) => r.hash)).toEqual(['host-migration-hash']);
    host.close();
  });

  it('a database migrated by an older version (rows in __drizzle_migrations) keeps working: its rows are copied, nothing re-applied', async () => {
    t = tempDir();
    const file = join(t.dir, 'old.db');
    const old = new Database(file);
    migrate(drizzle({ client: old }), { migrationsFolder: SQLITE_MIGRATIONS }); // as versions before §16.1 did
    old.exec(`INSERT INTO workspaces (id, slug, created_at) VALUES ('w1', 'acme', 1)`);
    old.close();
    const v = await createVerdict({ database: file });
    expect((await v.store.getWorkspaceBySlug('acme'))?.id).toBe('w1');
    await v.close();
    const db = new Database(file);
    expect(rows(db, 'verdict_migrations')).toEqual(rows(db, '__drizzle_migrations'));
    db.close();
  });

  it('migrate: false leaves a fresh database unmigrated; `verdict migrate` migrates it, and again is a no-op', async () => {
    t = tempDir();
    const file = join(t.dir, 'fresh.db');
    const v = await createVerdict({ database: file, migrate: false });
    await expect(v.store.createWorkspace({ slug: 'acme' })).rejects.toThrow(/no such table/);
    await v.close();
    for (let i = 0; i < 2; i++) {
      const run = spawnCli(['migrate', '--database-url', file]);
      expect((await run.exited).code, run.stderr()).toBe(0);
      expect(run.stdout()).toContain(`migrated: ${known.length} migrations applied`);
    }
    const db = new Database(file);
    expect(rows(db, 'verdict_migrations')).toHaveLength(known.length);
    db.close();
    const v2 = await createVerdict({ database: file, migrate: false });
    expect((await v2.store.createWorkspace({ slug: 'acme' })).slug).toBe('acme');
    await v2.close();
  });
});

describe.skipIf(!TEST_PG_URL)(`Postgres migrations table${TEST_PG_URL ? '' : ` (${PG_SKIP_REASON})`}`, () => {
  it('a database migrated by an older version (drizzle.__drizzle_migrations) keeps working; a fresh one records in drizzle.verdict_migrations only', async () => {
    const db = await createTestDatabase(TEST_PG_URL!);
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      await migratePg(drizzlePg({ client: pool }), { migrationsFolder: PG_MIGRATIONS }); // as versions before §16.1 did
      await pool.query(`INSERT INTO workspaces (id, slug, created_at) VALUES ('w1', 'acme', 1)`);
      const v = await createVerdict({ database: { postgres: pool } });
      expect((await v.store.getWorkspaceBySlug('acme'))?.id).toBe('w1');
      await v.close();
      const q = async (t: string) => (await pool.query(`SELECT hash, created_at FROM drizzle.${t} ORDER BY id`)).rows;
      expect(await q('verdict_migrations')).toEqual(await q('__drizzle_migrations'));
      expect(await q('verdict_migrations')).toHaveLength(
        readMigrationFiles({ migrationsFolder: PG_MIGRATIONS }).length,
      );
    } finally {
      await pool.end();
      await db.drop();
    }
    const fresh = await createTestDatabase(TEST_PG_URL!);
    try {
      const v = await createVerdict({ database: fresh.url });
      await v.close();
      const c = new pg.Client({ connectionString: fresh.url });
      await c.connect();
      const r = await c.query(
        `SELECT to_regclass('drizzle.verdict_migrations') IS NOT NULL AS new, to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS old`,
      );
      await c.end();
      expect(r.rows[0]).toEqual({ new: true, old: false });
    } finally {
      await fresh.drop();
    }
  });
});
