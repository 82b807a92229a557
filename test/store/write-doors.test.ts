import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { noul } from '../../src/decision/questions.js';
import { attentionSet, effortSet } from '../../src/decision/production-sets.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

const linkSet = defineQuestionSet({ name: 'linked', questions: { k: noul('x') }, withLinks: true, noTrail: true });

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet, effortSet, linkSet]);
});
afterEach(async () => fx.cleanup());

async function item(ref: string, extra: Record<string, unknown> = {}) {
  return (
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref,
      title: `title ${ref}`,
      content: 'body',
      fields: { status: 'open' },
      ...extra,
    })
  ).row;
}

// The write-door rules both backends share (owing, coalescing, debounce, no-op writes,
// normalisation, tombstones) run in test/store/conformance.ts; these are the SQLite-only ones.
describe('write doors owe jobs in the same transaction', () => {
  it('a move owes the target collection sets', async () => {
    const only = await fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'bug' });
    const it1 = await item('T-1');
    await fx.store.dropJobs({});
    const r = await fx.store.moveItem(it1.id, only.id);
    expect(r.owed).toBe(3);
  });

  it('link add and remove owe both ends for sets that read links only', async () => {
    const a = await item('T-1');
    const b = await item('T-2');
    await fx.store.dropJobs({});
    const l = await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: a.id, targetId: b.id, linkType: 'blocks' });
    expect((await fx.store.listJobs({})).map((j) => `${j.itemId}:${j.questionSet}`).sort()).toEqual([
      `${a.id}:linked`,
      `${b.id}:linked`,
    ]);
    await fx.store.dropJobs({});
    await fx.store.removeLink(l.row.id);
    expect(await fx.store.listJobs({})).toHaveLength(2);
  });

  it('keeps number literals in stored fields', async () => {
    const it1 = await item('T-1', { fields: '{"estimate":3.0}' });
    expect((await fx.store.getItem(it1.id))!.fields).toBe('{"estimate":3.0}');
  });

  it('a collection rename owes its live items at backfill priority', async () => {
    const it1 = await item('T-1');
    await fx.store.dropJobs({});
    const r = await fx.store.updateCollection(fx.tasks.id, { slug: 'tasks' });
    expect(r.owed).toBe(3);
    expect((await fx.store.listJobs({ itemId: it1.id })).every((j) => j.priority === PRIORITY_BACKFILL)).toBe(true);
  });
});

describe('normalisation order', () => {
  it('repairs lone surrogates before removing NUL, so no pair is made up', async () => {
    const { normaliseText, emptyReport } = await import('../../src/store/input-rules.js');
    const report = emptyReport();
    expect(normaliseText('\uD800\u0000\uDC00', report)).toBe('\uFFFD\uFFFD');
    expect(report).toEqual({ loneSurrogates: 2, nulsRemoved: 1 });
  });
});

describe('normalisation inside fields', () => {
  it('normalises escaped NUL and lone surrogates inside the fields JSON, and keeps number literals', async () => {
    const fx2 = await makeFixture();
    try {
      const r = await fx2.store.createItem({
        workspaceId: fx2.ws.id,
        collectionId: fx2.tasks.id,
        ref: 'F-1',
        title: 't',
        fields: '{"note":"a\\u0000b\\ud800","n":3.0}',
      });
      expect(r.normalised).toEqual({ loneSurrogates: 1, nulsRemoved: 1 });
      expect(r.row.fields).toBe('{"note":"ab\uFFFD","n":3.0}');
      // control: clean fields keep their bytes exactly
      const clean = await fx2.store.createItem({
        workspaceId: fx2.ws.id,
        collectionId: fx2.tasks.id,
        ref: 'F-2',
        title: 't',
        fields: '{ "n": 3.0 }',
      });
      expect(clean.row.fields).toBe('{ "n": 3.0 }');
    } finally {
      await fx2.cleanup();
    }
  });
});
