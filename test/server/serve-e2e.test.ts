import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../harness/cli-in-process.js';
import { spawnCli, waitFor, type Spawned } from '../harness/cli-process.js';
import { EVENT_SIGNATURE_HEADER, verifyEventSignature } from '../../src/integrations/events/signature.js';

/**
 * Issue 14's end to end, with real processes (the built CLI) and real sockets: `verdict serve
 * --worker` with the fake provider; a token made by `verdict tokens create`; an item and a comment
 * POSTed over HTTP, whose decision appears at GET /v1/items/{ref}; a signed GitHub `issues`
 * webhook that creates #7, then an `edited` one that makes its answers stale until the worker
 * re-asks; and an outbound receiver (a node:http server here) that gets `decision.surfaced`,
 * signed with X-Verdict-Signature-256.
 *
 * The set `e2e` has threshold 0 (every noul surfaces, so the fake provider's answer always makes
 * an event), a 1.5 s quiet period (long enough to read the stale state, short for the test) and
 * no re-ask debounce.
 */

const WEBHOOK_SECRET = 'gh-e2e-secret';
const EVENT_SECRET = 'ev-e2e-secret';
let dir: string;
let serve: Spawned;
let base: string;
let token: string;
let receiver: Server;
const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];

const CONFIG = `sets:
  - name: e2e
    collections: [task, github]
    eligible: [notSystem, notTerminal]
    threshold: 0
    quietPeriodMs: 1500
    reaskDebounceMs: 0
    questions:
      blocked:
        kind: noul
        instructions: The item says it is blocked on something outside the team.
`;

const api = async (method: string, path: string, body?: unknown) => {
  const r = await fetch(base + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
};

const hook = async (event: string, delivery: string, payload: unknown, secret = WEBHOOK_SECRET) => {
  const body = JSON.stringify(payload);
  const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  const r = await fetch(`${base}/hooks/github`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      'x-github-delivery': delivery,
      'x-hub-signature-256': signature,
    },
    body,
  });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
};

const issue = (title: string, body: string) => ({
  number: 7,
  title,
  body,
  state: 'open',
  state_reason: null,
  labels: [{ name: 'bug' }],
  user: { login: 'octocat' },
  milestone: null,
  created_at: '2026-11-30T09:00:00Z',
  updated_at: '2026-11-30T09:00:00Z',
});

const e2eDecisions = async (ref: string) =>
  ((await api('GET', `/v1/items/${encodeURIComponent(ref)}`)).json.decisions ?? []).filter(
    (d: { questionSet: string }) => d.questionSet === 'e2e',
  );

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-serve-'));
  writeFileSync(join(dir, 'sets.yaml'), CONFIG);
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const env = {
    VERDICT_DATABASE_URL: join(dir, 'v.db'),
    VERDICT_PROVIDER: 'fake',
    VERDICT_CONFIG: join(dir, 'sets.yaml'),
    VERDICT_TICK_MS: '100',
    VERDICT_HTTP_PORT: '0',
    VERDICT_GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET,
    VERDICT_GITHUB_WORKSPACE: 'acme',
    VERDICT_EVENT_URLS: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/verdict-events`,
    VERDICT_EVENT_SECRET: EVENT_SECRET,
  };
  token = // In process: the token is set-up; the served process is what is tested.
    (
      await runCli(['tokens', 'create', '--workspace', 'acme', '--create-workspace', '--role', 'admin'], env)
    ).stdout.trim();
  expect(token).toMatch(/^vdt_[A-Za-z0-9_-]{43}$/);
  serve = spawnCli(['serve', '--worker'], env);
  base = (await waitFor(() => /listening on (http:\/\/\S+)/.exec(serve.stdout())?.[1], 30_000))!;
}, 90_000);

afterAll(async () => {
  if (serve) {
    serve.child.kill('SIGTERM');
    expect((await serve.exited).code).toBe(0);
  }
  await new Promise<void>((r) => receiver?.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

describe('verdict serve --worker', () => {
  it('an item and a comment POSTed over HTTP get their decision, read at GET /v1/items/{ref}', async () => {
    expect((await api('POST', '/v1/collections', { slug: 'task' })).status).toBe(201);
    const created = await api('POST', '/v1/items', {
      collection: 'task',
      ref: 'T-1',
      title: 'Upgrade the build image',
      content: 'Waiting on the platform team.',
    });
    expect(created.status).toBe(201);
    expect(created.json.write.owed).toBeGreaterThan(0);
    expect(
      (await api('POST', '/v1/items/T-1/comments', { author: 'ann', content: 'Still blocked on their review.' }))
        .status,
    ).toBe(201);
    const decisions = await waitFor(
      async () => {
        const d = await e2eDecisions('T-1');
        return d.length > 0 && d.every((x: { current: boolean }) => x.current) ? d : null;
      },
      30_000,
      200,
    );
    expect(decisions[0]).toMatchObject({
      questionKey: 'blocked',
      kind: 'noul',
      provider: 'fake',
      current: true,
      staleReason: null,
      surfacing: 'surfaced',
    });
  }, 60_000);

  it('a signed issues webhook creates #7; an edited one makes its answer stale, then the worker re-asks it', async () => {
    const opened = await hook('issues', 'delivery-1', {
      action: 'opened',
      issue: issue('Flaky upload test', 'Fails one run in ten.'),
      repository: { full_name: 'acme/widgets' },
    });
    expect(opened).toMatchObject({ status: 200, json: { status: 'applied', ref: '#7' } });
    const first = await waitFor(
      async () => {
        const d = await e2eDecisions('#7');
        return d.length && d[0].current ? d[0] : null;
      },
      30_000,
      200,
    );

    const edited = await hook('issues', 'delivery-2', {
      action: 'edited',
      issue: issue('Flaky upload test', 'Fails one run in ten; blocked on the storage vendor.'),
      changes: { body: { from: 'Fails one run in ten.' } },
      repository: { full_name: 'acme/widgets' },
    });
    expect(edited).toMatchObject({ status: 200, json: { status: 'applied' } });
    expect(edited.json.owed).toBeGreaterThan(0);
    // Within the quiet period the old answer reads stale, with the part that moved.
    const stale = (await e2eDecisions('#7'))[0];
    expect(stale).toMatchObject({ rowId: first.rowId, current: false, staleReason: 'state_changed' });
    expect(stale.changedParts).toContain('body');
    // Then the worker re-asks: a new current row.
    const again = await waitFor(
      async () => {
        const d = (await e2eDecisions('#7'))[0];
        return d.current && d.rowId !== first.rowId ? d : null;
      },
      30_000,
      200,
    );
    expect(Date.parse(again.evaluatedAt)).toBeGreaterThanOrEqual(Date.parse(first.evaluatedAt)); // ISO 8601 at /v1

    // A redelivery of the edit is a no-op.
    const replay = await hook('issues', 'delivery-2', {
      action: 'edited',
      issue: issue('Flaky upload test', 'Fails one run in ten; blocked on the storage vendor.'),
      repository: { full_name: 'acme/widgets' },
    });
    expect(replay).toMatchObject({ status: 200, json: { status: 'duplicate', owed: 0 } });
    // A wrong secret is refused.
    expect(
      (
        await hook(
          'issues',
          'delivery-3',
          { action: 'edited', issue: issue('x', 'y'), repository: { full_name: 'acme/widgets' } },
          'wrong',
        )
      ).status,
    ).toBe(401);
  }, 90_000);

  it('the outbound receiver gets decision.surfaced for T-1 and #7, each signed over its body', async () => {
    await waitFor(
      () => {
        const refs = received
          .map((r) => JSON.parse(r.body))
          .filter((e) => e.type === 'decision.surfaced')
          .map((e) => e.item.ref);
        return refs.includes('T-1') && refs.includes('#7');
      },
      30_000,
      100,
    );
    for (const r of received) {
      const sig = r.headers[EVENT_SIGNATURE_HEADER] as string;
      expect(verifyEventSignature(EVENT_SECRET, r.body, sig)).toBe(true);
      expect(verifyEventSignature('not-the-secret', r.body, sig)).toBe(false);
      const e = JSON.parse(r.body);
      expect(e).toMatchObject({ set: 'e2e', key: 'blocked' });
      expect(typeof e.state_hash).toBe('string');
      expect(r.body).not.toContain('blocked on the storage vendor'); // no item text
      expect(r.body).not.toContain('Upgrade the build image');
    }
    // #7 surfaced once: its re-ask kept it surfaced, which is no transition.
    const sevens = received
      .map((r) => JSON.parse(r.body))
      .filter((e) => e.item.ref === '#7' && e.type === 'decision.surfaced');
    expect(sevens).toHaveLength(1);
  }, 60_000);

  it('healthz reports the worker and metrics count the requests', async () => {
    const h = await fetch(`${base}/healthz`);
    expect(h.status).toBe(200);
    expect(await h.json()).toMatchObject({ status: 'ok' });
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(m).toMatch(/verdict_http_requests_total\{route="\/v1\/items",method="POST",status="201"\} 1/);
    expect(m).toMatch(/verdict_jobs_claimed_total\{set="e2e"\} [1-9]/); // the worker's registry is merged in
  });
});
