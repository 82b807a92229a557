import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { ItemRow } from '../../src/store/tracker-reads.js';
import { makeFixture, tempDir, type Fixture } from '../harness/store-fixture.js';
import { holdWriteLock } from '../harness/thread-write-lock.js';

/**
 * The hot write doors of SQLite (`updateItem`, `oweJobs`: sqlite-store.ts `onConnection`) are written
 * out instead of wrapped at construction, so each rule the installed wrappers give every other
 * store call is checked here for them: the busy retry (DESIGN §10.1), the connection gate of
 * async transactions (§16.1: wait, never run inside one, refuse a call from inside its own
 * callback or on a handle whose transaction ended), a tracker door joining a transaction the host
 * opened itself while a queue write waits for it, and errors as rejections. And the row
 * `updateItem` returns is built, not read back (write-statements.ts `BUMP_ITEM`): it is checked
 * against the stored row.
 */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
});
afterEach(async () => fx.cleanup());

const client = () => fx.store.ctx.db.$client;
const newItem = (ref: string) =>
  fx.store.createItem({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref, title: `Item ${ref}` });
const titleOf = (id: string) =>
  (client().prepare('SELECT title FROM items WHERE id = ?').get(id) as { title: string }).title;
const generationOf = (id: string) =>
  (
    client()
      .prepare(`SELECT generation FROM decision_jobs WHERE item_id = ? AND question_set = 'attention'`)
      .get(id) as {
      generation: number;
    }
  ).generation;
/** Lets the event loop turn a few times, so a call that does not wait would have run. */
const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe('the hot write doors (updateItem, oweJobs) keep every store call’s gate and retry', () => {
  it('under another connection’s write lock past the busy timeout, both are retried and land', async () => {
    const item = await newItem('T-1');
    const store = new SqliteStore({ url: fx.file, registry: fx.registry, busyTimeoutMs: 20 });
    try {
      const lock = await holdWriteLock(fx.file, 300);
      const updated = store.updateItem(item.row.id, { title: 'edited under a lock' });
      const owed = store.oweJobs([{ itemId: item.row.id, questionSet: 'attention' }], {});
      await expect(updated).resolves.toMatchObject({ changed: true });
      await expect(owed).resolves.toBe(1);
      await lock.done;
    } finally {
      await store.close();
    }
    expect(titleOf(item.row.id)).toBe('edited under a lock');
  });

  it('while an async transaction holds the connection, both wait for it and are not rolled back with it', async () => {
    const item = await newItem('T-1');
    const generation = generationOf(item.row.id);
    let letGo!: () => void;
    const hold = new Promise<void>((r) => (letGo = r));
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    const tx = fx.store.transaction(async (t) => {
      await t.updateItem(item.row.id, { title: 'inside, rolled back' });
      inside();
      await hold;
      throw new Error('roll back');
    });
    await entered;
    let settled = 0;
    const updated = fx.store.updateItem(item.row.id, { title: 'outside' }).then(() => settled++);
    const owed = fx.store.oweJobs([{ itemId: item.row.id, questionSet: 'attention' }], {}).then(() => settled++);
    await turns();
    expect(settled).toBe(0); // waiting for the mutex, not running inside the open transaction
    letGo();
    await expect(tx).rejects.toThrow('roll back');
    await Promise.all([updated, owed]);
    expect(titleOf(item.row.id)).toBe('outside');
    expect(generationOf(item.row.id)).toBe(generation + 2); // the update's owe and oweJobs', nothing of the rolled-back one
  });

  it('called on the store from inside its own transaction callback, both are refused, never a deadlock', async () => {
    const item = await newItem('T-1');
    await expect(
      fx.store.transaction(async () => {
        await fx.store.updateItem(item.row.id, { title: 'on the store, not on tx' });
      }),
    ).rejects.toMatchObject({ code: 'transaction_misuse' });
    await expect(
      fx.store.transaction(async () => {
        await fx.store.oweJobs([{ itemId: item.row.id, questionSet: 'attention' }], {});
      }),
    ).rejects.toMatchObject({ code: 'transaction_misuse' });
    expect(titleOf(item.row.id)).toBe('Item T-1');
  });

  it('on a handle whose transaction ended, both are refused', async () => {
    const item = await newItem('T-1');
    let leaked: SqliteStore | undefined;
    await fx.store.transaction(async (tx) => {
      leaked = tx as SqliteStore;
    });
    await expect(leaked!.updateItem(item.row.id, { title: 'late' })).rejects.toMatchObject({
      code: 'transaction_closed',
    });
    await expect(leaked!.oweJobs([{ itemId: item.row.id, questionSet: 'attention' }], {})).rejects.toMatchObject({
      code: 'transaction_closed',
    });
    // The job path's statements (onConnectionNow) too, reads and writes.
    await expect(leaked!.loadItemForEvaluation(item.row.id)).rejects.toMatchObject({ code: 'transaction_closed' });
    await expect(leaked!.claimNextJob('w1', 60_000, 8)).rejects.toMatchObject({ code: 'transaction_closed' });
    expect(titleOf(item.row.id)).toBe('Item T-1');
  });

  it('a bad argument is a rejected promise, not a throw, on the store and on a transaction handle', async () => {
    const bad = () => fx.store.updateItem('', { title: 'x' });
    let onStore: Promise<unknown> | undefined;
    expect(() => (onStore = bad())).not.toThrow();
    await expect(onStore).rejects.toMatchObject({ code: 'invalid_input' });
    await fx.store.transaction(async (tx) => {
      let onHandle: Promise<unknown> | undefined;
      expect(() => (onHandle = tx.updateItem('', { title: 'x' }))).not.toThrow();
      await expect(onHandle).rejects.toMatchObject({ code: 'invalid_input' });
    });
  });
});

describe('a transaction the host opened itself on a shared connection', () => {
  let t: { dir: string; cleanup: () => void };
  let host: Database.Database;
  let store: SqliteStore;
  beforeEach(() => {
    t = tempDir();
    host = new Database(join(t.dir, 'host.db'));
    store = new SqliteStore({ url: '', connection: host, registry: new Registry([attentionSet]) });
  });
  afterEach(async () => {
    await store.close();
    host.close();
    t.cleanup();
  });

  it('updateItem joins it (and goes with its ROLLBACK); oweJobs waits for it to end', async () => {
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task' });
    const item = await store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'before' });
    const generation = () =>
      (
        host.prepare('SELECT generation FROM decision_jobs WHERE item_id = ?').get(item.row.id) as {
          generation: number;
        }
      ).generation;
    const before = generation();
    host.exec('BEGIN IMMEDIATE');
    await store.updateItem(item.row.id, { title: 'inside the host transaction' });
    let owedDone = false;
    const owed = store.oweJobs([{ itemId: item.row.id, questionSet: 'attention' }], {}).then((n) => {
      owedDone = true;
      return n;
    });
    await turns();
    expect(owedDone).toBe(false);
    host.exec('ROLLBACK');
    await expect(owed).resolves.toBe(1);
    expect((host.prepare('SELECT title FROM items WHERE id = ?').get(item.row.id) as { title: string }).title).toBe(
      'before',
    );
    expect(generation()).toBe(before + 1); // oweJobs' alone: the update's owe went with the ROLLBACK
  });

  it("once a call found the file locked, job-path calls take turns behind the gate: none runs in its caller's turn", async () => {
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task' });
    const item = await store.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'due' });
    store.ctx.storage.problem = 'database locked'; // as context.ts retryBusy records a SQLITE_BUSY
    let settled = false;
    const loaded = store.loadItemForEvaluation(item.row.id).finally(() => (settled = true));
    for (let i = 0; i < 10; i++) await Promise.resolve(); // microtasks only: no timer turn
    expect(settled).toBe(false); // gated: it waits for a timer turn (context.ts gated), as every other call does
    expect((await loaded)!.item.title).toBe('due');
  });

  it("a claim and a state read wait for the host's own transaction, and its ROLLBACK takes neither", async () => {
    const ws = await store.createWorkspace({ slug: 'acme' });
    const col = await store.createCollection({ workspaceId: ws.id, slug: 'task' });
    const item = await store.createItem(
      { workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'due' },
      { quietPeriod: false },
    );
    host.exec('BEGIN IMMEDIATE');
    let settled = 0;
    const claimed = store.claimNextJob('w1', 60_000, 8).finally(() => settled++);
    const loaded = store.loadItemForEvaluation(item.row.id).finally(() => settled++);
    await turns();
    expect(settled).toBe(0); // neither ran inside the host's transaction
    host.exec('ROLLBACK');
    const claim = await claimed;
    expect(claim).toMatchObject({ itemId: item.row.id, questionSet: 'attention', claimedBy: 'w1' });
    expect((await loaded)!.item.title).toBe('due');
    const row = host.prepare('SELECT claimed_by AS by FROM decision_jobs WHERE item_id = ?').get(item.row.id);
    expect(row).toEqual({ by: 'w1' }); // the claim stands: it was not written inside the rolled-back transaction
  });
});

describe('the row updateItem returns is the row stored', () => {
  it('for a title, a body and a fields edit, alone and together, and for an edit that changes nothing', async () => {
    const item = await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref: 'T-1',
      title: 'first',
      content: 'body',
      fields: { status: 'open' },
      sourceUrl: 'https://example.com/t/1',
    });
    const stored = () => fx.store.getItem(item.row.id) as Promise<ItemRow>;
    const patches = [
      { title: 'second' },
      { content: 'another body' },
      { setFields: { status: 'in_progress' } },
      { title: 'third', content: 'third body', fields: { status: 'closed' } },
      { title: 'third' },
    ];
    for (const [i, patch] of patches.entries()) {
      fx.clock.advance(1_000);
      const w = await fx.store.updateItem(item.row.id, patch);
      expect(w.changed).toBe(i < 4);
      expect(w.row).toEqual(await stored());
    }
    expect(await stored()).toMatchObject({
      seq: 5,
      title: 'third',
      content: 'third body',
      fields: '{"status":"closed"}',
    });
  });
});
