import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from './src/decision/registry.js';
import { SqliteStore } from './src/store/sqlite/sqlite-store.js';
const store = new SqliteStore({ url: join(mkdtempSync(join(tmpdir(), 'x-')), 'b.db'), registry: new Registry([]) });
const ws = await store.createWorkspace({ slug: 'b' });
const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: { fields: [] } });
const ids: string[] = [];
await store.transaction(async (tx) => { for (let j = 0; j < 200; j++) ids.push((await tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: `B-${j}`, title: `t${j}`, content: 'c', fields: {} })).row.id); });
const dz = store.ctx.db as any; const origTx = dz.transaction.bind(dz); let inner = 0, outer = 0, ntx = 0;
dz.transaction = (fn: any, cfg: any) => { const t0 = performance.now(); let t1 = 0, t2 = 0; const r = origTx((tx: any) => { t1 = performance.now(); const x = fn(tx); t2 = performance.now(); return x; }, cfg); const t3 = performance.now(); inner += t2 - t1; outer += (t1 - t0) + (t3 - t2); ntx++; return r; };
for (let round = 0; round < 3; round++) {
  inner = outer = ntx = 0;
  const t = performance.now();
  for (let u = 0; u < 3000; u++) await store.updateItem(ids[u % 200], { title: `r${round}.${u}` });
  console.log('updateItem µs', ((performance.now() - t) / 3000 * 1000).toFixed(1), 'inner', (inner / ntx * 1000).toFixed(1), 'begin+commit', (outer / ntx * 1000).toFixed(1));
}
await store.close();
{
const s2 = new SqliteStore({ url: join(mkdtempSync(join(tmpdir(), 'x-')), 'b.db'), registry: new Registry([]) });
const ws = await s2.createWorkspace({ slug: 'b' });
const col = await s2.createCollection({ workspaceId: ws.id, slug: 'task', schema: { fields: [] } });
const ids: string[] = [];
await s2.transaction(async (tx) => { for (let j = 0; j < 200; j++) ids.push((await tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: `B-${j}`, title: `t${j}`, content: 'c', fields: {} })).row.id); });
const c = s2.ctx.db.$client;
const up = c.prepare('UPDATE items SET title = ?, seq = seq + 1, updated_at = ? WHERE id = ?');
for (const fk of ['ON', 'OFF']) {
  c.pragma(`foreign_keys = ${fk}`);
  let t = performance.now();
  for (let u = 0; u < 3000; u++) c.transaction(() => up.run('x' + u, u, ids[u % 200])).immediate();
  console.log(`raw tx on store connection fk=${fk}`, ((performance.now() - t) / 3000 * 1000).toFixed(1));
  const tx = c.transaction((u: number) => up.run('y' + u, u, ids[u % 200]));
  t = performance.now();
  for (let u = 0; u < 3000; u++) tx.immediate(u);
  console.log(`raw reused tx fk=${fk}`, ((performance.now() - t) / 3000 * 1000).toFixed(1));
}
await s2.close();
}
