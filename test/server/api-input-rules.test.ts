import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, type Verdict } from '../../src/index.js';
import { createApiServer } from '../../src/server/api-server.js';

/**
 * The input rules of every door (DESIGN §3.1) through /v1: a ref that would have to change is
 * refused with the reason, repaired text is reported in the answer, the same content in another
 * form is unchanged, and no internal error text reaches the client.
 */

let dir: string;
let v: Verdict;
let app: FastifyInstance;
let h: { authorization: string };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-input-rules-'));
  v = await createVerdict({ database: join(dir, 'v.db'), provider: 'fake' });
  h = {
    authorization: `Bearer ${(await v.tokens.create({ workspace: 'acme', role: 'admin', createWorkspace: true })).token}`,
  };
  app = await createApiServer(v, {});
  await app.inject({ method: 'POST', url: '/v1/collections', headers: h, payload: { slug: 'task' } });
});
afterAll(async () => {
  await app?.close();
  await v?.close();
  rmSync(dir, { recursive: true, force: true });
});

const post = async (url: string, payload: unknown) => {
  const r = await app.inject({
    method: 'POST',
    url,
    headers: { ...h, 'content-type': 'application/json' },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
  return { status: r.statusCode, body: r.json() as Record<string, any> };
};

describe('/v1 input rules', () => {
  it('a ref with NUL, a lone surrogate or over 500 characters is refused (400 naming body.ref), never stored altered', async () => {
    for (const [ref, reason] of [
      ['N\u0000UL', 'holds a control character'],
      ['x\uD800', 'holds a lone surrogate (not valid Unicode)'],
      ['r'.repeat(501), 'is longer than 500 characters'],
      ['Cafe\u0301', 'is not in Unicode NFC'],
    ]) {
      const r = await post('/v1/items', { collection: 'task', ref, title: 't' });
      expect(r).toMatchObject({
        status: 400,
        body: { error: 'invalid_request', issues: [{ path: 'body.ref', message: reason }] },
      });
    }
    expect((await app.inject({ method: 'GET', url: '/v1/items/NUL', headers: h })).statusCode).toBe(404);
  });

  it('a lone surrogate in a title is repaired and the answer says so', async () => {
    // JSON.stringify writes the lone surrogate as the escape \ud800, which the body parser decodes.
    const r = await post('/v1/items', { collection: 'task', ref: 'S-1', title: 'a\uD800b' });
    expect(r).toMatchObject({
      status: 201,
      body: { item: { title: 'a\uFFFDb' }, write: { normalised: { loneSurrogates: 1, nulsRemoved: 0 } } },
    });
    const clean = await post('/v1/items', { collection: 'task', ref: 'S-2', title: 'clean' });
    expect(clean.body.write.normalised).toEqual({ loneSurrogates: 0, nulsRemoved: 0 });
  });

  it('CRLF and NFD forms of stored text are unchanged and owe nothing', async () => {
    await post('/v1/items', { collection: 'task', ref: 'L-1', title: 'Café', content: 'one\ntwo' });
    const r = await app.inject({
      method: 'PATCH',
      url: '/v1/items/L-1',
      headers: h,
      payload: { title: 'Cafe\u0301', content: 'one\r\ntwo' },
    });
    expect(r.json()).toMatchObject({
      write: { changed: false, owed: 0 },
      item: { title: 'Café', content: 'one\ntwo' },
    });
  });

  it('5,000-deep fields answer 400 with the depth rule, never internal error text', async () => {
    const body = `{"collection":"task","ref":"D-1","title":"t","fields":{"a":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}}`;
    const r = await post('/v1/items', body);
    expect(r.status).toBe(400);
    expect(r.body.message).toBe('fields nest deeper than 32 levels');
    expect(JSON.stringify(r.body)).not.toMatch(/stack|RangeError|TypeError/);
  });
});
