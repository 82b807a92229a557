import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createVerdict, type Verdict } from '../../src/index.js';
import { ManualClock } from '../../src/clock.js';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { ItemRow, WorkspaceRow } from '../../src/store/tracker-reads.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { TASK_SCHEMA, tempDir, type Fixture } from '../harness/store-fixture.js';
import { readerOf } from './support.js';

/**
 * The item view (`VerdictReader.item`, `GET /v1/items/{ref}`, MCP `item_get`, the dashboard's item
 * page) reads its rows once (`Store.readItemView`) and judges them as the per-part reads do.
 */

/** The bundled beads sample's first issues: real titles and bodies. */
const sample = readFileSync(join(__dirname, '../../sample/beads-issues.jsonl'), 'utf8')
  .split('\n')
  .slice(0, 3)
  .map((l) => JSON.parse(l) as { id: string; title: string; description: string });

let t: ReturnType<typeof tempDir>;
let host: Database.Database;
let fx: Fixture;
/** Every statement the connection ran since the last reset, as SQLite reports it. */
let ran: string[];
let items: ItemRow[];

beforeEach(async () => {
  t = tempDir();
  ran = [];
  const file = join(t.dir, 'verdict.db');
  host = new Database(file, { verbose: (s) => ran.push(String(s)) });
  const clock = new ManualClock();
  const registry = new Registry(productionSets());
  const store = new SqliteStore({ url: file, connection: host, registry, clock });
  const ws: WorkspaceRow = await store.createWorkspace({ slug: 'acme' });
  const tasks = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  fx = { store, clock, registry, ws, tasks, file, cleanup: async () => store.close() };
  items = [];
  for (const s of sample)
    items.push(
      (
        await store.createItem({
          workspaceId: ws.id,
          collectionId: tasks.id,
          ref: s.id,
          title: s.title,
          content: s.description,
          fields: { status: 'open' },
        })
      ).row,
    );
  await store.addLink({ workspaceId: ws.id, sourceId: items[0].id, targetId: items[1].id, linkType: 'blocks' });
  await store.addComment({ itemId: items[0].id, author: 'amy', body: sample[2].title });
  clock.advance(3_600_001);
  await drainNow(runnerOptions(fx, new FakeProvider()));
});
afterEach(async () => {
  await fx.cleanup();
  t.cleanup();
});

describe('the item view', () => {
  it('judges its one read as decisions and setApplicability do, with the item’s jobs and verdicts, and reads no row twice', async () => {
    const reader = readerOf(fx);
    const item = items[0];
    await fx.store.addComment({ itemId: item.id, author: 'bob', body: sample[1].title }); // a set is owed again: a job to show
    ran = [];
    const rows = (await fx.store.readItemView('acme', item.ref))!;
    const view = await reader.itemView(rows);
    const statements = [...ran];
    expect(rows.decisions.length).toBeGreaterThan(0);
    expect(view.decisions).toEqual(await reader.decisions(item.id));
    expect(view.sets).toEqual(await reader.setApplicability(item.id));
    expect(rows.jobs).toEqual(await fx.store.listJobs({ itemId: item.id }));
    expect(rows.jobs.length).toBeGreaterThan(0);
    expect(rows.verdicts).toEqual(await fx.store.listVerdicts({ workspaceId: fx.ws.id, itemId: item.id }));
    expect(rows.collection.slug).toBe('task');
    expect(new Set(statements).size).toBe(statements.length);
    expect(await fx.store.readItemView('acme', 'no-such-ref')).toBeNull();
    expect(await fx.store.readItemView('nobody', item.ref)).toBeNull();
  });

  it('reads the decisions oldest first, as listDecisions does, when a set answered again sorts before an older one', async () => {
    const item = items[0];
    await fx.store.addComment({ itemId: item.id, author: 'bob', body: sample[1].title });
    fx.clock.advance(3_600_001);
    await drainNow(runnerOptions(fx, new FakeProvider()));
    const rows = (await fx.store.readItemView('acme', item.ref))!;
    const oldestFirst = await fx.store.listDecisions(item.id);
    // The item's index holds them by (set, key, id): that order is not the answer order here.
    const bySetAndKey = [...oldestFirst].sort(
      (a, b) => a.questionSet.localeCompare(b.questionSet) || a.questionKey.localeCompare(b.questionKey) || a.id - b.id,
    );
    expect(oldestFirst.map((d) => d.id)).not.toEqual(bySetAndKey.map((d) => d.id));
    expect(rows.decisions).toEqual(oldestFirst);
  });

  it('an item never answered is shown without reading what judging needs', async () => {
    const fresh = (
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: `${sample[0].id}-copy`,
        title: sample[0].title,
        fields: { status: 'closed' },
      })
    ).row;
    const rows = (await fx.store.readItemView('acme', fresh.ref))!;
    expect(rows.decisions).toEqual([]);
    expect(rows.judging).toBeNull();
    const view = await readerOf(fx).itemView(rows);
    expect(view).toEqual({ decisions: [], sets: await readerOf(fx).setApplicability(fresh.id) });
    expect(view.sets.length).toBeGreaterThan(0);
  });

  describe('through the public API', () => {
    let v: Verdict;
    afterEach(async () => v?.close());

    it('reader.item reads no statement twice and returns the collection slug and the verdicts', async () => {
      v = await createVerdict({ database: { sqlite: host }, provider: 'fake' });
      const item = items[0];
      await v.store.recordVerdict({
        workspace: 'acme',
        ref: item.ref,
        key: (await v.reader.item(item.ref, { workspace: 'acme' }))!.decisions[0].questionKey,
        verdict: 'agree',
        author: 'amy',
      });
      ran = [];
      const out = (await v.reader.item(item.ref, { workspace: 'acme' }))!;
      const statements = [...ran];
      expect(out.collection).toBe('task');
      expect(out.verdicts).toEqual(await v.store.listVerdicts({ workspace: 'acme', ref: item.ref }));
      expect(out.verdicts.length).toBe(1);
      expect(out.decisions.length).toBeGreaterThan(0);
      expect(new Set(statements).size).toBe(statements.length);
    });
  });
});
