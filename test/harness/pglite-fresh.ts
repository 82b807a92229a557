import { PGlite } from '@electric-sql/pglite';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A fresh, empty PGlite cluster, as `PGlite.create()` gives, loaded from a saved copy of one.
 *
 * Why: `PGlite.create()` runs initdb inside WebAssembly, 10.5 CPU-s on this machine against 2.4
 * CPU-s to load the same cluster from its tar (measured with process.cpuUsage, PGlite 0.5.17), and
 * several test files each start one. The first caller on a machine creates the cluster, dumps it
 * (uncompressed, about 40 MB) and saves it under the temp folder, named by PGlite's version so an
 * upgrade makes a new one; every later caller loads that file. A cluster loaded from it is the one
 * initdb made, so nothing a test checks can tell them apart.
 *
 * Concurrent first callers each write their own temp file and rename it into place: a reader
 * sees a whole file or none.
 */
export async function freshPglite(): Promise<PGlite> {
  const saved = join(tmpdir(), 'verdict-test-cache', `pglite-${pgliteVersion()}-initdb.tar`);
  if (existsSync(saved)) return PGlite.create({ loadDataDir: new Blob([readFileSync(saved)]) });
  const client = await PGlite.create();
  const dump = await client.dumpDataDir('none');
  mkdirSync(join(tmpdir(), 'verdict-test-cache'), { recursive: true });
  const part = `${saved}.${process.pid}.part`;
  writeFileSync(part, Buffer.from(await dump.arrayBuffer()));
  renameSync(part, saved);
  return client;
}

/** The installed PGlite's version (its package.json is not among the package's exports). */
function pgliteVersion(): string {
  const manifest = new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url);
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}
