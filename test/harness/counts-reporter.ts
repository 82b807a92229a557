import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints `vitest: N passed, N failed, N skipped` as the last line of a run, because vitest's
 * own summary ends on "Duration" and CI reads the plain counts line.
 * A file that fails to import counts as one failure; unhandled errors count as failures.
 */
export default class CountsReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of modules) {
      const tests = [...m.children.allTests()];
      if (m.state() === 'failed' && tests.length === 0) failed++;
      for (const t of tests) {
        const s = t.result().state;
        if (s === 'passed') passed++;
        else if (s === 'failed') failed++;
        else skipped++;
      }
    }
    failed += unhandledErrors.length;
    process.stdout.write(`vitest: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    if (passed + failed === 0) process.exitCode = 1;
  }
}
