import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { writeDoorLean } from '../../scripts/bench-lean.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * Part h's raw write door (`writeDoorLean`) on a real SQLite file: an update that finds no item
 * would time nothing, so it throws; an update that finds one bumps the item and owes its sets.
 */
describe('bench part h: the lean write door', () => {
  let fx: Fixture | undefined;
  afterEach(async () => {
    await fx?.cleanup();
    fx = undefined;
  });

  it('throws naming the item when an update finds none, and writes nothing for it', async () => {
    fx = await makeFixture();
    const file = fx.file;
    expect(() => writeDoorLean(file, ['no-such-item'], ['attention'], 1)).toThrow(
      'lean write door: no item no-such-item',
    );
    const db = new Database(file, { readonly: true });
    try {
      expect(db.prepare("SELECT count(*) AS n FROM decision_jobs WHERE item_id = 'no-such-item'").get()).toEqual({
        n: 0,
      });
    } finally {
      db.close();
    }
  });

  it('an update that finds its item bumps it and owes each set once', async () => {
    fx = await makeFixture();
    const made = await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: 'T-1',
      title: 't',
      content: 'b',
      fields: { status: 'open' },
    });
    const before = (await fx.store.getItem(made.row.id))!.seq;
    const r = writeDoorLean(fx.file, [made.row.id], ['attention', 'effort'], 3);
    expect(r.wallUs).toBeGreaterThan(0);
    expect((await fx.store.getItem(made.row.id))!.seq).toBe(before + 3);
  });
});
