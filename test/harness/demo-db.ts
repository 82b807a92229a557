import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { inject } from 'vitest';
import { runCli } from './cli-in-process.js';

/**
 * Puts the demo database at `path` (a new file): what `verdict demo --database-url <path>` leaves,
 * the bundled sample of a real tracker drained by the fake provider. For files that serve or read
 * the demo, not ones that test the demo command itself.
 *
 * The drain costs about 10 s of CPU (9.7 s user + sys, `/usr/bin/time node dist/cli/main.js demo`),
 * the same work in every file that needs it, so the first caller of the run makes it once in the
 * run's fixture folder (inject('runFixtures'), test/harness/build-once.ts) and every caller gets a
 * copy of its own to change. A racing second caller makes its own and renames it over the first:
 * both are whole demos. The copy is of a checkpointed file, so it carries no WAL.
 */
export async function demoDatabase(path: string): Promise<void> {
  if (existsSync(path)) throw new Error(`demoDatabase: ${path} exists; it makes a new file`);
  const fixtures = inject('runFixtures');
  const template = join(fixtures, 'demo.db');
  if (!existsSync(template)) {
    mkdirSync(fixtures, { recursive: true });
    const scratch = mkdtempSync(`${template}-`);
    const built = join(scratch, 'demo.db');
    await runCli(['demo', '--database-url', built]);
    const db = new Database(built);
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      db.close();
    }
    renameSync(built, template);
    rmSync(scratch, { recursive: true, force: true });
  }
  copyFileSync(template, path);
}
