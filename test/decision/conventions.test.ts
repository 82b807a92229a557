import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  conventionQuestion,
  CONVENTION_STATEMENT,
  resetConventionSkipLog,
  resolveConventions,
} from '../../src/decision/conventions.js';
import { conventionsCommentsSet, conventionsSet, productionSets } from '../../src/decision/production-sets.js';
import { questionFingerprint } from '../../src/decision/questions.js';
import { createLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { CONVENTIONS_COLLECTION_SCHEMA, CONVENTIONS_COLLECTION_SETTINGS } from '../../src/importers/conventions.js';
import type { CollectionRow } from '../../src/store/tracker-reads.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';
import { currency, readerOf, settle } from '../reads/support.js';

/** The `conventions` and `conventions_comments` sets (DESIGN §6). */

let fx: Fixture;
let conv: CollectionRow;
let fake: FakeProvider;
beforeEach(async () => {
  fx = await makeFixture([conventionsSet, conventionsCommentsSet]);
  conv = await fx.store.createCollection({
    workspaceId: fx.ws.id,
    slug: 'conventions',
    isSystem: true,
    schema: CONVENTIONS_COLLECTION_SCHEMA,
    settings: CONVENTIONS_COLLECTION_SETTINGS,
  });
  fake = new FakeProvider();
  resetConventionSkipLog();
});
afterEach(async () => fx.cleanup());

const ON = { status: 'active', trigger: 'always', decision_check: 'on' };

async function convention(
  ref: string,
  fields: Record<string, unknown> = ON,
  content = `Body of ${ref}.`,
  collectionId = conv.id,
) {
  return (
    await fx.store.createItem({ workspaceId: fx.ws.id, collectionId, ref, title: `Title of ${ref}`, content, fields })
  ).row;
}

async function task(ref = 'T-1') {
  return (
    await fx.store.createItem({
      workspaceId: fx.ws.id,
      collectionId: fx.tasks.id,
      ref,
      title: `Task ${ref}`,
      content: 'the body',
      fields: { status: 'open' },
    })
  ).row;
}

const resolve = (logger = createLogger('silent')) =>
  resolveConventions({ workspaceId: fx.ws.id, store: fx.store, logger });

function captureLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { logger: createLogger('info', stream), lines };
}

describe("resolving a workspace's conventions", () => {
  it('one noul per active convention, key conv:<ref>, with its title and body in the instructions', async () => {
    await convention('CONV-1');
    await convention('CONV-2', ON, '');
    const qs = await resolve();
    expect(Object.keys(qs)).toEqual(['conv:CONV-1', 'conv:CONV-2']);
    expect(qs['conv:CONV-1']).toEqual({
      kind: 'noul',
      instructions: `${CONVENTION_STATEMENT}\n\nConvention CONV-1: Title of CONV-1\n\nBody of CONV-1.`,
    });
    expect(qs['conv:CONV-2'].instructions).toBe(`${CONVENTION_STATEMENT}\n\nConvention CONV-2: Title of CONV-2`);
  });

  it('skips what is not active, not triggered always, switched off, over 4 KiB, deleted, or outside a conventions collection', async () => {
    await convention('OK-1');
    await convention('OK-NOCHECK', { status: 'active', trigger: 'always' }); // decision_check absent: not off
    await convention('DRAFT', { ...ON, status: 'draft' });
    await convention('MANUAL', { ...ON, trigger: 'manual' });
    await convention('OFF', { ...ON, decision_check: 'off' });
    await convention('EXACT', ON, 'é'.repeat(2048)); // 4,096 UTF-8 bytes: asked
    await convention('LONG', ON, 'é'.repeat(2048) + 'x'); // 4,097 bytes (2,049 code points): skipped
    const gone = await convention('GONE');
    await fx.store.softDeleteItem(gone.id);
    await convention('AT@REF');
    const plain = await fx.store.createCollection({ workspaceId: fx.ws.id, slug: 'notes', isSystem: true });
    await convention('ELSEWHERE', ON, 'x', plain.id);
    expect(Object.keys(await resolve()).sort()).toEqual(['conv:EXACT', 'conv:OK-1', 'conv:OK-NOCHECK']);
    // a deleted conventions collection contributes nothing
    await fx.store.softDeleteCollection(conv.id);
    expect(await resolve()).toEqual({});
  });

  it('logs each skip once per process, with ids and the reason only', async () => {
    await convention('DRAFT', { ...ON, status: 'draft' }, 'SECRET BODY TEXT');
    await convention('OFF', { ...ON, decision_check: 'off' });
    const { logger, lines } = captureLogger();
    await resolve(logger);
    await resolve(logger);
    await resolve(logger);
    const skips = lines.filter((l) => l.msg === 'convention skipped');
    expect(skips.map((l) => [l.ref, l.reason])).toEqual([
      ['DRAFT', 'not_active'],
      ['OFF', 'check_off'],
    ]);
    expect(JSON.stringify(lines)).not.toContain('SECRET');
    expect(JSON.stringify(lines)).not.toContain('Title of');
  });

  it('pins the wording of the convention question (it is part of every convention fingerprint)', () => {
    const q = conventionQuestion({ ref: 'CONV-1', title: 'No secrets', content: 'Never paste a key.' });
    expect(
      questionFingerprint(q, { model: 'claude-haiku-5-5', promptVersion: 'anthropic-v1', effort: 'low' }).slice(0, 16),
    ).toBe(PINNED_CONVENTION_FP);
  });
});

const PINNED_CONVENTION_FP = 'd506f245659fa03f';

describe('the sets', () => {
  it('have the settings DESIGN §6 gives them and are production sets', () => {
    expect(conventionsSet).toMatchObject({
      withLinks: true,
      noTrail: true,
      perComment: false,
      maxPerCall: 12,
      threshold: 0.9,
      eligible: ['notSystem'],
      collections: [],
    });
    expect(conventionsCommentsSet).toMatchObject({
      noTrail: true,
      perComment: true,
      maxPerCall: 12,
      threshold: 0.9,
      eligible: ['notSystem'],
      collections: [],
    });
    expect(conventionsSet.questions).toBeUndefined();
    expect(conventionsSet.resolve).toBe(resolveConventions);
    expect(conventionsCommentsSet.resolve).toBe(resolveConventions);
    expect(productionSets().map((s) => s.name)).toEqual(['attention', 'conventions', 'conventions_comments', 'effort']);
  });

  it('the write doors owe them for items of every collection; a convention item itself drops without a call', async () => {
    await convention('CONV-1');
    const t = await task();
    expect((await fx.store.listJobs({ itemId: t.id })).map((j) => j.questionSet).sort()).toEqual([
      'conventions',
      'conventions_comments',
    ]);
    const reports = await settle(fx, fake);
    const byItem = (id: string) =>
      reports
        .filter((r) => r.claim.itemId === id)
        .map((r) => `${r.claim.questionSet}:${r.outcome.kind}`)
        .sort();
    expect(byItem(t.id)).toEqual(['conventions:complete', 'conventions_comments:complete']);
    const convItem = (await fx.store.getItemByRef(fx.ws.id, 'CONV-1'))!;
    expect(byItem(convItem.id)).toEqual(['conventions:drop', 'conventions_comments:drop']);
    expect(fake.requests).toHaveLength(1); // the task's conventions; it has no comments
    expect(fake.requests[0].keys).toEqual(['conv:CONV-1']);
    expect(JSON.parse(fake.requests[0].state)).toHaveProperty('links', []); // WithLinks
    expect(JSON.parse(fake.requests[0].state).recent_trail).toEqual([]); // NoTrail
  });

  it('more than 12 conventions take more than one call (maxPerCall 12)', async () => {
    for (let i = 10; i < 23; i++) await convention(`C-${i}`);
    await task();
    await settle(fx, fake);
    expect(fake.requests.map((r) => r.keys.length)).toEqual([12, 1]);
  });

  it('conventions_comments asks the same questions per comment, over the comment state', async () => {
    await convention('CONV-1');
    const t = await task();
    const c = (await fx.store.addComment({ itemId: t.id, author: 'amy', body: 'here is the key: hunter2' })).row;
    await settle(fx, fake);
    const perComment = fake.requests.filter((r) => 'comment' in JSON.parse(r.state));
    expect(perComment).toHaveLength(1);
    expect(perComment[0].keys).toEqual(['conv:CONV-1']);
    expect(await currency(readerOf(fx), t.id)).toEqual({
      'conventions/conv:CONV-1': 'current',
      [`conventions_comments/conv:CONV-1@${c.id}`]: 'current',
    });
    // the comment state has no links: a link write owes conventions, not conventions_comments
    const other = await task('T-2');
    await fx.store.dropJobs({});
    await fx.store.addLink({ workspaceId: fx.ws.id, sourceId: other.id, targetId: t.id, linkType: 'blocks' });
    expect((await fx.store.listJobs({ itemId: t.id })).map((j) => j.questionSet)).toEqual(['conventions']);
  });

  it('editing a convention makes its answers stale (question_changed), and only its answers', async () => {
    await convention('CONV-1');
    const c2 = await convention('CONV-2');
    const t = await task();
    await settle(fx, fake);
    expect(await currency(readerOf(fx), t.id)).toEqual({
      'conventions/conv:CONV-1': 'current',
      'conventions/conv:CONV-2': 'current',
    });
    await fx.store.updateItem(c2.id, { content: 'Body of CONV-2, now stricter.' });
    expect(await currency(readerOf(fx), t.id)).toEqual({
      'conventions/conv:CONV-1': 'current',
      'conventions/conv:CONV-2': 'question_changed',
    });
    // nothing about the task was written, so nothing is owed for it: the drift sweep's job
    expect(await fx.store.listJobs({ itemId: t.id })).toEqual([]);
    // switched off: the key is no longer asked
    await fx.store.updateItem(c2.id, { fields: { ...ON, decision_check: 'off' } });
    expect(await currency(readerOf(fx), t.id)).toEqual({
      'conventions/conv:CONV-1': 'current',
      'conventions/conv:CONV-2': 'question_removed',
    });
  });
});
