import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import type { RunReport } from '../../src/runner/job-life.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { Worker } from '../../src/worker/worker.js';
import { buildRuntime, reloadWorker } from '../../src/cli/reload.js';
import { loadConfig } from '../../src/config.js';
import { spawnCli, waitFor } from '../harness/cli-process.js';
import { makeFixture, tempDir, TASK_SCHEMA } from '../harness/store-fixture.js';

/**
 * SIGHUP reload (DESIGN §10): a valid new config swaps the provider and cancels the in-flight pass,
 * whose job is released without an attempt; an invalid one is refused and the old one keeps
 * running. The worker re-reads its `--env-vars-file` on SIGHUP.
 */

describe('Worker.cancelPass', () => {
  it('aborts the in-flight evaluation: its job is released without an attempt and the swapped provider answers it', async () => {
    const fx = await makeFixture();
    try {
      const a = new FakeProvider({ model: 'fake-A', latencyMs: 30_000 });
      const b = new FakeProvider({ model: 'fake-B' });
      const item = await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: 'T-1',
          title: 't',
          content: 'c',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
      const outcomes: RunReport[] = [];
      const worker = new Worker({
        store: fx.store,
        registry: fx.registry,
        provider: a,
        logger: silentLogger,
        workerId: 'w',
        concurrency: 1,
        tickMs: 10,
        leaseMs: 60_000,
        passLimit: 20,
        abandonLimit: 8,
        onOutcome: (r) => outcomes.push(r),
      });
      const running = worker.run();
      await waitFor(() => a.requests.length === 1, 5_000, 5);
      // attention and effort are co-asked in that one call (DESIGN §7.2): both jobs are in flight.
      const inFlight = (await fx.store.listJobs({ itemId: item.row.id })).filter((j) => j.claimToken !== null);
      expect(inFlight.map((j) => [j.questionSet, j.attempts])).toEqual([
        ['attention', 1],
        ['effort', 1],
      ]);
      worker.swap(b, fx.registry);
      worker.cancelPass('reload');
      await waitFor(async () => (await fx.store.listJobs({ itemId: item.row.id })).length === 0, 5_000, 5);
      worker.stop();
      await running;
      const released = outcomes.slice(0, 2);
      expect(released.map((r) => [r.claim.questionSet, r.outcome]).sort()).toEqual(
        inFlight.map((j) => [j.questionSet, { kind: 'release', reason: 'reload' }]),
      );
      // The released jobs' next claims are attempt 1 again: the cancelled one was not counted.
      for (const j of inFlight)
        expect(outcomes.slice(2).find((r) => r.claim.questionSet === j.questionSet)!.claim.attempts).toBe(1);
      expect(outcomes.slice(2).every((r) => r.outcome.kind === 'complete')).toBe(true);
      expect(a.requests).toHaveLength(1); // the old provider got nothing after the cancel
      const models = new Set((await fx.store.listDecisions(item.row.id)).map((d) => d.model));
      expect([...models]).toEqual(['fake-B']);
    } finally {
      await fx.cleanup();
    }
  });

  it('a swap ends the cooling-off a provider-wide error started: the new provider is asked at once', async () => {
    const fx = await makeFixture();
    try {
      const a = new FakeProvider({ model: 'fake-A', faults: [{ status: 401 }] });
      const b = new FakeProvider({ model: 'fake-B' });
      const item = await fx.store.createItem(
        {
          workspaceId: fx.ws.id,
          collectionId: fx.tasks.id,
          ref: 'T-1',
          title: 't',
          content: 'c',
          fields: { status: 'open' },
        },
        { quietPeriod: false },
      );
      const worker = new Worker({
        store: fx.store,
        registry: fx.registry,
        provider: a,
        logger: silentLogger,
        workerId: 'w',
        concurrency: 1,
        tickMs: 10,
        leaseMs: 60_000,
        passLimit: 20,
        abandonLimit: 8,
        clock: fx.clock,
      });
      const running = worker.run();
      await waitFor(() => worker.providerProblem !== null, 5_000, 5); // cooling off for 30 s of the clock now
      // The slot keeps turning tick by tick as the clock moves (it is idle, not stuck) but claims
      // nothing while cooling off.
      for (let tick = 0; tick < 6; tick++) {
        const t0 = worker.lastLoopAt;
        fx.clock.advance(10);
        await waitFor(() => worker.lastLoopAt >= t0 + 10, 5_000, 1);
        expect(worker.lastLoopAt).toBe(fx.clock.now()); // the worker's time is the clock it was given
      }
      expect(a.requests).toHaveLength(1);
      expect((await fx.store.listJobs({ itemId: item.row.id })).map((j) => [j.attempts, j.claimToken])).toEqual(
        fx.registry.all().map(() => [0, null]),
      ); // one job per production set
      worker.swap(b, fx.registry);
      worker.cancelPass('reload');
      // Each look moves the clock one tick, ending the slot's idle wait: no wait of real time.
      await waitFor(
        async () => {
          fx.clock.advance(10);
          return (await fx.store.listJobs({ itemId: item.row.id })).length === 0;
        },
        5_000,
        5,
      );
      worker.stop();
      await running;
      expect(worker.providerProblem).toBeNull();
      expect(b.requests.length).toBe(1); // attention and effort, co-asked (DESIGN §7.2)
    } finally {
      await fx.cleanup();
    }
  });
});

describe('reloadWorker', () => {
  async function setup() {
    const fx = await makeFixture();
    const cfg = loadConfig({ provider: 'fake', model: 'fake-A', leaseMs: '60000', databaseUrl: fx.file }, {});
    const current = buildRuntime(cfg, silentLogger);
    const worker = new Worker({
      store: fx.store,
      registry: fx.registry,
      provider: current.provider!,
      logger: silentLogger,
      workerId: 'w',
      concurrency: 1,
      tickMs: 10,
      leaseMs: cfg.leaseMs,
      passLimit: 20,
      abandonLimit: 8,
    });
    return { fx, cfg, current, worker };
  }

  it('refuses a provider whose worst-case call the running lease cannot cover, and keeps the old runtime', async () => {
    const { fx, current, worker } = await setup();
    try {
      const next = loadConfig(
        { provider: 'anthropic', leaseMs: '60000', databaseUrl: fx.file },
        { ANTHROPIC_API_KEY: 'sk-ant-x' },
      );
      const r = reloadWorker({ worker, store: fx.store, current, read: () => next, logger: silentLogger });
      expect(r.result).toEqual({
        status: 'refused',
        reason: expect.stringMatching(/--lease-ms 60000 is shorter than one provider call's worst case/),
      });
      expect(r.runtime).toBe(current);
    } finally {
      await fx.cleanup();
    }
  });

  it('a reload to provider none owes nothing from then on and stops the worker', async () => {
    const { fx, current, worker } = await setup();
    try {
      const running = worker.run();
      const r = reloadWorker({
        worker,
        store: fx.store,
        current,
        read: () => loadConfig({ provider: 'none', databaseUrl: fx.file }, {}),
        logger: silentLogger,
      });
      expect(r.result).toEqual({ status: 'disabled' });
      await running; // stopped
      const w = await fx.store.createItem({
        workspaceId: fx.ws.id,
        collectionId: fx.tasks.id,
        ref: 'T-9',
        title: 't',
        fields: { status: 'open' },
      });
      expect(w.owed).toBe(0);
    } finally {
      await fx.cleanup();
    }
  });

  it('names options that only change at a restart, and applies the rest', async () => {
    const { fx, current, worker } = await setup();
    try {
      const next = loadConfig(
        { provider: 'fake', model: 'fake-B', leaseMs: '60000', concurrency: '7', databaseUrl: fx.file },
        {},
      );
      const r = reloadWorker({ worker, store: fx.store, current, read: () => next, logger: silentLogger });
      expect(r.result).toEqual({
        status: 'applied',
        provider: 'fake',
        model: 'fake-B',
        restartNeeded: ['concurrency'],
      });
      expect(r.runtime.provider!.model).toBe('fake-B');
    } finally {
      worker.stop();
      await fx.cleanup();
    }
  });
});

let dir: { dir: string; cleanup: () => void };
let file: string;
let envFile: string;
beforeEach(() => {
  dir = tempDir();
  file = join(dir.dir, 'verdict.db');
  envFile = join(dir.dir, 'verdict.env');
});
afterEach(() => dir.cleanup());

async function seedOne(): Promise<string> {
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  const ws = await store.createWorkspace({ slug: 'acme' });
  const col = await store.createCollection({ workspaceId: ws.id, slug: 'task', schema: TASK_SCHEMA });
  const r = await store.createItem(
    {
      workspaceId: ws.id,
      collectionId: col.id,
      ref: 'T-1',
      title: 'reload me',
      content: 'body',
      fields: { status: 'open' },
    },
    { quietPeriod: false },
  );
  await store.close();
  return r.row.id;
}

function q<T>(sql: string, ...params: unknown[]): T[] {
  const d = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return d.prepare(sql).all(...params) as T[];
  } finally {
    d.close();
  }
}

function logLines(stderr: string): Array<Record<string, any>> {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

const workerArgs = () => [
  'worker',
  '--database-url',
  file,
  '--env-vars-file',
  envFile,
  '--tick-ms',
  '50',
  '--concurrency',
  '1',
  '--lease-ms',
  '60000',
  '--log-level',
  'debug',
];

describe('SIGHUP reload of a worker process', () => {
  it('a valid new config: the provider is swapped (answers carry model B) and the in-flight job is released without an attempt', async () => {
    const itemId = await seedOne();
    writeFileSync(envFile, 'VERDICT_PROVIDER=fake\nVERDICT_MODEL=fake-A\nVERDICT_FAKE_LATENCY_MS=20000\n');
    const w = spawnCli(workerArgs());
    try {
      await waitFor(
        () =>
          q<{ t: string | null }>(
            'SELECT claim_token AS t FROM decision_jobs WHERE item_id = ? AND claim_token IS NOT NULL',
            itemId,
          )[0]?.t,
      );
      writeFileSync(envFile, 'VERDICT_PROVIDER=fake\nVERDICT_MODEL=fake-B\nVERDICT_FAKE_LATENCY_MS=1500\n');
      w.child.kill('SIGHUP');
      const release = (await waitFor(() =>
        logLines(w.stderr()).find((l) => l.msg === 'job outcome' && l.outcome === 'release'),
      ))!;
      expect(release).toMatchObject({ reason: 'reload', attempts: 1 });
      expect(logLines(w.stderr()).find((l) => l.msg === 'config reloaded')).toMatchObject({
        provider: 'fake',
        model: 'fake-B',
      });
      // The released job is claimed again (by model B, which takes 1.5 s) as attempt 1, not 2.
      const reclaimed = await waitFor(
        () =>
          q<{ attempts: number }>(
            'SELECT attempts FROM decision_jobs WHERE item_id = ? AND question_set = ? AND claim_token IS NOT NULL',
            itemId,
            release.set,
          )[0],
      );
      expect(reclaimed.attempts).toBe(1);
      await waitFor(() => q('SELECT 1 FROM decision_jobs').length === 0, 30_000);
      const models = q<{ model: string; n: number }>('SELECT model, count(*) AS n FROM item_decisions GROUP BY model');
      expect(models).toEqual([{ model: 'fake-B', n: 4 }]); // three attention keys and one effort key
    } finally {
      w.child.kill('SIGTERM');
    }
    expect((await w.exited).code).toBe(0);
  }, 60_000);

  it('an invalid new config is refused with the reason logged; the old provider keeps running', async () => {
    const itemId = await seedOne();
    writeFileSync(envFile, 'VERDICT_PROVIDER=fake\nVERDICT_MODEL=fake-A\nVERDICT_FAKE_LATENCY_MS=2000\n');
    const w = spawnCli(workerArgs());
    try {
      await waitFor(
        () =>
          q<{ t: string | null }>(
            'SELECT claim_token AS t FROM decision_jobs WHERE item_id = ? AND claim_token IS NOT NULL',
            itemId,
          )[0]?.t,
      );
      writeFileSync(envFile, 'VERDICT_PROVIDER=anthropic\nVERDICT_MODEL=fake-B\n'); // no ANTHROPIC_API_KEY
      w.child.kill('SIGHUP');
      const refused = (await waitFor(() => logLines(w.stderr()).find((l) => l.msg.startsWith('reload refused'))))!;
      expect(refused.reason).toMatch(/ANTHROPIC_API_KEY/);
      writeFileSync(envFile, 'VERDICT_PROVIDER=fake\nVERDICT_MODEL=fake-B\nVERDICT_INPUT_BUDGET_TOKENS=lots\n');
      w.child.kill('SIGHUP');
      await waitFor(() => logLines(w.stderr()).filter((l) => l.msg.startsWith('reload refused')).length === 2);
      expect(logLines(w.stderr()).filter((l) => l.msg.startsWith('reload refused'))[1].reason).toMatch(
        /VERDICT_INPUT_BUDGET_TOKENS: got "lots"/,
      );
      await waitFor(() => q('SELECT 1 FROM decision_jobs').length === 0, 30_000);
      expect(logLines(w.stderr()).some((l) => l.msg === 'job outcome' && l.outcome === 'release')).toBe(false);
      expect(logLines(w.stderr()).some((l) => l.msg === 'config reloaded')).toBe(false);
      expect(q<{ model: string; n: number }>('SELECT model, count(*) AS n FROM item_decisions GROUP BY model')).toEqual(
        [{ model: 'fake-A', n: 4 }],
      );
    } finally {
      w.child.kill('SIGTERM');
    }
    expect((await w.exited).code).toBe(0);
  }, 60_000);
});
