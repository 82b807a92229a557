import { ROOT } from './cli-process.js';

/**
 * The CLI's behaviour without a process per command: the commander program (`main` of
 * src/cli/program.ts, the one the built bin runs) called in this test worker, with stdout, stderr,
 * the environment and the exit code captured as a child would have them. A spawned
 * `node dist/cli/main.js` costs about a second of CPU to start (5 s wall under this machine's
 * usual load); this costs the command's own work. Use it wherever the process itself is not what
 * is tested; signals, exit on a crash, the preloads, stdin, the bin's own start-up and several
 * processes on one database stay with runBuiltCli / spawnCli.
 *
 * Same contract as runBuiltCli: resolves with `{ stdout, stderr }` on exit code 0, rejects with an
 * Error carrying `code`, `stdout` and `stderr` otherwise. The environment is `process.env` with
 * `NO_COLOR=1`, `CI=1`, an empty `ANTHROPIC_API_KEY` and `env` on top, for the call only. Calls
 * run one at a time (the streams and the environment are the process's own); the working folder
 * must be the repository root, as runBuiltCli's is.
 */
export async function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string }> {
  const run = queue.then(() => runOnce(args, env));
  queue = run.then(
    () => undefined,
    () => undefined,
  );
  return run;
}

let queue: Promise<unknown> = Promise.resolve();

/**
 * runCli for a test that checks a failing command's exit code: resolves with `code` (0 or the
 * non-zero code) and both streams instead of rejecting; any other error (not an exit) still rejects.
 */
export async function runCliExit(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return runCli(args, env).then(
    (ok) => ({ code: 0, ...ok }),
    (err: unknown) => {
      const e = err as { code?: unknown; stdout?: string; stderr?: string };
      if (typeof e.code !== 'number') throw err;
      return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
    },
  );
}

/**
 * Imports the program (the whole CLI, transformed on first import: seconds of a loaded machine).
 * A file calls it from `beforeAll`, under the hook's own timeout, so its first test does not pay
 * that cost inside its own.
 */
export async function loadCli(): Promise<void> {
  await import('../../src/cli/program.js');
}

type Write = typeof process.stdout.write;

async function runOnce(args: string[], env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  if (process.cwd() !== ROOT.replace(/\/$/, ''))
    throw new Error(`runCli: the working folder is ${process.cwd()}, not the repository root`);
  // The bin sets SQLITE_USE_URI before the driver loads (src/cli/main.ts), the same here; the
  // driver reads it once, when it loads, so it is restored with the rest: a later test file in
  // this worker (isolate: false) starts with the environment the run began with.
  const overrides: Record<string, string> = { NO_COLOR: '1', CI: '1', ANTHROPIC_API_KEY: '', ...env };
  const saved = new Map(['SQLITE_USE_URI', ...Object.keys(overrides)].map((k) => [k, process.env[k]]));
  process.env.SQLITE_USE_URI ??= '1';
  const { main } = await import('../../src/cli/program.js');
  const out: string[] = [];
  const err: string[] = [];
  const capture = (into: string[]): Write =>
    function (chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
      into.push(
        typeof chunk === 'string'
          ? chunk
          : Buffer.from(chunk as Uint8Array).toString(
              (typeof encoding === 'string' ? encoding : 'utf8') as BufferEncoding,
            ),
      );
      const done = typeof encoding === 'function' ? encoding : cb;
      if (typeof done === 'function') queueMicrotask(() => (done as () => void)());
      return true;
    } as Write;
  const writes = { out: process.stdout.write, err: process.stderr.write };
  const exitCodeBefore = process.exitCode;
  let code: number;
  try {
    Object.assign(process.env, overrides);
    process.exitCode = undefined;
    process.stdout.write = capture(out);
    process.stderr.write = capture(err);
    code = await main(['node', 'verdict', ...args]);
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    process.exitCode = exitCodeBefore;
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  const stdout = out.join('');
  const stderr = err.join('');
  if (code !== 0)
    throw Object.assign(new Error(`verdict ${args.join(' ')} exited ${code}\n${stderr}`), { code, stdout, stderr });
  return { stdout, stderr };
}
