import type { Command } from 'commander';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { Registry } from '../decision/registry.js';
import { PG_MIGRATIONS, isPostgresUrl } from '../store/postgres/open.js';
import { SQLITE_MIGRATIONS } from '../store/sqlite/open.js';
import { configFrom, openStore } from './common.js';

/**
 * `verdict migrate` (DESIGN §16.1): applies the committed migrations to the configured database
 * and exits, for hosts that open Verdict with `migrate: false`. Idempotent (nothing pending: only
 * reads) and safe with several processes at once (the side-file lock on SQLite, the advisory lock
 * on Postgres, as at every open).
 */
export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description(
      'apply the database migrations (recorded in verdict_migrations) and exit; safe to run again or from several processes',
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const cfg = configFrom(cmd);
      // Migrating needs no question sets: nothing is written through the doors.
      const store = openStore(cfg, new Registry([]), { migrate: true });
      try {
        await store.now(); // Postgres migrates before its first call
        const known = readMigrationFiles({
          migrationsFolder: isPostgresUrl(cfg.databaseUrl) ? PG_MIGRATIONS : SQLITE_MIGRATIONS,
        }).length;
        process.stdout.write(`migrated: ${known} migrations applied (table verdict_migrations)\n`);
      } finally {
        await store.close();
      }
    });
}
