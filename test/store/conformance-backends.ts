import type { PGlite } from '@electric-sql/pglite';
import { join } from 'node:path';
import pg from 'pg';
import { ManualClock } from '../../src/clock.js';
import { Registry } from '../../src/decision/registry.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/whole-store.js';
import { createDatabase } from '../../scripts/bench-drain.js';
import { tempDir } from '../harness/store-fixture.js';
import { SERVER_SKIP_MARK, serverMissing } from '../harness/needs-server.js';
import { freshPglite } from '../harness/pglite-fresh.js';

/**
 * The backends the store conformance suite runs against: SQLite (a real file per test, a manual
 * clock), PGlite (in-process Postgres, one instance per file, emptied between tests) and a real
 * PostgreSQL server (a database per file, from VERDICT_TEST_PG_URL). On Postgres "now" is the
 * database's clock plus the store's test-only offset, so `advance` moves the offset.
 */

export type TestStore = Store & { setRegistry(r: Registry): void };

export interface OpenedStore {
  store: TestStore;
  /** Moves the store's "now" forward by `ms` milliseconds. */
  advance(ms: number): void;
  /** A second store on the same data, as another process would open it; closed by `cleanup`. */
  peer(registry: Registry): Promise<TestStore>;
  /** Closes the store (and its peers) and drops its data. */
  cleanup(): Promise<void>;
}

export interface StoreBackend {
  readonly name: string;
  /** True when the backend is a real server with many connections (SKIP LOCKED contention is real). */
  readonly concurrentConnections: boolean;
  /** Once per file. */
  setup(): Promise<void>;
  teardown(): Promise<void>;
  /** A fresh, empty, migrated store. */
  open(registry: Registry, newId: () => string): Promise<OpenedStore>;
}

export function sqliteBackend(): StoreBackend {
  return {
    name: 'sqlite',
    concurrentConnections: false,
    setup: async () => undefined,
    teardown: async () => undefined,
    open: async (registry, newId) => {
      const t = tempDir();
      const file = join(t.dir, 'verdict.db');
      const clock = new ManualClock();
      const store = new SqliteStore({ url: file, registry, clock, newId });
      const peers: SqliteStore[] = [];
      return {
        store,
        advance: (ms) => clock.advance(ms),
        peer: async (r) => {
          const p = new SqliteStore({ url: file, registry: r, clock });
          peers.push(p);
          return p;
        },
        cleanup: async () => {
          for (const p of peers) await p.close();
          await store.close();
          t.cleanup();
        },
      };
    },
  };
}

const TABLES =
  'workspaces, collections, items, comments, item_links, decision_jobs, item_decisions, decision_spend, decision_spend_reservations, verdict_meta, event_targets, decision_events, api_tokens, dashboard_sessions, webhook_deliveries, human_verdicts, surfacing_changes, provider_batches, batch_requests, item_actions';

export function pgliteBackend(): StoreBackend {
  let client: PGlite;
  return {
    name: 'pglite',
    concurrentConnections: false,
    setup: async () => {
      client = await freshPglite();
    },
    teardown: async () => {
      await client.close();
    },
    open: async (registry, newId) => {
      const store = await PgStore.onPglite(client, { registry, newId, closeClient: false });
      await client.exec(`TRUNCATE ${TABLES} RESTART IDENTITY CASCADE`);
      const peers: PgStore[] = [];
      return {
        store,
        advance: (ms) => {
          for (const s of [store, ...peers]) s.advanceClockForTests(ms);
        },
        peer: async (r) => {
          const p = await PgStore.onPglite(client, {
            registry: r,
            closeClient: false,
            clockOffsetMs: store.ctx.clockOffsetMs,
          });
          peers.push(p);
          return p;
        },
        cleanup: () => store.close(),
      };
    },
  };
}

/**
 * The admin URL of the real server, or undefined: the suites needing it then skip, saying why, and
 * loudly (serverMissing: a warning and a count; in CI a failure instead).
 */
export const TEST_PG_URL = process.env.VERDICT_TEST_PG_URL || undefined;

export const PG_SKIP_REASON = `${SERVER_SKIP_MARK} VERDICT_TEST_PG_URL is not set: start a server with \`eval "$(scripts/pg-test-server.sh start)"\` (.ci/run does)`;

if (!TEST_PG_URL) serverMissing('PostgreSQL', PG_SKIP_REASON);

/**
 * A fresh database on the real server for one test file; `drop` removes it. Its default collation
 * is ICU `en-US` (linguistic, like most installed servers'), not the test cluster's C, so a text
 * sort that leans on the database collation lists in another order than SQLite and fails here.
 */
export const createTestDatabase = (adminUrl: string) => createDatabase(adminUrl, 'verdict_t', { icuLocale: 'en-US' });

export function postgresBackend(adminUrl: string): StoreBackend {
  let db: { url: string; drop(): Promise<void> };
  /**
   * The file's connections, opened once: the store's pool and one pool for each peer a test opens
   * (a peer is another process, so it has pools of its own; a test opens at most 3). Each test's
   * stores are new (`PgStore.onPool`: closing them leaves the pool open), the connections are not:
   * opening 24 of them for every test cost more than most tests.
   */
  let pools: { store: pg.Pool; peers: pg.Pool[] };
  /** One client for the file, emptying the database before each test. */
  let admin: pg.Client;
  const pool = (max: number) => {
    const p = new pg.Pool({ connectionString: db.url, max });
    p.on('error', () => undefined);
    return p;
  };
  return {
    name: 'postgres',
    concurrentConnections: true,
    setup: async () => {
      db = await createTestDatabase(adminUrl);
      // Migrated once per file: each test's stores then open with `migrate: false`.
      const migrated = PgStore.connect(db.url, { registry: new Registry([]), poolSize: 1 });
      await migrated.opened();
      await migrated.close();
      admin = new pg.Client({ connectionString: db.url });
      await admin.connect();
      pools = { store: pool(24), peers: [pool(8), pool(8), pool(8)] };
    },
    teardown: async () => {
      await Promise.all([pools.store, ...pools.peers].map((p) => p.end()));
      await admin.end();
      await db.drop();
    },
    open: async (registry, newId) => {
      await emptyTables(admin);
      const store = PgStore.onPool(pools.store, { registry, newId, migrate: false });
      const peers: PgStore[] = [];
      return {
        store,
        advance: (ms) => {
          for (const s of [store, ...peers]) s.advanceClockForTests(ms);
        },
        peer: async (r) => {
          const on = pools.peers[peers.length];
          if (!on) throw new Error(`a test opens at most ${pools.peers.length} peers`);
          const p = PgStore.onPool(on, { registry: r, clockOffsetMs: store.ctx.clockOffsetMs, migrate: false });
          await p.opened();
          peers.push(p);
          return p;
        },
        cleanup: async () => {
          for (const p of peers) await p.close();
          await store.close();
          // A connection the test left checked out (a transaction never ended) would carry its
          // locks into the next test: fail this one instead.
          for (const p of [pools.store, ...pools.peers]) {
            if (p.idleCount !== p.totalCount)
              throw new Error(`${p.totalCount - p.idleCount} connections left checked out`);
          }
        },
      };
    },
  };
}

/**
 * Empties every table a test wrote to, as a fresh database has them. TRUNCATE, not DELETE: it also
 * resets the tables' statistics, so every test plans its statements on empty tables as on a fresh
 * database (after DELETEs, the statistics left by earlier tests changed a claim's plan). Only the
 * tables with pages on disk: a table TRUNCATE left empty has none until a row is written to it
 * (even one rolled back), and truncating all 21 every time was most of an empty test's time.
 */
async function emptyTables(admin: pg.Client): Promise<void> {
  const written = await admin.query<{ t: string }>(
    `SELECT c.relname AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind = 'r' AND pg_relation_size(c.oid) > 0`,
  );
  if (written.rows.length === 0) return;
  await admin.query(`TRUNCATE ${written.rows.map((r) => `"${r.t}"`).join(', ')} RESTART IDENTITY CASCADE`);
}
