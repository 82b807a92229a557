import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { tempDir } from '../harness/store-fixture.js';
import { holdWriteLock as holdLockOn } from '../harness/thread-write-lock.js';

/**
 * SQLITE_BUSY never reaches the job layer: a write transaction that outlasts the busy timeout is
 * retried. Another thread (its own connection, as another process would have) holds the write
 * lock. DESIGN §10.1: the retries await, so the event loop is never held longer than the short
 * busy timeout, and the store reports the lock (and a full disk) until a write succeeds.
 */

let dir: { dir: string; cleanup: () => void };
let file: string;
beforeEach(() => {
  dir = tempDir();
  file = join(dir.dir, 'verdict.db');
});
afterEach(() => dir.cleanup());

const holdWriteLock = (ms: number) => holdLockOn(file, ms);

describe("SQLite under another process's write lock", () => {
  it('a write that outlasts the busy timeout is retried and lands', async () => {
    const store = new SqliteStore({ url: file, registry: new Registry([attentionSet]), busyTimeoutMs: 20 });
    try {
      const lock = await holdWriteLock(300);
      const ws = await store.createWorkspace({ slug: 'acme' });
      expect(await store.getWorkspace(ws.id)).toMatchObject({ slug: 'acme' });
      expect(await store.claimNextJob('w', 1_000, 8)).toBeNull();
      await lock.done;
    } finally {
      await store.close();
    }
  });

  it("the job path's own statements wait out the lock too: a claim and a finish handed in under it land", async () => {
    const store = new SqliteStore({ url: file, registry: new Registry([attentionSet]), busyTimeoutMs: 20 });
    try {
      await store.createWorkspace({ slug: 'acme' });
      // The first store call under the lock is the job path's (claim, then group commit), not a
      // tracker write that would wait out the lock first: SqliteStore.onConnection retries them.
      const lock = await holdWriteLock(300);
      expect(await store.claimNextJob('w', 1_000, 8)).toBeNull();
      const second = await holdWriteLock(300);
      await expect(store.finishJobs([])).resolves.toEqual([]);
      await Promise.all([lock.done, second.done]);
    } finally {
      await store.close();
    }
  });

  it('control: the same lock held past the retry deadline surfaces SQLITE_BUSY (the test can fail)', async () => {
    const store = new SqliteStore({
      url: file,
      registry: new Registry([attentionSet]),
      busyTimeoutMs: 20,
      busyDeadlineMs: 500,
    });
    try {
      const lock = await holdWriteLock(2_500);
      await expect(store.createWorkspace({ slug: 'acme' })).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
      await lock.done;
    } finally {
      await store.close();
    }
  });

  it('a 1.5 s lock delays five waiting writes without holding the event loop over 250 ms; the store says locked, then not', async () => {
    const store = new SqliteStore({ url: file, registry: new Registry([attentionSet]) }); // the real busy timeout
    try {
      const ws = await store.createWorkspace({ slug: 'acme' });
      expect(store.storageProblem()).toBeNull();
      const lock = await holdWriteLock(1_500);
      let last = Date.now();
      let maxGap = 0;
      const seen = new Set<string | null>();
      const probe = setInterval(() => {
        maxGap = Math.max(maxGap, Date.now() - last);
        last = Date.now();
        seen.add(store.storageProblem());
      }, 20);
      try {
        const writes = Array.from({ length: 5 }, (_, i) =>
          store.createCollection({ workspaceId: ws.id, slug: `c${i}` }),
        );
        await Promise.all(writes);
      } finally {
        clearInterval(probe);
      }
      await lock.done;
      expect(seen).toContain('database locked');
      expect(store.storageProblem()).toBeNull(); // the writes that landed cleared it
      expect((await store.listCollections(ws.id)).map((c) => c.slug)).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);
      // The old 10 s busy timeout held the loop for the whole 1.5 s.
      expect(maxGap).toBeLessThanOrEqual(250);
    } finally {
      await store.close();
    }
  }, 20_000);

  it('a full database (SQLITE_FULL) is reported as disk full until a write succeeds; nothing half-written', async () => {
    const store = new SqliteStore({ url: file, registry: new Registry([attentionSet]) });
    try {
      const ws = await store.createWorkspace({ slug: 'acme' });
      const tasks = await store.createCollection({ workspaceId: ws.id, slug: 'tasks' });
      const client = store.ctx.db.$client;
      const pages = client.pragma('page_count', { simple: true }) as number;
      client.pragma(`max_page_count = ${pages}`); // SQLite's own "database or disk is full"
      const big = 'x'.repeat(200_000);
      await expect(
        store.createItem({ workspaceId: ws.id, collectionId: tasks.id, ref: 'BIG-1', title: 'big', content: big }),
      ).rejects.toMatchObject({ code: 'SQLITE_FULL' });
      expect(store.storageProblem()).toBe('disk full');
      client.pragma('max_page_count = 1073741823');
      await store.createCollection({ workspaceId: ws.id, slug: 'small' });
      expect(store.storageProblem()).toBeNull();
      expect((await store.listCollections(ws.id)).map((c) => c.slug).sort()).toEqual(['small', 'tasks']);
      expect(await store.getItemByRef(ws.id, 'BIG-1')).toBeNull();
    } finally {
      await store.close();
    }
  });
});
