import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BUILT_MAIN, requireBuiltCli } from './built-cli.js';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (null when killed by a signal) and the signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts the real CLI, built (`dist/cli/main.js`, plain node: no tsx compiling the sources in
 * every child), as a child process with the given args and environment additions. `preload` adds
 * `--import` modules (test seams such as the poison item); plain node loads JavaScript only, so a
 * preload is a `.mjs` that patches the built modules (see poison-preload.mjs).
 */
export function spawnCli(args: string[], env: Record<string, string> = {}, preload: string[] = []): Spawned {
  requireBuiltCli();
  const child = spawn(process.execPath, [...preload.flatMap((p) => ['--import', p]), BUILT_MAIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: '1', CI: '1', VERDICT_LOG_LEVEL: 'info', ANTHROPIC_API_KEY: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Polls `check` every `everyMs` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(check: () => T | Promise<T>, timeoutMs = 20_000, everyMs = 50): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > until) throw new Error('waitFor: timed out');
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
