import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attentionSet } from '../../src/decision/production-sets.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { drainNow, runnerOptions } from '../harness/runner-fixture.js';
import { captureLog } from '../harness/log-capture.js';
import { makeFixture, type Fixture } from '../harness/store-fixture.js';

/** What the runner logs (DESIGN §7 step 7, §10) and what the logger redacts, through the real pino logger. */

let fx: Fixture;
beforeEach(async () => {
  fx = await makeFixture([attentionSet]);
});
afterEach(async () => fx.cleanup());

async function item(ref: string, status = 'open') {
  return (
    await fx.store.createItem(
      { workspaceId: fx.ws.id, collectionId: fx.tasks.id, ref, title: ref, content: 'b', fields: { status } },
      { quietPeriod: false },
    )
  ).row;
}

const PINO_KEYS = ['level', 'time', 'service', 'msg'];

describe('logs', () => {
  it('one spend line per evaluation that made a call, with exactly the fields DESIGN §7 names', async () => {
    const it1 = await item('T-1');
    const { logger, records } = captureLog('debug');
    await drainNow(runnerOptions(fx, new FakeProvider(), { logger }));
    const spend = records().filter((r) => r.msg === 'spend');
    expect(spend).toHaveLength(1);
    expect(Object.keys(spend[0]).sort()).toEqual(
      [
        ...PINO_KEYS,
        'set',
        'workspaceId',
        'ref',
        'itemId',
        'questions',
        'calls',
        'inputTokens',
        'outputTokens',
        'truncated',
        'outcome',
      ].sort(),
    );
    expect(spend[0]).toMatchObject({
      set: 'attention',
      workspaceId: fx.ws.id,
      ref: 'T-1',
      itemId: it1.id,
      questions: 3,
      calls: 1,
      truncated: false,
      outcome: 'complete',
    });
    expect(spend[0].level).toBe(20);
  });

  it('per-job lines are at debug: a drain logs none of them at info', async () => {
    await item('T-1');
    await item('T-2', 'closed'); // dropped
    const { logger, records } = captureLog('info');
    await drainNow(runnerOptions(fx, new FakeProvider(), { logger }));
    expect(await fx.store.countDecisions()).toBeGreaterThan(0);
    expect(records().filter((r) => r.msg === 'spend' || r.msg === 'job outcome')).toEqual([]);
  });

  it('a log line for every outcome other than complete: drop, refuse, fail, defer at debug; park at warn', async () => {
    await item('T-1', 'closed'); // drop
    await item('T-2'); // refused (400)
    await item('T-3'); // fails (503)
    await item('T-4'); // deferred (429)
    const { logger, records } = captureLog('debug');
    const fake = new FakeProvider({ faults: [{ status: 400 }, { status: 503 }, { status: 429, retryAfterMs: 5_000 }] });
    await drainNow(runnerOptions(fx, fake, { logger }));
    const big = await item('T-5');
    await fx.store.updateItem(big.id, { content: 'x'.repeat(50_000) });
    fx.clock.advance(60_000);
    await drainNow(runnerOptions(fx, new FakeProvider({ inputBudgetTokens: 1_000 }), { logger })); // park: over the input budget
    // The over-budget refusal happened before any request: no spend line, no call in the spend table.
    expect(records().filter((r) => r.msg === 'spend' && r.ref === 'T-5')).toHaveLength(0);
    expect((await fx.store.spendRowsSince(86_400_000)).rows.filter((r) => r.outcome === 'park')).toEqual([]);
    const outcomes = records()
      .filter((r) => r.msg === 'job outcome' && r.outcome !== 'complete')
      .map((r) => [r.ref, r.outcome, r.level]);
    expect(outcomes).toEqual([
      ['T-1', 'drop', 20],
      ['T-2', 'refuse', 20],
      ['T-3', 'fail', 20],
      ['T-4', 'defer', 20],
      ['T-5', 'park', 40],
    ]);
  });

  it('redacts API keys and authorization headers wherever they are put', () => {
    const KEY = 'sk-ant-api03-REDACTME-1234';
    const { logger, lines } = captureLog('trace');
    logger.info(
      { apiKey: KEY, authorization: `Bearer ${KEY}`, headers: { authorization: `Bearer ${KEY}`, 'x-api-key': KEY } },
      'a',
    );
    logger
      .child({ component: 'anthropic' })
      .warn(
        { options: { headers: { 'x-api-key': KEY, authorization: KEY } }, req: { headers: { authorization: KEY } } },
        'b',
      );
    logger.info({ client: { apiKey: KEY }, config: { key: KEY } }, 'c');
    expect(lines).toHaveLength(3);
    expect(lines.join('\n')).not.toContain('REDACTME');
    expect(lines.join('\n')).toContain('[redacted]');
  });
});
