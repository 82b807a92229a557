import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { formatEstimates } from '../../src/cli/estimate.js';
import { formatJobs, listJobViews } from '../../src/cli/jobs.js';
import { formatStatus, statusReport } from '../../src/cli/status.js';
import { attentionSet } from '../../src/decision/production-sets.js';
import { noul } from '../../src/decision/questions.js';
import { defineQuestionSet } from '../../src/decision/registry.js';
import { AnthropicProvider } from '../../src/providers/anthropic.js';
import { Backfill } from '../../src/backfill/backfill.js';
import { estimateSet, estimateTarget } from '../../src/backfill/estimate.js';
import { judgeHealth, serveMetrics, WorkerMetrics, type MetricsServer } from '../../src/worker/metrics.js';
import { Worker } from '../../src/worker/worker.js';
import { spawnCli, waitFor } from '../harness/cli-process.js';
import { FakeAnthropicServer } from '../../src/testing/fake-anthropic-server.js';
import { captureLog } from '../harness/log-capture.js';
import { makeFixture, tempDir, type Fixture } from '../harness/store-fixture.js';

/**
 * No item text, comment text, question text or API key in any log line, in metrics output or in
 * `status` output (DESIGN §1 principle 9), checked end to end with canary strings:
 * - the real CLI as child processes (import, a long-running worker with --metrics-port, status,
 *   jobs, estimate, backfill) over an export whose items and comments carry canaries, with the
 *   canary key in ANTHROPIC_API_KEY and everything logged at trace;
 * - in-process, the real Anthropic provider against the fake Anthropic server (which echoes the
 *   key, the item text and the question text back in its error bodies), a custom set whose question
 *   text carries a canary, a worker with metrics, status, jobs, estimate and a backfill.
 * Each part also shows the canaries really went where they may go (the database, the provider), so
 * a leak would be seen.
 */

const ITEM = 'ITEMCANARY7f3a';
const COMMENT = 'COMMENTCANARY91b';
const QUESTION = 'QUESTIONCANARY44d';
const KEY = 'sk-ant-api03-KEYCANARY-0c9e5d';
const CANARIES = [ITEM, COMMENT, QUESTION, KEY, 'CANARY'];

function expectClean(label: string, text: string): void {
  for (const c of CANARIES) expect(text.includes(c), `${label} contains ${c}`).toBe(false);
}

function beadsRow(i: number, status = 'open'): string {
  return JSON.stringify({
    id: `bd-s${i}`,
    title: `Task ${i} about ${ITEM}`,
    description: `We are blocked: ${ITEM} waits for the vendor.`,
    notes: `more ${ITEM}`,
    status,
    priority: 2,
    issue_type: 'task',
    created_at: '2026-01-10T10:00:00Z',
    updated_at: '2026-01-10T10:00:00Z',
    comments: [
      {
        id: 100 + i,
        issue_id: `bd-s${i}`,
        author: 'amy',
        text: `Comment ${COMMENT} here`,
        created_at: '2026-01-11T10:00:00Z',
      },
    ],
  });
}

describe('secrecy: the CLI as real processes', () => {
  let dir: { dir: string; cleanup: () => void };
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => dir.cleanup());

  it('import, worker with metrics, status, jobs, estimate and backfill print no canary', async () => {
    const file = join(dir.dir, 'verdict.db');
    const input = join(dir.dir, 'issues.jsonl');
    writeFileSync(input, `${[1, 2, 3, 4].map((i) => beadsRow(i)).join('\n')}\n${beadsRow(5, 'closed')}\n`);
    const env = { ANTHROPIC_API_KEY: KEY, VERDICT_LOG_LEVEL: 'trace' };
    const db = ['--database-url', file, '--provider', 'fake'];
    const outputs: Array<[string, string]> = [];
    const run = async (args: string[], expectCode = 0) => {
      const p = spawnCli([...args, ...db], env);
      const { code } = await p.exited;
      outputs.push([args.join(' '), `${p.stdout()}\n${p.stderr()}`]);
      expect(code, `${args.join(' ')}: ${p.stderr()}`).toBe(expectCode);
      return p.stdout();
    };

    await run(['import', 'beads', input]);
    // The canaries are in the store: the checks below can see a leak.
    const d = new Database(file, { readonly: true });
    expect(
      (d.prepare('SELECT count(*) AS n FROM items WHERE content LIKE ?').get(`%${ITEM}%`) as { n: number }).n,
    ).toBe(5);
    expect(
      (d.prepare('SELECT count(*) AS n FROM comments WHERE body LIKE ?').get(`%${COMMENT}%`) as { n: number }).n,
    ).toBe(5);
    d.close();

    const worker = spawnCli(['worker', '--metrics-port', '0', '--tick-ms', '50', '--concurrency', '2', ...db], env);
    const port = await waitFor(() => /"port":(\d+)/.exec(worker.stderr())?.[1], 30_000);
    const pending = () => {
      const c = new Database(file, { readonly: true });
      try {
        return (c.prepare('SELECT count(*) AS n FROM decision_jobs').get() as { n: number }).n;
      } finally {
        c.close();
      }
    };
    await waitFor(() => pending() === 0, 30_000);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const health = await (await fetch(`http://127.0.0.1:${port}/healthz`)).text();
    expect(metrics).toContain('verdict_provider_calls_total{set="attention",outcome="ok"} 4');
    expect(JSON.parse(health).status).toBe('ok');
    outputs.push(['metrics', metrics], ['healthz', health]);
    const status = await run(['status']);
    expect(status).toContain(`alive`); // the worker's heartbeat is read
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
    outputs.push(['worker', `${worker.stdout()}\n${worker.stderr()}`]);
    expect(worker.stderr()).toContain('"msg":"spend"');

    await run(['status', '--json']);
    await run(['jobs', 'list']);
    await run(['jobs', 'list', '--json']);
    await run(['estimate']);
    await run(['estimate', '--json']);
    await run(['backfill', '--set', 'effort', '--drain', '--restart', '--tick-ms', '50']);
    // A paid provider: the estimate is printed and nothing is owed without --yes (the key is read, never printed).
    const paid = spawnCli(['backfill', '--set', 'attention', '--database-url', file, '--provider', 'anthropic'], env);
    expect((await paid.exited).code).toBe(2);
    expect(paid.stdout()).toContain('estimate for anthropic:claude-haiku-5-5');
    outputs.push(['paid backfill', `${paid.stdout()}\n${paid.stderr()}`]);

    for (const [label, text] of outputs) expectClean(label, text);
  }, 120_000);
});

describe('secrecy: in-process with the Anthropic provider and a custom set', () => {
  let server: FakeAnthropicServer;
  let fx: Fixture;
  let metricsServer: MetricsServer | null = null;
  beforeAll(async () => {
    server = await FakeAnthropicServer.start();
  });
  afterAll(async () => server.close());
  const secretSet = defineQuestionSet({
    name: 'secret_check',
    questions: { leak: noul(`Does the item mention ${QUESTION}?`) },
    eligible: ['notSystem', 'notTerminal'],
    quietPeriodMs: 0,
  });
  beforeEach(async () => {
    fx = await makeFixture([attentionSet, secretSet]);
    server.reset();
  });
  afterEach(async () => {
    await metricsServer?.close();
    metricsServer = null;
    await fx.cleanup();
  });

  it('logs, metrics, /healthz, status, jobs, estimate and backfill carry none of them, even when the provider echoes them in errors', async () => {
    for (let i = 1; i <= 4; i++) {
      const item = await fx.store.createItem(
        // S-4's body is over the input budget below, so its jobs park (status lists parked jobs).
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: `S-${i}`,
          title: `Title ${ITEM}`,
          content: `Body ${ITEM} ${i === 4 ? 'x'.repeat(12_000) : ''}`,
          fields: { status: 'open', note: ITEM },
        },
        { quietPeriod: false },
      );
      await fx.store.addComment(
        { itemId: item.row.id, author: 'amy', body: `Comment ${COMMENT}` },
        { quietPeriod: false },
      );
    }
    const echo = `bad key ${KEY}; prompt ${ITEM} ${COMMENT} ${QUESTION}`;
    // Job 1 is refused (400), job 2 meets four 529s (fails, backs off), the rest are answered; then a 401.
    server.script(
      FakeAnthropicServer.error(400, 'invalid_request_error', echo),
      ...Array.from({ length: 4 }, () => FakeAnthropicServer.error(529, 'overloaded_error', echo)),
    );
    const { logger, lines } = captureLog('trace');
    const provider = new AnthropicProvider({
      apiKey: KEY,
      baseURL: server.url,
      logger: logger.child({ component: 'anthropic' }),
      minBackoffMs: 1,
      maxBackoffMs: 2,
      inputBudgetTokens: 3_000,
    });
    const metrics = new WorkerMetrics({ store: fx.store, logger });
    const make = () =>
      new Worker({
        store: fx.store,
        onSpend: (r) => metrics.countSpend(r),
        registry: fx.registry,
        provider,
        logger,
        workerId: 'w',
        concurrency: 1,
        tickMs: 10,
        leaseMs: 600_000,
        passLimit: 20,
        abandonLimit: 8,
        untilIdle: true,
        onOutcome: (r) => metrics.observe(r),
      });
    let w = make();
    metricsServer = await serveMetrics({
      metrics,
      health: () => judgeHealth(w, 60_000),
      port: 0,
      host: '127.0.0.1',
      logger,
    });
    await w.run();
    // The failure paths ran: a refusal and a transient failure are on record.
    const jobsAfterFailures = await listJobViews(fx.store, {});
    expect(jobsAfterFailures.some((j) => j.refusals === 1)).toBe(true);
    expect(jobsAfterFailures.some((j) => j.lastError === 'provider_unavailable 529')).toBe(true);
    const statusAfterFailures = await statusReport(fx.store);
    expect(statusAfterFailures.failingSets.length).toBeGreaterThan(0);
    expect(statusAfterFailures.parked.jobs.map((j) => j.ref)).toEqual(['S-4', 'S-4']);
    // Another write, then a 401: provider-wide, so the worker cools off and /healthz reports it.
    const first = (await fx.store.listItems({ workspaceId: fx.ws.id }))[0];
    await fx.store.updateItem(first.id, { content: `Edited ${ITEM}` }, { quietPeriod: false });
    fx.clock.advance(3_700_000); // past the re-ask debounce and every backoff
    server.script(FakeAnthropicServer.error(401, 'authentication_error', echo));
    w = make();
    await w.run();
    expect(w.providerProblem).toMatch(/401/);

    // What was sent: the key, item, comment and question text all reached the provider.
    const sent = server.messages.map((m) => `${m.rawBody}\n${JSON.stringify(m.headers)}`).join('\n');
    for (const c of [ITEM, COMMENT, QUESTION, KEY]) expect(sent).toContain(c);
    const jobs = [...jobsAfterFailures, ...(await listJobViews(fx.store, {}))];

    const metricsText = await (await fetch(`http://127.0.0.1:${metricsServer.port}/metrics`)).text();
    const health = await (await fetch(`http://127.0.0.1:${metricsServer.port}/healthz`)).text();
    expect(JSON.parse(health).status).toBe('unhealthy');
    const status = await statusReport(fx.store);
    const target = estimateTarget('anthropic', 'claude-haiku-5-5');
    const estimates = [
      await estimateSet(fx.store, secretSet, target),
      await estimateSet(fx.store, attentionSet, target),
    ];
    const bf = new Backfill({
      store: fx.store,
      set: secretSet,
      chunkSize: 2,
      tickMs: 1,
      logger,
      signal: AbortSignal.abort(),
    });
    await bf.run();

    expect(lines.some((l) => l.includes('"msg":"spend"'))).toBe(true);
    expect(lines.some((l) => l.includes('"msg":"job outcome"'))).toBe(true);
    expectClean('logs', lines.join('\n'));
    expectClean('metrics', metricsText);
    expectClean('healthz', health);
    for (const st of [statusAfterFailures, status]) {
      expectClean('status', formatStatus(st));
      expectClean('status --json', JSON.stringify(st));
    }
    expectClean('jobs', formatJobs(jobs));
    expectClean('jobs --json', JSON.stringify(jobs));
    expectClean('estimate', formatEstimates(target, estimates));
    expectClean('estimate --json', JSON.stringify(estimates));
  });
});
