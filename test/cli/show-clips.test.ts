import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { runCli } from '../harness/cli-in-process.js';
import { TASK_SCHEMA, tempDir } from '../harness/store-fixture.js';

/**
 * `verdict show` through the CLI (its commander program, in process) on a real SQLite file: it says when and how the states the
 * item's sets read are clipped (DESIGN §5.1), and `--json` prints the fields with their number
 * literals (DESIGN §3.2).
 */

let cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

async function seeded(opts: { comments: number; body: string }): Promise<string> {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const file = join(t.dir, 'verdict.db');
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  const ws = await store.createWorkspace({ slug: 'acme' });
  const c = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  const item = (
    await store.createItem({
      workspaceId: ws.id,
      collectionId: c.id,
      ref: 'T-1',
      title: 'a long discussion',
      content: opts.body,
      fields: '{"estimate":3.0,"ext_id":12345678901234567890,"status":"open"}',
    })
  ).row;
  for (let i = 0; i < opts.comments; i++)
    await store.addComment({ itemId: item.id, author: 'amy', body: `comment ${i}`, createdAt: 1_000 * (i + 1) });
  await store.close();
  return file;
}

const show = async (file: string, ...args: string[]) =>
  (await runCli(['show', 'T-1', ...args, '--database-url', file, '--provider', 'fake'])).stdout;

describe('verdict show: the clip note and lossless fields (CLI in process, real SQLite file)', () => {
  it('says which sets read a clipped state and how: comments omitted, body cut', async () => {
    const file = await seeded({ comments: 12, body: 'b'.repeat(16_001) });
    const lines = (await show(file)).split('\n');
    expect(lines).toContain(
      'state clipped for attention, effort: 2 older comments omitted (the trail holds the newest 10); body cut to 16,000 code points',
    );
    expect(lines).toContain('state clipped for conventions: body cut to 16,000 code points'); // NoTrail: no comments to omit
  }, 30_000);

  it('prints no note for an item its states hold whole', async () => {
    const file = await seeded({ comments: 10, body: 'short' });
    expect(await show(file)).not.toContain('clipped');
  }, 30_000);

  it('--json carries the clips and the fields with their number literals', async () => {
    const file = await seeded({ comments: 11, body: 'short' });
    const out = await show(file, '--json');
    expect(out).toContain('"estimate": 3.0');
    expect(out).toContain('"ext_id": 12345678901234567890');
    const doc = JSON.parse(out) as {
      stateClips: Array<{ questionSet: string; omittedComments: number; note: string }>;
    };
    expect(doc.stateClips.map((c) => [c.questionSet, c.omittedComments])).toEqual([
      ['attention', 1],
      ['effort', 1],
    ]);
    expect(doc.stateClips[0].note).toBe('1 older comment omitted (the trail holds the newest 10)');
  }, 30_000);
});
