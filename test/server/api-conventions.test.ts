import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validate } from '@readme/openapi-parser';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, type Verdict } from '../../src/index.js';
import { createApiServer } from '../../src/server/api-server.js';
import { captureLog } from '../harness/log-capture.js';

/**
 * The HTTP API's conventions (DESIGN §16.2 and §16.3), on a real
 * SQLite file loaded with beads sample items (real tracker data) through the write doors: the
 * item list's cursor paging with `has_more`, `next_cursor` and a `Link` header, a bad cursor a 400
 * naming `param`, content only when asked; errors in one shape with `param` and an `x-request-id`
 * that is also in the log line; 405 with `Allow` for a wrong method; a duplicate's 409 without
 * column names; `fields` patched as RFC 7396; the OpenAPI document valid under a validator.
 */

const ROOT = join(import.meta.dirname, '../..');
const sample = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .slice(0, 30)
  .map((l) => JSON.parse(l) as { id: string; title: string; description?: string; status: string; priority?: number });

let v: Verdict;
let app: FastifyInstance;
let h: { authorization: string };
const log = captureLog('info');

beforeAll(async () => {
  v = await createVerdict({ database: ':memory:', provider: 'none' });
  h = {
    authorization: `Bearer ${(await v.tokens.create({ workspace: 'beads', role: 'admin', createWorkspace: true })).token}`,
  };
  app = await createApiServer(v, { logger: log.logger });
  await app.inject({ method: 'POST', url: '/v1/collections', headers: h, payload: { slug: 'task' } });
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
        fields: { status: r.status, priority: r.priority ?? null },
      },
    });
    expect(res.statusCode).toBe(201);
  }
});
afterAll(async () => {
  await app?.close();
  await v?.close();
});

const get = (url: string) => app.inject({ method: 'GET', url, headers: h });

describe('GET /v1/items', () => {
  it('pages by an opaque cursor with has_more and a Link header, each item once, in the order asked', async () => {
    const seen: string[] = [];
    let url: string | null = '/v1/items?sort=ref&limit=7';
    let pages = 0;
    while (url) {
      const r = await get(url);
      expect(r.statusCode).toBe(200);
      const body = r.json() as { items: Array<{ ref: string }>; has_more: boolean; next_cursor: string | null };
      seen.push(...body.items.map((i) => i.ref));
      expect(body.has_more).toBe(body.next_cursor !== null);
      const link = r.headers.link as string | undefined;
      if (body.has_more) {
        expect(link).toMatch(/^<\/v1\/items\?.*cursor=.*>; rel="next"$/);
        url = /^<([^>]+)>/.exec(link!)![1];
      } else {
        expect(link).toBeUndefined();
        url = null;
      }
      pages++;
    }
    expect(pages).toBe(Math.ceil(sample.length / 7));
    expect(seen).toEqual(sample.map((r) => r.id).sort());
  });

  it('filters by status and title text, and leaves content out unless include=content', async () => {
    const closed = (await get('/v1/items?status=closed&limit=500')).json() as {
      items: Array<{ ref: string; fields: { status: string }; content?: string }>;
    };
    expect(closed.items.map((i) => i.ref).sort()).toEqual(
      sample
        .filter((r) => r.status === 'closed')
        .map((r) => r.id)
        .sort(),
    );
    expect(closed.items.every((i) => i.content === undefined)).toBe(true);
    const word = sample[3].title.split(' ')[0];
    const found = (await get(`/v1/items?q=${encodeURIComponent(word.toLowerCase())}&limit=500`)).json() as {
      items: Array<{ ref: string }>;
    };
    expect(found.items.map((i) => i.ref)).toContain(sample[3].id);
    const full = (await get('/v1/items?include=content&limit=500')).json() as {
      items: Array<{ ref: string; content: string }>;
    };
    const bare = (await get('/v1/items?limit=500')).payload.length;
    expect(full.items.find((i) => i.ref === sample[0].id)!.content).toBe(sample[0].description ?? '');
    expect(bare).toBeLessThan(JSON.stringify(full).length);
  });

  it('a bad cursor is a 400 naming param cursor, with the one error shape and a request id', async () => {
    const r = await get('/v1/items?cursor=garbage');
    expect(r.statusCode).toBe(400);
    expect(r.json()).toEqual({ error: 'invalid_input', message: expect.stringContaining('cursor'), param: 'cursor' });
    expect(r.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const other = (await get('/v1/items?sort=ref&limit=1')).json() as { next_cursor: string };
    expect((await get(`/v1/items?sort=created&cursor=${other.next_cursor}`)).json()).toMatchObject({ param: 'cursor' });
    expect((await get('/v1/items?limit=0')).json()).toMatchObject({ error: 'invalid_request', param: 'limit' });
  });
});

describe('errors', () => {
  it('every answer carries x-request-id, the same id as its log line', async () => {
    log.lines.length = 0;
    const r = await get(`/v1/items/${encodeURIComponent(sample[0].id)}`);
    expect(r.statusCode).toBe(200);
    const id = r.headers['x-request-id'];
    const line = log.records().find((l) => l.msg === 'http request');
    expect(line).toMatchObject({ requestId: id, status: 200 });
    const again = await get(`/v1/items/${encodeURIComponent(sample[0].id)}`);
    expect(again.headers['x-request-id']).not.toBe(id);
  });

  it('a wrong method on a real path is 405 with Allow, an unknown path 404', async () => {
    const r = await app.inject({
      method: 'PUT',
      url: `/v1/items/${encodeURIComponent(sample[0].id)}`,
      headers: h,
      payload: {},
    });
    expect(r.statusCode).toBe(405);
    expect(r.headers.allow).toBe('DELETE, GET, PATCH');
    expect(r.json()).toMatchObject({ error: 'method_not_allowed' });
    expect((await app.inject({ method: 'DELETE', url: '/v1/items', headers: h })).statusCode).toBe(405);
    expect((await get('/v1/nothing-here')).statusCode).toBe(404);
  });

  it('a duplicate is 409 naming the member, never the table or columns', async () => {
    const r = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: h,
      payload: { collection: 'task', ref: sample[0].id, title: 'again' },
    });
    expect(r.statusCode).toBe(409);
    expect(r.json()).toEqual({
      error: 'conflict',
      message: 'an item of that ref already exists in this workspace',
      param: 'ref',
    });
    expect(r.payload).not.toMatch(/items\.|workspace_id/);
  });

  it('a bad body member is a 400 naming it in param and issues', async () => {
    const r = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: h,
      payload: { collection: 'task', ref: 'X-1', title: 5 },
    });
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ error: 'invalid_request', param: 'title', issues: [{ path: 'body.title' }] });
  });
});

describe('PATCH merges fields as JSON Merge Patch (RFC 7396)', () => {
  it('keeps keys not named, removes a key set to null, merges nested objects', async () => {
    const url = `/v1/items/${encodeURIComponent(sample[1].id)}`;
    const patch = (fields: unknown) => app.inject({ method: 'PATCH', url, headers: h, payload: { fields } });
    expect((await patch({ owner: { name: 'ann', team: 'core' } })).statusCode).toBe(200);
    const r = await patch({ priority: null, owner: { team: null, site: 'x' } });
    expect(r.json().item.fields).toEqual({ status: sample[1].status, owner: { name: 'ann', site: 'x' } });
    const same = await patch({ status: sample[1].status });
    expect(same.json()).toMatchObject({ write: { changed: false, owed: 0 } });
  });
});

describe('the OpenAPI document', () => {
  it('passes a validator, and every operation has an operationId, tags and a summary', async () => {
    const doc = (await get('/v1/openapi.json')).json() as {
      paths: Record<string, Record<string, { operationId?: string; tags?: string[]; summary?: string }>>;
    };
    const result = await validate(structuredClone(doc) as never);
    expect('errors' in result ? result.errors : []).toEqual([]);
    expect(result.valid).toBe(true);
    const ops = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([m, op]) => ({ at: `${m.toUpperCase()} ${path}`, ...op })),
    );
    expect(ops.length).toBeGreaterThan(30);
    expect(ops.filter((o) => !o.operationId || !o.tags?.length || !o.summary).map((o) => o.at)).toEqual([]);
    const ids = ops.map((o) => o.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
