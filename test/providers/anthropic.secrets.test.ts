import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noul, type Question } from '../../src/decision/questions.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import type { Reply } from '../../src/testing/fake-server-core.js';
import { askOpts, captureLogger } from './support.js';

/**
 * No key, item text, question text or provider error body in any error message or log line
 * (DESIGN §9, errors.ts). The fake server echoes all three back in its error bodies and answers,
 * as real APIs and proxies sometimes do, so copying a body anywhere would leak them.
 */

const KEY = 'sk-ant-api03-CANARY-5e1f0c2a9b';
const STATE_SECRET = 'STATE-CANARY-item-text';
const QUESTION_SECRET = 'QUESTION-CANARY-wording';
const state = JSON.stringify({ title: STATE_SECRET, body: 'b' });
const qs = new Map<string, Question>([['leak', noul(`Does ${QUESTION_SECRET} hold?`)]]);
const echo = `invalid x-api-key ${KEY} for prompt ${STATE_SECRET} / ${QUESTION_SECRET}`;

let server: FakeAnthropicServer;
beforeAll(async () => {
  server = await FakeAnthropicServer.start();
});
afterAll(async () => {
  await server.close();
});

const scenarios: Array<[string, Array<Reply | ReturnType<typeof FakeAnthropicServer.answer>>]> = [
  ['401', [FakeAnthropicServer.error(401, 'authentication_error', echo)]],
  ['400 refusal', [FakeAnthropicServer.error(400, 'invalid_request_error', echo)]],
  ['400 schema', [FakeAnthropicServer.error(400, 'invalid_request_error', `output_config schema ${echo}`)]],
  ['529 exhausted', Array.from({ length: 4 }, () => FakeAnthropicServer.error(529, 'overloaded_error', echo))],
  ['429 over the cap', [FakeAnthropicServer.error(429, 'rate_limit_error', echo, { 'retry-after': '600' })]],
  [
    'error in 200, then 500s',
    [
      FakeAnthropicServer.errorIn200(),
      ...Array.from({ length: 3 }, () => FakeAnthropicServer.error(500, 'api_error', echo)),
    ],
  ],
  ['malformed answer', [FakeAnthropicServer.text(`{"leak": ${echo}`)]],
  ['wrong kind answer', [FakeAnthropicServer.answer({ leak: { probabilities: { [echo]: 1 } } })]],
  ['out-of-range answer', [FakeAnthropicServer.answer({ leak: { probability: 2, why: echo } })]],
];

describe('secrets stay out of errors and logs', () => {
  it.each(scenarios)('%s', async (_name, replies) => {
    server.reset();
    server.script(...replies);
    const { lines, logger } = captureLogger();
    const p = new AnthropicProvider({ apiKey: KEY, baseURL: server.url, logger, minBackoffMs: 1, maxBackoffMs: 2 });
    const err = await p.ask(state, qs, askOpts()).then(
      () => {
        throw new Error('expected a failure');
      },
      (e: unknown) => e as Error,
    );
    // The key really went out, and the body really came back: the test can see a leak.
    const sent = server.messages[0].headers;
    expect(String(sent.authorization ?? sent['x-api-key'])).toContain(KEY);
    const surfaces = [
      err.message,
      String(err),
      err.stack ?? '',
      JSON.stringify(err),
      JSON.stringify(Object.getOwnPropertyNames(err).map((k) => (err as any)[k])),
      String((err as any).cause ?? ''),
      ...lines,
    ].join('\n');
    for (const secret of [KEY, 'CANARY', STATE_SECRET, QUESTION_SECRET]) expect(surfaces).not.toContain(secret);
  });

  it('logs attempt failures (so the scan above reads real lines)', async () => {
    server.reset();
    server.script(FakeAnthropicServer.error(529, 'overloaded_error', echo));
    const { lines, logger } = captureLogger();
    const p = new AnthropicProvider({ apiKey: KEY, baseURL: server.url, logger, minBackoffMs: 1, maxBackoffMs: 2 });
    await p.ask(state, qs, askOpts());
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).toContain('"status":529');
    expect(lines.join('\n')).not.toContain('CANARY');
  });
});
