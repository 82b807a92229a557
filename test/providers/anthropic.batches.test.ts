import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { noul, type Question } from '../../src/decision/questions.js';
import { AnthropicProvider, type AnthropicProviderOptions } from '../../src/providers/anthropic.js';
import { ANTHROPIC_BATCH_MAX_BODY_BYTES, ANTHROPIC_BATCH_MAX_REQUESTS } from '../../src/providers/batch.js';
import {
  AnswerDefect,
  BatchNotFound,
  BatchUnsupported,
  ProviderMisconfigured,
  ProviderRefusal,
  ProviderUnavailable,
  SchemaRejected,
} from '../../src/providers/errors.js';
import type { AskResult, BatchApi, BatchRequest, BatchResult } from '../../src/providers/provider.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import type { RecordedRequest, Reply } from '../../src/testing/fake-server-core.js';
import { aliased, askOpts, captureLogger, goodAnswers, questions, STATE } from './support.js';

/**
 * Message Batches through the real SDK and the fake Anthropic server (DESIGN §7.3, STACK §3):
 * what a batch sends, how its results are read (as `ask` reads a reply), its faults, its guards.
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
  server.batches.endAfterRetrieves = 1;
  server.batches.now = Date.now;
  server.batches.answer = (req) => FakeAnthropicServer.autoReply(req, {});
});

function provider(over: Partial<AnthropicProviderOptions> = {}): AnthropicProvider {
  return new AnthropicProvider({
    apiKey: 'sk-ant-test',
    baseURL: server.url,
    minBackoffMs: 1,
    maxBackoffMs: 4,
    runtime: { random: () => 0 },
    ...over,
  });
}

const sig = () => ({ signal: new AbortController().signal });

function req(customId: string, over: Partial<BatchRequest> = {}): BatchRequest {
  return { customId, state: STATE, questions: questions(), explain: false, ...over };
}

/** The states of `req`s that answer differently (see `byState`). */
const STATES = ['{"title":"one"}', '{"title":"two"}', '{"title":"three"}'];

/** A model whose answers depend on the state, so results matched to the wrong request show. */
function byState(r: RecordedRequest): Reply {
  const i = STATES.indexOf(r.body.messages[0].content);
  const raw = goodAnswers();
  (raw.blocked as { probability: number }).probability = 0.1 * (i + 1);
  const input = aliased(raw);
  if (r.body.tools) return FakeAnthropicServer.toolAnswer(input)(r) as Reply;
  return FakeAnthropicServer.answer(input)(r) as Reply;
}

async function collect(it: AsyncIterable<BatchResult>): Promise<Map<string, BatchResult>> {
  const out = new Map<string, BatchResult>();
  for await (const r of it) out.set(r.customId, r);
  return out;
}

const lookupAll =
  (qs: ReadonlyMap<string, Question> = questions(), explain = false) =>
  () => ({ questions: qs, explain });

/** Submits, retrieves until ended, and reads every result. */
async function runBatch(
  p: AnthropicProvider,
  requests: BatchRequest[],
  lookup: Parameters<BatchApi['results']>[1] = lookupAll(),
): Promise<Map<string, BatchResult>> {
  const info = await p.batch.submit(requests, sig());
  let status = info.status;
  for (let i = 0; i < 5 && status !== 'ended'; i++) status = (await p.batch.retrieve(info.id, sig())).status;
  expect(status).toBe('ended');
  return collect(p.batch.results(info.id, lookup, sig()));
}

function succeeded(r: BatchResult | undefined): AskResult {
  if (r?.type !== 'succeeded')
    throw new Error(`expected a succeeded result, got ${r?.type}: ${r?.type === 'errored' ? r.error.message : ''}`);
  return r.result;
}

function erroredWith(r: BatchResult | undefined): Error {
  if (r?.type !== 'errored') throw new Error(`expected an errored result, got ${r?.type}`);
  return r.error;
}

const createRequests = () => server.requests.filter((r) => r.method === 'POST' && r.path === '/v1/messages/batches');

describe('AnthropicProvider batches: submit, retrieve, results', () => {
  it('is in progress until it ends, then its results are what ask returns for the same state and questions', async () => {
    const p = provider();
    server.batches.plan({ endAfterRetrieves: 2 });
    server.batches.answer = byState;
    const requests = STATES.map((state, i) => req(`item-${i}`, { state }));
    const info = await p.batch.submit(requests, sig());
    expect(info).toMatchObject({
      status: 'in_progress',
      counts: { processing: 3, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
    });
    expect(info.id).toMatch(/^msgbatch_/);
    expect(info.expiresAt - info.createdAt).toBe(24 * 3600 * 1000);
    expect((await p.batch.retrieve(info.id, sig())).status).toBe('in_progress');
    const ended = await p.batch.retrieve(info.id, sig());
    expect(ended).toMatchObject({ status: 'ended', counts: { processing: 0, succeeded: 3 } });
    const results = await collect(p.batch.results(info.id, lookupAll(), sig()));
    // The fake sends results reversed: they are matched by custom id, never by position.
    expect([...results.keys()]).toEqual(['item-2', 'item-1', 'item-0']);
    for (const [i, state] of STATES.entries()) {
      server.script(byState);
      const asked = await p.ask(state, questions(), askOpts());
      expect(succeeded(results.get(`item-${i}`))).toEqual(asked);
      expect(asked.answers.get('blocked')!.answer).toEqual({ type: 'noul', noul: 0.1 * (i + 1) });
    }
  });

  it('sends as params exactly the body ask sends, each under its custom id', async () => {
    const p = provider();
    await p.batch.submit([req('a'), req('b', { explain: true })], sig());
    await p.ask(STATE, questions(), askOpts());
    await p.ask(STATE, questions(), askOpts({ explain: true }));
    const [create] = createRequests();
    expect(create.body.requests.map((r: { custom_id: string }) => r.custom_id)).toEqual(['a', 'b']);
    expect(create.body.requests[0].params).toEqual(server.messages[0].body);
    expect(create.body.requests[1].params).toEqual(server.messages[1].body);
    expect(Object.keys(create.body)).toEqual(['requests']);
  });

  it('puts the 1-hour TTL on the cache breakpoint of batch requests (ask keeps the default)', async () => {
    // claude-opus-5 caches from 512 tokens: the rules and the questions reach it.
    const p = provider({ model: 'claude-opus-5' });
    await p.batch.submit([req('a')], sig());
    await p.ask(STATE, questions(), askOpts());
    const params = createRequests()[0].body.requests[0].params;
    const asked = server.messages[0].body;
    expect(asked.system[0].cache_control).toEqual({ type: 'ephemeral' });
    expect(params.system[0].cache_control).toEqual({ type: 'ephemeral', ttl: '1h' });
    expect({ ...params, system: undefined }).toEqual({ ...asked, system: undefined });
  });

  it('reads the forced-tool path and the rationales as ask does', async () => {
    const p = provider({ useTool: true });
    const results = await runBatch(p, [req('t', { explain: true })], lookupAll(questions(), true));
    const asked = await p.ask(STATE, questions(), askOpts({ explain: true }));
    const got = succeeded(results.get('t'));
    expect(got).toEqual(asked);
    expect(got.rationales?.get('area')).toBe('auto rationale for q1');
    expect(createRequests()[0].body.requests[0].params.tool_choice).toMatchObject({ type: 'tool' });
  });

  it('reads each result with the questions and explain flag the lookup gives for its custom id', async () => {
    const p = provider();
    const one = new Map<string, Question>([['only', noul('Is it done?')]]);
    const lookups: string[] = [];
    const results = await runBatch(p, [req('three'), req('one', { questions: one })], (id) => {
      lookups.push(id);
      return id === 'one' ? { questions: one, explain: false } : { questions: questions(), explain: false };
    });
    expect(lookups.sort()).toEqual(['one', 'three']);
    expect([...succeeded(results.get('one')).answers.keys()]).toEqual(['only']);
    expect(succeeded(results.get('three')).answers.size).toBe(3);
  });

  it('reports billed usage of a succeeded result undiscounted, as ask reports it', async () => {
    const p = provider();
    server.batches.answer = (r) =>
      FakeAnthropicServer.auto({
        usage: { input_tokens: 1234, output_tokens: 56, cache_read_input_tokens: 7, cache_creation_input_tokens: null },
      })(r) as Reply;
    const results = await runBatch(p, [req('u')]);
    expect(succeeded(results.get('u')).usage).toEqual({
      inputTokens: 1234,
      outputTokens: 56,
      cacheReadTokens: 7,
      cacheWriteTokens: 0,
    });
  });

  it('stops reading when the caller breaks out, leaving nothing to fail', async () => {
    const p = provider();
    const info = await p.batch.submit([req('a'), req('b')], sig());
    await p.batch.retrieve(info.id, sig());
    let n = 0;
    for await (const _ of p.batch.results(info.id, lookupAll(), sig())) {
      n++;
      break;
    }
    expect(n).toBe(1);
  });

  it('refuses to read the results of a batch that has not ended', async () => {
    const p = provider();
    server.batches.plan({ endAfterRetrieves: 5 });
    const info = await p.batch.submit([req('a')], sig());
    await expect(collect(p.batch.results(info.id, lookupAll(), sig()))).rejects.toThrow(TypeError);
    expect(server.requests.some((r) => r.path.endsWith('/results'))).toBe(false);
  });
});

describe('AnthropicProvider batches: list', () => {
  it('finds batches created at or after `since`, newest first, and stops at the first older one', async () => {
    const p = provider();
    let clock = 1_000_000;
    server.batches.now = () => clock;
    const old = await p.batch.submit([req('a')], sig());
    clock = 2_000_000;
    const mid = await p.batch.submit([req('a')], sig());
    clock = 3_000_000;
    const last = await p.batch.submit([req('a')], sig());
    expect((await p.batch.list({ ...sig(), since: 2_000_000 })).map((b) => b.id)).toEqual([last.id, mid.id]);
    expect((await p.batch.list({ ...sig(), since: 0 })).map((b) => b.id)).toEqual([last.id, mid.id, old.id]);
    expect(await p.batch.list({ ...sig(), since: 3_000_001 })).toEqual([]);
    const found = (await p.batch.list({ ...sig(), since: 3_000_000 }))[0];
    expect(found).toEqual({ ...last, status: 'in_progress' });
  });

  it('walks every page (after_id), and asks for no page past the first older batch', async () => {
    const p = provider();
    let clock = 0;
    server.batches.now = () => (clock += 1000);
    const ids: string[] = [];
    for (let i = 0; i < 105; i++) ids.push((await p.batch.submit([req('a')], sig())).id);
    server.reset();
    const all = await p.batch.list({ ...sig(), since: 0 });
    expect(all.map((b) => b.id)).toEqual(ids.reverse());
    const pages = server.requests.filter((r) => r.path === '/v1/messages/batches');
    expect(pages).toHaveLength(2);
    expect(pages[1].query?.get('after_id')).toBe(all[99].id);
    server.reset();
    // The 10 newest are on the first page; the eleventh is older: one page, ten batches.
    expect(await p.batch.list({ ...sig(), since: all[9].createdAt })).toHaveLength(10);
    expect(server.requests).toHaveLength(1);
  });

  it('stops at a page that says more follow but names no last id (it could never be continued)', async () => {
    const batch = {
      id: 'msgbatch_x',
      type: 'message_batch',
      processing_status: 'ended',
      request_counts: {},
      created_at: '2026-11-30T00:00:00Z',
      expires_at: '2026-12-01T00:00:00Z',
    };
    server.script({ kind: 'json', body: { data: [batch], has_more: true, first_id: null, last_id: null } });
    expect((await provider().batch.list({ ...sig(), since: 0 })).map((b) => b.id)).toEqual(['msgbatch_x']);
    expect(server.requests).toHaveLength(1);
  });

  it('refuses a `since` that is not a time', async () => {
    await expect(provider().batch.list({ ...sig(), since: Number.NaN })).rejects.toThrow(TypeError);
    expect(server.requests).toHaveLength(0);
  });
});

describe('AnthropicProvider batches: faults of a batch', () => {
  it('an expired batch has every result expired', async () => {
    server.batches.plan({ fault: 'expired' });
    const results = await runBatch(provider(), [req('a'), req('b')]);
    expect([...results.values()].map((r) => r.type)).toEqual(['expired', 'expired']);
  });

  it('a partially errored batch maps invalid_request_error to ProviderRefusal and answers the rest', async () => {
    server.batches.plan({ fault: 'partial' });
    const results = await runBatch(
      provider(),
      ['a', 'b', 'c', 'd'].map((id) => req(id)),
    );
    expect(erroredWith(results.get('a'))).toBeInstanceOf(ProviderRefusal);
    expect(erroredWith(results.get('c'))).toBeInstanceOf(ProviderRefusal);
    expect(succeeded(results.get('b')).answers.size).toBe(3);
    expect(succeeded(results.get('d')).answers.size).toBe(3);
  });

  it('a canceled batch: canceling, then ended with canceled results', async () => {
    const p = provider();
    server.batches.plan({ endAfterRetrieves: 10 });
    const info = await p.batch.submit([req('a'), req('b')], sig());
    const canceling = await p.batch.cancel(info.id, sig());
    expect(canceling.status).toBe('canceling');
    const ended = await p.batch.retrieve(info.id, sig());
    expect(ended).toMatchObject({ status: 'ended', counts: { canceled: 2, processing: 0 } });
    const results = await collect(p.batch.results(info.id, lookupAll(), sig()));
    expect([...results.values()].map((r) => r.type)).toEqual(['canceled', 'canceled']);
    // Canceling an ended batch changes nothing.
    expect((await p.batch.cancel(info.id, sig())).status).toBe('ended');
  });

  it('a batch canceled elsewhere ends with canceled results', async () => {
    server.batches.plan({ fault: 'canceled' });
    const results = await runBatch(provider(), [req('a')]);
    expect(results.get('a')?.type).toBe('canceled');
  });

  it.each([
    ['overloaded_error', 529, ProviderUnavailable],
    ['api_error', 500, ProviderUnavailable],
    ['rate_limit_error', 429, ProviderUnavailable],
    ['billing_error', 400, ProviderMisconfigured],
    ['authentication_error', 401, ProviderMisconfigured],
    ['not_found_error', 404, ProviderMisconfigured],
    ['invalid_request_error', 400, ProviderRefusal],
    ['some_new_error', 500, ProviderUnavailable],
  ] as const)('an errored result of type %s is the typed error ask would throw', async (type, status, cls) => {
    server.batches.answer = (r) =>
      r.body.messages[0].content === 'bad'
        ? FakeAnthropicServer.errorReply(status, type, 'secret provider text')
        : FakeAnthropicServer.autoReply(r, {});
    const results = await runBatch(provider(), [req('bad', { state: 'bad' }), req('good')]);
    const err = erroredWith(results.get('bad'));
    expect(err).toBeInstanceOf(cls);
    expect(err.message).not.toContain('secret provider text');
    if (type === 'rate_limit_error') expect((err as ProviderUnavailable).rateLimited).toBe(true);
    expect(succeeded(results.get('good')).answers.size).toBe(3);
  });

  it('a request whose schema is refused as too complex is a ProviderRefusal (a batch request is not split)', async () => {
    server.batches.answer = () =>
      FakeAnthropicServer.errorReply(400, 'invalid_request_error', 'The compiled grammar is too large for this schema');
    const err = erroredWith((await runBatch(provider(), [req('a')])).get('a'));
    expect(err).toBeInstanceOf(ProviderRefusal);
    expect(err.message).toContain('not split');
  });

  it('a request whose schema the API rejects is SchemaRejected (the set cools off)', async () => {
    server.batches.answer = () =>
      FakeAnthropicServer.errorReply(400, 'invalid_request_error', 'output_config.format.schema: invalid');
    expect(erroredWith((await runBatch(provider(), [req('a')])).get('a'))).toBeInstanceOf(SchemaRejected);
  });

  it('a truncated or refused reply is an AnswerDefect carrying the billed usage', async () => {
    server.batches.answer = (r) =>
      (r.body.messages[0].content === 'cut'
        ? FakeAnthropicServer.truncated()(r)
        : FakeAnthropicServer.refusal()(r)) as Reply;
    const results = await runBatch(provider(), [req('cut', { state: 'cut' }), req('refused')]);
    for (const id of ['cut', 'refused']) {
      const err = erroredWith(results.get(id));
      expect(err).toBeInstanceOf(AnswerDefect);
      expect((err as AnswerDefect).usage).toEqual({
        inputTokens: 100,
        outputTokens: 20,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
      });
    }
    expect(erroredWith(results.get('cut')).message).toContain('max_tokens');
  });

  it('an answer that fails validation is an AnswerDefect', async () => {
    server.batches.answer = (r) => FakeAnthropicServer.answer({ q1: { probability: 7 } })(r) as Reply;
    expect(erroredWith((await runBatch(provider(), [req('a')])).get('a'))).toBeInstanceOf(AnswerDefect);
  });

  it('a result for a custom id the lookup does not know is errored, with its usage', async () => {
    const results = await runBatch(provider(), [req('known'), req('stranger')], (id) =>
      id === 'known' ? { questions: questions(), explain: false } : null,
    );
    const err = erroredWith(results.get('stranger'));
    expect(err).toBeInstanceOf(AnswerDefect);
    expect(err.message).toContain('unknown custom id');
    expect((err as AnswerDefect).usage?.inputTokens).toBe(100);
    expect(results.get('known')?.type).toBe('succeeded');
  });
});

describe('AnthropicProvider batches: result lines the API should never send', () => {
  async function withLines(lines: unknown[]): Promise<{ results: BatchResult[]; error?: unknown }> {
    const p = provider();
    const info = await p.batch.submit([req('a')], sig());
    await p.batch.retrieve(info.id, sig());
    server.batches.get(info.id)!.rawResults =
      lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';
    const results: BatchResult[] = [];
    try {
      for await (const r of p.batch.results(info.id, lookupAll(), sig())) results.push(r);
    } catch (error) {
      return { results, error };
    }
    return { results };
  }
  const message = () => ({
    type: 'message',
    model: 'claude-fake',
    content: [{ type: 'text', text: JSON.stringify(aliased(goodAnswers())) }],
    stop_reason: 'end_turn',
    usage: { input_tokens: 1, output_tokens: 1 },
  });

  it('skips a line without a custom id and a repeated custom id', async () => {
    const { results, error } = await withLines([
      'null',
      '7',
      { result: { type: 'succeeded', message: message() } },
      { custom_id: 'a', result: { type: 'succeeded', message: message() } },
      { custom_id: 'a', result: { type: 'expired' } },
    ]);
    expect(error).toBeUndefined();
    expect(results.map((r) => [r.customId, r.type])).toEqual([['a', 'succeeded']]);
  });

  it('reports a succeeded line without a message as an AnswerDefect, an unknown result type as ProviderUnavailable', async () => {
    const { results } = await withLines([
      { custom_id: 'a', result: { type: 'succeeded' } },
      { custom_id: 'b', result: { type: 'succeeded', message: { type: 'error' } } },
      { custom_id: 'c', result: { type: 'paused' } },
      { custom_id: 'd' },
      { custom_id: 'e', result: { type: 'succeeded', message: { type: 'message', stop_reason: 'end_turn' } } },
    ]);
    expect(results.map((r) => r.type)).toEqual(['errored', 'errored', 'errored', 'errored', 'errored']);
    expect(erroredWith(results[0])).toBeInstanceOf(AnswerDefect);
    expect(erroredWith(results[1]).message).toContain('carries no message');
    expect(erroredWith(results[4])).toBeInstanceOf(AnswerDefect);
    expect(erroredWith(results[4]).message).toContain('carries no message');
    expect(erroredWith(results[2])).toBeInstanceOf(ProviderUnavailable);
    expect(erroredWith(results[2]).message).toContain('paused');
    expect(erroredWith(results[3])).toBeInstanceOf(ProviderUnavailable);
  });

  it('a line that is not JSON ends the stream with ProviderUnavailable after the results before it', async () => {
    const { results, error } = await withLines([
      { custom_id: 'a', result: { type: 'expired' } },
      '{"custom_id": "b", "res',
    ]);
    expect(results.map((r) => r.customId)).toEqual(['a']);
    expect(error).toBeInstanceOf(ProviderUnavailable);
    expect((error as Error).message).toContain('after 1 results');
  });
});

describe('AnthropicProvider batches: retries and lookups of the batch endpoints', () => {
  it('retries a create refused with 529 or 429, once at a time', async () => {
    server.script(FakeAnthropicServer.overloaded(), FakeAnthropicServer.rateLimited(0));
    const info = await provider().batch.submit([req('a')], sig());
    expect(info.status).toBe('in_progress');
    expect(createRequests()).toHaveLength(3);
    expect(server.batches.batches).toHaveLength(1);
  });

  it.each([
    ['a 500', () => FakeAnthropicServer.errorReply(500, 'api_error')],
    ['a dropped connection', () => FakeAnthropicServer.drop()],
  ])('does not retry a create after %s (the batch may exist): ProviderUnavailable, list tells', async (_, reply) => {
    server.script(reply());
    const err = await provider()
      .batch.submit([req('a')], sig())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect((err as Error).message).toContain('may have been created');
    expect(createRequests()).toHaveLength(1);
  });

  it('does not retry a create that timed out', async () => {
    server.script(FakeAnthropicServer.hang());
    const err = await provider({ perAttemptTimeoutMs: 100 })
      .batch.submit([req('a')], sig())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect(createRequests()).toHaveLength(1);
  });

  // DESIGN §7.4: every rule of a create is checked before it is sent, so a 400, 404 or 405, or a
  // 200 that is no batch object and names no error, says the endpoint has no batch API.
  it.each([
    ['a 400', () => FakeAnthropicServer.errorReply(400, 'invalid_request_error', 'requests: bad'), 400],
    ['a 404', () => FakeAnthropicServer.errorReply(404, 'not_found_error', 'no such route'), 404],
    ['a 405', () => ({ kind: 'json', status: 405, body: { detail: 'Method Not Allowed' } }) as Reply, 405],
    ['a 200 that is no batch', () => ({ kind: 'json', body: { type: 'something' } }) as Reply, 200],
  ])('a create answered with %s is BatchUnsupported, not retried', async (_, reply, status) => {
    server.script(reply());
    const err = await provider()
      .batch.submit([req('a')], sig())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BatchUnsupported);
    expect(err).toMatchObject({ status, code: 'batch_unsupported' });
    expect(createRequests()).toHaveLength(1);
  });

  it('a create answered with a billing 400 stays provider-wide (ProviderMisconfigured)', async () => {
    server.script(FakeAnthropicServer.errorReply(400, 'invalid_request_error', 'Your credit balance is too low'));
    await expect(provider().batch.submit([req('a')], sig())).rejects.toBeInstanceOf(ProviderMisconfigured);
  });

  it('retries retrieve, list and cancel on transient faults', async () => {
    const p = provider();
    const info = await p.batch.submit([req('a')], sig());
    server.script(FakeAnthropicServer.overloaded(), FakeAnthropicServer.drop());
    expect((await p.batch.retrieve(info.id, sig())).id).toBe(info.id);
    server.script(FakeAnthropicServer.errorReply(500, 'api_error'));
    expect(await p.batch.list({ ...sig(), since: 0 })).toHaveLength(1);
    server.script(FakeAnthropicServer.errorIn200());
    expect((await p.batch.cancel(info.id, sig())).id).toBe(info.id);
  });

  const batchObject = (over: Record<string, unknown>) => ({
    id: 'msgbatch_x',
    type: 'message_batch',
    processing_status: 'in_progress',
    request_counts: { processing: 1, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
    created_at: '2026-11-30T00:00:00Z',
    expires_at: '2026-12-01T00:00:00Z',
    ...over,
  });

  it.each([
    ['no type', { type: undefined }],
    ['an id that is no identifier', { id: 'msgbatch x' }],
    ['an id that is not a string', { id: 42 }],
    ['an unknown status', { processing_status: 'paused' }],
    ['an unparseable created_at', { created_at: 'yesterday' }],
    ['no expires_at', { expires_at: undefined }],
  ])('retries a retrieve answered with a batch object with %s', async (_, over) => {
    server.script({ kind: 'json', body: batchObject(over) });
    server.script({ kind: 'json', body: batchObject({}) });
    expect((await provider().batch.retrieve('msgbatch_x', sig())).id).toBe('msgbatch_x');
    expect(server.requests).toHaveLength(2);
  });

  it('reads request counts that are not non-negative integers as 0', async () => {
    server.script({
      kind: 'json',
      body: batchObject({ request_counts: { processing: -3, succeeded: '7', errored: 1.5, canceled: null } }),
    });
    expect((await provider().batch.retrieve('msgbatch_x', sig())).counts).toEqual({
      processing: 0,
      succeeded: 0,
      errored: 0,
      canceled: 0,
      expired: 0,
    });
  });

  it('an unknown batch id is BatchNotFound on retrieve, cancel and results, without retries', async () => {
    const p = provider();
    await expect(p.batch.retrieve('msgbatch_nope', sig())).rejects.toBeInstanceOf(BatchNotFound);
    await expect(p.batch.cancel('msgbatch_nope', sig())).rejects.toBeInstanceOf(BatchNotFound);
    await expect(collect(p.batch.results('msgbatch_nope', lookupAll(), sig()))).rejects.toBeInstanceOf(BatchNotFound);
    expect(server.requests).toHaveLength(3);
  });

  it('results whose download answers 404 are BatchNotFound (archived)', async () => {
    const p = provider();
    const info = await p.batch.submit([req('a')], sig());
    await p.batch.retrieve(info.id, sig());
    const pass = (r: RecordedRequest) => server.defaultReply(r);
    server.script(pass, pass, FakeAnthropicServer.errorReply(404, 'not_found_error'));
    await expect(collect(p.batch.results(info.id, lookupAll(), sig()))).rejects.toBeInstanceOf(BatchNotFound);
  });

  it('a results stream cut part way is ProviderUnavailable', async () => {
    const p = provider();
    const info = await p.batch.submit([req('a')], sig());
    await p.batch.retrieve(info.id, sig());
    const pass = (r: RecordedRequest) => server.defaultReply(r);
    server.script(pass, pass, FakeAnthropicServer.drop(true));
    await expect(collect(p.batch.results(info.id, lookupAll(), sig()))).rejects.toBeInstanceOf(ProviderUnavailable);
  });

  it('refuses an empty batch id before any request', async () => {
    await expect(provider().batch.retrieve('', sig())).rejects.toThrow(TypeError);
    await expect(provider().batch.cancel(' ', sig())).rejects.toThrow(TypeError);
    expect(server.requests).toHaveLength(0);
  });

  it('an aborted signal rejects with its reason before any request', async () => {
    const c = new AbortController();
    c.abort(new Error('shutdown'));
    const p = provider();
    await expect(p.batch.submit([req('a')], { signal: c.signal })).rejects.toThrow('shutdown');
    await expect(p.batch.retrieve('msgbatch_x', { signal: c.signal })).rejects.toThrow('shutdown');
    await expect(p.batch.list({ signal: c.signal, since: 0 })).rejects.toThrow('shutdown');
    await expect(p.batch.cancel('msgbatch_x', { signal: c.signal })).rejects.toThrow('shutdown');
    expect(server.requests).toHaveLength(0);
  });

  it('an aborted submit does no work: the abort wins over what the requests would be refused for', async () => {
    const c = new AbortController();
    c.abort(new Error('shutdown'));
    const p = provider({ inputBudgetTokens: 10 });
    await expect(p.batch.submit([req('a')], sig())).rejects.toBeInstanceOf(ProviderRefusal);
    await expect(p.batch.submit([req('a')], { signal: c.signal })).rejects.toThrow('shutdown');
  });
});

describe('AnthropicProvider batches: guards before any request', () => {
  it.each([
    ['a custom id with a space', [req('item 1')]],
    ['a custom id with a colon', [req('conv:bd-7h7')]],
    ['an empty custom id', [req('')]],
    ['a custom id of 65 characters', [req('x'.repeat(65))]],
    ['a repeated custom id', [req('a'), req('b'), req('a')]],
    ['no request', []],
    ['a request without questions', [req('a', { questions: new Map() })]],
  ])('refuses %s with a TypeError', async (_, requests) => {
    await expect(provider().batch.submit(requests, sig())).rejects.toThrow(TypeError);
    expect(server.requests).toHaveLength(0);
  });

  it('takes a custom id of 64 characters of every legal kind', async () => {
    await provider().batch.submit([req('aZ09_-'.padEnd(64, 'x'))], sig());
    expect(createRequests()).toHaveLength(1);
  });

  it('refuses more requests than the limit (100 000 by default)', async () => {
    const p = provider();
    expect(p.batch.maxRequests).toBe(ANTHROPIC_BATCH_MAX_REQUESTS);
    const many = Array.from({ length: ANTHROPIC_BATCH_MAX_REQUESTS + 1 }, (_, i) => req(`r${i}`));
    await expect(p.batch.submit(many, sig())).rejects.toThrow(/at most 100000 requests/);
    await expect(
      provider({ batchLimits: { maxRequests: 2 } }).batch.submit([req('a'), req('b'), req('c')], sig()),
    ).rejects.toThrow(TypeError);
    expect(server.requests).toHaveLength(0);
  });

  it('requestBytes adds up to the create body exactly, and a body over the limit is refused', async () => {
    const p = provider();
    // "256 MB" read as 10^6-byte megabytes, the smaller reading (batch.ts).
    expect(ANTHROPIC_BATCH_MAX_BODY_BYTES).toBe(256_000_000);
    expect(p.batch.maxBytes).toBe(ANTHROPIC_BATCH_MAX_BODY_BYTES - 14);
    const requests = [req('a'), req('b', { explain: true }), req('c', { state: '{"title":"caf\u00e9 \u{1F389}"}' })];
    await p.batch.submit(requests, sig());
    const sum = requests.reduce((n, r) => n + p.batch.requestBytes(r), 0);
    const body = Buffer.byteLength(createRequests()[0].rawBody);
    expect(sum + 14).toBe(body);
    server.reset();
    const tight = provider({ batchLimits: { maxBodyBytes: body - 1 } });
    expect(tight.batch.maxBytes).toBe(body - 15);
    await expect(tight.batch.submit(requests, sig())).rejects.toThrow(/at most \d+ bytes/);
    await tight.batch.submit(requests.slice(0, 2), sig());
    expect(server.requests).toHaveLength(1);
  });

  it('refuses a request over the input budget as ask does, in requestBytes and in submit', async () => {
    const p = provider({ inputBudgetTokens: 1_000 });
    const big = req('big', { state: 'x'.repeat(10_000) });
    expect(() => p.batch.requestBytes(big)).toThrow(ProviderRefusal);
    const err = await p.batch.submit([req('small'), big], sig()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderRefusal);
    expect((err as ProviderRefusal).code).toBe('input_over_budget');
    await expect(p.ask(big.state, big.questions, askOpts())).rejects.toMatchObject({ code: 'input_over_budget' });
    expect(server.requests).toHaveLength(0);
  });

  it('refuses an invalid question as ask does', async () => {
    const broken = new Map<string, Question>([['per@comment', noul('Is it?')]]);
    const p = provider();
    await expect(p.ask(STATE, broken, askOpts())).rejects.toBeInstanceOf(ProviderRefusal);
    expect(() => p.batch.requestBytes(req('a', { questions: broken }))).toThrow(ProviderRefusal);
    await expect(p.batch.submit([req('a', { questions: broken })], sig())).rejects.toBeInstanceOf(ProviderRefusal);
    expect(server.requests).toHaveLength(0);
  });

  it('requestBytes refuses a bad custom id and a request without questions', () => {
    const p = provider();
    expect(() => p.batch.requestBytes(req('no spaces please'))).toThrow(TypeError);
    expect(() => p.batch.requestBytes(req('a', { questions: new Map() }))).toThrow(TypeError);
  });

  it.each([
    [{ maxRequests: 0 }],
    [{ maxRequests: 100_001 }],
    [{ maxRequests: 1.5 }],
    [{ maxBodyBytes: 0 }],
    [{ maxBodyBytes: ANTHROPIC_BATCH_MAX_BODY_BYTES + 1 }],
  ])('refuses batchLimits %o at construction', (batchLimits) => {
    expect(() => provider({ batchLimits })).toThrow(/batchLimits\.max/);
  });
});

describe('AnthropicProvider batches: logs', () => {
  it('log ids and counts only, never a request body or a provider error text', async () => {
    const { lines, logger } = captureLogger();
    server.batches.plan({ fault: 'partial' });
    server.batches.answer = () => FakeAnthropicServer.errorReply(529, 'overloaded_error', 'PROVIDER-SECRET');
    const results = await runBatch(provider({ logger }), [req('a', { state: '{"title":"STATE-SECRET"}' }), req('b')]);
    expect(results.size).toBe(2);
    const text = lines.join('\n');
    expect(text).not.toContain('STATE-SECRET');
    expect(text).not.toContain('PROVIDER-SECRET');
    expect(text).not.toContain('refused');
    const submitted = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'batch submitted');
    expect(submitted).toMatchObject({
      provider: 'anthropic',
      requests: 2,
      batchId: expect.stringMatching(/^msgbatch_/),
    });
    const read = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'batch results read');
    expect(read).toMatchObject({ errored: 2, succeeded: 0 });
  });
});

/**
 * A server of our own for what the fake cannot do: a results body that sends one line and then
 * nothing (a stalled download).
 */
describe('AnthropicProvider batches: a stalled results stream', () => {
  let stall: Server;
  let url = '';
  let open: ServerResponse[] = [];
  let closed = 0;
  beforeAll(async () => {
    stall = createServer((rq, res) => {
      const id = rq.url?.includes('msgbatch_slow') ? 'msgbatch_slow' : 'msgbatch_stall';
      const batch = {
        id,
        type: 'message_batch',
        processing_status: 'ended',
        request_counts: { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 2 },
        created_at: '2026-11-30T00:00:00Z',
        expires_at: '2026-12-01T00:00:00Z',
        ended_at: '2026-11-30T01:00:00Z',
        results_url: `${url}/v1/messages/batches/${id}/results`,
      };
      if (rq.url?.endsWith('/results')) {
        res.writeHead(200, { 'content-type': 'application/binary' });
        res.write(`${JSON.stringify({ custom_id: 'a', result: { type: 'expired' } })}\n`);
        // msgbatch_slow: a second line 100 ms later, then the end; msgbatch_stall: nothing more.
        if (id === 'msgbatch_slow')
          setTimeout(() => res.end(`${JSON.stringify({ custom_id: 'b', result: { type: 'expired' } })}\n`), 100);
        open.push(res);
        res.on('close', () => closed++);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(batch));
    });
    await new Promise<void>((r) => stall.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(stall.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    stall.closeAllConnections();
    await new Promise<void>((r) => stall.close(() => r()));
  });
  beforeEach(() => {
    open = [];
    closed = 0;
  });
  const stalled = (over: Partial<AnthropicProviderOptions> = {}) =>
    new AnthropicProvider({ apiKey: 'sk-ant-test', baseURL: url, perAttemptTimeoutMs: 150, ...over });

  it('gives up after the per-attempt timeout without a new line: ProviderUnavailable after the results so far', async () => {
    const seen: string[] = [];
    const err = await (async () => {
      for await (const r of stalled().batch.results('msgbatch_stall', lookupAll(), sig())) seen.push(r.customId);
    })().catch((e: unknown) => e);
    expect(seen).toEqual(['a']);
    expect(err).toBeInstanceOf(ProviderUnavailable);
    expect((err as Error).message).toContain('timed out');
  });

  it('the idle timer counts only the wait for the provider, not the caller’s own work between results', async () => {
    const seen: string[] = [];
    const started = performance.now();
    for await (const r of stalled().batch.results('msgbatch_slow', lookupAll(), sig())) {
      seen.push(r.customId);
      // Twice the 150 ms idle timeout, spent by the caller, not waiting on the provider.
      await new Promise((res) => setTimeout(res, 300));
    }
    expect(seen).toEqual(['a', 'b']);
    expect(performance.now() - started).toBeGreaterThan(500);
  });

  it('an abort while waiting for the next line rejects with the signal’s reason at once and closes the download', async () => {
    const c = new AbortController();
    const started = performance.now();
    const run = (async () => {
      for await (const _ of stalled({ perAttemptTimeoutMs: 10_000 }).batch.results('msgbatch_stall', lookupAll(), {
        signal: c.signal,
      })) {
        setTimeout(() => c.abort(new Error('shutdown')), 50);
      }
    })();
    await expect(run).rejects.toThrow('shutdown');
    // Not the 10 s idle timeout: the abort itself ended the wait.
    expect(performance.now() - started).toBeLessThan(2_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(1);
  });

  it('a caller that stops early closes the download', async () => {
    for await (const _ of stalled({ perAttemptTimeoutMs: 10_000 }).batch.results('msgbatch_stall', lookupAll(), sig()))
      break;
    await new Promise((r) => setTimeout(r, 50));
    expect(open).toHaveLength(1);
    expect(closed).toBe(1);
  });
});
