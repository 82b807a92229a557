import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { runCli } from '../harness/cli-in-process.js';
import { TASK_SCHEMA, tempDir } from '../harness/store-fixture.js';

/**
 * `verdict edit --field` through the CLI (its commander program, in process) (its commander program, in process)
 * on a real SQLite file: only the named field's bytes change, and a value already held is no
 * change and owes nothing (DESIGN §3.2).
 */

const STORED = '{"estimate":3.0,"ext_id":12345678901234567890,"ratio":1e2,"status":"open"}';

let cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

async function seeded(): Promise<string> {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const file = join(t.dir, 'verdict.db');
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  const ws = await store.createWorkspace({ slug: 'acme' });
  const c = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  await store.createItem({ workspaceId: ws.id, collectionId: c.id, ref: 'T-1', title: 'seeded', fields: STORED });
  await store.close();
  return file;
}

async function stored(file: string): Promise<{ fields: string; seq: number; jobs: number }> {
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  try {
    const ws = (await store.getWorkspaceBySlug('acme'))!;
    const item = (await store.getItemByRef(ws.id, 'T-1'))!;
    return { fields: item.fields, seq: item.seq, jobs: (await store.listJobs({ itemId: item.id })).length };
  } finally {
    await store.close();
  }
}

async function edit(file: string, ...args: string[]): Promise<string> {
  return (await runCli(['edit', 'T-1', ...args, '--database-url', file, '--provider', 'fake'])).stdout;
}

describe('verdict edit --field (CLI in process, real SQLite file)', () => {
  it('changes only the named field; every other byte survives', async () => {
    const file = await seeded();
    expect(await edit(file, '--field', 'status=in_progress')).toMatch(
      /^T-1: changed; \d+ jobs owed\n {2}no stored answer went stale\n$/,
    );
    expect((await stored(file)).fields).toBe(
      '{"estimate":3.0,"ext_id":12345678901234567890,"ratio":1e2,"status":"in_progress"}',
    );
    await edit(file, '--field', 'ext_id=12345678901234567891', '--field', 'size=2.50');
    expect((await stored(file)).fields).toBe(
      '{"estimate":3.0,"ext_id":12345678901234567891,"ratio":1e2,"status":"in_progress","size":2.50}',
    );
  }, 30_000);

  it('a same-value edit changes nothing and owes nothing', async () => {
    const file = await seeded();
    const before = await stored(file);
    const out = await edit(file, '--field', 'status=open', '--field', 'estimate=3', '--field', 'ratio=100');
    expect(out).toBe('T-1: unchanged (nothing to write); 0 jobs owed\n');
    expect(await stored(file)).toEqual(before);
  }, 30_000);
});
