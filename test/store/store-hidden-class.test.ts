import { setFlagsFromString } from 'node:v8';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { GroupCommit } from '../../src/store/group-commit.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { freshPglite } from '../harness/pglite-fresh.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * Every store a process opens keeps one hidden class, so code V8 optimised for the job path on one
 * store (planGroup, sendCall, the claim check) serves the next. A store used as a transaction
 * handle's prototype (async-tx.ts once made `Object.create(store)`) got a class of its own, so each
 * drain of a new store threw that code away ("wrong map") and compiled it again: 291 ms of TurboFan
 * in a 16,000-job drain at 16 slots on a second store before, 186 ms after this and the two rules
 * below (--trace-opt over scripts/cpu-per-job.ts with the warm-up on another store). Checked with
 * V8's own `%HaveSameMap`. A method kept on each store (the busy retry once was) is a field whose
 * value optimised code may take as fixed, and a lane's closures were a new call target per
 * committer: both deopted the same code once per store or worker.
 */
setFlagsFromString('--allow-natives-syntax');
// V8 natives syntax parses only in a function built at run time.
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

const stores: SqliteStore[] = [];
const dirs: Array<{ cleanup(): void }> = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) d.cleanup();
});

function open(): SqliteStore {
  const dir = tempDir();
  dirs.push(dir);
  const store = new SqliteStore({ url: join(dir.dir, 'v.db'), registry: new Registry([attentionSet]) });
  stores.push(store);
  return store;
}

describe('one hidden class for every SQLite store', () => {
  it('two stores share it, after each ran an async transaction and store calls', async () => {
    const a = open();
    const b = open();
    for (const s of [a, b]) {
      const ws = await s.transaction((tx) => tx.createWorkspace({ slug: 'w' }));
      await s.now();
      expect(ws.slug).toBe('w');
    }
    expect(haveSameMap(a, b)).toBe(true);
  });

  it('holds no method of its own: the busy retry and the connection gate are on the prototype', () => {
    const own = Object.getOwnPropertyNames(open()).filter(
      (n) => typeof (SqliteStore.prototype as unknown as Record<string, unknown>)[n] === 'function',
    );
    expect(own).toEqual([]);
  });

  it('a transaction handle is not built on its store: the store never becomes a prototype', async () => {
    const s = open();
    let handle: object | null = null;
    await s.transaction(async (tx) => {
      handle = tx;
    });
    expect(Object.getPrototypeOf(handle!)).toBe(SqliteStore.prototype);
    expect(Object.prototype.isPrototypeOf.call(s, handle!)).toBe(false);
  });
});

describe('one hidden class for every Postgres store', () => {
  it("a store that ran a transaction keeps the class of one that did not, and is no handle's prototype", async () => {
    const client = await freshPglite();
    try {
      const a = await PgStore.onPglite(client, { registry: new Registry([attentionSet]), closeClient: false });
      const b = await PgStore.onPglite(client, { registry: new Registry([attentionSet]), closeClient: false });
      let handle: object | null = null;
      const ws = await a.transaction(async (tx) => {
        handle = tx;
        return tx.createWorkspace({ slug: 'w' });
      });
      expect(ws.slug).toBe('w');
      expect(Object.getPrototypeOf(handle!)).toBe(PgStore.prototype);
      expect(haveSameMap(a, b)).toBe(true);
      await a.close();
      await b.close();
    } finally {
      await client.close();
    }
  });
});

describe('group commit lanes', () => {
  it("share one hand-in function, so a committer's call to it keeps one call target", () => {
    const g = new GroupCommit();
    const x = g.lane<number, number>(async (e) => e);
    const y = new GroupCommit().lane<string, string>(async (e) => e);
    expect(x.handIn).toBe(y.handIn);
    expect(x.handInOne).toBe(y.handInOne);
  });
});
