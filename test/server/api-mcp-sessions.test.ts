import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createApiServer, createVerdict, type Verdict } from '../../src/index.js';

/**
 * `/mcp` session limits (src/mcp/mcp-http.ts), in process with short limits: a token's sessions
 * past its cap close the least recently used, the server's cap answers 503, an idle session is
 * closed. Each opened with a raw `initialize` POST, as any client sends it. Idle time is the
 * server's injected clock, moved by the tests: nothing here waits on real time.
 */

const clock = new ManualClock();

let dir: string;
let v: Verdict;
let app: FastifyInstance;
let base: string;
const tok: string[] = [];

const headers = (token: string, sid?: string) => ({
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: `Bearer ${token}`,
  'mcp-protocol-version': '2025-06-18',
  ...(sid ? { 'mcp-session-id': sid } : {}),
});
async function open(token: string): Promise<Response> {
  const init = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
  };
  return fetch(`${base}/mcp`, { method: 'POST', headers: headers(token), body: JSON.stringify(init) });
}
async function sessionOf(token: string): Promise<string> {
  const r = await open(token);
  expect(r.status).toBe(200);
  return r.headers.get('mcp-session-id')!;
}
async function ping(token: string, sid: string): Promise<number> {
  const r = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: headers(token, sid),
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }),
  });
  await r.text();
  return r.status;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'verdict-mcp-sessions-'));
  v = await createVerdict({ database: join(dir, 'v.db'), provider: 'fake' });
  for (const ws of ['a', 'b', 'c'])
    tok.push((await v.tokens.create({ workspace: ws, role: 'read', createWorkspace: true })).token);
  app = await createApiServer(v, {
    dashboard: false,
    mcp: { sessionsPerToken: 2, sessionsMax: 3, sessionIdleMs: 300, clock },
  });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  await app?.close();
  await v?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('/mcp sessions', () => {
  it('a token past its cap loses its least recently used session; the server past its cap answers 503', async () => {
    const first = await sessionOf(tok[0]);
    const second = await sessionOf(tok[0]);
    expect(await ping(tok[0], first)).toBe(200); // now `second` is the least recently used
    const third = await sessionOf(tok[0]);
    expect(await ping(tok[0], second)).toBe(404);
    expect(await ping(tok[0], first)).toBe(200);
    expect(await ping(tok[0], third)).toBe(200);
    await sessionOf(tok[1]); // three sessions in all: the server's cap
    const full = await open(tok[2]);
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('60');
    // A token at its own cap still opens one: its oldest makes the room.
    expect((await open(tok[0])).status).toBe(200);
  });

  it('closes a session left idle past the idle limit, and keeps one in use', async () => {
    clock.advance(400); // the sessions above go idle: the next request closes them first
    const idle = await sessionOf(tok[1]);
    const busy = await sessionOf(tok[2]);
    // `busy` is used every 100 ms for twice the idle limit; `idle` is left alone (a ping would refresh it).
    for (let t = 0; t < 600; t += 100) {
      clock.advance(100);
      expect(await ping(tok[2], busy)).toBe(200);
    }
    expect(await ping(tok[1], idle)).toBe(404);
    expect(await ping(tok[2], busy)).toBe(200);
  });

  it('is not served with `mcp: false` (serve --no-mcp)', async () => {
    const off = await createApiServer(v, { dashboard: false, mcp: false });
    try {
      const r = await off.inject({ method: 'POST', url: '/mcp', headers: headers(tok[0]), payload: {} });
      expect(r.statusCode).toBe(404);
    } finally {
      await off.close();
    }
  });

  it('refuses JSON-RPC batches, an oversize clientInfo, and costs a token no session for an initialize the transport refuses', async () => {
    const sid = await sessionOf(tok[1]);
    const batch = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: headers(tok[1], sid),
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'ping' },
        { jsonrpc: '2.0', id: 2, method: 'ping' },
      ]),
    });
    expect(batch.status).toBe(400);
    expect(await batch.text()).toMatch(/batches are not accepted/);
    const big = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'x'.repeat(5_000), version: '1' },
      },
    };
    const refused = await fetch(`${base}/mcp`, { method: 'POST', headers: headers(tok[1]), body: JSON.stringify(big) });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/clientInfo is limited/);
    // (after the idle sweep above) tok[1] holds `sid` and one more (cap 2): an initialize without the Accept the transport needs is a 406 and closes neither.
    const second = await sessionOf(tok[1]);
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
    };
    const noAccept = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { ...headers(tok[1]), accept: 'text/html' },
      body: JSON.stringify(init),
    });
    expect(noAccept.status).toBe(406);
    expect(await ping(tok[1], sid)).toBe(200);
    expect(await ping(tok[1], second)).toBe(200);
  });
});
