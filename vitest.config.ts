import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files run three at a time (on two cores; the parallel project says why) unless they are named
 * here. These run one at a time, after the parallel group, with nothing beside them, each for
 * the reason given: a real-time bound of a few hundred ms or a measured event-loop lag that a
 * second file's load would break, or several processes that take both cores themselves. PAIRED
 * files run two at a time after them.
 */
const SERIAL = [
  // A provider attempt bounded by a few hundred ms against the fake Anthropic / OpenAI server.
  'test/providers/anthropic.batches.test.ts',
  'test/providers/anthropic.faults.test.ts',
  'test/providers/anthropic.request.test.ts',
  'test/providers/openai-compatible.test.ts',
  // A delivery attempt bounded by a few hundred ms against a local receiver.
  'test/worker/event-delivery.test.ts',
  // A real worker against a fake server that answers 429 to a request sent before a reset 2 s
  // ahead in real time (failed once beside another file under a load average of 30).
  'test/worker/ratelimit-headers.test.ts',
  // Worker processes whose checks depend on timing between processes: leases running out, a
  // SIGKILL mid-call, signals, a held lock, the WAL under several writers, the loop's lag.
  'test/worker/processes.test.ts',
  'test/worker/event-loop-process.test.ts',
  'test/worker/wal-process.test.ts',
  'test/worker/held-lock-process.test.ts',
  'test/worker/signals-process.test.ts',
  // Four worker processes draining one database (two cores' worth by themselves); a lock held past
  // the busy timeout and a 250 ms loop bound.
  'test/scale/processes-sqlite.test.ts',
  'test/scale/sqlite-busy.test.ts',
  // The live Anthropic test reads ANTHROPIC_API_KEY when its module loads. The parallel project
  // shares a worker between files (isolate: false), where a key another file's test put in
  // process.env can still be set (a CI run sent the live test to a closed fake server with one);
  // a file of its own reads the key the run was started with.
  'test/providers/anthropic.live.test.ts',
  // The MCP server over stdio and serve end to end: a child server plus clients with deadlines.
  'test/mcp/**/*.test.ts',
];

/**
 * Files kept from the parallel group for the same reasons as SERIAL (leases and deadlines of a
 * second or more between real processes), but whose processes mostly wait: on fake provider
 * latency, limiter refills, retry-after and quiet periods (fault-processes: 11.5 s of CPU in 26.4 s
 * of wall; processes-postgres: 8.9 in 21.6 and the PostgreSQL server about 5 more; VERDICT_TEST_CPU_LOG
 * on an idle machine, /proc for the server); and the browser test, busy but with no deadline of its
 * own to miss, in a lane beside them. They run two at a time, after the serial group, with nothing
 * else of the suite beside them: one at a time they left a core idle.
 */
const PAIRED = [
  // Two workers' leases against their own limiter (1 s past the call), and the daily token cap
  // across processes ended by a 2 s quiet period.
  'test/worker/fault-processes.test.ts',
  // A lease 1.1 s past the call after a SIGKILL, and four processes draining one PostgreSQL database.
  'test/scale/processes-postgres.test.ts',
  // A worker that must exit on its own through a 529 outage with retry-after: 1.
  'test/worker/until-idle-outage.test.ts',
  // serve end to end: a child server, a worker, a webhook receiver and clients with deadlines.
  'test/server/serve-e2e.test.ts',
  // A reload (SIGHUP) of a worker process and of an in-process worker mid-call: every step waits
  // for the log line or the state it expects, none on a timer.
  'test/worker/reload.test.ts',
  // Chromium against a served dashboard: a browser, a server and the test, but no deadline under
  // Playwright's own (its refresh runs on Playwright's clock), so it runs in a lane of its own
  // while the others wait.
  'test/dashboard/dashboard-browser.test.ts',
];

/**
 * Files `npm test` leaves to `npm run test:scale` (VERDICT_TEST_SCALE=1), which CI runs beside the
 * suite, as it does the 10,000-job drains: the whole benchmark at its smallest sizes (`npm run bench
 * -- --smoke`, 23 s of both cores in the last CI run) proves the bench still runs, not a rule of the
 * product. They run one at a time there, in the serial group.
 */
const SCALE_ONLY = ['test/ops/bench-smoke.test.ts'];
const SCALE_RUN = process.env.VERDICT_TEST_SCALE === '1';

/**
 * Files whose SQLite databases keep `synchronous = FULL`: the power-cut simulation proves that FULL
 * keeps every acknowledged write (strace of a child process), so it runs alone and without the
 * test-only NORMAL preload every other file gets (FAST_SYNC; test/harness/test-sync-preload.mjs says why).
 */
const DURABLE = ['test/store/power-cut.test.ts'];
/** Per-file wall and CPU seconds when VERDICT_TEST_CPU_LOG names a file; nothing without it (test/harness/cpu-log-setup.ts). */
const CPU_LOG = ['./test/harness/cpu-log-setup.ts'];
const FAST_SYNC = ['./test/harness/test-sync-setup.ts', ...CPU_LOG];
/** A file that leaves process.env changed fails (test/harness/env-guard-setup.ts says why). */
const ENV_GUARD = ['./test/harness/env-guard-setup.ts'];

/**
 * Files that start first in their group. Without a results cache (a clean clone: CI) vitest starts
 * the largest files first, and the Postgres conformance suite is a 10-line file that runs the whole
 * store suite: started last, it ran alone on one core while the other sat idle. Started first, the
 * rest of the group runs beside it. Only the order changes, never what runs.
 */
const START_FIRST = [
  'test/store/conformance.postgres.test.ts',
  // The longest paired files, the first two short ones by size: one starts on each worker, the rest follow.
  'test/dashboard/dashboard-browser.test.ts',
  'test/worker/fault-processes.test.ts',
  'test/scale/processes-postgres.test.ts',
];

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
    // Reporters run in array order, so the counts line closes the log (CI reads it). CI's marker of
    // the serial group's start (scripts/ci-phase-reporter.ts) only when CI asks for it.
    reporters: [
      'default',
      ...(process.env.VERDICT_CI_SERIAL_MARK ? ['./scripts/ci-phase-reporter.ts'] : []),
      './test/harness/counts-reporter.ts',
    ],
    // The groups run one after the other (`sequence.groupOrder`): the serial files never share the
    // cores. The power-cut simulation checks a trace, not times, so it runs in the parallel group's
    // turn, on one of its workers: it needs the same maxWorkers as the parallel project, since with
    // maxWorkers 1 vitest ran it after every other group, alone (7 s at the end of each run).
    projects: [
      {
        extends: true,
        test: {
          name: 'parallel',
          include: ['test/**/*.test.ts'],
          exclude: [...SERIAL, ...PAIRED, ...DURABLE, ...SCALE_ONLY],
          setupFiles: [...FAST_SYNC, ...ENV_GUARD],
          // A worker runs file after file on the modules it has already loaded, instead of a new
          // process loading src/ and its packages again for each file: on 44 of these files their
          // own CPU went from 100.3 to 47.4 s (VERDICT_TEST_CPU_LOG). The setup files still run,
          // and vi mocks and spies are still restored, before each file; a file relying on
          // module-level state resets it itself (resetConventionSkipLog).
          isolate: false,
          // Three workers on two cores: the group's files wait on child processes and servers about
          // a quarter of the time, so two left the cores 72 % busy (CPU 166 s over 2 × 115 s of
          // wall). Idle machine, whole suite: 227, 231, 240 and 245 s with two, 225 s with three.
          maxWorkers: 3,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'serial',
          include: SCALE_RUN ? [...SERIAL, ...SCALE_ONLY] : SERIAL,
          setupFiles: FAST_SYNC,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: { name: 'paired', include: PAIRED, setupFiles: FAST_SYNC, maxWorkers: 2, sequence: { groupOrder: 2 } },
      },
      {
        extends: true,
        test: { name: 'durable', include: DURABLE, setupFiles: CPU_LOG, maxWorkers: 3, sequence: { groupOrder: 0 } },
      },
    ],
  },
});
