import { afterEach, beforeEach, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { txScopeEnabled } from '../../src/store/sqlite/async-tx.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/**
 * The async transactions' context (src/store/sqlite/async-tx.ts `txScope`) is on only while a
 * transaction's callback runs: on Node 20 an enabled AsyncLocalStorage keeps promise hooks on for
 * every promise of the process, so once the last transaction ends it is disabled, and the next
 * one enables it again with its misuse check intact.
 */

let a: Fixture;
let b: Fixture;
beforeEach(async () => {
  a = await makeFixture([attentionSet]);
  b = await makeFixture([attentionSet]);
});
afterEach(async () => {
  await a.cleanup();
  await b.cleanup();
});

const item = (fx: Fixture, ref: string) => ({ workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref, title: ref });

it('is off once a transaction ends, committed or thrown, and on while its callback runs', async () => {
  let during = false;
  await a.store.transaction(async (tx) => {
    await tx.createItem(item(a, 'A-1'));
    during = txScopeEnabled();
  });
  expect(during).toBe(true);
  expect(txScopeEnabled()).toBe(false);
  await expect(
    a.store.transaction(async () => {
      throw new Error('roll back');
    }),
  ).rejects.toThrow('roll back');
  expect(txScopeEnabled()).toBe(false);
});

it('a later transaction still refuses a call on its own store from inside its callback', async () => {
  await a.store.transaction(async (tx) => void (await tx.createItem(item(a, 'A-1'))));
  expect(txScopeEnabled()).toBe(false);
  await expect(a.store.transaction(async () => void (await a.store.createItem(item(a, 'A-2'))))).rejects.toMatchObject({
    code: 'transaction_misuse',
  });
});

it("stays on while another store's transaction is still open, so that one's misuse check holds", async () => {
  let aEnded!: () => void;
  const aOver = new Promise<void>((r) => (aEnded = r));
  let bEntered!: () => void;
  const bIn = new Promise<void>((r) => (bEntered = r));
  let during = false;
  const bTx = b.store.transaction(async () => {
    bEntered();
    await aOver; // A's transaction ends while B's callback still runs
    during = txScopeEnabled();
    await b.store.createItem(item(b, 'B-WRONG')); // on the store, not on the handle: refused
  });
  await bIn;
  await a.store.transaction(async (tx) => void (await tx.createItem(item(a, 'A-1'))));
  aEnded();
  await expect(bTx).rejects.toMatchObject({ code: 'transaction_misuse' });
  expect(during).toBe(true);
  expect(txScopeEnabled()).toBe(false);
});
