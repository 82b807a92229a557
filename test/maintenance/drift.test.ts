import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { resetConventionSkipLog } from '../../src/decision/conventions.js';
import { DRIFT_OWE, planDrift, readDriftMarker, surveyDrift } from '../../src/maintenance/drift-plan.js';
import { attentionSet, conventionsCommentsSet, conventionsSet } from '../../src/decision/production-sets.js';
import { fingerprintContextText, questionFingerprint } from '../../src/decision/questions.js';
import { Registry } from '../../src/decision/registry.js';
import { itemStateFor } from '../../src/decision/set-states.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { CONVENTIONS_COLLECTION_SCHEMA, CONVENTIONS_COLLECTION_SETTINGS } from '../../src/importers/conventions.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import type { CollectionRow, ItemRow } from '../../src/store/tracker-reads.js';
import { startBackgroundPasses } from '../../src/maintenance/background.js';
import { DriftSweeper } from '../../src/maintenance/drift.js';
import { waitFor } from '../harness/cli-process.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { currency, readerOf, settle } from '../reads/support.js';

/**
 * The drift sweep (DESIGN §8): answers that went stale with no item write (an edited, added or
 * switched-off convention, a reworded question, another model) are re-owed at backfill priority,
 * at a bounded rate, without rescanning when nothing changed.
 */

let fx: Fixture;
let conv: CollectionRow;
let fake: FakeProvider;
let tasks: ItemRow[];
const ON = { status: 'active', trigger: 'always', decision_check: 'on' };

beforeEach(async () => {
  fx = await makeFixture([attentionSet, conventionsSet]);
  conv = await fx.store.createCollection({
    workspaceId: fx.ws.id,
    slug: 'conventions',
    isSystem: true,
    schema: CONVENTIONS_COLLECTION_SCHEMA,
    settings: CONVENTIONS_COLLECTION_SETTINGS,
  });
  fake = new FakeProvider();
  resetConventionSkipLog();
  for (const ref of ['CONV-1', 'CONV-2', 'CONV-3']) {
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: conv.id,
      ref,
      title: `Title ${ref}`,
      content: `Body ${ref}.`,
      fields: ON,
    });
  }
  tasks = [];
  for (let i = 1; i <= 3; i++) {
    tasks.push(
      (
        await fx.store.createItem({
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: `T-${i}`,
          title: `Task ${i}`,
          content: 'body',
          fields: { status: 'open' },
        })
      ).row,
    );
  }
  await settle(fx, fake);
});
afterEach(async () => fx.cleanup());

const sweeper = (perMinute = 1_000, over: Partial<ConstructorParameters<typeof DriftSweeper>[0]> = {}) =>
  new DriftSweeper({ store: fx.store, registry: fx.registry, ctx: fake, logger: silentLogger, perMinute, ...over });

const conventionRef = async (ref: string) => (await fx.store.getItemByRef(fx.ws.id, ref))!;
const taskJobs = async () => (await Promise.all(tasks.map((t) => fx.store.listJobs({ itemId: t.id })))).flat();

describe('the drift sweep', () => {
  it("a pass reads its markers in one read and a workspace's collections once, whatever the number of sets", async () => {
    const calls = { getMeta: 0, listMeta: 0, listCollections: 0 };
    const store = new Proxy(fx.store, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (typeof v !== 'function') return v;
        const f = (v as (...a: unknown[]) => unknown).bind(target);
        return key in calls
          ? (...a: unknown[]) => {
              calls[key as keyof typeof calls]++;
              return f(...a);
            }
          : f;
      },
    });
    const s = sweeper(1_000, {
      store,
      registry: new Registry([attentionSet, conventionsSet, conventionsCommentsSet]),
    });
    await s.sweepOnce(); // walks each (set, workspace) once and writes its marker
    Object.assign(calls, { getMeta: 0, listMeta: 0, listCollections: 0 });
    expect((await s.sweepOnce()).scanned).toBe(0); // nothing changed: nothing walked
    // Two sets resolve their questions from the workspace's collections; three sets have markers.
    expect(calls).toEqual({ getMeta: 0, listMeta: 1, listCollections: 1 });
  });

  it('editing a convention: its answers go stale, the sweep re-owes the items, and only that key is asked again', async () => {
    const s = sweeper();
    expect((await s.sweepOnce()).owed).toBe(0); // control: nothing drifted, nothing owed
    expect(fake.requests.filter((r) => r.keys.some((k) => k.startsWith('conv:')))).toHaveLength(3); // one call per task
    await fx.store.updateItem((await conventionRef('CONV-2')).id, { content: 'Body CONV-2, now stricter.' });
    for (const t of tasks)
      expect((await currency(readerOf(fx), t.id))['conventions/conv:CONV-2']).toBe('question_changed');
    expect(await taskJobs()).toEqual([]); // the gap: nothing owed by the edit itself

    const pass = await s.sweepOnce();
    expect(pass.owed).toBe(3);
    const jobs = await taskJobs();
    expect(jobs.map((j) => j.questionSet)).toEqual(['conventions', 'conventions', 'conventions']);
    // backfill priority, due now: no quiet period and no re-ask debounce (the answers are minutes old)
    for (const j of jobs)
      expect(j).toMatchObject({ priority: PRIORITY_BACKFILL, state: 'owed', notBefore: fx.clock.now() });

    const before = fake.requests.length;
    await settle(fx, fake);
    const asked = fake.requests.slice(before);
    expect(asked).toHaveLength(3);
    for (const r of asked) expect(r.keys).toEqual(['conv:CONV-2']); // the other conventions are not re-asked
    for (const t of tasks) {
      expect(await currency(readerOf(fx), t.id)).toMatchObject({
        'conventions/conv:CONV-1': 'current',
        'conventions/conv:CONV-2': 'current',
        'conventions/conv:CONV-3': 'current',
      });
    }
  });

  it('answers of an older item-state version are re-owed and re-asked once (DESIGN §5.1: version 2)', async () => {
    const t9 = (
      await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-9',
        title: 'Task 9',
        content: 'body',
        fields: { status: 'open' },
      })
    ).row;
    await fx.store.dropJobs({});
    const state = itemStateFor(attentionSet, (await fx.store.loadItemForEvaluation(t9.id))!);
    await fx.store.insertDecisions(
      Object.entries(attentionSet.questions!).map(([k, q]) => ({
        workspaceId: fx.ws.id,
        itemId: t9.id,
        questionSet: 'attention',
        questionKey: k,
        kind: 'noul' as const,
        answer: JSON.stringify({ type: 'noul', noul: 0.9 }),
        confidence: null,
        provider: 'fake',
        model: fake.model,
        stateHash: state.hash,
        questionHash: questionFingerprint(q, fake),
        stateVersion: 1, // stored before omitted_comments
        stateParts: JSON.stringify(state.parts),
        inputTokens: 0,
        outputTokens: 0,
        itemSeq: t9.seq,
        stateTruncated: false,
        fingerprintContext: fingerprintContextText(fake),
      })),
    );
    const s = sweeper(1_000, { registry: new Registry([attentionSet]) });
    expect((await s.sweepOnce()).owed).toBe(1); // T-9 only: T-1..3 were answered at version 2
    expect((await fx.store.listJobs({})).map((j) => [j.itemId, j.questionSet])).toEqual([[t9.id, 'attention']]);
    const before = fake.requests.length;
    await settle(fx, fake);
    expect(fake.requests.slice(before).map((r) => r.keys)).toEqual([
      ['blocked', 'needs_human_decision', 'waiting_on_external'],
    ]);
    expect((await currency(readerOf(fx), t9.id))['attention/blocked']).toBe('current');
  });

  it('does not rescan when nothing changed: a swept (set, workspace) reads no items', async () => {
    const s = sweeper();
    const spy = vi.spyOn(fx.store, 'scanItemsForDrift');
    const first = await s.sweepOnce();
    expect(first.scanned).toBeGreaterThan(0); // never swept: walked once
    expect(first.completed.map((c) => c.set).sort()).toEqual(['attention', 'conventions']);
    spy.mockClear();
    const again = await s.sweepOnce();
    expect(again).toMatchObject({ scanned: 0, owed: 0 });
    expect(spy).not.toHaveBeenCalled();
    // control: a change makes the next pass walk that set only
    await fx.store.updateItem((await conventionRef('CONV-1')).id, { title: 'Title CONV-1, reworded' });
    const after = await s.sweepOnce();
    expect(after.owed).toBe(3);
    expect(new Set(spy.mock.calls.map(([q]) => q.questionSet))).toEqual(new Set(['conventions']));
  });

  it('a switched-off convention needs no call: nothing is owed and its key reads question_removed', async () => {
    const s = sweeper();
    await s.sweepOnce();
    await fx.store.updateItem((await conventionRef('CONV-3')).id, { fields: { ...ON, decision_check: 'off' } });
    expect((await s.sweepOnce()).owed).toBe(0);
    expect((await currency(readerOf(fx), tasks[0].id))['conventions/conv:CONV-3']).toBe('question_removed');
  });

  it('a new convention is asked of every item, and only it', async () => {
    const s = sweeper();
    await s.sweepOnce();
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: conv.id,
      ref: 'CONV-4',
      title: 'New',
      content: 'Newly agreed.',
      fields: ON,
    });
    await fx.store.dropJobs({}); // the convention item's own jobs (they would drop)
    expect((await s.sweepOnce()).owed).toBe(3);
    const before = fake.requests.length;
    await settle(fx, fake);
    expect(fake.requests.slice(before).map((r) => r.keys)).toEqual([['conv:CONV-4'], ['conv:CONV-4'], ['conv:CONV-4']]);
  });

  it("a newly pinned model re-owes every set's items; the new model is asked everything once", async () => {
    await sweeper().sweepOnce();
    const model2 = new FakeProvider({ model: 'fake-model-2' });
    const s2 = new DriftSweeper({
      store: fx.store,
      registry: fx.registry,
      ctx: model2,
      logger: silentLogger,
      perMinute: 1_000,
    });
    expect((await s2.sweepOnce()).owed).toBe(6); // 3 tasks × (attention, conventions)
    await settle(fx, model2);
    expect(model2.requests).toHaveLength(6);
    expect((await s2.sweepOnce()).owed).toBe(0);
  });

  it('owes at most perMinute items a minute, continuing from its cursor', async () => {
    for (let i = 4; i <= 7; i++) {
      tasks.push(
        (
          await fx.store.createItem({
            workspaceId: fx.ws.id,
            collectionId: fx.tasks.id,
            ref: `T-${i}`,
            title: `Task ${i}`,
            content: 'body',
            fields: { status: 'open' },
          })
        ).row,
      );
    }
    await settle(fx, fake);
    const s = sweeper(2);
    await fx.store.updateItem((await conventionRef('CONV-1')).id, { content: 'changed' });
    const owedPerPass: number[] = [];
    owedPerPass.push((await s.sweepOnce()).owed); // a full bucket: 2
    owedPerPass.push((await s.sweepOnce()).owed); // same instant: 0
    fx.clock.advance(30_000);
    owedPerPass.push((await s.sweepOnce()).owed); // half a minute: 1
    fx.clock.advance(600_000);
    owedPerPass.push((await s.sweepOnce()).owed); // the bucket holds at most 2
    fx.clock.advance(120_000);
    owedPerPass.push((await s.sweepOnce()).owed); // the last 2
    expect(owedPerPass).toEqual([2, 0, 1, 2, 2]);
    expect((await taskJobs()).length).toBe(7);
    expect((await readDriftMarker(fx.store, 'conventions', fx.ws.id)).cursor).toBeNull();
    fx.clock.advance(120_000);
    expect((await s.sweepOnce()).owed).toBe(0);
  });

  it('restarts its walk when the questions change again mid-walk', async () => {
    const s = sweeper(1);
    await fx.store.updateItem((await conventionRef('CONV-1')).id, { content: 'v2' });
    expect((await s.sweepOnce()).owed).toBe(1);
    const first = (await taskJobs()).map((j) => j.itemId);
    await settle(fx, fake); // the first item is re-asked at v2
    await fx.store.updateItem((await conventionRef('CONV-1')).id, { content: 'v3' });
    fx.clock.advance(60_000);
    expect((await s.sweepOnce()).owed).toBe(1);
    expect((await taskJobs()).map((j) => j.itemId)).toEqual(first); // the walk started over: the same first item
  });

  it('reads at most scanPerPass items a pass and resumes where it stopped', async () => {
    const s = sweeper(1_000, { scanPerPass: 2, batchSize: 2, registry: new Registry([attentionSet]) });
    const scanned: number[] = [];
    for (let i = 0; i < 4; i++) scanned.push((await s.sweepOnce()).scanned);
    // 6 live items (3 conventions, 3 tasks): 2 + 2 + 2, then the end, then nothing
    expect(scanned).toEqual([2, 2, 2, 0]);
    expect(await readDriftMarker(fx.store, 'attention', fx.ws.id)).toMatchObject({ cursor: null, target: null });
  });

  it('leaves owed and parked jobs alone (insert-only) and skips items the set does not apply to', async () => {
    await fx.store.updateItem(tasks[0].id, { fields: { status: 'closed' } }); // attention: not applicable any more
    await fx.store.updateItem(tasks[1].id, { content: 'edited' }); // owed by the write
    await settle(fx, fake);
    await fx.store.updateItem(tasks[1].id, { content: 'edited again' });
    const owedBefore = (await fx.store.getJob(tasks[1].id, 'attention'))!;
    const model2 = new FakeProvider({ model: 'fake-model-2' });
    const s2 = new DriftSweeper({
      store: fx.store,
      registry: fx.registry,
      ctx: model2,
      logger: silentLogger,
      perMinute: 1_000,
    });
    await s2.sweepOnce();
    expect(await fx.store.getJob(tasks[0].id, 'attention')).toBeNull(); // closed: attention does not apply
    expect((await fx.store.getJob(tasks[0].id, 'conventions'))!.priority).toBe(PRIORITY_BACKFILL); // conventions does
    expect(await fx.store.getJob(tasks[1].id, 'attention')).toEqual(owedBefore); // untouched
    expect((await fx.store.getJob(tasks[2].id, 'attention'))!.priority).toBe(PRIORITY_BACKFILL);
  });

  it('model A → B → A: the latest row decides, so A is asked again at the state B last saw', async () => {
    const t = tasks[0];
    const modelB = new FakeProvider({ model: 'fake-model-2' });
    const sweepAs = (p: FakeProvider) =>
      new DriftSweeper({
        store: fx.store,
        registry: new Registry([attentionSet]),
        ctx: p,
        logger: silentLogger,
        perMinute: 1_000,
      }).sweepOnce();
    await sweepAs(fake);
    await sweepAs(modelB);
    await settle(fx, modelB, new Registry([attentionSet]));
    await fx.store.updateItem(t.id, { content: 'moved on while B was pinned' });
    await settle(fx, modelB, new Registry([attentionSet]));
    // Back to A: an old row at A's fingerprint exists, but of the first state.
    expect((await currency(readerOf(fx, new Registry([attentionSet]), fake), t.id))['attention/blocked']).toBe(
      'model_changed',
    );
    const rep = await sweepAs(fake);
    // All three items' latest rows are B's, so all are owed; the runner then asks only T-1: the
    // others still hold A rows at their current state (S1 → S2 → S1 across models costs a claim, no call).
    expect(rep.owed).toBe(3);
    const before = fake.requests.length;
    await settle(fx, fake, new Registry([attentionSet]));
    expect(fake.requests.slice(before).map((r) => JSON.parse(r.state).body)).toEqual(['moved on while B was pinned']);
    expect((await currency(readerOf(fx, new Registry([attentionSet]), fake), t.id))['attention/blocked']).toBe(
      'current',
    );
  });

  it('drift owes are insert-only: a job created between the scan and the owe is never reset or un-parked', async () => {
    const t = tasks[0];
    await fx.store.updateItem(t.id, { content: 'edited' });
    fx.clock.advance(3_600_001);
    const c = (await fx.store.claimNextJob('w', 60_000, 8))!;
    await fx.store.parkJob(c, 'poison');
    const parked = (await fx.store.getJob(c.itemId, c.questionSet))!;
    expect(await fx.store.oweJobs([{ itemId: c.itemId, questionSet: c.questionSet }], DRIFT_OWE)).toBe(0);
    expect(await fx.store.getJob(c.itemId, c.questionSet)).toEqual(parked);
    // control: an item without a job is owed
    await fx.store.dropJobs({ itemId: tasks[1].id });
    expect(await fx.store.oweJobs([{ itemId: tasks[1].id, questionSet: 'attention' }], DRIFT_OWE)).toBe(1);
  });

  it('per-comment sets: each of the newest 10 comments is checked, and the estimate counts a call per comment', async () => {
    const registry = new Registry([conventionsCommentsSet]);
    fx.store.setRegistry(registry);
    const t = tasks[0];
    for (const body of ['first', 'second']) {
      fx.clock.advance(1_000);
      await fx.store.addComment({ itemId: t.id, author: 'amy', body });
    }
    await settle(fx, fake, registry);
    const sweep = () =>
      new DriftSweeper({ store: fx.store, registry, ctx: fake, logger: silentLogger, perMinute: 1_000 }).sweepOnce();
    expect((await sweep()).owed).toBe(0); // control
    await fx.store.updateItem((await conventionRef('CONV-3')).id, { title: 'Title CONV-3, sharper' });
    await fx.store.dropJobs({});
    const survey = await surveyDrift(fx.store, await planDrift(fx.store, conventionsCommentsSet, fx.ws.id, fake));
    expect(survey.toOwe.map((c) => [c.ref, c.calls])).toEqual([['T-1', 2]]); // 2 comments × ceil(1 drifted key / 12)
    expect((await sweep()).owed).toBe(1);
    const before = fake.requests.length;
    await settle(fx, fake, registry);
    const asked = fake.requests.slice(before);
    expect(asked.map((r) => [JSON.parse(r.state).comment.body, r.keys])).toEqual([
      ['first', ['conv:CONV-3']],
      ['second', ['conv:CONV-3']],
    ]);
  });

  it("the worker's background passes follow a reload: the next pass fingerprints under the provider in force", async () => {
    let provider = fake;
    const controller = new AbortController();
    const done = startBackgroundPasses({
      store: fx.store,
      runtime: () => ({ registry: new Registry([attentionSet]), provider }),
      logger: silentLogger,
      signal: controller.signal,
      driftSweepPerMinute: 1_000,
      sweepIntervalMs: 5,
      pruneIntervalMs: 0,
      retentionHistoryMs: 0,
    });
    try {
      await waitFor(async () => (await readDriftMarker(fx.store, 'attention', fx.ws.id)).swept !== null, 10_000, 5);
      expect(await taskJobs()).toEqual([]); // control: nothing drifted under the model in force
      provider = new FakeProvider({ model: 'fake-model-2' }); // what a SIGHUP reload installs
      await waitFor(async () => (await taskJobs()).length === 3, 10_000, 5);
    } finally {
      controller.abort();
      await done;
    }
  });
});
