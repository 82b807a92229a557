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

describe("the hot owe's re-owe in place (write-statements.ts `reoweSql`)", () => {
  // Each case puts two items' jobs of `attention` in the same state, owes one through the one-item
  // statements (oweJobs with one pair: the re-owe in place or the upsert) and the other through the
  // shared statement (two pairs of one set: ../sql/owe.ts `oweItems`, the rule both dialects
  // share), and expects the same columns. Two items' jobs owed and answered alike.
  const COLUMNS =
    'generation, enqueued_at, not_before, state, priority, attempts, refusals, abandons, defers, owed_at, claim_token';
  type Job = Record<string, unknown>;

  async function twin(prepare: (ids: string[]) => void): Promise<{ hot: Job; shared: Job }> {
    const db = fx.store.ctx.db.$client;
    const ids = [(await item('T-1')).id, (await item('T-2')).id, (await item('T-3')).id];
    prepare(ids);
    fx.clock.advance(90_000);
    await fx.store.oweJobs([{ itemId: ids[0], questionSet: 'attention' }], {});
    await fx.store.oweJobs(
      ids.slice(1).map((itemId) => ({ itemId, questionSet: 'attention' })),
      {},
    );
    const job = (id: string) =>
      db
        .prepare(`SELECT ${COLUMNS} FROM decision_jobs WHERE item_id = ? AND question_set = 'attention'`)
        .get(id) as Job;
    return { hot: job(ids[0]), shared: job(ids[1]) };
  }

  const sql = (s: string, ...p: unknown[]) => fx.store.ctx.db.$client.prepare(s).run(...p);
  const answered = (id: string, at: number) =>
    sql(
      `INSERT INTO item_decisions (workspace_id, item_id, question_set, question_key, kind, answer, provider, model,
         state_hash, question_hash, state_version, state_parts, item_seq, evaluated_at)
       VALUES (?, ?, 'attention', 'k', 'noul', '"x"', 'fake', 'm', 'h', 'q', 1, '[]', 1, ?)`,
      fx.ws.id,
      id,
      at,
    );

  it('an owed job with a recent answer: generation bumped, not_before debounced and capped, counters reset', async () => {
    const { hot, shared } = await twin((ids) => {
      for (const id of ids) answered(id, fx.clock.now() - 1_000);
      sql(`UPDATE decision_jobs SET attempts = 2, defers = 1 WHERE question_set = 'attention'`);
    });
    expect(hot).toEqual(shared);
    expect(hot).toMatchObject({ generation: 2, attempts: 0, defers: 0, state: 'owed' });
  });

  it('a backfill job owed again by a live write is raised to live', async () => {
    const { hot, shared } = await twin(() => sql(`UPDATE decision_jobs SET priority = ${PRIORITY_BACKFILL}`));
    expect(hot).toEqual(shared);
    expect(hot.priority).toBe(0);
  });

  it('a parked job is owed again', async () => {
    const { hot, shared } = await twin(() => sql(`UPDATE decision_jobs SET state = 'parked', refusals = 5`));
    expect(hot).toEqual(shared);
    expect(hot).toMatchObject({ state: 'owed', refusals: 0 });
  });

  it('a claimed job keeps its claim and is owed again (generation bumped)', async () => {
    const { hot, shared } = await twin(() => sql(`UPDATE decision_jobs SET claim_token = 'tok', claimed_by = 'w'`));
    expect(hot).toEqual(shared);
    expect(hot).toMatchObject({ claim_token: 'tok', generation: 2 });
  });

  it('a job whose item row is gone is not owed again (the upsert reads the item)', async () => {
    const db = fx.store.ctx.db.$client;
    const gone = (await item('T-9')).id;
    db.pragma('foreign_keys = OFF');
    sql('DELETE FROM items WHERE id = ?', gone);
    db.pragma('foreign_keys = ON');
    fx.clock.advance(90_000);
    expect(await fx.store.oweJobs([{ itemId: gone, questionSet: 'attention' }], {})).toBe(0);
  });
});
