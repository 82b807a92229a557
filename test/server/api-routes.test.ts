import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sign } from '@octokit/webhooks-methods';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, verifyGitHubSignature, type Verdict } from '../../src/index.js';
import { createApiServer } from '../../src/server/api-server.js';

/**
 * The /v1 routes do what the write doors and reads do (DESIGN §16.2), on a real SQLite file
 * through `inject`; the webhook route's answers for what it does not apply. Refusals are in
 * api-security.test.ts.
 */

const SECRET = 'routes-secret';
let dir: string;
let v: Verdict;
let app: FastifyInstance;
let h: { authorization: string };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-routes-'));
  v = await createVerdict({ database: join(dir, 'v.db'), provider: 'fake' });
  h = {
    authorization: `Bearer ${(await v.tokens.create({ workspace: 'acme', role: 'admin', createWorkspace: true })).token}`,
  };
  app = await createApiServer(v, { github: { secret: SECRET, workspace: 'acme-gh' } });
});
afterAll(async () => {
  await app?.close();
  await v?.close();
  rmSync(dir, { recursive: true, force: true });
});

const call = async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) => {
  const r = await app.inject({
    method,
    url,
    headers: h,
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
  return { status: r.statusCode, body: r.json() as Record<string, any> };
};

describe('/v1 routes', () => {
  it('collections, items, comments and links: each door through HTTP, with owed counts and no-op writes', async () => {
    expect(
      (
        await call('POST', '/v1/collections', {
          slug: 'task',
          schema: {
            fields: [{ key: 'status', type: 'select', options: ['open', 'done'], terminal_options: ['done'] }],
          },
        })
      ).status,
    ).toBe(201);
    expect((await call('POST', '/v1/collections', { slug: 'bug' })).status).toBe(201);
    expect((await call('POST', '/v1/collections', { slug: 'task' })).status).toBe(409); // the slug is taken
    expect((await call('GET', '/v1/collections')).body.collections.map((c: { slug: string }) => c.slug)).toEqual([
      'bug',
      'task',
    ]);

    const a = await call('POST', '/v1/items', {
      collection: 'task',
      ref: '#12',
      title: 'A',
      fields: { status: 'open' },
    });
    expect(a).toMatchObject({
      status: 201,
      body: { item: { ref: '#12', fields: { status: 'open' } }, write: { changed: true } },
    });
    expect((await call('POST', '/v1/items', { collection: 'task', ref: '#12', title: 'again' })).status).toBe(409);
    expect((await call('POST', '/v1/items', { collection: 'nope', ref: 'X', title: 'x' })).status).toBe(404);
    await call('POST', '/v1/items', { collection: 'task', ref: 'B', title: 'B' });

    // Refs go URL-encoded; the workspace path names the same item.
    expect((await call('GET', '/v1/items/%2312')).body.item.title).toBe('A');
    expect((await call('GET', '/v1/workspaces/acme/items/%2312')).body.item.title).toBe('A');
    expect((await call('GET', '/v1/items/missing')).status).toBe(404);

    const same = await call('PATCH', '/v1/items/%2312', { title: 'A' });
    expect(same.body).toMatchObject({ item: { ref: '#12' }, write: { changed: false, owed: 0 } });
    // Before the edit the production sets apply and their jobs wait out the quiet period.
    const pending = (await call('GET', '/v1/items/%2312')).body.sets as Array<{
      questionSet: string;
      applies: boolean;
      reason: string | null;
      job: { state: string; dueAt: number } | null;
    }>;
    const attention = pending.find((x) => x.questionSet === 'attention')!;
    expect([attention.applies, attention.job?.state]).toEqual([true, 'owed']);
    expect(Date.parse(attention.job!.dueAt as unknown as string)).toBeGreaterThan(Date.parse(a.body.item.updatedAt));
    const edited = await call('PATCH', '/v1/items/%2312', { setFields: { status: 'done' } });
    expect(edited.body).toMatchObject({ write: { changed: true }, item: { fields: { status: 'done' } } });
    // Terminal now: "not asked", with the reason, told apart from "pending".
    const terminal = (await call('GET', '/v1/items/%2312')).body.sets as Array<{
      questionSet: string;
      applies: boolean;
      reason: string | null;
    }>;
    expect(terminal.find((x) => x.questionSet === 'attention')).toMatchObject({
      applies: false,
      reason: expect.stringMatching(/terminal/),
    });
    expect((await call('PATCH', '/v1/items/%2312', { fields: {}, setFields: { a: 1 } })).status).toBe(400);

    const c = await call('POST', '/v1/items/%2312/comments', { author: 'ann', content: 'first' });
    expect(c).toMatchObject({
      status: 201,
      body: { comment: { author: 'ann', content: 'first' }, write: { changed: true } },
    });
    const cid = c.body.comment.id as string;
    // A comment is reached only through its own item.
    expect((await call('PATCH', `/v1/items/B/comments/${cid}`, { content: 'hijack' })).status).toBe(404);
    expect((await call('PATCH', `/v1/items/%2312/comments/${cid}`, { content: 'second' })).body.comment.content).toBe(
      'second',
    );
    expect(
      (await call('POST', '/v1/items/B/comments', { author: 'bo', content: 'reply', parentCommentId: cid })).status,
    ).toBe(404); // parent on another item

    const l = await call('POST', '/v1/items/B/links', { target: '#12', type: 'blocks' });
    // Read back as written: by ref, with its type.
    expect(l).toMatchObject({
      status: 201,
      body: { write: { changed: true }, link: { source: 'B', target: '#12', type: 'blocks' } },
    });
    expect((await call('GET', '/v1/items/%2312/links')).body.links).toEqual([l.body.link]);
    expect((await call('POST', '/v1/items/B/links', { target: 'nope', type: 'blocks' })).body).toMatchObject({
      error: 'invalid_input',
      param: 'target',
    });
    const other = await call('POST', '/v1/items', { collection: 'task', ref: 'C', title: 'C' });
    expect(other.status).toBe(201);
    expect((await call('DELETE', `/v1/items/C/links/${l.body.link.id}`)).status).toBe(404); // not C's link
    expect((await call('DELETE', `/v1/items/%2312/links/${l.body.link.id}`)).body).toMatchObject({
      link: null,
      write: { changed: true },
    }); // either end may remove it

    expect((await call('GET', '/v1/items/%2312/links')).body.links).toEqual([]); // removed above
    await call('POST', '/v1/items/B/links', { target: 'C', type: 'blocks' });
    expect(
      (await call('GET', '/v1/items/C/links')).body.links.map((x: { source: string; target: string; type: string }) => [
        x.source,
        x.target,
        x.type,
      ]),
    ).toEqual([['B', 'C', 'blocks']]);
    const moved = await call('POST', '/v1/items/B/move', { collection: 'bug' });
    expect(moved.body.item).toMatchObject({ collection: 'bug' });
    expect(moved.body.item.collectionId).not.toBe(a.body.item.collectionId);
    // A DELETE sent with a JSON content type and no body (many clients do) is no body, not bad JSON.
    const del = await app.inject({
      method: 'DELETE',
      url: '/v1/items/B',
      headers: { ...h, 'content-type': 'application/json' },
    });
    expect(del.statusCode).toBe(200);
    expect(del.json().item.deletedAt).not.toBeNull();
    expect((await call('GET', '/v1/items')).body.items.map((i: { ref: string }) => i.ref).sort()).toEqual(['#12', 'C']);
    expect((await call('POST', '/v1/items/B/restore')).body.item.deletedAt).toBeNull();
    expect((await call('GET', '/v1/items/%2312/comments')).body.comments).toMatchObject([
      { id: cid, content: 'second', deletedAt: null },
    ]);
    expect((await call('DELETE', `/v1/items/%2312/comments/${cid}`)).body.write.changed).toBe(true);
    expect((await call('DELETE', `/v1/items/%2312/comments/${cid}`)).status).toBe(404);
    expect((await call('GET', '/v1/items/%2312/comments')).body.comments).toEqual([]);
  });

  it('items list pages by cursor; status and flags read the workspace', async () => {
    const p1 = await call('GET', '/v1/items?limit=2&sort=ref');
    expect(p1.body).toMatchObject({ has_more: true });
    const p2 = await call('GET', `/v1/items?limit=2&sort=ref&cursor=${p1.body.next_cursor}`);
    const refs = [...p1.body.items, ...p2.body.items].map((i: { ref: string }) => i.ref);
    expect(refs).toEqual([...refs].sort());
    expect(new Set(refs).size).toBe(refs.length);
    expect((await call('GET', '/v1/items?limit=0')).status).toBe(400);
    const st = await call('GET', '/v1/status');
    expect(st.body).toMatchObject({ workspace: 'acme', items: 3 });
    expect(st.body.jobs.length).toBeGreaterThan(0);
    const flags = await call('GET', '/v1/flags/attention?threshold=0.5');
    expect(flags).toMatchObject({
      status: 200,
      body: { flags: [], has_more: false, next_cursor: null, failing: false },
    });
    expect((await call('GET', '/v1/flags/attention?threshold=2')).status).toBe(400);
    expect((await call('GET', '/v1/flags/atention')).status).toBe(404); // a typo is not "nothing flagged"
    expect(
      (await call('GET', '/v1/items')).body.items.every((i: { collection: string }) =>
        ['task', 'bug'].includes(i.collection),
      ),
    ).toBe(true);
  });
});

describe('/hooks/github answers for what it does not apply', () => {
  const deliver = async (event: string, payload: unknown, delivery: string) => {
    const body = JSON.stringify(payload);
    return app.inject({
      method: 'POST',
      url: '/hooks/github',
      headers: {
        'content-type': 'application/json',
        'x-github-event': event,
        'x-github-delivery': delivery,
        'x-hub-signature-256': await sign(SECRET, body),
      },
      payload: body,
    });
  };
  const issue = {
    number: 3,
    title: 't',
    body: 'b',
    state: 'open',
    state_reason: null,
    labels: [],
    user: { login: 'u' },
    milestone: null,
    created_at: '2026-11-01T00:00:00Z',
    updated_at: '2026-11-01T00:00:00Z',
  };

  it('an action or event Verdict does not map: 202, nothing written; a pull request: 202; a payload of the wrong shape: 400 naming the member', async () => {
    expect(
      (await deliver('issues', { action: 'pinned', issue, repository: { full_name: 'acme/w' } }, 'a1')).statusCode,
    ).toBe(202);
    expect((await deliver('star', { action: 'created' }, 'a2')).json()).toMatchObject({
      status: 'ignored',
      reason: 'event',
    });
    const pr = await deliver(
      'issue_comment',
      {
        action: 'created',
        issue: { ...issue, pull_request: { url: 'x' } },
        comment: {
          id: 1,
          body: 'c',
          user: { login: 'u' },
          created_at: '2026-11-01T00:00:00Z',
          updated_at: '2026-11-01T00:00:00Z',
          issue_url: 'https://api.github.com/repos/acme/w/issues/3',
        },
        repository: { full_name: 'acme/w' },
      },
      'a3',
    );
    expect(pr.json()).toMatchObject({ status: 'ignored', reason: 'pull_request' });
    const bad = await deliver(
      'issues',
      { action: 'opened', issue: { ...issue, number: 'three' }, repository: { full_name: 'acme/w' } },
      'a4',
    );
    expect(bad.statusCode).toBe(400);
    expect(bad.json().issues).toContain('issue.number');
    expect(await v.store.getWorkspaceBySlug('acme-gh')).toBeNull();
  });

  it('a comment event for an issue never imported creates the issue and its comment; a delete removes the comment', async () => {
    const comment = {
      id: 99,
      body: 'me too',
      user: { login: 'u2' },
      created_at: '2026-11-02T00:00:00Z',
      updated_at: '2026-11-02T00:00:00Z',
      issue_url: 'https://api.github.com/repos/acme/w/issues/3',
    };
    const r = await deliver(
      'issue_comment',
      { action: 'created', issue, comment, repository: { full_name: 'acme/w' } },
      'b1',
    );
    expect(r.json()).toMatchObject({ status: 'applied', ref: '#3' });
    const ws = (await v.store.getWorkspaceBySlug('acme-gh'))!;
    const item = (await v.store.getItemByRef(ws.id, '#3'))!;
    expect(item.title).toBe('t');
    const del = await deliver(
      'issue_comment',
      { action: 'deleted', issue, comment, repository: { full_name: 'acme/w' } },
      'b2',
    );
    expect(del.json()).toMatchObject({ status: 'applied', action: 'deleted' });
    const gone = await deliver('issues', { action: 'deleted', issue, repository: { full_name: 'acme/w' } }, 'b3');
    expect(gone.json()).toMatchObject({ status: 'applied' });
    expect((await v.store.getItemByRef(ws.id, '#3'))!.deletedAt).not.toBeNull();
  });

  it('a deletion of something never imported claims nothing; a second repository is refused; a deleted workspace takes no writes', async () => {
    const other = { ...issue, number: 5 };
    const del = await deliver(
      'issues',
      { action: 'deleted', issue: other, repository: { full_name: 'zeta/never' } },
      'c1',
    );
    expect([del.statusCode, del.json()]).toEqual([202, { status: 'ignored', reason: 'not_imported', owed: 0 }]);
    // acme-gh holds acme/w (from the test above): a second repository is refused with its reason, and leaves no mapping.
    const second = await deliver(
      'issues',
      { action: 'opened', issue: other, repository: { full_name: 'zeta/never' } },
      'c2',
    );
    expect(second.statusCode).toBe(400);
    expect(second.json().message).toContain('already holds acme/w');
    const ws = (await v.store.getWorkspaceBySlug('acme-gh'))!;
    await v.store.softDeleteWorkspace(ws.id);
    const refused = await deliver(
      'issues',
      { action: 'opened', issue: { ...issue, number: 6 }, repository: { full_name: 'acme/w' } },
      'c3',
    );
    expect(refused.statusCode).toBe(400);
    expect(await v.store.getItemByRef(ws.id, '#6')).toBeNull();
    await v.store.restoreWorkspace(ws.id);
    // The refused delivery left no delivery row: GitHub's redelivery applies it.
    const again = await deliver(
      'issues',
      { action: 'opened', issue: { ...issue, number: 6 }, repository: { full_name: 'acme/w' } },
      'c3',
    );
    expect(again.json()).toMatchObject({ status: 'applied', ref: '#6' });
    const milestoned = await deliver(
      'issues',
      {
        action: 'milestoned',
        issue: { ...issue, number: 6, milestone: { title: 'v2' } },
        repository: { full_name: 'acme/w' },
      },
      'c4',
    );
    expect(milestoned.json()).toMatchObject({ status: 'applied' });
    expect(JSON.parse((await v.store.getItemByRef(ws.id, '#6'))!.fields)).toMatchObject({ milestone: 'v2' });
  });

  it('verifyGitHubSignature: right, wrong secret, altered, empty, not UTF-8', async () => {
    const body = '{"a":1}';
    const sig = await sign(SECRET, body);
    expect(await verifyGitHubSignature(SECRET, Buffer.from(body), sig)).toBe(true);
    expect(await verifyGitHubSignature('other', Buffer.from(body), sig)).toBe(false);
    expect(await verifyGitHubSignature(SECRET, Buffer.from('{"a":2}'), sig)).toBe(false);
    expect(await verifyGitHubSignature(SECRET, Buffer.alloc(0), sig)).toBe(false);
    expect(await verifyGitHubSignature(SECRET, Buffer.from(body), undefined)).toBe(false);
    expect(await verifyGitHubSignature(SECRET, Buffer.from(body), 'sha256=zz')).toBe(false);
    // Bytes that are not UTF-8 read as U+FFFD: a signature over that text must not pass for them.
    const raw = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    expect(await verifyGitHubSignature(SECRET, raw, await sign(SECRET, raw.toString('utf8')))).toBe(false);
  });
});
