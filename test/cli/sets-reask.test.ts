import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadQuestionSetConfig } from '../../src/decision/config-file.js';
import { productionSets } from '../../src/decision/production-sets.js';
import { questionFingerprint } from '../../src/decision/questions.js';
import { Registry } from '../../src/decision/registry.js';
import { importConventions } from '../../src/importers/conventions.js';
import { silentLogger } from '../../src/log.js';
import { FakeProvider } from '../../src/providers/fake.js';
import { runOnce } from '../../src/runner/job-life.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { loadCli, runCli } from '../harness/cli-in-process.js';
import { ROOT } from '../harness/cli-process.js';
import { tempDir, TASK_SCHEMA } from '../harness/store-fixture.js';

/**
 * `verdict sets list|show`, `verdict reask`, `verdict prune` and a config file refused at start,
 * on a real SQLite file, the commands run in process (test/harness/cli-in-process.ts): what is
 * tested is their output and exit code, not the process.
 */

let dir: { dir: string; cleanup: () => void };
let file: string;
const EXAMPLE_CONFIG = join(ROOT, 'examples/verdict.config.yaml');

async function run(args: string[], env: Record<string, string> = {}) {
  try {
    const r = await runCli(args, { VERDICT_LOG_LEVEL: 'warn', ...env });
    return { code: 0, ...r };
  } catch (e) {
    const f = e as { code?: number; stdout?: string; stderr?: string };
    if (typeof f.code !== 'number') throw e;
    return { code: f.code, stdout: f.stdout ?? '', stderr: f.stderr ?? '' };
  }
}

beforeAll(async () => {
  await loadCli();
  dir = tempDir();
  file = join(dir.dir, 'verdict.db');
  // A workspace with three conventions and four tasks, all answered, then one convention edited.
  const store = new SqliteStore({ url: file, registry: new Registry(productionSets()) });
  const doc = {
    collection: 'conventions',
    conventions: ['CONV-1', 'CONV-2', 'CONV-3'].map((ref) => ({
      ref,
      title: `Title ${ref}`,
      body: `Body ${ref}.`,
      status: 'active',
      trigger: 'always',
      decision_check: 'on',
    })),
  };
  const { workspaceId } = await importConventions(store, doc, 'acme');
  const col = await store.createCollection({ workspaceId, slug: 'task', schema: TASK_SCHEMA });
  for (let i = 1; i <= 4; i++) {
    await store.createItem(
      {
        workspaceId,
        collectionId: col.id,
        ref: `T-${i}`,
        title: `Task ${i}`,
        content: 'body',
        fields: { status: 'open' },
      },
      { quietPeriod: false },
    );
  }
  const opts = {
    store,
    registry: new Registry(productionSets()),
    provider: new FakeProvider(),
    logger: silentLogger,
    workerId: 'seed',
    leaseMs: 60_000,
  };
  const signal = new AbortController().signal;
  while (await runOnce(opts, signal));
  const conv2 = (await store.getItemByRef(workspaceId, 'CONV-2'))!;
  await store.updateItem(conv2.id, { content: 'Body CONV-2, edited.' }, { quietPeriod: false });
  while (await runOnce(opts, signal)); // the convention's own jobs drop
  await store.close();
}, 60_000);
afterAll(() => dir.cleanup());

describe('verdict sets', () => {
  it('list prints the built-in and config sets; show prints questions and their fingerprints', async () => {
    const [list, show, resolved] = await Promise.all([
      run(['sets', 'list', '--config', EXAMPLE_CONFIG, '--json']),
      run(['sets', 'show', 'readiness', '--config', EXAMPLE_CONFIG, '--provider', 'fake', '--json']),
      run(['sets', 'show', 'conventions', '--database-url', file, '--provider', 'fake']),
    ]);
    expect(list.code).toBe(0);
    const l = JSON.parse(list.stdout);
    expect(l.sets.map((s: { name: string }) => s.name)).toEqual([
      'attention',
      'conventions',
      'conventions_comments',
      'effort',
      'readiness',
    ]);
    expect(l.sets.find((s: { name: string }) => s.name === 'readiness').source).toBe(EXAMPLE_CONFIG);
    expect(l.sets.find((s: { name: string }) => s.name === 'conventions')).toMatchObject({
      questions: 'resolved per workspace',
      maxPerCall: 12,
      threshold: 0.9,
      withLinks: true,
      noTrail: true,
    });

    expect(show.code).toBe(0);
    const s = JSON.parse(show.stdout);
    const [set] = loadQuestionSetConfig(EXAMPLE_CONFIG);
    const fake = new FakeProvider();
    expect(s.questions.map((q: { key: string; fingerprint: string }) => [q.key, q.fingerprint])).toEqual(
      Object.keys(set.questions!)
        .sort()
        .map((k) => [k, questionFingerprint(set.questions![k], fake)]),
    );
    expect(s.fingerprintContext).toEqual({ model: 'fake-model-1', prompt_version: 'fake-v1', effort: null });

    expect(resolved.code).toBe(0);
    expect(resolved.stdout).toContain('questions resolved for workspace acme');
    expect(resolved.stdout).toMatch(/conv:CONV-1 {2}\[noul\] {2}fingerprint [0-9a-f]{64}/);
    expect(resolved.stdout).toContain('Body CONV-2, edited.');
  }, 30_000);

  it('the time-dependent example loads: sets show prints its maxAge (DESIGN §5.2), and a bad maxAge is refused at start', async () => {
    const example = join(ROOT, 'examples/time-dependent.yaml');
    const bad = join(dir.dir, 'bad-max-age.yaml');
    writeFileSync(
      bad,
      'sets:\n  - name: mine\n    maxAge: 12h\n    questions:\n      q: {kind: noul, instructions: x}\n',
    );
    const [text, json, refused] = await Promise.all([
      run(['sets', 'show', 'staleness', '--config', example, '--provider', 'fake']),
      run(['sets', 'show', 'staleness', '--config', example, '--json']),
      run(['sets', 'list', '--config', bad]),
    ]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('max age 7d (604800000 ms): older answers read stale: expired and are asked again');
    expect(text.stdout).toMatch(/no_progress_14d {2}\[noul\] {2}fingerprint [0-9a-f]{64}/);
    expect(JSON.parse(json.stdout).set).toMatchObject({
      name: 'staleness',
      maxAgeMs: 604_800_000,
      maxAge: '7d',
      source: example,
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`config file ${bad}: set "mine": maxAge: "12h" is shorter than 1d`);
  }, 30_000);

  it('a config file that fails validation is refused at start, naming the file, the set and the problem', async () => {
    const bad = join(dir.dir, 'bad.yaml');
    writeFileSync(bad, 'sets:\n  - name: mine\n    questions:\n      q: {kind: noul, instructions: "   "}\n');
    const [worker, list] = await Promise.all([
      run(['worker', '--until-idle', '--provider', 'fake', '--database-url', file], { VERDICT_CONFIG: bad }),
      run(['sets', 'list', '--config', bad]),
    ]);
    for (const r of [worker, list]) {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        `config file ${bad}: set "mine": question "q" is invalid: instructions: must not be blank`,
      );
    }
  }, 30_000);
});

describe('verdict reask', () => {
  it('shows the count and estimated calls first; --dry-run owes nothing; then owes at backfill priority', async () => {
    const jobs = () => {
      const d = new Database(file, { readonly: true });
      try {
        return d
          .prepare("SELECT question_set, priority FROM decision_jobs WHERE question_set = 'conventions'")
          .all() as Array<{ priority: number }>;
      } finally {
        d.close();
      }
    };
    // Three runs that write nothing, side by side.
    const [dry, paid, unknown] = await Promise.all([
      run(['reask', '--set', 'conventions', '--dry-run', '--database-url', file, '--provider', 'fake']),
      run(['reask', '--set', 'conventions', '--database-url', file, '--provider', 'openai', '--model', 'm'], {
        VERDICT_OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
      }),
      run(['reask', '--set', 'nope', '--database-url', file, '--provider', 'fake']),
    ]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(
      'conventions in acme: 7 items scanned, 3 keys asked now; 4 items drifted to re-ask, estimated 4 calls (maxPerCall 12)',
    );
    expect(dry.stdout).toContain('dry run: nothing owed');
    expect(paid.code).toBe(2);
    expect(paid.stdout).toContain('nothing owed: openai is a paid provider; run again with --yes');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown set "nope"');
    expect(jobs()).toHaveLength(0);

    const real = await run(['reask', '--set', 'conventions', '--database-url', file, '--provider', 'fake', '--json']);
    expect(real.code).toBe(0);
    expect(JSON.parse(real.stdout)).toMatchObject({
      total: { items: 4, calls: 4, alreadyOwed: 0, parked: 0 },
      owed: 4,
    });
    expect(jobs()).toEqual(Array(4).fill({ question_set: 'conventions', priority: 1 }));

    const drain = await run([
      'worker',
      '--until-idle',
      '--database-url',
      file,
      '--provider',
      'fake',
      '--tick-ms',
      '50',
    ]);
    expect(drain.stdout).toContain('drained: 4 jobs claimed, 4 provider calls');
    const after = await run([
      'reask',
      '--set',
      'conventions',
      '--dry-run',
      '--database-url',
      file,
      '--provider',
      'fake',
    ]);
    expect(after.stdout).toContain('0 items drifted to re-ask, estimated 0 calls');
  }, 60_000);
});
