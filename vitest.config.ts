import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // better-sqlite3 is a native addon: stay on forks (the vitest 4 default).
    pool: 'forks',
    // The process tests spawn the built CLI (dist/cli/main.js) instead of tsx: build it once, first, when stale.
    globalSetup: ['./test/harness/build-once.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Reporters run in array order, so the counts line closes the log (CI reads it).
    reporters: ['default', './test/harness/counts-reporter.ts'],
  },
});
