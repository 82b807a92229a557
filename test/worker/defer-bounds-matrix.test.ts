import { describe, expect, it } from 'vitest';
import { faultCases, runFaultCase, type FaultResult } from '../harness/fault-matrix.js';

/**
 * DESIGN §3.7 and §3.8 rows of the provider fault matrix, each through the real worker
 * (`--until-idle`: every run below must return on its own), a real SQLite file and the real
 * AnthropicProvider against the fake Anthropic server. The matrix's Retry-After cap is 500 ms, so a
 * 0.1 s Retry-After is "short" and a 30 s one is above the cap.
 */

function run(name: string): Promise<FaultResult> {
  const c = faultCases().find((x) => x.name === name);
  if (!c) throw new Error(`no fault case "${name}"`);
  return runFaultCase(c);
}

const kinds = (r: FaultResult) => r.outcomes.map((o) => o.kind);

describe('5xx and 529 with a short Retry-After are transient fails, never defers', () => {
  it.each(['529 + retry-after 0.1 s forever (2 passes)', '503 api_error + retry-after 0.1 s forever (2 passes)'])(
    '%s: attempts 1 then 2, backoff 30 s then 60 s, 4 requests a pass',
    async (name) => {
      const r = await run(name);
      expect(kinds(r)).toEqual(['fail', 'fail']);
      expect(r.outcomes.map((o) => o.attempts)).toEqual([1, 2]);
      expect(r.calls).toBe(8);
      expect(r.job).toMatchObject({ state: 'owed', attempts: 2, defers: 0 });
      const [a, b] = r.delays;
      expect(a).toBeGreaterThanOrEqual(27_000);
      expect(a).toBeLessThanOrEqual(33_000);
      expect(b).toBeGreaterThanOrEqual(54_000);
      expect(b).toBeLessThanOrEqual(66_000);
      expect(r.answers).toBe(0);
    },
  );

  it('503 with a Retry-After above the cap defers (one request, no attempt counted, one defer counted)', async () => {
    const r = await run('503 + retry-after 30 s (over the cap)');
    expect(r.calls).toBe(1);
    expect(kinds(r)).toEqual(['defer']);
    expect(r.job).toMatchObject({ attempts: 0, defers: 1 });
    expect(r.delays[0]).toBe(30_000);
  });
});

describe("a rejected schema is the set's fault", () => {
  it('one request, released without an attempt and held 30 s; the worker is not stopped as misconfigured', async () => {
    const r = await run('400 rejecting the schema');
    expect(r.calls).toBe(1);
    expect(kinds(r)).toEqual(['schema_rejected']);
    expect(r.misconfigured).toBeNull();
    expect(r.job).toMatchObject({ state: 'owed', attempts: 0, lastError: 'schema_rejected 400' });
    expect(r.delays[0]).toBe(30_000);
    expect(
      r.logs.some(
        (l) =>
          l.msg === 'answer schema rejected: not claiming this set during the cooling-off period' && l.set === 'matrix',
      ),
    ).toBe(true);
  });
});
