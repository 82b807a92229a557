/**
 * Test-only: SQLite files the tests open commit with `synchronous = NORMAL` instead of FULL.
 *
 * Why: under FULL every commit is fsynced before it returns (DESIGN §3.9), about 10 ms a commit
 * on this machine's virtual disk against 0.03 ms under NORMAL (measured with 300 single-row
 * commits each), and the suite's throwaway databases commit tens of thousands of times. A power
 * cut is no risk to a test's temp file; a process killed by a test loses nothing under NORMAL in
 * WAL mode either (the OS still holds the written pages).
 *
 * How: loaded with `node --import` (into the built CLI and every other node child, through
 * NODE_OPTIONS) and imported by vitest's setup file (into the test workers), it rewrites the one
 * pragma `openSqlite` runs, `synchronous = FULL`, to NORMAL on better-sqlite3's own prototype.
 * Nothing under src/ knows of it, so no user can reach it. The power-cut simulation and the
 * durability tests run without it (the `durable` project in vitest.config.ts). It requires only
 * better-sqlite3's JavaScript (the native addon loads at the first `new Database`), so a child
 * whose addon cannot load (the dlopen-mismatch tests) fails where it did before; a project without
 * better-sqlite3 (a packed consumer in a temp folder) is left as it is.
 */
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../package.json', import.meta.url));
let Database;
try {
  Database = require('better-sqlite3');
} catch {
  Database = undefined;
}
if (Database && !Database.prototype.pragma.verdictTestSync) {
  const pragma = Database.prototype.pragma;
  const patched = function (source, options) {
    const s =
      typeof source === 'string' && /^\s*synchronous\s*=\s*FULL\s*$/i.test(source) ? 'synchronous = NORMAL' : source;
    return pragma.call(this, s, options);
  };
  patched.verdictTestSync = true;
  Database.prototype.pragma = patched;
}
