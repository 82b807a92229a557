import { appendFileSync, writeFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

/**
 * CI's marker for the moment the suite's serial group starts (vitest.config.ts adds this reporter
 * when VERDICT_CI_SERIAL_MARK names a file; .ci/run sets it). The parallel group keeps both cores
 * busy; the serial group runs one file at a time and leaves a core mostly idle, so .ci/run holds
 * its Node 22 and 24 checks until this file exists. It also records the parallel group's wall
 * time, as a `time:` line in the file VERDICT_TIMES names (scripts/timed.sh's format), so that
 * each CI log shows how long each group took.
 */
const SERIAL_PROJECT = 'serial';

export default class CiPhaseReporter implements Reporter {
  #started = performance.now();
  #marked = false;

  onTestRunStart(): void {
    this.#started = performance.now();
  }

  onTestModuleStart(testModule: TestModule): void {
    const mark = process.env.VERDICT_CI_SERIAL_MARK;
    if (this.#marked || !mark || testModule.project.name !== SERIAL_PROJECT) return;
    this.#marked = true;
    const seconds = Math.round((performance.now() - this.#started) / 1000);
    writeFileSync(mark, `${seconds}\n`);
    const times = process.env.VERDICT_TIMES;
    if (times) appendFileSync(times, `time: npm test, to the serial group's first file: ${seconds} s wall\n`);
  }
}
