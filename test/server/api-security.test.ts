import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sign } from '@octokit/webhooks-methods';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, type Verdict } from '../../src/index.js';
import { createApiServer } from '../../src/server/api-server.js';
import { captureLog } from '../harness/log-capture.js';

/**
 * The HTTP API's refusals (DESIGN §16.2), one request each, on a real SQLite file through
 * fastify's `inject` (the same request pipeline as a socket: parsers, hooks, limits). The closing
 * note's security table is this file's list. The process end to end is in serve-e2e.test.ts.
 */

const SECRET = 'whsec-test-secret';
let dir: string;
let v: Verdict;
let app: FastifyInstance;
let tokens: { read: string; write: string; admin: string; other: string };
const logs = captureLog();

const issuePayload = (number: number, title: string, body: string) => ({
  action: 'opened',
  issue: {
    number,
    title,
    body,
    state: 'open',
    state_reason: null,
    labels: [],
    user: { login: 'octocat' },
    milestone: null,
    created_at: '2026-11-01T10:00:00Z',
    updated_at: '2026-11-01T10:00:00Z',
  },
  repository: { full_name: 'acme/widgets' },
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-api-'));
  v = await createVerdict({ database: join(dir, 'v.db'), provider: 'fake', logger: logs.logger });
  const mk = async (workspace: string, role: 'read' | 'write' | 'admin') =>
    (await v.tokens.create({ workspace, role, createWorkspace: true })).token;
  tokens = {
    read: await mk('acme', 'read'),
    write: await mk('acme', 'write'),
    admin: await mk('acme', 'admin'),
    other: await mk('globex', 'admin'),
  };
  app = await createApiServer(v, {
    logger: logs.logger,
    rateLimitPerMinute: 600,
    github: { secret: SECRET, workspace: 'acme-gh' },
  });
  const admin = { authorization: `Bearer ${tokens.admin}` };
  expect(
    (await app.inject({ method: 'POST', url: '/v1/collections', headers: admin, payload: { slug: 'task' } }))
      .statusCode,
  ).toBe(201);
});
afterAll(async () => {
  await app?.close();
  await v?.close();
  rmSync(dir, { recursive: true, force: true });
});

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

describe('HTTP API refusals', () => {
  it('no token, a malformed header, an unknown or revoked token: 401 with WWW-Authenticate, and nothing says whether the workspace exists', async () => {
    for (const url of ['/v1/items', '/v1/workspaces/acme/items', '/v1/workspaces/no-such/items']) {
      const r = await app.inject({ method: 'GET', url });
      expect(r.statusCode, url).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Bearer');
      expect(r.json().error).toBe('unauthorized');
    }
    expect(
      (await app.inject({ method: 'GET', url: '/v1/items', headers: { authorization: 'Basic abc' } })).statusCode,
    ).toBe(401);
    // Refused before the body is read: bad JSON or a bad member without a token is still 401, never a 400 that describes the schema.
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/items',
          headers: { 'content-type': 'application/json' },
          payload: '{"bad',
        })
      ).statusCode,
    ).toBe(401);
    expect(
      (await app.inject({ method: 'POST', url: '/v1/items', headers: bearer(tokens.read), payload: { title: 42 } }))
        .statusCode,
    ).toBe(403);
    expect(
      (await app.inject({ method: 'GET', url: '/v1/items', headers: bearer('vdt_not-a-real-token') })).statusCode,
    ).toBe(401);
    const t = await v.tokens.create({ workspace: 'acme', role: 'read', createWorkspace: true });
    expect((await app.inject({ method: 'GET', url: '/v1/items', headers: bearer(t.token) })).statusCode).toBe(200);
    expect(await v.tokens.revoke(t.row.id)).toBe(true);
    expect((await app.inject({ method: 'GET', url: '/v1/items', headers: bearer(t.token) })).statusCode).toBe(401);
  });

  it('a token on another workspace: 403, the same for a workspace that exists and one that does not', async () => {
    const a = await app.inject({ method: 'GET', url: '/v1/workspaces/acme/items', headers: bearer(tokens.other) });
    const b = await app.inject({ method: 'GET', url: '/v1/workspaces/no-such/items', headers: bearer(tokens.other) });
    expect([a.statusCode, b.statusCode]).toEqual([403, 403]);
    expect(a.json()).toEqual(b.json());
  });

  it('a read token writing, a write token on an admin route: 403; the right role passes', async () => {
    const item = { collection: 'task', ref: 'T-1', title: 'Ship it' };
    expect(
      (await app.inject({ method: 'POST', url: '/v1/items', headers: bearer(tokens.read), payload: item })).statusCode,
    ).toBe(403);
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/collections',
          headers: bearer(tokens.write),
          payload: { slug: 'bug' },
        })
      ).statusCode,
    ).toBe(403);
    const ok = await app.inject({ method: 'POST', url: '/v1/items', headers: bearer(tokens.write), payload: item });
    expect(ok.statusCode).toBe(201);
    expect(ok.json()).toMatchObject({ item: { ref: 'T-1', title: 'Ship it' }, write: { changed: true } });
    expect(ok.json().write.owed).toBeGreaterThan(0);
    expect(
      (await app.inject({ method: 'GET', url: `/v1/items/${encodeURIComponent('T-1')}`, headers: bearer(tokens.read) }))
        .statusCode,
    ).toBe(200);
  });

  it('a 2 MiB body: 413, and nothing is written', async () => {
    const r = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: { ...bearer(tokens.write), 'content-type': 'application/json' },
      payload: JSON.stringify({ collection: 'task', ref: 'BIG', title: 'x', content: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(r.statusCode).toBe(413);
    expect(r.json().error).toBe('payload_too_large');
    expect(await v.store.getItemByRef((await v.store.getWorkspaceBySlug('acme'))!.id, 'BIG')).toBeNull();
  });

  it('bad JSON: 400 invalid_json; a bad member: 400 with the field path; an unknown member is refused, not dropped', async () => {
    const bad = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: { ...bearer(tokens.write), 'content-type': 'application/json' },
      payload: '{"collection": "task", "ref": ',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('invalid_json');
    const wrong = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: bearer(tokens.write),
      payload: { collection: 'task', ref: 'T-2', title: 42 },
    });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json()).toMatchObject({ error: 'invalid_request', issues: [{ path: 'body.title' }] });
    const typo = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: bearer(tokens.write),
      payload: { collection: 'task', ref: 'T-3', title: 'ok', tilte: 'typo' },
    });
    expect(typo.statusCode).toBe(400);
    expect(JSON.stringify(typo.json().issues)).toContain('body');
  });

  it('GitHub webhooks: a bad signature, a body altered after signing, a missing signature: 401; a replayed delivery: 200 no-op', async () => {
    const body = JSON.stringify(issuePayload(7, 'Webhook issue', 'From GitHub'));
    const headers = (sig: string | undefined, delivery = 'd-1') => ({
      'content-type': 'application/json',
      'x-github-event': 'issues',
      'x-github-delivery': delivery,
      ...(sig ? { 'x-hub-signature-256': sig } : {}),
    });
    const wrongSecret = await app.inject({
      method: 'POST',
      url: '/hooks/github',
      headers: headers(await sign('another-secret', body)),
      payload: body,
    });
    expect(wrongSecret.statusCode).toBe(401);
    const altered = await app.inject({
      method: 'POST',
      url: '/hooks/github',
      headers: headers(await sign(SECRET, body)),
      payload: body.replace('Webhook issue', 'Webhook issuf'),
    });
    expect(altered.statusCode).toBe(401);
    expect(
      (await app.inject({ method: 'POST', url: '/hooks/github', headers: headers(undefined), payload: body }))
        .statusCode,
    ).toBe(401);
    const ws = async () => v.store.getWorkspaceBySlug('acme-gh');
    expect(await ws()).toBeNull(); // nothing of a refused delivery was written

    const good = await app.inject({
      method: 'POST',
      url: '/hooks/github',
      headers: headers(await sign(SECRET, body)),
      payload: body,
    });
    expect(good.statusCode).toBe(200);
    expect(good.json()).toMatchObject({ status: 'applied', ref: '#7' });
    expect(good.json().owed).toBeGreaterThan(0);
    const item = await v.store.getItemByRef((await ws())!.id, '#7');
    expect(item?.title).toBe('Webhook issue');

    const replay = await app.inject({
      method: 'POST',
      url: '/hooks/github',
      headers: headers(await sign(SECRET, body)),
      payload: body,
    });
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual({ status: 'duplicate', owed: 0 });
    expect((await v.store.getItemByRef((await ws())!.id, '#7'))?.seq).toBe(item!.seq);

    const ping = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
    const pong = await app.inject({
      method: 'POST',
      url: '/hooks/github',
      headers: { ...headers(await sign(SECRET, ping), 'd-ping'), 'x-github-event': 'ping' },
      payload: ping,
    });
    expect(pong.statusCode).toBe(200);
  });

  it('1,000 requests in a second from one token: the first 600 pass, the rest get 429 with Retry-After', async () => {
    const limited = await createApiServer(v, { logger: logs.logger, rateLimitPerMinute: 600 });
    try {
      const t = (await v.tokens.create({ workspace: 'acme', role: 'read', createWorkspace: true })).token;
      const statuses = await Promise.all(
        Array.from({ length: 1000 }, () =>
          limited
            .inject({ method: 'GET', url: '/v1/status', headers: bearer(t) })
            .then((r) => ({ status: r.statusCode, retryAfter: r.headers['retry-after'] })),
        ),
      );
      const ok = statuses.filter((s) => s.status === 200).length;
      const tooMany = statuses.filter((s) => s.status === 429);
      expect(ok).toBe(600);
      expect(tooMany.length).toBe(400);
      expect(Number(tooMany[0].retryAfter)).toBeGreaterThan(0);
      // Bad tokens are limited per client address: they cannot buy unlimited attempts.
      const guesses = await Promise.all(
        Array.from({ length: 700 }, (_, i) =>
          limited
            .inject({ method: 'GET', url: '/v1/status', headers: bearer(`vdt_guess${i}`) })
            .then((r) => r.statusCode),
        ),
      );
      expect([guesses.filter((s) => s === 401).length, guesses.filter((s) => s === 429).length]).toEqual([600, 100]);
      // Another token is not held back by the first one's flood.
      expect(
        (await limited.inject({ method: 'GET', url: '/v1/status', headers: bearer(tokens.read) })).statusCode,
      ).toBe(200);
    } finally {
      await limited.close();
    }
  }, 60_000);

  it('logs carry ids, routes and statuses; never a token, a title or a body', async () => {
    const text = logs.lines.join('\n');
    expect(text).toContain('"route":"/v1/items"');
    for (const secret of [tokens.read, tokens.write, tokens.admin, 'Ship it', 'Webhook issue', 'From GitHub', SECRET])
      expect(text).not.toContain(secret);
  });

  it('a long ref is as reachable as a short one; a bad URL gets the API\u2019s error shape without echoing the path; no message quotes a ref', async () => {
    const ref = 'r'.repeat(400);
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/items',
          headers: bearer(tokens.write),
          payload: { collection: 'task', ref, title: 'long' },
        })
      ).statusCode,
    ).toBe(201);
    expect(
      (await app.inject({ method: 'GET', url: `/v1/items/${ref}`, headers: bearer(tokens.read) })).statusCode,
    ).toBe(200);
    const bad = await app.inject({ method: 'GET', url: '/v1/items/%FF%3Cscript%3E', headers: bearer(tokens.read) });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('bad_request');
    expect(bad.body).not.toContain('script');
    const missing = await app.inject({ method: 'GET', url: '/v1/items/secret-ref-123', headers: bearer(tokens.read) });
    expect(missing.statusCode).toBe(404);
    expect(missing.body).not.toContain('secret-ref-123');
    const many = Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`k${i}`, i]));
    const tooMany = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: bearer(tokens.write),
      payload: { collection: 'task', ref: 'MANY', title: 'x', fields: many },
    });
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().issues[0].path).toBe('body.fields');
  });

  it('CORS is off: a preflight gets no Access-Control headers, nor does a cross-origin request', async () => {
    const pre = await app.inject({
      method: 'OPTIONS',
      url: '/v1/items',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    const get = await app.inject({
      method: 'GET',
      url: '/v1/items',
      headers: { ...bearer(tokens.read), origin: 'https://evil.example' },
    });
    expect(get.statusCode).toBe(200);
    expect(Object.keys(get.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
  });

  it('the OpenAPI document is served without a token and lists the routes', async () => {
    const r = await app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(r.statusCode).toBe(200);
    const doc = r.json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/items',
        '/v1/items/{ref}',
        '/v1/items/{ref}/comments',
        '/v1/flags/{set}',
        '/v1/workspaces/{workspace}/items/{ref}',
      ]),
    );
    expect(doc.paths['/v1/items'].post.requestBody.content['application/json'].schema.required).toEqual(
      expect.arrayContaining(['collection', 'ref', 'title']),
    );
    // Every path parameter an operation declares is in its path, and the other way round (OpenAPI 3 requires both).
    for (const [path, ops] of Object.entries(
      doc.paths as Record<string, Record<string, { parameters?: Array<{ in: string; name: string }> }>>,
    )) {
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      for (const [method, op] of Object.entries(ops)) {
        expect(
          (op.parameters ?? [])
            .filter((p) => p.in === 'path')
            .map((p) => p.name)
            .sort(),
          `${method} ${path}`,
        ).toEqual(inPath);
      }
    }
  });
});
