import { Worker as Thread } from 'node:worker_threads';

/**
 * Holds `BEGIN IMMEDIATE` on the SQLite `file` for `ms` in another thread (its own connection, as
 * another process would have); resolves once the lock is held, and `done` once released.
 */
export async function holdWriteLock(file: string, ms: number): Promise<{ done: Promise<void> }> {
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
