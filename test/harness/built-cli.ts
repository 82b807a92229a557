import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The repository root (also exported by ./cli-process.ts, which imports this module). */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The built CLI entry point; `npm run build` makes it (vitest's global setup, test/harness/build-once.ts, when it is stale). */
export const BUILT_MAIN = join(ROOT, 'dist/cli/main.js');

/** Throws a clear error when the build is missing (call from `beforeAll`). */
export function requireBuiltCli(): void {
  if (!existsSync(BUILT_MAIN)) throw new Error('dist/cli/main.js is missing: run `npm run build` first');
}

/**
 * Runs the built CLI (`node dist/cli/main.js ARGS`) to completion, no TTY, no API key from the
 * environment. Resolves with stdout and stderr; rejects (with `code`, `stdout`, `stderr`) on a
 * non-zero exit.
 */
export async function runBuiltCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, [BUILT_MAIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: '1', CI: '1', ANTHROPIC_API_KEY: '', ...env },
    maxBuffer: 16 * 1024 * 1024,
  });
}
