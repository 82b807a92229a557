import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openReader } from '../../src/compose/reader.js';
import { githubHistory } from '../harness/github-history.js';
import { ghLabels, LABEL, makeActionsFixture, REPO, type ActionsFixture } from '../harness/actions-fixture.js';

/**
 * DESIGN §17 on real history: the bundled sample (1,881 rows of a real tracker) replayed as GitHub
 * webhook deliveries in time order (test/harness/github-history.ts), drained with actions on
 * `propose` (proposals only, no GitHub write), then with `apply` once seeded verdicts meet the gate
 * (every write idempotent: a second drain writes nothing; GitHub's echoes of Verdict's own writes
 * owe nothing).
 */

const CONFIG = `sets:
  - name: triage
    threshold: 0.5
    eligible: [notTerminal]
    questions:
      blocked: { kind: noul, instructions: "The issue says its work is blocked by something outside it." }
actions:
  sets:
    triage:
      mode: apply
      keys:
        blocked: { label: "${LABEL}" }
`;

describe('replay of GitHub-shaped history with actions', () => {
  let fx: ActionsFixture;
  let wsId = '';
  let surfaced: string[] = [];

  beforeAll(async () => {
    fx = await makeActionsFixture({ configText: CONFIG, provider: 'hashed' });
    const h = githubHistory(REPO);
    fx.github.issues.push(...h.issues);
    for (const n of h.deleted) fx.github.deleted.add(n);
    fx.clock.set(h.deliveries.at(-1)!.at + 86_400_000);
    const statuses = new Map<string, number>();
    for (const d of h.deliveries) {
      const r = await fx.deliver(d.event, d.payload);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ applied: h.deliveries.length });
    fx.clock.advance(31_000); // past the quiet period of the last writes
    wsId = (await fx.store.getWorkspaceBySlug('github'))!.id;
  }, 300_000);
  afterAll(async () => fx?.cleanup());

  it('on propose: one proposal per surfaced open issue, and 0 GitHub writes', async () => {
    const r = await fx.drain({ mode: 'propose' });
    expect(r.claimed).toBeGreaterThan(1_000);
    const flags = (await (
      await openReader(fx.store, fx.registry, fx.deps.readsAgainst, fx.deps.logger)
    ).workspaceFlags(wsId, 'triage'))!;
    surfaced = Object.values(flags.flags)
      .map((f) => f.ref)
      .sort();
    const proposals = (await fx.actions.proposals({ workspace: 'github' }))!;
    console.log(
      `replay: ${r.claimed} jobs, ${surfaced.length} surfaced open issues, ${proposals.length} proposals, ${fx.github.writes().length} GitHub writes`,
    );
    expect(proposals.map((p) => p.ref).sort()).toEqual(surfaced);
    expect(proposals.every((p) => p.reason === 'mode')).toBe(true);
    expect(surfaced.length).toBeGreaterThan(30);
    expect(fx.github.writes()).toEqual([]);
  }, 300_000);

  it('on apply with the gate met by 30 seeded verdicts: every surfaced issue labelled, and a second drain writes nothing', async () => {
    const proposals = (await fx.actions.proposals({ workspace: 'github' }))!;
    for (const p of proposals.slice(0, 30))
      await fx.actions.decide({
        workspace: 'github',
        ref: p.ref,
        set: 'triage',
        key: 'blocked',
        decision: 'apply',
        author: 'seed',
      });
    expect((await fx.actions.gates({ workspace: 'github' }))![0]).toMatchObject({ passes: true, labels: 30 });
    await fx.drain({ mode: 'apply' });
    const writes = fx.github.writes();
    console.log(`replay apply: ${writes.length} GitHub writes for ${surfaced.length} surfaced issues`);
    expect(writes).toHaveLength(surfaced.length);
    for (const ref of surfaced) expect(ghLabels(fx, Number(ref.slice(1)))).toContain(LABEL);
    await fx.drain({ mode: 'apply' });
    console.log(`replay second drain: ${fx.github.writes().length - writes.length} GitHub writes`);
    expect(fx.github.writes()).toHaveLength(writes.length);
    // GitHub's echoes of those writes, delivered back: nothing owed, no verdict, no write.
    const verdicts = (await fx.store.listVerdicts({ workspaceId: wsId })).length;
    for (const h of fx.github.hooks.splice(0))
      expect(await fx.deliver(h.event, h.payload)).toMatchObject({ status: 'applied', owed: 0 });
    expect((await fx.store.listVerdicts({ workspaceId: wsId })).length).toBe(verdicts);
    const r = await fx.drain({ mode: 'apply' });
    expect(r.claimed).toBe(0);
    expect(fx.github.writes()).toHaveLength(writes.length);
  }, 300_000);
});
