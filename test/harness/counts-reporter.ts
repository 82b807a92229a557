import type { Reporter, TestModule } from 'vitest/node';
import { SERVER_SKIP_MARK } from './needs-server.js';

/**
 * Prints `vitest: N passed, N failed, N skipped` as the last line of a run, because vitest's
 * own summary ends on "Duration" and CI reads the plain counts line. Tests skipped because a
 * server is missing (their titles carry SERVER_SKIP_MARK; see needs-server.ts) are counted again
 * on a warning line just before it, so a green run without PostgreSQL never looks complete.
 * A file that fails to import, or whose hook fails while none of its tests fails (a failing
 * `beforeAll` leaves every test skipped), counts as one failure; unhandled errors count as failures.
 */
export default class CountsReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    let noServer = 0;
    for (const m of modules) {
      const tests = [...m.children.allTests()];
      if (m.state() === 'failed' && !tests.some((t) => t.result().state === 'failed')) failed++;
      for (const t of tests) {
        const s = t.result().state;
        if (s === 'passed') passed++;
        else if (s === 'failed') failed++;
        else {
          skipped++;
          if (t.fullName.includes(SERVER_SKIP_MARK)) noServer++;
        }
      }
    }
    failed += unhandledErrors.length;
    if (noServer > 0)
      process.stdout.write(
        `WARNING: ${noServer} tests SKIPPED for want of a server ${SERVER_SKIP_MARK}; CI runs them\n`,
      );
    process.stdout.write(`vitest: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    if (passed + failed === 0) process.exitCode = 1;
  }
}
