import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/program.js';
import { Registry } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { tempDir } from '../harness/store-fixture.js';

/** The demo resets only its own database, and checks its inputs before touching any. */
let dir: { dir: string; cleanup: () => void };
beforeEach(() => {
  dir = tempDir();
  vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
});
afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
  dir.cleanup();
});

describe('demo safety', () => {
  it("refuses to reset a database that is not the demo's own, and leaves it as it was", async () => {
    const file = join(dir.dir, 'team.db');
    const store = new SqliteStore({ url: file, registry: new Registry([]) });
    await store.createWorkspace({ slug: 'myteam' });
    await store.close();
    expect(await main(['node', 'verdict', 'demo', '--database-url', file])).toBe(2);
    const again = new SqliteStore({ url: file, registry: new Registry([]) });
    expect((await again.listWorkspaces()).map((w) => w.slug)).toEqual(['myteam']);
    await again.close();
  });

  it('checks --sample before creating anything', async () => {
    const file = join(dir.dir, 'fresh.db');
    expect(
      await main(['node', 'verdict', 'demo', '--database-url', file, '--sample', join(dir.dir, 'missing.jsonl')]),
    ).toBe(2);
    expect(existsSync(file)).toBe(false);
  });
});
