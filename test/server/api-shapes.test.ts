import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validate } from '@readme/openapi-parser';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, type Verdict } from '../../src/index.js';
import { createApiServer } from '../../src/server/api-server.js';
import { captureLog } from '../harness/log-capture.js';

/**
 * One shape per kind of answer and one name per thing (DESIGN §16.3), on a real SQLite store
 * loaded with beads sample items (real tracker data) through `/v1`: times in ISO 8601, a write
 * answering the envelope a GET of the resource answers, comments with `content` and the token as
 * their author, select options refused at every door, flags as a paged array, sets and the job
 * routes, 413 and 415 in the error shape, and an OpenAPI document that says all of it.
 */

const ROOT = join(import.meta.dirname, '../..');
const sample = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .slice(0, 12)
  .map((l) => JSON.parse(l) as { id: string; title: string; description?: string; status: string });
const STATUSES = [...new Set(sample.map((r) => r.status))];

let v: Verdict;
let app: FastifyInstance;
let h: { authorization: string };
let tokenId: string;
const log = captureLog('info');
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

beforeAll(async () => {
  v = await createVerdict({ database: ':memory:', provider: 'fake' });
  const made = await v.tokens.create({ workspace: 'beads', role: 'admin', createWorkspace: true });
  h = { authorization: `Bearer ${made.token}` };
  tokenId = made.row.id;
  app = await createApiServer(v, { logger: log.logger, github: { secret: 'shapes-secret' } });
  const col = await app.inject({
    method: 'POST',
    url: '/v1/collections',
    headers: h,
    payload: { slug: 'task', schema: { fields: [{ key: 'status', type: 'select', options: STATUSES }] } },
  });
  expect(col.statusCode).toBe(201);
  await app.inject({
    method: 'POST',
    url: '/v1/collections',
    headers: h,
    payload: { slug: 'idea', schema: { fields: [{ key: 'status', type: 'select', options: ['new', 'kept'] }] } },
  });
  for (const r of sample) {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: h,
      payload: {
        collection: 'task',
        ref: r.id,
        title: r.title,
        content: r.description ?? '',
        fields: { status: r.status },
      },
    });
    expect(res.statusCode).toBe(201);
  }
  // The API's writes owe after the quiet period: make them due, then let the fake provider answer.
  await v.jobs.retry({ workspace: 'beads', state: 'owed' });
  await v.worker({ concurrency: 1 }).runUntilIdle();
});
afterAll(async () => {
  await app?.close();
  await v?.close();
});

const call = async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) => {
  const r = await app.inject({
    method,
    url,
    headers: h,
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
  return { status: r.statusCode, body: r.json() as Record<string, any>, headers: r.headers };
};
const ref = encodeURIComponent(sample[0].id);

/** Every member named `…At` in a JSON value, at any depth, outside `fields` (tracker data). */
function times(v: unknown, out: unknown[] = []): unknown[] {
  if (Array.isArray(v)) v.forEach((x) => times(x, out));
  else if (v && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) {
      if (k.endsWith('At')) out.push(x);
      else if (k !== 'fields') times(x, out);
    }
  return out;
}

describe('times', () => {
  it('every /v1 answer gives its times in ISO 8601, and a tracker field named like a time is left alone', async () => {
    await call('PATCH', `/v1/items/${ref}`, { fields: { closedAt: 1234 } });
    await call('POST', `/v1/items/${ref}/comments`, { content: 'a comment' });
    const answers = [
      (await call('GET', `/v1/items/${ref}`)).body,
      (await call('GET', '/v1/items?limit=3')).body,
      (await call('GET', `/v1/items/${ref}/comments`)).body,
      (await call('GET', '/v1/collections')).body,
      (await call('GET', '/v1/status')).body,
      (await call('GET', '/v1/jobs')).body,
      (await call('PATCH', `/v1/items/${ref}`, { title: `${sample[0].title}.` })).body,
    ];
    const found = answers.flatMap((a) => times(a)).filter((t) => t !== null);
    expect(found.length).toBeGreaterThan(20);
    expect(found.filter((t) => typeof t !== 'string' || !ISO.test(t))).toEqual([]);
    const item = answers[0];
    expect(item.decisions.length).toBeGreaterThan(0);
    expect(item.decisions[0].evaluatedAt).toMatch(ISO);
    expect(item.item.fields.closedAt).toBe(1234);
    // The OpenAPI document says the same: a date-time string.
    const doc = (await call('GET', '/v1/openapi.json')).body;
    const itemSchema =
      doc.paths['/v1/items/{ref}'].get.responses['200'].content['application/json'].schema.properties.item;
    expect(itemSchema.properties.updatedAt).toMatchObject({ type: 'string', format: 'date-time' });
  });
});

describe('one envelope', () => {
  it('a GET of an item and a write to it answer the item under the same name; the write adds `write`', async () => {
    const got = (await call('GET', `/v1/items/${ref}`)).body;
    const patched = (await call('PATCH', `/v1/items/${ref}`, { content: 'new text' })).body;
    expect(Object.keys(patched).sort()).toEqual(['item', 'write']);
    expect(Object.keys(patched.item).sort()).toEqual(Object.keys(got.item).sort());
    expect(patched.write).toEqual({
      changed: true,
      normalised: { loneSurrogates: 0, nulsRemoved: 0 },
      owed: expect.any(Number),
    });
    const col = (await call('PATCH', '/v1/collections/idea', { settings: { tracks_work: true } })).body;
    expect(Object.keys(col).sort()).toEqual(['collection', 'write']);
  });

  it('GET /v1/items/{ref} carries the decisions and the verdicts, as MCP item_get; a decision names each thing once', async () => {
    const key = (await call('GET', `/v1/items/${ref}`)).body.decisions[0].questionKey as string;
    expect(
      (
        await call('POST', `/v1/items/${ref}/verdicts`, {
          key,
          set: 'attention',
          verdict: 'value',
          value: true,
          note: 'checked',
        })
      ).status,
    ).toBe(201);
    const got = (await call('GET', `/v1/items/${ref}`)).body;
    expect(got.verdicts).toMatchObject([
      { questionKey: key, verdict: 'value', note: 'checked', createdAt: expect.stringMatching(ISO) },
    ]);
    for (const d of got.decisions) {
      expect(d).not.toHaveProperty('key');
      expect(d).not.toHaveProperty('unsurfaced');
      if (d.source === 'model') expect(d.modelAnswer).toBeNull();
    }
    const human = got.decisions.find(
      (d: { questionKey: string; questionSet: string }) => d.questionKey === key && d.questionSet === 'attention',
    );
    expect(human).toMatchObject({ source: 'human', answer: { noul: 1 }, modelAnswer: { type: 'noul' } });
    expect(
      (await call('POST', `/v1/items/${ref}/verdicts`, { key, set: 'attention', verdict: 'withdraw' })).body.inForce,
    ).toBe(false);
  });
});

describe('one name per thing', () => {
  it('a comment\u2019s text is `content`, written and read; its author is the token unless named', async () => {
    const c = await call('POST', `/v1/items/${encodeURIComponent(sample[1].id)}/comments`, {
      content: 'Looks blocked on the parser.',
    });
    expect(c).toMatchObject({
      status: 201,
      body: {
        comment: { content: 'Looks blocked on the parser.', author: `token:${tokenId}` },
        write: { changed: true },
      },
    });
    const named = await call('POST', `/v1/items/${encodeURIComponent(sample[1].id)}/comments`, {
      content: 'x',
      author: 'steveyegge',
    });
    expect(named.body.comment.author).toBe('steveyegge');
    expect(
      (await call('POST', `/v1/items/${encodeURIComponent(sample[1].id)}/comments`, { body: 'old name' })).body,
    ).toMatchObject({ error: 'invalid_request' });
    const listed = (await call('GET', `/v1/items/${encodeURIComponent(sample[1].id)}/comments`)).body.comments;
    expect(listed.map((x: { content: string }) => x.content)).toEqual(['Looks blocked on the parser.', 'x']);
    expect(listed[0]).not.toHaveProperty('body');
  });

  it('a link reads back in the shape it was written: refs and type', async () => {
    const l = await call('POST', `/v1/items/${encodeURIComponent(sample[2].id)}/links`, {
      target: sample[3].id,
      type: 'blocks',
    });
    expect(l.body.link).toMatchObject({
      source: sample[2].id,
      target: sample[3].id,
      type: 'blocks',
      createdAt: expect.stringMatching(ISO),
    });
    const read = (await call('GET', `/v1/items/${encodeURIComponent(sample[3].id)}/links`)).body.links;
    expect(read).toEqual([l.body.link]);
  });
});

describe('select options', () => {
  it('fields outside a select field\u2019s options are refused with 400 naming the field and listing the options, at create, patch and move', async () => {
    const bad = await call('POST', '/v1/items', {
      collection: 'task',
      ref: 'wip-1',
      title: 'x',
      fields: { status: 'wip' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'invalid_write', param: 'fields.status' });
    expect(bad.body.message).toContain(`options: ${STATUSES.join(', ')}`);
    expect(bad.body.message).not.toContain('wip'); // tracker text is never echoed
    expect(await v.store.getItemByRef((await v.store.getWorkspaceBySlug('beads'))!.id, 'wip-1')).toBeNull();
    const patch = await call('PATCH', `/v1/items/${encodeURIComponent(sample[4].id)}`, { fields: { status: 'wip' } });
    expect(patch.body).toMatchObject({ error: 'invalid_write', param: 'fields.status' });
    expect((await call('GET', `/v1/items/${encodeURIComponent(sample[4].id)}`)).body.item.fields.status).toBe(
      sample[4].status,
    );
    expect(
      (await call('PATCH', `/v1/items/${encodeURIComponent(sample[4].id)}`, { fields: { status: null } })).status,
    ).toBe(200); // unset is allowed
    // Moving into a collection whose options the item's value is not among.
    const move = await call('POST', `/v1/items/${encodeURIComponent(sample[5].id)}/move`, { collection: 'idea' });
    expect(move.body).toMatchObject({
      error: 'invalid_write',
      param: 'fields.status',
      message: expect.stringContaining('options: new, kept'),
    });
  });

  it('the library\u2019s write doors refuse the same (createItem, updateItem, upsertItem)', async () => {
    const ws = (await v.store.getWorkspaceBySlug('beads'))!;
    const task = (await v.store.listCollections(ws.id)).find((c) => c.slug === 'task')!;
    await expect(
      v.store.createItem({
        workspaceId: ws.id,
        collectionId: task.id,
        ref: 'lib-1',
        title: 't',
        fields: { status: 'wip' },
      }),
    ).rejects.toMatchObject({ code: 'invalid_write', param: 'fields.status' });
    const item = (await v.store.getItemByRef(ws.id, sample[6].id))!;
    await expect(v.store.updateItem(item.id, { setFields: { status: 'wip' } })).rejects.toMatchObject({
      param: 'fields.status',
    });
    await expect(
      v.store.upsertItem({
        id: item.id,
        workspaceId: ws.id,
        collectionId: task.id,
        ref: item.ref,
        title: item.title,
        fields: { status: 'wip' },
      }),
    ).rejects.toMatchObject({ param: 'fields.status' });
    // A write that leaves the field as stored is not checked again.
    expect((await v.store.updateItem(item.id, { title: 'retitled' })).changed).toBe(true);
  });
});

describe('flags, sets and jobs', () => {
  it('GET /v1/flags/{set} is an ordered array of refs and titles, paged by cursor with has_more and Link; a bad cursor is a 400', async () => {
    const all = (await call('GET', '/v1/flags/attention?threshold=0&limit=500')).body;
    expect(Array.isArray(all.flags)).toBe(true);
    expect(all.flags.length).toBeGreaterThan(2);
    expect(all.flags[0]).toMatchObject({
      ref: expect.any(String),
      title: expect.any(String),
      questionKey: expect.any(String),
      p: expect.any(Number),
      evaluatedAt: expect.stringMatching(ISO),
    });
    expect(all.flags[0]).not.toHaveProperty('itemId');
    const ps = all.flags.map((f: { p: number }) => f.p);
    expect(ps).toEqual([...ps].sort((a, b) => b - a));
    const seen: string[] = [];
    let url: string | null = '/v1/flags/attention?threshold=0&limit=2';
    while (url) {
      const r = await call('GET', url);
      seen.push(...r.body.flags.map((f: { ref: string; questionKey: string }) => `${f.ref} ${f.questionKey}`));
      expect(r.body.has_more).toBe(r.body.next_cursor !== null);
      url = r.body.has_more ? /^<([^>]+)>; rel="next"$/.exec(r.headers.link as string)![1] : null;
    }
    expect(seen).toEqual(all.flags.map((f: { ref: string; questionKey: string }) => `${f.ref} ${f.questionKey}`));
    expect((await call('GET', '/v1/flags/attention?cursor=bogus')).body).toMatchObject({
      error: 'invalid_input',
      param: 'cursor',
    });
    const other = (await call('GET', '/v1/flags/attention?threshold=0&limit=1')).body.next_cursor;
    expect((await call('GET', `/v1/flags/triage?cursor=${other}`)).body).toMatchObject({ param: 'cursor' }); // another list's cursor
  });

  it('GET /v1/sets lists the sets by name', async () => {
    const sets = (await call('GET', '/v1/sets')).body.sets as Array<{ name: string; threshold: number }>;
    expect(sets.map((s) => s.name)).toEqual(
      v.registry
        .all()
        .map((s) => s.name)
        .sort(),
    );
    expect(sets.find((s) => s.name === 'attention')).toMatchObject({
      threshold: v.registry.get('attention')!.threshold,
    });
  });

  it('jobs: list filtered by state, make due now, retry, drop with a reason (logged with the count)', async () => {
    const target = encodeURIComponent(sample[7].id);
    await call('PATCH', `/v1/items/${target}`, { content: 'changed, so a job is owed after the quiet period' });
    const owed = (await call('GET', `/v1/jobs?state=owed&ref=${target}`)).body.jobs as Array<{
      ref: string;
      state: string;
      dueAt: string;
    }>;
    expect(owed.length).toBeGreaterThan(0);
    expect(owed.every((j) => j.ref === sample[7].id && j.state === 'owed' && ISO.test(j.dueAt))).toBe(true);
    const now = Date.parse((await call('GET', `/v1/items/${target}`)).body.item.updatedAt);
    expect(owed.some((j) => Date.parse(j.dueAt) > now)).toBe(true); // waiting out the quiet period
    expect((await call('POST', '/v1/jobs/due-now', { ref: sample[7].id })).body).toEqual({ count: owed.length });
    const due = (await call('GET', `/v1/jobs?ref=${target}`)).body.jobs as Array<{ dueAt: string }>;
    expect(due.every((j) => Date.parse(j.dueAt) < now + 60_000)).toBe(true); // due now, not after the quiet period
    expect((await call('POST', '/v1/jobs/retry', { ref: sample[7].id })).body).toEqual({ count: 0 }); // nothing parked
    expect((await call('POST', '/v1/jobs/drop', { ref: sample[7].id })).body).toMatchObject({
      error: 'invalid_request',
      param: 'reason',
    });
    expect((await call('POST', '/v1/jobs/drop', { reason: 'no filter' })).body).toMatchObject({
      error: 'invalid_request',
      param: 'state',
    });
    expect(
      (await call('POST', '/v1/jobs/drop', { ref: sample[7].id, reason: 'duplicate of another item' })).body,
    ).toEqual({ count: owed.length });
    expect((await call('GET', `/v1/jobs?ref=${target}`)).body.jobs).toEqual([]);
    expect(log.records().find((l) => l.msg === 'jobs dropped')).toMatchObject({
      dropped: owed.length,
      reason: 'duplicate of another item',
    });
    expect((await call('GET', '/v1/jobs?state=nope')).status).toBe(400);
    expect((await call('GET', '/v1/jobs?ref=missing')).status).toBe(404);
  });
});

describe('413 and 415', () => {
  it('a body over 1 MiB is 413 and a body that is not JSON is 415, each in the documented error shape with a request id', async () => {
    const big = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: { ...h, 'content-type': 'application/json' },
      payload: JSON.stringify({ collection: 'task', ref: 'BIG', title: 'x', content: 'x'.repeat(1024 * 1024 + 1) }),
    });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toEqual({ error: 'payload_too_large', message: expect.any(String) });
    expect(big.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const text = await app.inject({
      method: 'PATCH',
      url: `/v1/items/${ref}`,
      headers: { ...h, 'content-type': 'text/plain' },
      payload: 'title=x',
    });
    expect(text.statusCode).toBe(415);
    expect(text.json()).toEqual({ error: 'unsupported_media_type', message: 'send application/json' });
    expect(text.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('the OpenAPI document', () => {
  it('has /hooks/github, /mcp and /healthz, a summary and a description on every operation, 413 and 415 where a body is taken, and passes the validator', async () => {
    const doc = (await call('GET', '/v1/openapi.json')).body as {
      paths: Record<
        string,
        Record<string, { summary?: string; description?: string; responses: Record<string, unknown> }>
      >;
    };
    const result = await validate(structuredClone(doc) as never);
    expect('errors' in result ? result.errors : []).toEqual([]);
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/hooks/github',
        '/mcp',
        '/healthz',
        '/v1/sets',
        '/v1/jobs',
        '/v1/jobs/drop',
        '/v1/flags/{set}',
      ]),
    );
    const ops = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([m, op]) => ({ at: `${m.toUpperCase()} ${path}`, ...op })),
    );
    expect(ops.filter((o) => !o.summary || !o.description).map((o) => o.at)).toEqual([]);
    const v1Writes = ops.filter((o) => /^(POST|PATCH|DELETE) \/v1\//.test(o.at));
    expect(v1Writes.filter((o) => !o.responses['413'] || !o.responses['415']).map((o) => o.at)).toEqual([]);
    expect(doc.paths['/v1/items'].post.responses).toHaveProperty('409');
    expect(doc.paths['/v1/items/{ref}'].get.responses).not.toHaveProperty('409');
    expect(doc.paths['/hooks/github'].post.responses).toHaveProperty('401');
  });
});
