import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Test files that run in this process only (no child processes, no provider attempt bounded by a
 * few hundred ms): they run two at a time. Everything else runs one file at a time: with 3 or 4
 * files at once the suite took 303–345 s instead of 444 s, but the process tests that bound a
 * provider attempt by a few hundred ms, or four workers' startup, failed now and then under that
 * load (issue 13's closing note), and a red CI does not land. The groups run one after the
 * other (`sequence.groupOrder`: in-process, CLI_PAIRS, serial), so the serial group never shares the cores.
 */
const IN_PROCESS = [
  'test/store/**/*.test.ts',
  'test/decision/**/*.test.ts',
  'test/reads/**/*.test.ts',
  'test/importers/**/*.test.ts',
  'test/api/public-api.test.ts',
  'test/server/api-*.test.ts',
  'test/server/dashboard-reads.test.ts',
  'test/integrations/github-import.test.ts',
  'test/eval/**/*.test.ts',
];

/**
 * Process tests that run short CLI commands (and `worker --until-idle` on the fake provider) with
 * nothing bounded by a few hundred ms: they run two files at a time, after the in-process group
 * and before the serial one. Each file uses its own temp databases, so two share nothing but the
 * cores (issue 18's closing note has the CI figures before and after).
 */
const CLI_PAIRS = [
  'test/cli/outputs.test.ts',
  'test/cli/review.test.ts',
  'test/cli/errors.test.ts',
  'test/cli/cli-inputs.test.ts',
  'test/cli/eval.test.ts',
  'test/cli/tokens.test.ts',
  'test/cli/show-clips.test.ts',
  'test/cli/edit-fields.test.ts',
  'test/cli/sets-reask.test.ts',
  'test/integrations/github-cli.test.ts',
  'test/ops/readme-commands.test.ts',
  'test/mcp/**/*.test.ts',
  'test/docs.test.ts',
];

/**
 * Files that start first in their group. Without a results cache (a clean clone: CI) vitest starts
 * the largest files first, and the Postgres conformance suite is a 10-line file that runs the whole
 * store suite (about 45 s): started last, it ran alone on one core while the other sat idle. Started
 * first, the rest of the in-process group runs beside it. Only the order changes, never what runs.
 */
const START_FIRST = ['test/store/conformance.postgres.test.ts'];

/**
 * Files whose SQLite databases keep `synchronous = FULL`: the power-cut simulation proves that FULL
 * keeps every acknowledged write, so it runs without the test-only NORMAL preload every other
 * file gets (FAST_SYNC; test/harness/test-sync-preload.mjs says why).
 */
const DURABLE = ['test/store/power-cut.test.ts'];
const FAST_SYNC = ['./test/harness/test-sync-setup.ts'];

class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const path = (f: TestSpecification) => relative(f.project.config.root, f.moduleId).split('\\').join('/');
    // Each project keeps the base order and its place; within a project the named files move to
    // its front, in START_FIRST order.
    const byProject = new Map<string, TestSpecification[]>();
    for (const f of sorted) byProject.set(f.project.name, [...(byProject.get(f.project.name) ?? []), f]);
    return [...byProject.values()].flatMap((group) => [
      ...START_FIRST.flatMap((p) => group.filter((f) => path(f) === p)),
      ...group.filter((f) => !START_FIRST.includes(path(f))),
    ]);
  }
}

export default defineConfig({
  test: {
    environment: 'node',
    // better-sqlite3 is a native addon: stay on forks (the vitest 4 default).
    pool: 'forks',
    // The process tests spawn the built CLI (dist/cli/main.js) instead of tsx: build it once, first, when stale.
    globalSetup: ['./test/harness/build-once.ts'],
    sequence: { sequencer: LongFilesFirst },
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Reporters run in array order, so the counts line closes the log (CI reads it).
    reporters: ['default', './test/harness/counts-reporter.ts'],
    projects: [
      { extends: true, test: { name: 'in-process', include: IN_PROCESS, exclude: DURABLE, setupFiles: FAST_SYNC, maxWorkers: 2, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'cli-pairs', include: CLI_PAIRS, setupFiles: FAST_SYNC, maxWorkers: 2, sequence: { groupOrder: 1 } } },
      { extends: true, test: { name: 'serial', include: ['test/**/*.test.ts'], exclude: [...IN_PROCESS, ...CLI_PAIRS, ...DURABLE], setupFiles: FAST_SYNC, maxWorkers: 1, sequence: { groupOrder: 2 } } },
      // The power-cut simulation proves FULL itself: no NORMAL preload here.
      { extends: true, test: { name: 'durable', include: DURABLE, maxWorkers: 1, sequence: { groupOrder: 2 } } },
    ],
  },
});
