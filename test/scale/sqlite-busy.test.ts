import { join } from 'node:path';
import { Worker as Thread } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * SQLITE_BUSY never reaches the job layer: a write transaction that outlasts the busy timeout is
 * retried. Another thread (its own connection, as another process would have) holds the write
 * lock for 300 ms while the store's busy timeout is 20 ms.
 */

let dir: { dir: string; cleanup: () => void };
let file: string;
beforeEach(() => {
  dir = tempDir();
  file = join(dir.dir, 'verdict.db');
});
afterEach(() => dir.cleanup());

/** Holds `BEGIN IMMEDIATE` on `file` for `ms` in another thread; resolves once the lock is held, and `done` once released. */
async function holdWriteLock(ms: number): Promise<{ done: Promise<void> }> {
  const t = new Thread(
    `const Database = require('better-sqlite3');
     const { parentPort, workerData } = require('node:worker_threads');
     const db = new Database(workerData.file);
     db.exec('BEGIN IMMEDIATE');
     parentPort.postMessage('held');
     Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.ms);
     db.exec('COMMIT');
     db.close();`,
    { eval: true, workerData: { file, ms } },
  );
  await new Promise<void>((resolve, reject) => {
    t.once('message', () => resolve());
    t.once('error', reject);
  });
  return { done: new Promise<void>((resolve) => t.once('exit', () => resolve())) };
}

describe('SQLite under another process\'s write lock', () => {
  it('a write that outlasts the busy timeout is retried and lands', async () => {
    const store = new SqliteStore({ url: file, registry: new Registry([attentionSet]), busyTimeoutMs: 20 });
    try {
      const lock = await holdWriteLock(300);
      const ws = await store.createWorkspace({ slug: 'acme' });
      expect(await store.getWorkspace(ws.id)).toMatchObject({ slug: 'acme' });
      expect(await store.claimNextJob('w', 1_000, 8)).toBeNull();
      await lock.done;
    } finally {
      await store.close();
    }
  });

  it('control: the same lock held past the retries surfaces SQLITE_BUSY (the test can fail)', async () => {
    const store = new SqliteStore({ url: file, registry: new Registry([attentionSet]), busyTimeoutMs: 20 });
    try {
      const lock = await holdWriteLock(2_500);
      await expect(store.createWorkspace({ slug: 'acme' })).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
      await lock.done;
    } finally {
      await store.close();
    }
  });
});
