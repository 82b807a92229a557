import { fileURLToPath } from 'node:url';
import './test-sync-preload.mjs';

/**
 * Vitest setup file (every project but `durable`): the worker's own SQLite connections commit
 * under NORMAL (the import above patches better-sqlite3 in this process), and so does every node
 * child the test spawns, through NODE_OPTIONS (`--import` of the same module). See
 * test-sync-preload.mjs for why and for what keeps FULL.
 */
const PRELOAD = fileURLToPath(new URL('./test-sync-preload.mjs', import.meta.url));
const flag = `--import=${PRELOAD}`;
if (!(process.env.NODE_OPTIONS ?? '').includes(flag)) {
  process.env.NODE_OPTIONS = [process.env.NODE_OPTIONS, flag].filter(Boolean).join(' ');
}
