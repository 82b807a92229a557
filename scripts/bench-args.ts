import { parseArgs } from 'node:util';

/** The parts `npm run bench` knows, in run order (see scripts/bench.ts). */
export const BENCH_PARTS = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'] as const;
export type BenchPart = (typeof BENCH_PARTS)[number];

/** The bench's validated flags. */
export interface BenchArgs {
  /** `--quick`: shrink every part. */
  quick: boolean;
  /** `--only a,c`: the parts to run, in run order, without repeats; every part when absent. */
  parts: BenchPart[];
}

/** A bad bench flag: the message names the flag, what it got and what it expects. */
export class BenchArgsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BenchArgsError';
  }
}

/**
 * Parses `npm run bench` flags (`--quick`, `--only a,c` or `--only=a,c`) with `util.parseArgs`
 * (strict: an unknown flag or a stray argument is an error, never silently ignored).
 * @throws BenchArgsError when a flag is unknown, `--only` is empty or names a part that does not exist.
 */
export function parseBenchArgs(argv: readonly string[]): BenchArgs {
  let values: { quick?: boolean; only?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { quick: { type: 'boolean' }, only: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new BenchArgsError(`${(err as Error).message}; usage: npm run bench -- [--quick] [--only ${BENCH_PARTS.join(',')}]`);
  }
  let parts: BenchPart[] = [...BENCH_PARTS];
  if (values.only !== undefined) {
    const asked = values.only.split(',').map((p) => p.trim());
    const unknown = asked.filter((p) => !(BENCH_PARTS as readonly string[]).includes(p));
    if (asked.length === 0 || unknown.length > 0) {
      throw new BenchArgsError(`--only: got "${values.only}", expected a comma-separated list of parts from ${BENCH_PARTS.join(',')}`);
    }
    parts = BENCH_PARTS.filter((p) => asked.includes(p));
  }
  return { quick: values.quick === true, parts };
}
