import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // better-sqlite3 is a native addon: stay on forks (the vitest 4 default).
    pool: 'forks',
    // Most files wait (child processes, provider latency, timers) rather than compute, so more
    // files than cores run at once. vitest's default is cores − 1, one file at a time on CI's 2
    // cores: 444 s for the suite, against 303–345 s with 4 (issue 13, measured on this machine),
    // but with 4 the tests that bound provider attempts by a few hundred ms failed now and then
    // under the load; 3 keeps most of the gain.
    maxWorkers: Math.max(3, availableParallelism() - 1),
    // The process tests spawn the built CLI (dist/cli/main.js) instead of tsx: build it once, first, when stale.
    globalSetup: ['./test/harness/build-once.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Reporters run in array order, so the counts line closes the log (CI reads it).
    reporters: ['default', './test/harness/counts-reporter.ts'],
  },
});
