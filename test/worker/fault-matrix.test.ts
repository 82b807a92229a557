import { describe, expect, it } from 'vitest';
import { faultCases, runFaultCase, type FaultResult } from '../harness/fault-matrix.js';

/**
 * The key rows of the provider fault matrix (scripts/fault-matrix.ts prints all of them), each
 * through the real worker, a real SQLite file and the real AnthropicProvider against the fake
 * Anthropic server.
 */

function run(name: string, opts?: { apiKey?: string }): Promise<FaultResult> {
  const c = faultCases().find((x) => x.name === name);
  if (!c) throw new Error(`no fault case "${name}"`);
  return runFaultCase(c, opts);
}

const kinds = (r: FaultResult) => r.outcomes.map((o) => o.kind);

describe('fault matrix through the worker', () => {
  it('529 twice, then 200: the answer is stored in one job attempt, three requests one after another', async () => {
    const r = await run('529 twice, then 200');
    expect(r.calls).toBe(3);
    expect(r.maxInFlight).toBe(1);
    expect(kinds(r)).toEqual(['complete']);
    expect(r.outcomes[0].attempts).toBe(1);
    expect(r.job).toBeNull();
    expect(r.answers).toBe(3);
    expect(r.logs.filter((l) => l.msg === 'provider attempt failed' && l.status === 529)).toHaveLength(2);
  });

  it('529 forever: a transient failure each pass, backoff growing 30 s → 60 s → 120 s, never dropped or parked', async () => {
    const r = await run('529 forever (3 passes)');
    expect(kinds(r)).toEqual(['fail', 'fail', 'fail']);
    expect(r.outcomes.map((o) => o.attempts)).toEqual([1, 2, 3]);
    expect(r.calls).toBe(12); // 4 provider attempts per job attempt
    expect(r.maxInFlight).toBe(1);
    expect(r.job).toMatchObject({ state: 'owed', attempts: 3, refusals: 0 });
    // 30 s × 2^(attempts−1) with ±10 % jitter (DESIGN §3).
    const [a, b, c] = r.delays;
    expect(a).toBeGreaterThanOrEqual(27_000);
    expect(a).toBeLessThanOrEqual(33_000);
    expect(b).toBeGreaterThanOrEqual(54_000);
    expect(b).toBeLessThanOrEqual(66_000);
    expect(c).toBeGreaterThanOrEqual(108_000);
    expect(c).toBeLessThanOrEqual(132_000);
    expect(r.answers).toBe(0);
  });

  it('400: a permanent refusal, not retried by the provider: refusals 1, backoff 30 s', async () => {
    const r = await run('400 invalid_request_error');
    expect(r.calls).toBe(1);
    expect(kinds(r)).toEqual(['refuse']);
    expect(r.outcomes[0].reason).toBe('provider_refusal 400');
    expect(r.job).toMatchObject({ state: 'owed', attempts: 1, refusals: 1 });
    expect(r.delays[0]).toBeGreaterThanOrEqual(27_000);
    expect(r.logs.some((l) => l.msg === 'job outcome' && l.outcome === 'refuse')).toBe(true);
  });

  it('a timeout: the slow request is aborted before the retry is sent; never two requests at once', async () => {
    const r = await run('timeout (slow reply), then 200');
    expect(r.calls).toBe(2);
    expect(r.maxInFlight).toBe(1);
    expect(r.requests[0].aborted).toBe(true);
    expect(r.requests[0].closedAt!).toBeLessThanOrEqual(r.requests[1].receivedAt);
    expect(kinds(r)).toEqual(['complete']);
    expect(r.outcomes[0].attempts).toBe(1);
    expect(r.logs.some((l) => l.msg === 'provider attempt failed' && /timed out/.test(l.reason))).toBe(true);
  });

  it('shutdown mid-request: the request is aborted and the job released with no attempt counted', async () => {
    const r = await run('shutdown mid-request');
    expect(r.calls).toBe(1);
    expect(r.requests[0].aborted).toBe(true);
    expect(r.outcomes).toEqual([{ kind: 'release', reason: 'shutdown', attempts: 1, recorded: 'applied' }]);
    expect(r.job).toMatchObject({ state: 'owed', attempts: 0, refusals: 0, claimToken: null });
    expect(r.delays).toEqual([0]);
  });

  it('401: provider-wide: released without an attempt, the worker cools off, nothing parked', async () => {
    const r = await run('401 authentication_error');
    expect(r.calls).toBe(1);
    expect(kinds(r)).toEqual(['misconfigured']);
    expect(r.job).toMatchObject({ state: 'owed', attempts: 0, refusals: 0, claimToken: null });
    expect(r.misconfigured).toBe('provider_misconfigured 401');
    expect(r.logs.find((l) => l.msg.startsWith('provider misconfigured'))?.cooloffMs).toBe(30_000);
  });

  it('429 with a retry-after over the cap: deferred to the reset time, no attempt counted', async () => {
    const r = await run('429, retry-after 30 s (over the cap)');
    expect(r.calls).toBe(1);
    expect(kinds(r)).toEqual(['defer']);
    expect(r.job).toMatchObject({ state: 'owed', attempts: 0, refusals: 0 });
    expect(r.delays).toEqual([30_000]);
  });

  it('a defective answer is a refusal whose billed tokens are recorded as spend', async () => {
    const r = await run('malformed JSON');
    expect(kinds(r)).toEqual(['refuse']);
    expect(r.job).toMatchObject({ refusals: 1 });
    // The fake server bills 100 input / 20 output tokens per message.
    expect(r.spend).toMatchObject({ calls: 1, inputTokens: 100, outputTokens: 20 });
    expect(r.logs.find((l) => l.msg === 'spend')).toMatchObject({ inputTokens: 100, outputTokens: 20 });
  });

  it('forced tool with a conv:bd-7h7 key: sent as property q1, answered, stored under its key (DESIGN §9.2)', async () => {
    const r = await run('forced tool, key conv:bd-7h7 (not a legal property name)');
    expect(r.calls).toBe(1);
    expect(kinds(r)).toEqual(['complete']);
    expect(r.misconfigured).toBeNull();
    expect(r.job).toBeNull();
    expect(r.answers).toBe(1);
    expect(r.storedKeys).toEqual(['conv:bd-7h7']);
  });

  it('extra keys are ignored; a wrong kind fails the whole call', async () => {
    const extra = await run('extra keys (ignored)');
    expect(kinds(extra)).toEqual(['complete']);
    expect(extra.answers).toBe(3);
    const wrong = await run('wrong kind (noul answered with probabilities)');
    expect(kinds(wrong)).toEqual(['refuse']);
    expect(wrong.answers).toBe(0);
  });

  it('the API key never reaches a log line, even through the provider failure paths', async () => {
    const key = 'sk-ant-api03-MATRIXCANARY-77';
    const lines: string[] = [];
    for (const name of ['529 twice, then 200', '401 authentication_error', 'malformed JSON']) {
      const r = await run(name, { apiKey: key });
      lines.push(...r.logs.map((l) => JSON.stringify(l)));
    }
    expect(lines.length).toBeGreaterThan(5);
    expect(lines.join('\n')).not.toContain('MATRIXCANARY');
  });
});
