import { afterAll } from 'vitest';

/**
 * Vitest setup file: a test file that leaves process.env changed fails. In the parallel project
 * one worker runs file after file (isolate: false), so a variable one file sets and never
 * restores is seen by the files after it (a key left behind once made the live Anthropic test
 * run, and fail, in a CI run without one). Compared when the file's tests have ended, so a value
 * set and restored within a test, or by vi.stubEnv and vi.unstubAllEnvs, passes.
 */
const before = { ...process.env };

afterAll(() => {
  const now = process.env;
  const changed = [...new Set([...Object.keys(before), ...Object.keys(now)])]
    .filter((k) => before[k] !== now[k])
    .sort();
  // Names only: a value can be a key.
  if (changed.length > 0) throw new Error(`this file left process.env changed: ${changed.join(', ')}`);
});
