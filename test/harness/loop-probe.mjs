/**
 * Event-loop probe, loaded with `node --import <this file>` into a real worker process (plain
 * JavaScript so it also loads into the built CLI without tsx, and into older builds for "before"
 * figures). A 20 ms interval records every gap between its ticks longer than 40 ms, with the
 * epoch ms at which the gap ended and the CPU time the process used during it, and writes them as
 * JSON to `$LOOP_PROBE_FILE` when the process exits: `{ ticks, gaps: [[endEpochMs, gapMs, cpuMs], ...] }`.
 * The CPU figure tells a loop held by the process's own work from a process the OS did not
 * schedule (a loaded machine): a wall gap with little CPU in it was not the process's doing. A caller filters the gaps by time (e.g. only
 * those that ended after the worker logged "worker started", so module loading is not counted).
 */
import { writeFileSync } from 'node:fs';

const file = process.env.LOOP_PROBE_FILE;
if (file) {
  const EVERY_MS = 20;
  const gaps = [];
  let ticks = 0;
  let last = Date.now();
  let lastCpu = process.cpuUsage();
  const record = (now) => {
    const cpu = process.cpuUsage(lastCpu);
    if (now - last > 2 * EVERY_MS && gaps.length < 100_000)
      gaps.push([now, now - last, Math.round((cpu.user + cpu.system) / 1000)]);
    last = now;
    lastCpu = process.cpuUsage();
  };
  const timer = setInterval(() => {
    ticks++;
    record(Date.now());
  }, EVERY_MS);
  timer.unref();
  process.on('exit', () => {
    // The gap still open at exit counts too (a drain that never let the timer run has no tick).
    record(Date.now());
    writeFileSync(file, JSON.stringify({ ticks, gaps }));
  });
}
