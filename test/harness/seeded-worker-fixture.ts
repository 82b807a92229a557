import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { seedJobs } from '../../scripts/bench-drain.js';
import { tempDir } from './store-fixture.js';

/**
 * For process tests of a real worker: before each test, a fresh SQLite file in a temp folder with
 * `items` items owed (seedJobs); after it, every child pushed to `children` that is still running
 * is killed and the folder removed. `file()` is the current test's database path.
 */
export function seededWorkerFixture(items: number): { file: () => string; children: ChildProcess[] } {
  let dir: { dir: string; cleanup: () => void };
  let file = '';
  const children: ChildProcess[] = [];
  beforeEach(async () => {
    dir = tempDir();
    file = join(dir.dir, 'verdict.db');
    await seedJobs(file, items);
  });
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    dir.cleanup();
  });
  return { file: () => file, children };
}
