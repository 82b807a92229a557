import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { asOfDate, DAY_MS } from '../../src/decision/as-of.js';
import { loadQuestionSetConfig } from '../../src/decision/config-file.js';
import { attentionSet } from '../../src/decision/production-sets.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet, Registry, type QuestionSet } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { estimateSet, estimateTarget } from '../../src/backfill/estimate.js';
import { DRIFT_OWE } from '../../src/maintenance/drift-plan.js';
import { readExpiryMarker } from '../../src/maintenance/expiry-plan.js';
import { PRIORITY_BACKFILL } from '../../src/store/queue-store.js';
import type { ItemRow } from '../../src/store/tracker-reads.js';
import { startBackgroundPasses } from '../../src/maintenance/background.js';
import { ExpirySweeper, EXPIRY_REWALK_MS } from '../../src/maintenance/expiry.js';
import { OweBucket } from '../../src/maintenance/owe-bucket.js';
import { DriftSweeper } from '../../src/maintenance/drift.js';
import { ROOT, waitFor } from '../harness/cli-process.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { currency, readerOf } from '../reads/support.js';

/**
 * Time-dependent questions (DESIGN §5.2) on an injected clock: a set with `maxAge` keeps an
 * answer current across days while the item is unchanged (no call when its job is owed again),
 * reads `stale: expired` past `maxAge`, is re-owed by the expiry sweep at its bounded rate, and is
 * asked again at a state carrying the new `as_of`, so at a new state hash, beside the old row.
 * The set is the one of examples/time-dependent.yaml, so the example is what is tested.
 */

const [staleness] = loadQuestionSetConfig(join(ROOT, 'examples/time-dependent.yaml'));
const KEY = 'staleness/no_progress_14d';
/** Midday, so a day boundary falls between the answer and every later read. */
const DAY0 = Date.UTC(2026, 0, 1, 12);

let fx: Fixture;
let fake: FakeProvider;
let items: ItemRow[];

beforeEach(async () => {
  fx = await makeFixture([staleness]);
  fx.clock.set(DAY0 - 3_600_001); // the first drain advances past the quiet period to DAY0
  fake = new FakeProvider();
  items = [];
  for (const ref of ['T-1', 'T-2', 'T-3', 'T-4', 'T-5']) {
    items.push(
      (
        await fx.store.createItem({
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref,
          title: `Task ${ref}`,
          content: 'body',
          fields: { status: 'open' },
        })
      ).row,
    );
  }
  fx.clock.set(DAY0);
  await drainNow(runnerOptions(fx, fake));
});
afterEach(async () => fx.cleanup());

const at = (days: number, ms = 0) => fx.clock.set(DAY0 + days * DAY_MS + ms);
const drain = () => drainNow(runnerOptions(fx, fake));
const sweeper = (perMinute: number, over: Partial<ConstructorParameters<typeof ExpirySweeper>[0]> = {}) =>
  new ExpirySweeper({ store: fx.store, registry: fx.registry, logger: silentLogger, perMinute, ...over });
const rowsOf = async (item: ItemRow) =>
  (await fx.store.listDecisions(item.id)).filter((r) => r.questionSet === 'staleness');
const asOfOf = (r: { stateParts: string }) => (JSON.parse(r.stateParts) as Record<string, string>).as_of;

describe('maxAge: expiry through the sweep, on an injected clock', () => {
  it('the example set loads with maxAge 7d', () => {
    expect(staleness).toMatchObject({ name: 'staleness', maxAgeMs: 7 * DAY_MS, threshold: 0.8 });
  });

  it('day 0 answer; day 6 current and no call; day 8 expired; the sweep re-owes at its rate; the re-ask is a new state hash and reads current', async () => {
    // Day 0: one call per item, each state dated today.
    expect(fake.requests).toHaveLength(5);
    for (const r of fake.requests) expect(JSON.parse(r.state).as_of).toBe('2026-01-01');
    const first = (await rowsOf(items[0]))[0];
    expect(asOfOf(first)).toBe('2026-01-01');

    // Close T-4 and delete T-5 (their jobs drop): neither is a live item the set applies to.
    await fx.store.updateItem(items[3].id, { fields: { status: 'closed' } });
    await fx.store.softDeleteItem(items[4].id);
    at(0, 3_600_001);
    await drain();
    expect(fake.requests).toHaveLength(5);

    // Day 6, another UTC date: still current, and an owed job asks nothing (the pitfall of dating
    // every state "today" would re-ask an unchanged item on every owe after midnight).
    at(6);
    expect((await currency(readerOf(fx), items[0].id))[KEY]).toBe('current');
    expect(await fx.store.oweJobs([{ itemId: items[0].id, questionSet: 'staleness' }], DRIFT_OWE)).toBe(1);
    const owedAgain = await drain();
    expect(owedAgain.map((r) => [r.outcome.kind, r.outcome.reason])).toEqual([['complete', 'already_answered']]);
    expect(fake.requests).toHaveLength(5);
    const s = sweeper(2);
    expect((await s.sweepOnce()).owed).toBe(0); // nothing has expired yet

    // Day 8: expired, with no moved part (as_of is not a change of the item).
    at(8);
    const read = (await readerOf(fx).decisions(items[0].id)).find((d) => d.questionKey === 'no_progress_14d')!;
    expect(read).toMatchObject({ current: false, staleReason: 'expired', changedParts: [], rowId: first.id });
    expect(read.surfacing === 'surfaced').toBe(false);

    // The sweep: at most 2 a minute, for the live open items only (T-1..T-3).
    const s8 = sweeper(2, { rewalkMs: 0 });
    const owed: number[] = [];
    owed.push((await s8.sweepOnce()).owed); // a full bucket: 2
    owed.push((await s8.sweepOnce()).owed); // same instant: none
    at(8, 30_000);
    owed.push((await s8.sweepOnce()).owed); // half a minute: 1 token, the third item
    at(8, 90_000);
    owed.push((await s8.sweepOnce()).owed); // T-4 (closed) and T-5 (deleted) are never owed
    expect(owed).toEqual([2, 0, 1, 0]);
    const jobs = await fx.store.listJobs({ questionSet: 'staleness' });
    expect(jobs.map((j) => j.itemId).sort()).toEqual(
      items
        .slice(0, 3)
        .map((i) => i.id)
        .sort(),
    );
    for (const j of jobs) expect(j).toMatchObject({ priority: PRIORITY_BACKFILL, state: 'owed' });

    // The worker asks them again, at the state dated day 8: a new state hash, the old row kept.
    await drain();
    const asked = fake.requests.slice(5);
    expect(asked).toHaveLength(3);
    for (const r of asked) expect(JSON.parse(r.state).as_of).toBe(asOfDate(DAY0 + 8 * DAY_MS));
    const rows = await rowsOf(items[0]);
    expect(rows).toHaveLength(2);
    expect(rows[0].id).toBe(first.id);
    expect(rows[1].stateHash).not.toBe(rows[0].stateHash);
    expect(asOfOf(rows[1])).toBe('2026-01-09');
    // Every part but as_of is the same state.
    const { as_of: _a, ...before } = JSON.parse(rows[0].stateParts) as Record<string, string>;
    const { as_of: _b, ...after } = JSON.parse(rows[1].stateParts) as Record<string, string>;
    expect(after).toEqual(before);
    for (const it of items.slice(0, 3)) expect((await currency(readerOf(fx), it.id))[KEY]).toBe('current');
    at(9);
    expect((await sweeper(2, { rewalkMs: 0 }).sweepOnce()).owed).toBe(0); // fresh answers: nothing to owe
  });

  it('an edit still reads state_changed with the parts that moved, never as_of', async () => {
    at(3);
    await fx.store.updateItem(items[1].id, { content: 'moved on' });
    expect((await currency(readerOf(fx), items[1].id))[KEY]).toBe('state_changed(body)');
    at(9); // expired as well: the edit is what the read reports, and its owed job re-asks it
    expect((await currency(readerOf(fx), items[1].id))[KEY]).toBe('state_changed(body)');
    await drain();
    expect(JSON.parse(fake.requests.at(-1)!.state)).toMatchObject({ body: 'moved on', as_of: '2026-01-10' });
    expect((await currency(readerOf(fx), items[1].id))[KEY]).toBe('current');
  });

  it('S1 → S2 → S1 within maxAge reads current again without a call; after maxAge the way back is asked anew', async () => {
    at(2);
    await fx.store.updateItem(items[0].id, { content: 'edited' });
    at(2, 3_600_001);
    await drain();
    expect(fake.requests).toHaveLength(6); // S2 asked, dated day 2
    at(4);
    await fx.store.updateItem(items[0].id, { content: 'body' });
    at(4, 3_600_001);
    await drain();
    expect(fake.requests).toHaveLength(6); // S1's day-0 answer is 4 days old: current, no call
    expect((await currency(readerOf(fx), items[0].id))[KEY]).toBe('current');
    at(10);
    await fx.store.updateItem(items[0].id, { content: 'edited' }); // S2's day-2 answer is 8 days old
    at(10, 3_600_001);
    await drain();
    expect(fake.requests).toHaveLength(7);
    expect(JSON.parse(fake.requests[6].state).as_of).toBe('2026-01-11');
  });

  it('the estimate counts what a drain would ask: nothing before expiry, every live item after', async () => {
    const target = estimateTarget('fake', fake.model);
    at(6);
    expect((await estimateSet(fx.store, staleness, target)).unanswered.items).toBe(0);
    at(8);
    expect((await estimateSet(fx.store, staleness, target)).unanswered.items).toBe(5);
  });

  it('walks again only rewalkMs after a complete walk, and reads nothing for a registry without maxAge sets', async () => {
    const s = sweeper(1_000);
    at(1);
    expect(await s.sweepOnce()).toMatchObject({ owed: 0, completed: [{ set: 'staleness', workspaceId: fx.ws.id }] });
    expect((await readExpiryMarker(fx.store, 'staleness', fx.ws.id)).walkedAt).toBe(DAY0 + DAY_MS);
    at(8);
    // A walk ended day 1; the next may start an hour later, which day 8 is: every item owed now.
    expect((await s.sweepOnce()).owed).toBe(5);
    await fx.store.dropJobs({});
    at(8, EXPIRY_REWALK_MS - 1);
    expect((await s.sweepOnce()).scanned).toBe(0); // within the rewalk wait: no read
    at(8, EXPIRY_REWALK_MS);
    expect((await s.sweepOnce()).owed).toBe(5);

    const spy = vi.spyOn(fx.store, 'scanItemsForDrift');
    const plain = new ExpirySweeper({
      store: fx.store,
      registry: new Registry([attentionSet]),
      logger: silentLogger,
      perMinute: 1_000,
    });
    expect(await plain.sweepOnce()).toMatchObject({ scanned: 0, owed: 0 });
    expect(spy).not.toHaveBeenCalled();
  });

  it('shares one bucket with the drift sweep: together they owe at most perMinute', async () => {
    const other: QuestionSet = defineQuestionSet({
      name: 'other',
      collections: ['task'],
      questions: { q: noul('Something about the item.') },
    });
    const registry = new Registry([staleness, other]);
    fx.store.setRegistry(registry);
    at(8);
    const bucket = new OweBucket(fx.store, 3);
    const drift = new DriftSweeper({
      store: fx.store,
      registry,
      ctx: fake,
      logger: silentLogger,
      perMinute: 3,
      bucket,
    });
    const expiry = new ExpirySweeper({ store: fx.store, registry, logger: silentLogger, perMinute: 3, bucket });
    const d = await drift.sweepOnce(); // `other` was never asked: 5 items drifted, 3 tokens
    const e = await expiry.sweepOnce(); // 5 expired, no token left
    expect([d.owed, e.owed]).toEqual([3, 0]);
    at(8, 60_000);
    expect((await expiry.sweepOnce()).owed).toBe(3);
  });

  it("per-comment sets: each comment's answer expires on its own, and the re-ask dates that comment's state", async () => {
    const tone = defineQuestionSet({
      name: 'tone',
      collections: ['task'],
      perComment: true,
      questions: { stuck: noul('The comment says the work is stuck.') },
      maxAgeMs: 7 * DAY_MS,
    });
    const registry = new Registry([tone]);
    fx.store.setRegistry(registry);
    const opts = runnerOptions(fx, fake, { registry });
    await fx.store.addComment({ itemId: items[0].id, author: 'amy', body: 'first' });
    at(0, 3_600_001);
    await drainNow(opts);
    at(4);
    await fx.store.addComment({ itemId: items[0].id, author: 'bo', body: 'second' });
    at(4, 60_000);
    await drainNow(opts);
    const asked = () =>
      fake.requests.slice(5).map((r) => [JSON.parse(r.state).comment.body, JSON.parse(r.state).as_of]);
    expect(asked()).toEqual([
      ['first', '2026-01-01'],
      ['second', '2026-01-05'],
    ]); // the first is not re-asked on day 4
    at(8);
    const byBody = async () => {
      const out: Record<string, string> = {};
      const comments = await fx.store.listComments(items[0].id);
      for (const d of (await readerOf(fx, registry).decisions(items[0].id)).filter((x) => x.questionSet === 'tone'))
        out[comments.find((c) => c.id === d.commentId)!.body] = d.current ? 'current' : d.staleReason!;
      return out;
    };
    expect(await byBody()).toEqual({ first: 'expired', second: 'current' });
    expect(
      (await new ExpirySweeper({ store: fx.store, registry, logger: silentLogger, perMinute: 10 }).sweepOnce()).owed,
    ).toBe(1);
    await drainNow(opts);
    expect(asked().slice(2)).toEqual([['first', '2026-01-09']]);
    expect(await byBody()).toEqual({ first: 'current', second: 'current' });
  });

  it("the worker's background passes run the expiry sweep", async () => {
    at(8);
    const controller = new AbortController();
    const done = startBackgroundPasses({
      store: fx.store,
      runtime: () => ({ registry: fx.registry, provider: fake }),
      logger: silentLogger,
      signal: controller.signal,
      driftSweepPerMinute: 1_000,
      sweepIntervalMs: 5,
      pruneIntervalMs: 0,
      retentionHistoryMs: 0,
    });
    try {
      await waitFor(async () => (await fx.store.listJobs({ questionSet: 'staleness' })).length === 5, 10_000, 5);
    } finally {
      controller.abort();
      await done;
    }
  });
});
