import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';

/**
 * The fake Anthropic server's Message Batches endpoints on the wire (STACK §3): the shapes the SDK
 * reads and the 400s the real API sends. The provider's use of them is in anthropic.batches.test.ts.
 */

let server: FakeAnthropicServer;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.reset();
  server.batches.clear();
  server.batches.maxRequests = 100_000;
  server.batches.maxBodyBytes = 256_000_000;
  server.batches.endAfterRetrieves = 1;
});

const params = (content = 'state') => ({
  model: 'claude-haiku-5-5',
  max_tokens: 100,
  messages: [{ role: 'user', content }],
  output_config: {
    format: {
      type: 'json_schema',
      schema: {
        type: 'object',
        properties: { q1: { type: 'object', properties: { probability: { type: 'number' } } } },
      },
    },
  },
});

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; type: string | null; body: any; text: string }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-api-key': 'test' },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, type: res.headers.get('content-type'), body: parsed, text };
}

const create = (requests: unknown) => call('POST', '/v1/messages/batches', { requests });

describe('fake Anthropic server: creating a batch', () => {
  it('answers with a message_batch object in progress, expiring 24 h after creation', async () => {
    const r = await create([
      { custom_id: 'a', params: params() },
      { custom_id: 'b', params: params() },
    ]);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      type: 'message_batch',
      processing_status: 'in_progress',
      request_counts: { processing: 2, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
      ended_at: null,
      cancel_initiated_at: null,
      archived_at: null,
      results_url: null,
    });
    expect(r.body.id).toMatch(/^msgbatch_[A-Za-z0-9]+$/);
    expect(Date.parse(r.body.expires_at) - Date.parse(r.body.created_at)).toBe(24 * 3600 * 1000);
    expect(server.batches.get(r.body.id)?.requests.map((q) => q.custom_id)).toEqual(['a', 'b']);
  });

  it.each([
    ['requests missing', { nope: [] }, /requests: Field required/],
    ['no requests', { requests: [] }, /at least 1 item/],
    [
      'a bad custom id',
      { requests: [{ custom_id: 'a b', params: params() }] },
      /requests\.0\.custom_id: String should match pattern/,
    ],
    ['a custom id of 65 characters', { requests: [{ custom_id: 'x'.repeat(65), params: params() }] }, /custom_id/],
    ['a custom id that is not a string', { requests: [{ custom_id: 7, params: params() }] }, /custom_id/],
    [
      'a repeated custom id',
      {
        requests: [
          { custom_id: 'a', params: params() },
          { custom_id: 'a', params: params() },
        ],
      },
      /requests\.1\.custom_id: Duplicate/,
    ],
    ['a request without params', { requests: [{ custom_id: 'a' }] }, /requests\.0\.params/],
  ])('refuses %s with a 400 invalid_request_error, creating nothing', async (_, body, message) => {
    const r = await call('POST', '/v1/messages/batches', body);
    expect(r.status).toBe(400);
    expect(r.body.error.type).toBe('invalid_request_error');
    expect(r.body.error.message).toMatch(message);
    expect(server.batches.batches).toHaveLength(0);
  });

  it('refuses more requests than the limit with a 400 (100 000 by default)', async () => {
    expect(new FakeAnthropicServer().batches.maxRequests).toBe(100_000);
    server.batches.maxRequests = 2;
    const r = await create(['a', 'b', 'c'].map((custom_id) => ({ custom_id, params: params() })));
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/at most 2 items/);
    expect((await create(['a', 'b'].map((custom_id) => ({ custom_id, params: params() })))).status).toBe(200);
  });

  it('refuses a body over the byte limit with a 413 request_too_large (256 MB by default)', async () => {
    expect(new FakeAnthropicServer().batches.maxBodyBytes).toBe(256_000_000);
    const body = JSON.stringify({ requests: [{ custom_id: 'a', params: params() }] });
    server.batches.maxBodyBytes = Buffer.byteLength(body) - 1;
    const r = await call('POST', '/v1/messages/batches', body);
    expect(r.status).toBe(413);
    expect(r.body.error.type).toBe('request_too_large');
    server.batches.maxBodyBytes = Buffer.byteLength(body);
    expect((await call('POST', '/v1/messages/batches', body)).status).toBe(200);
  });
});

describe('fake Anthropic server: a batch ending and its results', () => {
  it('ends at the first retrieve by default, with results_url and counts, and serves JSONL results', async () => {
    const { body: b } = await create([
      { custom_id: 'a', params: params('one') },
      { custom_id: 'b', params: params('two') },
    ]);
    const ended = (await call('GET', `/v1/messages/batches/${b.id}`)).body;
    expect(ended).toMatchObject({ processing_status: 'ended', request_counts: { processing: 0, succeeded: 2 } });
    expect(ended.results_url).toBe(`${server.url}/v1/messages/batches/${b.id}/results`);
    expect(Date.parse(ended.ended_at)).not.toBeNaN();
    const r = await call('GET', `/v1/messages/batches/${b.id}/results`);
    expect(r.type).toBe('application/binary');
    const lines = r.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    // Not in request order.
    expect(lines.map((l) => l.custom_id)).toEqual(['b', 'a']);
    expect(lines[0].result.type).toBe('succeeded');
    expect(lines[0].result.message).toMatchObject({ type: 'message', role: 'assistant', stop_reason: 'end_turn' });
    expect(JSON.parse(lines[0].result.message.content[0].text)).toEqual({ q1: { probability: 0.5 } });
  });

  it('ends at the retrieve a plan or the default says', async () => {
    server.batches.endAfterRetrieves = 3;
    const { body: b } = await create([{ custom_id: 'a', params: params() }]);
    server.batches.plan({ endAfterRetrieves: 1 });
    const { body: c } = await create([{ custom_id: 'a', params: params() }]);
    expect((await call('GET', `/v1/messages/batches/${c.id}`)).body.processing_status).toBe('ended');
    expect((await call('GET', `/v1/messages/batches/${b.id}`)).body.processing_status).toBe('in_progress');
    expect((await call('GET', `/v1/messages/batches/${b.id}`)).body.processing_status).toBe('in_progress');
    expect((await call('GET', `/v1/messages/batches/${b.id}`)).body.processing_status).toBe('ended');
  });

  it('writes an errored result in the API shape, with the error type of the reply', async () => {
    server.batches.plan({ fault: 'partial' });
    const { body: b } = await create(['a', 'b', 'c'].map((custom_id) => ({ custom_id, params: params() })));
    expect((await call('GET', `/v1/messages/batches/${b.id}`)).body.request_counts).toMatchObject({
      errored: 2,
      succeeded: 1,
    });
    const lines = (await call('GET', `/v1/messages/batches/${b.id}/results`)).text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    const a = lines.find((l) => l.custom_id === 'a');
    expect(a.result).toEqual({
      type: 'errored',
      error: { type: 'error', error: { type: 'invalid_request_error', message: expect.any(String) }, request_id: null },
    });
    expect(lines.find((l) => l.custom_id === 'b').result.type).toBe('succeeded');
  });

  it('applies the server’s request checks to each request: a refused tool property name is an errored result', async () => {
    const tool = {
      ...params(),
      output_config: undefined,
      tools: [{ name: 'record_answers', input_schema: { type: 'object', properties: { 'conv:bd-7h7': {} } } }],
    };
    const { body: b } = await create([
      { custom_id: 'bad', params: tool },
      { custom_id: 'good', params: params() },
    ]);
    await call('GET', `/v1/messages/batches/${b.id}`);
    const lines = (await call('GET', `/v1/messages/batches/${b.id}/results`)).text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.find((l) => l.custom_id === 'bad').result.error.error.type).toBe('invalid_request_error');
    expect(lines.find((l) => l.custom_id === 'good').result.type).toBe('succeeded');
  });

  it('turns a reply that is no JSON error into an errored api_error', async () => {
    server.batches.answer = () => FakeAnthropicServer.hang();
    const { body: b } = await create([{ custom_id: 'a', params: params() }]);
    await call('GET', `/v1/messages/batches/${b.id}`);
    const line = JSON.parse((await call('GET', `/v1/messages/batches/${b.id}/results`)).text);
    expect(line.result.error.error.type).toBe('api_error');
    server.batches.answer = (req) => FakeAnthropicServer.autoReply(req, {});
  });

  it('expired and canceled faults, and a cancel: canceling, then ended with canceled results', async () => {
    server.batches.plan({ fault: 'expired' }, { fault: 'canceled' }, { endAfterRetrieves: 10 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await create([{ custom_id: 'a', params: params() }])).body.id);
    const [expired, canceledElsewhere, canceled] = ids;
    expect((await call('GET', `/v1/messages/batches/${expired}`)).body.request_counts.expired).toBe(1);
    const other = (await call('GET', `/v1/messages/batches/${canceledElsewhere}`)).body;
    expect(other.request_counts.canceled).toBe(1);
    expect(other.cancel_initiated_at).not.toBeNull();
    const c = await call('POST', `/v1/messages/batches/${canceled}/cancel`);
    expect(c.body).toMatchObject({ processing_status: 'canceling' });
    expect(Date.parse(c.body.cancel_initiated_at)).not.toBeNaN();
    expect((await call('POST', `/v1/messages/batches/${canceled}/cancel`)).body.processing_status).toBe('canceling');
    expect((await call('GET', `/v1/messages/batches/${canceled}`)).body).toMatchObject({
      processing_status: 'ended',
      request_counts: { canceled: 1 },
    });
    expect((await call('POST', `/v1/messages/batches/${canceled}/cancel`)).body.processing_status).toBe('ended');
    for (const [id, type] of [
      [expired, 'expired'],
      [canceledElsewhere, 'canceled'],
      [canceled, 'canceled'],
    ]) {
      expect(JSON.parse((await call('GET', `/v1/messages/batches/${id}/results`)).text).result).toEqual({ type });
    }
  });

  it('has no results before the end, and knows no other batch or route', async () => {
    server.batches.endAfterRetrieves = 2;
    const { body: b } = await create([{ custom_id: 'a', params: params() }]);
    expect((await call('GET', `/v1/messages/batches/${b.id}/results`)).status).toBe(400);
    expect((await call('GET', '/v1/messages/batches/msgbatch_none')).status).toBe(404);
    expect((await call('GET', '/v1/messages/batches/msgbatch_none/results')).status).toBe(404);
    expect((await call('POST', '/v1/messages/batches/msgbatch_none/cancel')).status).toBe(404);
    expect((await call('DELETE', `/v1/messages/batches/${b.id}`)).body.error.message).toBe('no such route');
    expect((await call('PUT', '/v1/messages/batches')).body.error.message).toBe('no such route');
  });

  it('gives each batch message the realistic usage of the server’s usage model, as /v1/messages', async () => {
    const real = await FakeAnthropicServer.start({ realisticUsage: true });
    try {
      const post = (path: string, body: unknown) =>
        fetch(`${real.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then((r) => r.json() as Promise<any>);
      const b = await post('/v1/messages/batches', {
        requests: [{ custom_id: 'a', params: params('x'.repeat(3000)) }],
      });
      await fetch(`${real.url}/v1/messages/batches/${b.id}`);
      const line = JSON.parse(await (await fetch(`${real.url}/v1/messages/batches/${b.id}/results`)).text());
      const direct = await post('/v1/messages', params('x'.repeat(3000)));
      expect(line.result.message.usage.input_tokens).not.toBe(100);
      expect(line.result.message.usage.input_tokens).toBe(direct.usage.input_tokens);
    } finally {
      await real.close();
    }
  });
});

describe('fake Anthropic server: listing batches', () => {
  it('pages newest first with limit, after_id and before_id, and says whether more follow', async () => {
    let clock = 0;
    server.batches.now = () => (clock += 1000);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create([{ custom_id: 'a', params: params() }])).body.id);
    const newest = [...ids].reverse();
    const first = (await call('GET', '/v1/messages/batches?limit=2')).body;
    expect(first).toMatchObject({ has_more: true, first_id: newest[0], last_id: newest[1] });
    expect(first.data.map((b: { id: string }) => b.id)).toEqual(newest.slice(0, 2));
    const last = (await call('GET', `/v1/messages/batches?limit=2&after_id=${newest[3]}`)).body;
    expect(last).toMatchObject({ has_more: false, first_id: newest[4], last_id: newest[4] });
    const before = (await call('GET', `/v1/messages/batches?limit=2&before_id=${newest[3]}`)).body;
    expect(before.data.map((b: { id: string }) => b.id)).toEqual(newest.slice(1, 3));
    expect(before.has_more).toBe(true);
    const all = (await call('GET', '/v1/messages/batches')).body;
    expect(all.data).toHaveLength(5);
    expect(all.has_more).toBe(false);
    expect((await call('GET', '/v1/messages/batches?limit=0')).status).toBe(400);
    expect((await call('GET', '/v1/messages/batches?limit=1001')).status).toBe(400);
    server.batches.now = Date.now;
  });

  it('lists nothing with null ids when there are no batches', async () => {
    expect((await call('GET', '/v1/messages/batches')).body).toEqual({
      data: [],
      has_more: false,
      first_id: null,
      last_id: null,
    });
  });
});
