import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openReader } from '../../src/compose/reader.js';
import { githubItemId } from '../../src/integrations/github/mapping.js';
import { ghIssue, ghLabels, LABEL, makeActionsFixture, REPO, type ActionsFixture } from '../harness/actions-fixture.js';

/**
 * DESIGN §17 end to end: the real @octokit/rest against the local fake GitHub, a manual clock, the
 * real worker's until-idle drains. One story in order: a key under the gate proposes; 30 agreeing
 * verdicts open the gate and labels are written (once: a second drain writes nothing); Verdict's own
 * `labeled` echoes owe nothing; a clear removes a label; a person's removal is a verdict the model
 * never overrules; a deleted item gets no write; a secondary rate limit waits and loses nothing.
 */

const BLOCKED = 'BLOCKED by the vendor API outage; nothing to do until they fix it.';
const FINE = 'Add a retry button to the upload form.';

describe('actions in GitHub', () => {
  let fx: ActionsFixture;
  let wsId = '';
  const itemOf = (n: number) => githubItemId({ repo: REPO, workspaceId: wsId, collectionId: '' }, n);

  beforeAll(async () => {
    fx = await makeActionsFixture({ mode: 'apply' });
    for (let n = 1; n <= 35; n++) await fx.open(n, BLOCKED);
    for (let n = 36; n <= 40; n++) await fx.open(n, FINE);
    wsId = (await fx.store.getWorkspaceBySlug('github'))!.id;
  });
  afterAll(async () => fx?.cleanup());

  it('under the gate, a key makes proposals only: 35 proposed, 0 GitHub writes', async () => {
    const r = await fx.drain();
    expect(r.actions).toMatchObject({ queued: 0, delivered: 0 });
    const proposals = (await fx.actions.proposals({ workspace: 'github' }))!;
    expect(proposals).toHaveLength(35);
    expect(proposals.every((p) => p.reason === 'gate' && p.labels[0] === LABEL)).toBe(true);
    expect(fx.github.writes()).toEqual([]);
    const gate = (await fx.actions.gates({ workspace: 'github' }))![0];
    expect(gate).toMatchObject({ passes: false, labels: 0, lacks: '30 more labelled items, a measured precision' });
  });

  it('30 agreeing verdicts put the key past the gate: every label is written, with its comment, once', async () => {
    for (let n = 1; n <= 30; n++)
      await fx.actions.decide({
        workspace: 'github',
        ref: `#${n}`,
        set: 'triage',
        key: 'blocked',
        decision: 'apply',
        author: 'alice',
      });
    const gate = (await fx.actions.gates({ workspace: 'github' }))![0];
    expect(gate).toMatchObject({ passes: true, labels: 30, precision: 1, source: 'verdicts' });
    const r = await fx.drain();
    expect(r.actions?.failed).toBe(0);
    for (let n = 1; n <= 35; n++) expect(ghLabels(fx, n)).toEqual([LABEL]);
    for (let n = 36; n <= 40; n++) expect(ghLabels(fx, n)).toEqual([]);
    const comments = fx.github.comments.filter((c) => String(c.issue_url).endsWith('/issues/31'));
    expect(comments).toHaveLength(1);
    expect(String(comments[0].body)).toBe(
      'Verdict (triage/blocked): yes (p=0.95). https://verdict.example.com/items/%2331',
    );
    expect(await fx.actions.proposals({ workspace: 'github' })).toEqual([]);
    const writes = fx.github.writes().length;
    expect(writes).toBe(35 + 35); // one label add and one comment per issue
    await fx.drain();
    expect(fx.github.writes()).toHaveLength(writes);
  });

  it("Verdict's own labeled deliveries owe nothing, record no verdict and change no state hash", async () => {
    const reader = await openReader(fx.store, fx.registry, fx.deps.readsAgainst, fx.deps.logger);
    const before = await reader.decisions(itemOf(31));
    const verdicts = (await fx.store.listVerdicts({ workspaceId: wsId })).length;
    const seq = (await fx.store.getItem(itemOf(31)))!.seq;
    expect(fx.github.hooks.length).toBeGreaterThanOrEqual(35);
    for (const h of fx.github.hooks.splice(0)) {
      const r = await fx.deliver(h.event, h.payload);
      expect(r).toMatchObject({ status: 'applied', owed: 0 });
    }
    expect((await fx.store.listVerdicts({ workspaceId: wsId })).length).toBe(verdicts);
    expect((await fx.store.getItem(itemOf(31)))!.seq).toBe(seq);
    expect(await fx.store.listJobs({ workspaceId: wsId })).toEqual([]);
    const after = await reader.decisions(itemOf(31));
    expect(after.map((d) => [d.current, d.rowId])).toEqual(before.map((d) => [d.current, d.rowId]));
    expect(after[0].current).toBe(true);
  });

  it('a clear removes the label', async () => {
    const issue = ghIssue(fx, 32);
    issue.body = FINE;
    await fx.deliver('issues', {
      action: 'edited',
      issue: structuredClone(issue),
      changes: { body: { from: BLOCKED } },
      sender: { login: 'bob', type: 'User' },
    });
    await fx.drain();
    expect(ghLabels(fx, 32)).toEqual([]);
  });

  it("a person's unlabeled delivery records a disagree, and the model never adds the label back", async () => {
    const issue = ghIssue(fx, 33);
    issue.labels = [];
    await fx.deliver('issues', {
      action: 'unlabeled',
      issue: structuredClone(issue),
      label: { name: LABEL },
      sender: { login: 'carol', type: 'User' },
    });
    const v = (await fx.store.listVerdicts({ workspaceId: wsId, itemId: itemOf(33) })).at(-1)!;
    expect(v).toMatchObject({
      verdict: 'disagree',
      author: 'github:carol',
      value: JSON.stringify({ type: 'noul', noul: 0 }),
    });
    // The issue changes and the model answers again, still "blocked": a proposal, never a write.
    issue.body = `${BLOCKED}\n\nStill waiting on the vendor.`;
    await fx.deliver('issues', {
      action: 'edited',
      issue: structuredClone(issue),
      changes: { body: { from: BLOCKED } },
      sender: { login: 'carol', type: 'User' },
    });
    const writes = fx.github.writes().length;
    await fx.drain();
    expect(ghLabels(fx, 33)).toEqual([]);
    expect(fx.github.writes()).toHaveLength(writes);
    const p = (await fx.actions.proposals({ workspace: 'github' }))!.find((x) => x.ref === '#33');
    expect(p).toMatchObject({ reason: 'person', labels: [LABEL] });
  });

  it('a deleted or closed item gets no write, in Verdict or on GitHub', async () => {
    await fx.open(41, BLOCKED);
    await fx.open(42, BLOCKED);
    await fx.open(44, BLOCKED);
    await fx.drain({ token: false }); // planned and queued, nothing written without a token
    expect(ghLabels(fx, 41)).toEqual([]);
    await fx.deliver('issues', {
      action: 'deleted',
      issue: structuredClone(ghIssue(fx, 41)),
      sender: { login: 'dave', type: 'User' },
    });
    fx.github.deleted.add(42); // gone on GitHub only: it answers 410
    ghIssue(fx, 44).state = 'closed'; // closed on GitHub before its webhook arrived
    const writes = fx.github.writes().length;
    const r = await fx.drain();
    expect(fx.github.writes()).toHaveLength(writes);
    expect(r.actions?.github?.skipped).toBe(3);
    expect(ghLabels(fx, 41)).toEqual([]);
  });

  it('a 403 secondary rate limit waits a minute and loses nothing', async () => {
    await fx.open(43, BLOCKED);
    // The first request about #43 is answered with GitHub's secondary limit (403, its message, no retry-after).
    let limited = false;
    fx.github.onRequest = (req) => {
      if (!limited && req.path === `/repos/${REPO}/issues/43`) fx.github.faults.push({ kind: 'secondary' });
      limited ||= req.path === `/repos/${REPO}/issues/43`;
    };
    const r = await fx.drain();
    fx.github.onRequest = null;
    expect(fx.github.requests.filter((q) => q.status === 403)).toHaveLength(1);
    expect(r.actions?.github?.rateLimited).toBe(1);
    expect(ghLabels(fx, 43)).toEqual([]);
    const pending = await fx.store.pendingActionWrites(wsId);
    expect(pending).toHaveLength(1);
    expect(pending[0].attempts).toBe(0); // a limit waited out is not a failed attempt
    const row = (await fx.store.listDecisionEvents({ kind: 'github', itemId: itemOf(43) }))[0];
    expect(row.nextAttemptAt - fx.clock.now()).toBe(60_000);
    await fx.drain();
    expect(ghLabels(fx, 43)).toEqual([]); // not due yet: nothing sent early
    fx.clock.advance(60_000);
    await fx.drain();
    expect(ghLabels(fx, 43)).toEqual([LABEL]);
    expect(await fx.store.pendingActionWrites(wsId)).toEqual([]);
  });

  it('status shows applied, proposed, failed and the gate per key', async () => {
    const [s] = (await fx.actions.status({ workspace: 'github' }))!;
    expect(s).toMatchObject({
      set: 'triage',
      key: 'blocked',
      mode: 'apply',
      applied: 34,
      proposed: 1,
      pending: 0,
      failed: 0,
    });
    expect(s.gate.passes).toBe(true);
  });
});

describe('the allowlist at delivery', () => {
  it('a planned label outside the label rule is never written, whatever the row says', async () => {
    const fx = await makeActionsFixture({ mode: 'apply' });
    try {
      await fx.open(1, BLOCKED);
      const ws = (await fx.store.getWorkspaceBySlug('github'))!;
      const itemId = githubItemId({ repo: REPO, workspaceId: ws.id, collectionId: '' }, 1);
      // A row that asks for `bug` (a hand-edited database, or a bug of ours): the sender refuses it.
      const change = {
        repo: REPO,
        number: 1,
        set: 'triage',
        key: 'blocked',
        group: [LABEL, 'bug'],
        want: ['bug'],
        comment: null,
      };
      await fx.store.saveItemAction(
        {
          workspaceId: ws.id,
          itemId,
          questionSet: 'triage',
          questionKey: 'blocked',
          want: ['bug'],
          source: 'human',
          decisionId: null,
          proposal: null,
          proposalReason: null,
          proposalDecisionId: null,
        },
        { targetUrl: `github:${REPO}`, eventId: 'e1', payload: JSON.stringify(change) },
      );
      await fx.actions.apply({ token: 'ghp_test_token', baseUrl: fx.github.url, mode: 'propose' });
      expect(fx.github.writes()).toEqual([]);
      expect((await fx.store.pendingActionWrites(ws.id))[0]).toMatchObject({
        attempts: 1,
        lastError: 'labels outside the allowlist',
      });
    } finally {
      await fx.cleanup();
    }
  });
});
