import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerdict, defineQuestionSet, noul, type Verdict } from '../../src/index.js';
import { createApiServer } from '../../src/server/api-server.js';
import { FakeProvider } from '../../src/testing.js';
import { html, trusted } from '../../src/dashboard/html.js';
import { bucketLabel } from '../../src/dashboard/spend-page.js';
import { captureLog } from '../harness/log-capture.js';

/**
 * Issue 17's library reads (`reader.surfaced`, `history`, `queue`, `spend`, `quality`, `jobs`) and
 * the dashboard's refusals over `inject`, fast and in process; the browser test
 * (test/dashboard/dashboard-browser.test.ts) drives the same pages in Chromium.
 */

const HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>';
const triage = defineQuestionSet({
  name: 'triage',
  questions: {
    blocked: noul('The work is blocked by something outside the team.'),
    urgent: noul('The item is urgent.'),
  },
  threshold: 0.5,
  quietPeriodMs: 0,
  reaskDebounceMs: 0,
});
const P: Record<string, number> = { 'T-1': 0.95, 'T-2': 0.8, 'T-3': 0.6, 'T-4': 0.1, 'B-1': 0.99 };
let dir: string;
let v: Verdict;
let app: FastifyInstance;
const logs = captureLog('info');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-dash-'));
  v = await createVerdict({
    database: join(dir, 'v.db'),
    sets: [triage],
    // Each item's title starts with its ref; the fake answers by ref.
    provider: new FakeProvider({
      handler: (req) => {
        const p = P[Object.keys(P).find((k) => req.state.includes(k)) ?? ''] ?? 0.5;
        return { blocked: { probability: p }, urgent: { probability: 1 - p } };
      },
    }),
  });
  const acme = await v.store.createWorkspace({ slug: 'acme' });
  const task = await v.store.createCollection({ workspaceId: acme.id, slug: 'task' });
  const bug = await v.store.createCollection({ workspaceId: acme.id, slug: 'bug' });
  await v.store.createItem({ workspaceId: acme.id, collectionId: task.id, ref: 'T-1', title: 'T-1 first' });
  await v.store.createItem({ workspaceId: acme.id, collectionId: task.id, ref: 'T-2', title: 'T-2 second' });
  await v.store.createItem({ workspaceId: acme.id, collectionId: bug.id, ref: 'T-3', title: 'T-3 third' });
  await v.store.createItem({ workspaceId: acme.id, collectionId: bug.id, ref: 'T-4', title: `T-4 ${HOSTILE}` });
  const beta = await v.store.createWorkspace({ slug: 'beta' });
  const bt = await v.store.createCollection({ workspaceId: beta.id, slug: 'task' });
  await v.store.createItem({ workspaceId: beta.id, collectionId: bt.id, ref: 'B-1', title: 'B-1 beta secret' });
  await v.worker({ concurrency: 1 }).runUntilIdle();
  app = await createApiServer(v, { logger: logs.logger });
});
afterAll(async () => {
  await app?.close();
  await v?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('reader.surfaced', () => {
  it('sorts highest first, filters by collection, key and currency, pages, and counts the total', async () => {
    const all = (await v.reader.surfaced('triage', { workspace: 'acme' }))!;
    expect(all.rows.map((r) => [r.ref, r.key, r.p])).toEqual([
      ['T-1', 'blocked', 0.95],
      ['T-4', 'urgent', 0.9],
      ['T-2', 'blocked', 0.8],
      ['T-3', 'blocked', 0.6],
    ]);
    expect(all).toMatchObject({ total: 4, keys: ['blocked', 'urgent'], collections: ['bug', 'task'], failing: false });
    expect(all.rows[0]).toMatchObject({
      title: 'T-1 first',
      collection: 'task',
      current: true,
      staleReason: null,
      source: 'model',
      threshold: 0.5,
    });
    expect(all.rows[1].title).toBe(`T-4 ${HOSTILE}`);
    expect(
      (await v.reader.surfaced('triage', { workspace: 'acme', collection: 'bug' }))!.rows.map((r) => r.ref),
    ).toEqual(['T-4', 'T-3']);
    expect((await v.reader.surfaced('triage', { workspace: 'acme', key: 'urgent' }))!.rows.map((r) => r.ref)).toEqual([
      'T-4',
    ]);
    const page2 = (await v.reader.surfaced('triage', { workspace: 'acme', offset: 2, limit: 1 }))!;
    expect(page2).toMatchObject({ total: 4, rows: [{ ref: 'T-2' }] });
    expect((await v.reader.surfaced('triage', { workspace: 'acme', currency: 'stale' }))!.total).toBe(0);
    await expect(v.reader.surfaced('triage', { workspace: 'acme', limit: 0 })).rejects.toMatchObject({
      code: 'invalid_input',
    });
    await expect(v.reader.surfaced('triage', { workspace: 'acme', offset: -1 })).rejects.toMatchObject({
      code: 'invalid_input',
    });
    expect(await v.reader.surfaced('triage', { workspace: 'nope' })).toBeNull();
    expect(await v.reader.surfaced('nope', { workspace: 'acme' })).toBeNull();
  });

  it('marks a stale key while its re-ask is owed, and a person\u2019s value as human', async () => {
    const ws = (await v.store.getWorkspaceBySlug('acme'))!;
    const t2 = (await v.store.getItemByRef(ws.id, 'T-2'))!;
    await v.store.updateItem(t2.id, { title: 'T-2 second, edited' });
    const stale = (await v.reader.surfaced('triage', { workspace: 'acme', currency: 'stale' }))!;
    expect(stale.rows).toEqual([
      expect.objectContaining({ ref: 'T-2', current: false, staleReason: 'state_changed', changedParts: ['title'] }),
    ]);
    expect(
      (await v.reader.surfaced('triage', { workspace: 'acme', currency: 'current' }))!.rows.map((r) => r.ref),
    ).not.toContain('T-2');
    await v.store.recordVerdict({
      workspace: 'acme',
      ref: 'T-3',
      key: 'blocked',
      verdict: 'value',
      value: 0.7,
      author: 'ana',
    });
    expect((await v.reader.surfaced('triage', { workspace: 'acme', collection: 'bug', key: 'blocked' }))!.rows).toEqual(
      [expect.objectContaining({ ref: 'T-3', p: 0.7, source: 'human' })],
    );
    await v.worker({ concurrency: 1 }).runUntilIdle();
  });
});

describe('reader.history', () => {
  it('lists evaluations newest first with the parts that moved since the previous one', async () => {
    const h = (await v.reader.history('T-2', { workspace: 'acme' }))!;
    expect(h.entries).toHaveLength(2);
    expect(h.entries[0]).toMatchObject({ questionSet: 'triage', changedParts: ['title'], provider: 'fake' });
    expect(h.entries[1]).toMatchObject({ changedParts: null });
    expect(h.entries[0].answers.map((a) => a.questionKey)).toEqual(['blocked', 'urgent']);
    expect(h.entries[0].stateHash).not.toBe(h.entries[1].stateHash);
    expect(await v.reader.history('B-1', { workspace: 'acme' })).toBeNull(); // another workspace's ref
  });
});

describe('jobs, queue and spend', () => {
  it('retries and drops one workspace\u2019s jobs only; a batched retry finds none here; refuses an unfiltered drop', async () => {
    const ws = (await v.store.getWorkspaceBySlug('acme'))!;
    const t1 = (await v.store.getItemByRef(ws.id, 'T-1'))!;
    await v.store.updateItem(t1.id, { title: 'T-1 edited' });
    const beta = (await v.store.getWorkspaceBySlug('beta'))!;
    const b1 = (await v.store.getItemByRef(beta.id, 'B-1'))!;
    await v.store.updateItem(b1.id, { title: 'B-1 edited' });
    expect((await v.jobs.list({ workspace: 'acme' })).map((j) => j.ref)).toEqual(['T-1']);
    expect(await v.jobs.retry({ workspace: 'acme', state: 'owed' })).toBe(1);
    // DESIGN §7.4: batched jobs can be retried (taken out of their batch); none is batched here.
    expect(await v.jobs.retry({ workspace: 'acme', state: 'batched' })).toBe(0);
    await expect(v.jobs.drop({ workspace: 'acme' })).rejects.toMatchObject({ code: 'invalid_input' });
    expect(await v.jobs.drop({ workspace: 'acme', ref: 'B-1' })).toBe(0); // not this workspace's ref
    expect(await v.jobs.drop({ workspace: 'acme', set: 'triage' })).toBe(1);
    expect(await v.jobs.list({ workspace: 'acme' })).toEqual([]);
    expect((await v.jobs.list({ workspace: 'beta' })).map((j) => j.ref)).toEqual(['B-1']); // untouched
    const q = (await v.reader.queue({ workspace: 'beta' }))!;
    expect(q.bySet).toEqual([expect.objectContaining({ questionSet: 'triage', due: 1, batched: 0 })]);
    expect((await v.reader.queue({ workspace: 'acme' }))!.bySet).toEqual([]);
    expect(await v.reader.queue({ workspace: 'nope' })).toBeNull();
  });

  it('reads spend per hour and model with totals, and the smallest daily cap of the live workers', async () => {
    // A day's hourly buckets span two dates: each needs its own label, or today's hour is drawn on yesterday's.
    const day = await v.reader.spend({ windowMs: 86_400_000 });
    expect(new Set(day.buckets.map((b) => bucketLabel(b, 'hour'))).size).toBe(day.buckets.length);
    expect(bucketLabel(day.buckets[day.buckets.length - 1], 'hour')).toBe(
      bucketLabel(day.points[day.points.length - 1].at, 'hour'),
    );
    const s = await v.reader.spend({ windowMs: 3 * 3_600_000 });
    expect(s.bucket).toBe('hour');
    expect(s.buckets.length).toBeGreaterThanOrEqual(3);
    const calls = s.points.reduce((a, p) => a + p.calls, 0);
    expect(calls).toBe(s.totals.calls);
    expect(calls).toBeGreaterThan(0);
    expect(s.points.every((p) => p.model.startsWith('fake:'))).toBe(true);
    expect(s.dailyCap.capTokens).toBeNull();
    // A running worker's heartbeat carries its cap.
    const w = v.worker({ concurrency: 1, dailyTokenCap: 5_000_000 });
    await w.start();
    try {
      const capped = await v.reader.spend({ bucket: 'day', windowMs: 86_400_000 });
      expect(capped.dailyCap.capTokens).toBe(5_000_000);
      expect(capped.dailyCap.usedTokens).toBeGreaterThan(0);
      expect(capped.bucket).toBe('day');
    } finally {
      await w.stop();
    }
  });

  it('reads jobs per minute by outcome as the workers recorded them, through the library and GET /v1/jobs/throughput', async () => {
    const t = await v.reader.throughput();
    expect(t.minutes).toHaveLength(60);
    expect(t.minutes.slice(1).every((m, i) => m.startAt - t.minutes[i].startAt === 60_000)).toBe(true);
    expect(t.minutes[59].startAt).toBe(Math.floor(Date.now() / 60_000) * 60_000);
    // Every job of this file so far completed: the first drain's five and T-2's re-ask after its edit.
    expect(t.outcomes).toEqual(['complete']);
    expect(t.totals).toEqual({ complete: 6 });
    expect(t.minutes.reduce((a, m) => a + (m.counts.complete ?? 0), 0)).toBe(6);
    await expect(v.reader.throughput({ minutes: 0 })).rejects.toMatchObject({
      code: 'invalid_input',
      param: 'minutes',
    });

    const admin = (await v.tokens.create({ workspace: 'acme', role: 'admin' })).token;
    const get = (url: string, token = admin) =>
      app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
    const r = await get('/v1/jobs/throughput?minutes=5');
    expect(r.statusCode).toBe(200);
    const body = r.json<{ minutes: Array<{ startAt: string; counts: Record<string, number> }>; totals: object }>();
    expect(body.minutes).toHaveLength(5);
    expect(body.minutes[4].startAt).toBe(new Date(t.minutes[59].startAt).toISOString());
    expect(body.totals).toEqual(Object.fromEntries(Object.entries(t.totals).map(([k]) => [k, expect.any(Number)])));
    const bad = await get('/v1/jobs/throughput?minutes=1441');
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ param: 'minutes' });
    const reader = (await v.tokens.create({ workspace: 'acme', role: 'read' })).token;
    expect((await get('/v1/jobs/throughput', reader)).statusCode).toBe(403);
  });

  it('records every eval as the set\u2019s latest result, read by quality', async () => {
    expect((await v.reader.quality({ workspace: 'acme' }))!.sets).toEqual([
      { set: 'triage', eval: null, flapping: [] },
    ]);
    await v.eval({ workspace: 'acme', gold: 'verdicts', stored: true });
    const q = (await v.reader.quality({ workspace: 'acme' }))!;
    expect(q.sets[0].eval).toMatchObject({
      set: 'triage',
      goldSource: 'verdicts in acme',
      columns: [{ mode: 'stored', provider: 'fake', set: { set: 'triage', n: 1 } }],
    });
    expect(q.sets[0].eval!.columns[0].set.bins).toHaveLength(10);
    expect((await v.reader.quality({ workspace: 'beta' }))!.sets[0].eval).toBeNull(); // per workspace
  });
});

describe('the dashboard over HTTP', () => {
  let cookie = '';
  let csrf = '';
  const form = (o: Record<string, string>) => new URLSearchParams(o).toString();
  const post = (url: string, body: Record<string, string>, c = cookie) =>
    app.inject({
      method: 'POST',
      url,
      headers: { cookie: c, 'content-type': 'application/x-www-form-urlencoded' },
      payload: form(body),
    });

  beforeAll(async () => {
    const login = await app.inject({ method: 'GET', url: '/ui/login' });
    const secret = login.cookies.find((c) => c.name === 'verdict_csrf')!;
    csrf = /name="_csrf" value="([^"]+)"/.exec(login.body)![1];
    const token = (await v.tokens.create({ workspace: 'acme', role: 'read', createWorkspace: true })).token;
    const r = await post('/ui/login', { _csrf: csrf, token }, `verdict_csrf=${secret.value}`);
    expect(r.statusCode).toBe(303);
    const session = r.cookies.find((c) => c.name === 'verdict_session')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/ui', maxAge: 43_200 });
    cookie = `verdict_csrf=${secret.value}; verdict_session=${session.value}`;
  });

  it('escapes tracker text, sends a CSP that runs only the dashboard\u2019s own script file, and shows only the token\u2019s workspace', async () => {
    const flags = await app.inject({ method: 'GET', url: '/ui/flags', headers: { cookie } });
    expect(flags.statusCode).toBe(200);
    expect(flags.body).toContain(
      'T-4 &lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;',
    );
    const item = await app.inject({ method: 'GET', url: '/ui/items/T-4', headers: { cookie } });
    expect(item.body).toContain('&lt;script&gt;alert(1)');
    expect(item.statusCode).toBe(200);
    expect(flags.headers['content-security-policy']).toContain("default-src 'none'");
    // Scripts only from the dashboard itself: no inline script, no other origin.
    expect(flags.headers['content-security-policy']).toContain("script-src 'self';");
    expect(flags.headers['content-security-policy']).not.toMatch(
      /unsafe-inline[^;]*;[^;]*$|script-src[^;]*(unsafe|http|\*)/,
    );
    expect(flags.body).toContain('<script src="/ui/assets/live.js" defer></script>');
    expect((await app.inject({ method: 'GET', url: '/ui/items/B-1', headers: { cookie } })).statusCode).toBe(404);
    expect(flags.body).not.toContain('B-1');
    for (const b of [flags.body, item.body]) expect(b).not.toMatch(/<script>|<img src=x/);
  });

  it('the html template escapes every value and inserts only trusted markup as is', () => {
    expect(html`<p title="${HOSTILE}">${HOSTILE}</p>`.text).toBe(
      '<p title="&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;">&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;</p>',
    );
    expect(html`${trusted('<svg></svg>')}${[1, null, false, 'a&b']}`.text).toBe('<svg></svg>1a&amp;b');
  });

  it('refuses a POST without the CSRF token, a read token\u2019s verdict, and anonymous pages', async () => {
    expect((await post('/ui/items/T-1/verdicts', { key: 'blocked', verdict: 'agree' })).statusCode).toBe(403);
    const refused = await post('/ui/items/T-1/verdicts', { _csrf: csrf, key: 'blocked', verdict: 'agree' });
    expect(refused.statusCode).toBe(403);
    expect(refused.body).toContain('role write');
    expect((await v.store.listVerdicts({ workspace: 'acme', ref: 'T-1' })).length).toBe(0);
    const anon = await app.inject({ method: 'GET', url: '/ui/queue' });
    expect(anon).toMatchObject({ statusCode: 303, headers: { location: '/ui/login' } });
    // The /v1 API still takes JSON only: the form parser lives in the dashboard's scope.
    const writer = (await v.tokens.create({ workspace: 'acme', role: 'write', createWorkspace: true })).token;
    const v1 = await app.inject({
      method: 'POST',
      url: '/v1/items',
      headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'a=1',
    });
    expect(v1.statusCode).toBe(415);
  });

  it('answers a refused verdict with the library\u2019s reason on the item page, and records nothing', async () => {
    const login = await app.inject({ method: 'GET', url: '/ui/login' });
    const secret = login.cookies.find((c) => c.name === 'verdict_csrf')!;
    const c0 = /name="_csrf" value="([^"]+)"/.exec(login.body)![1];
    const token = (await v.tokens.create({ workspace: 'acme', role: 'write', name: 'triage', createWorkspace: true }))
      .token;
    const r = await post('/ui/login', { _csrf: c0, token }, `verdict_csrf=${secret.value}`);
    const writer = `verdict_csrf=${secret.value}; verdict_session=${r.cookies.find((c) => c.name === 'verdict_session')!.value}`;
    const before = (await v.store.listVerdicts({ workspace: 'acme', ref: 'T-2' })).length;
    const bad = await post(
      '/ui/items/T-2/verdicts',
      { _csrf: c0, set: 'triage', key: 'blocked', verdict: 'value', value: 'perhaps' },
      writer,
    );
    expect(bad.statusCode).toBe(400);
    const reason = /That verdict was refused: ([^<]*)</.exec(bad.body)?.[1] ?? '';
    // The library's own words for this value, not a list of possible causes.
    const lib = String(
      await v.store
        .recordVerdict({
          workspace: 'acme',
          ref: 'T-2',
          set: 'triage',
          key: 'blocked',
          verdict: 'value',
          value: 'perhaps',
          author: 'x',
        })
        .catch((e: Error) => e.message),
    );
    expect(reason).not.toBe('');
    expect(reason).toBe(
      lib
        .replace(/&/g, '&amp;')
        .replace(/</g, '&lt;')
        .replace(/>/g, '&gt;')
        .replace(/"/g, '&quot;')
        .replace(/'/g, '&#39;'),
    );
    expect(bad.body).toContain('<h1><bdi>T-2</bdi>');
    const kind = await post(
      '/ui/items/T-2/verdicts',
      { _csrf: c0, set: 'triage', key: 'blocked', verdict: 'shrug' },
      writer,
    );
    expect(kind.statusCode).toBe(400);
    expect(kind.body).toContain('verdict must be agree, disagree, value or withdrawn');
    expect((await v.store.listVerdicts({ workspace: 'acme', ref: 'T-2' })).length).toBe(before);
  });

  it('marks the session cookie Secure behind an https proxy, clamps pages, and shows only known notices', async () => {
    const login = await app.inject({ method: 'GET', url: '/ui/login' });
    const secret = login.cookies.find((c) => c.name === 'verdict_csrf')!;
    const token = (await v.tokens.create({ workspace: 'acme', role: 'read', createWorkspace: true })).token;
    const r = await app.inject({
      method: 'POST',
      url: '/ui/login',
      headers: {
        cookie: `verdict_csrf=${secret.value}`,
        'content-type': 'application/x-www-form-urlencoded',
        'x-forwarded-proto': 'https',
      },
      payload: form({ _csrf: /name="_csrf" value="([^"]+)"/.exec(login.body)![1], token }),
    });
    expect(r.cookies.find((c) => c.name === 'verdict_session')).toMatchObject({ secure: true, httpOnly: true });
    const far = await app.inject({ method: 'GET', url: '/ui/flags?page=999', headers: { cookie } });
    expect(far.body).toContain('page 1 of 1');
    expect(far.body).toContain('<td class="num">1</td>');
    for (const code of ['constructor', '__proto__', 'toString'])
      expect(
        (await app.inject({ method: 'GET', url: `/ui/flags?notice=${code}`, headers: { cookie } })).body,
      ).not.toContain('class="notice');
    expect(
      (await app.inject({ method: 'GET', url: '/ui/flags?notice=jobs-retried', headers: { cookie } })).body,
    ).toContain('class="notice"');
    const doc = (await app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as {
      paths: Record<string, unknown>;
    };
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/ui'))).toBe(false);
  });

  it('keeps the session on the server: the cookie is a random id stored hashed and useless against /v1; logout and revocation end it, a replayed cookie gets the login page', async () => {
    const login = await app.inject({ method: 'GET', url: '/ui/login' });
    const secret = `verdict_csrf=${login.cookies.find((c) => c.name === 'verdict_csrf')!.value}`;
    const c0 = /name="_csrf" value="([^"]+)"/.exec(login.body)![1];
    const created = await v.tokens.create({ workspace: 'acme', role: 'write', createWorkspace: true });
    const logIn = async () => {
      const r = await post('/ui/login', { _csrf: c0, token: created.token }, secret);
      expect(r.statusCode).toBe(303);
      return r.cookies.find((c) => c.name === 'verdict_session')!.value;
    };
    const sid = await logIn();
    expect(sid).toMatch(/^vds_[A-Za-z0-9_-]{43}$/);
    expect(sid).not.toContain(created.token.slice(4));
    const page = (value: string) =>
      app.inject({ method: 'GET', url: '/ui/flags', headers: { cookie: `${secret}; verdict_session=${value}` } });
    expect((await page(sid)).statusCode).toBe(200);
    // The token itself is no session, and the session id is no API credential.
    expect(await page(created.token)).toMatchObject({ statusCode: 303, headers: { location: '/ui/login' } });
    expect(
      (await app.inject({ method: 'GET', url: '/v1/items', headers: { authorization: `Bearer ${sid}` } })).statusCode,
    ).toBe(401);
    expect(
      (await app.inject({ method: 'GET', url: '/v1/items', headers: { authorization: `Bearer ${created.token}` } }))
        .statusCode,
    ).toBe(200);
    // Only the id's SHA-256 is in the database.
    const db = new Database(join(dir, 'v.db'), { readonly: true });
    const stored = JSON.stringify(db.prepare('SELECT * FROM dashboard_sessions').all());
    db.close();
    expect(stored).toContain(createHash('sha256').update(sid).digest('hex'));
    expect(stored).not.toContain(sid.slice(4));
    // Logout ends the session on the server: the old cookie replayed gets the login page.
    const out = await post('/ui/logout', { _csrf: c0 }, `${secret}; verdict_session=${sid}`);
    expect(out).toMatchObject({ statusCode: 303, headers: { location: '/ui/login' } });
    expect(await page(sid)).toMatchObject({ statusCode: 303, headers: { location: '/ui/login' } });
    expect(
      (
        await post(
          '/ui/items/T-1/verdicts',
          { _csrf: c0, set: 'triage', key: 'blocked', verdict: 'agree' },
          `${secret}; verdict_session=${sid}`,
        )
      ).statusCode,
    ).toBe(401);
    // Revoking the token ends its other sessions too.
    const again = await logIn();
    expect((await page(again)).statusCode).toBe(200);
    expect(await v.tokens.revoke(created.row.id)).toBe(true);
    expect(await page(again)).toMatchObject({ statusCode: 303, headers: { location: '/ui/login' } });
  });

  it('logs no item text, token or form field', () => {
    const text = logs.lines.join('\n');
    expect(text).toContain('/ui/flags');
    expect(text).not.toContain('T-4 ');
    expect(text).not.toContain('alert(');
    expect(text).not.toContain('vdt_');
    expect(text).not.toContain(csrf);
  });
});

describe('GET / with the dashboard on', () => {
  it('redirects to /ui; with the dashboard off it stays a 404', async () => {
    const r = await app.inject({ method: 'GET', url: '/' });
    expect(r.statusCode).toBe(302);
    expect(r.headers.location).toBe('/ui');
    const off = await createApiServer(v, { logger: logs.logger, dashboard: false });
    try {
      expect((await off.inject({ method: 'GET', url: '/' })).statusCode).toBe(404);
    } finally {
      await off.close();
    }
  });
});
