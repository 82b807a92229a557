import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { afterAll, expect } from 'vitest';

/**
 * Vitest setup file for measuring the suite (VERDICT_TEST_CPU_LOG=<file>): one JSON line a test
 * file with its wall time and its CPU seconds, the worker's own (user + system) and its reaped
 * child processes' (/proc/self/stat cutime + cstime: the spawned CLI, workers, Chromium), so a
 * file's cost can be read apart from the machine's load. Nothing happens without the variable.
 */
const LOG = process.env.VERDICT_TEST_CPU_LOG;
const TICK = 100; // USER_HZ on Linux: /proc stat times are in 1/100 s

function childCpu(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command's closing parenthesis, field 3 is state; cutime and cstime are fields 16 and 17.
  return (Number(fields[13]) + Number(fields[14])) / TICK;
}

if (LOG) {
  // From this module's load: the file's import (the transform of what it imports) is its cost too.
  const start = performance.now();
  const cpu0 = process.cpuUsage();
  const child0 = childCpu();
  afterAll(() => {
    const file = relative(process.cwd(), expect.getState().testPath ?? '');
    const cpu = process.cpuUsage(cpu0);
    appendFileSync(
      LOG,
      JSON.stringify({
        file,
        pid: process.pid,
        wall: (performance.now() - start) / 1000,
        self: (cpu.user + cpu.system) / 1e6,
        children: childCpu() - child0,
      }) + '\n',
    );
  });
}
