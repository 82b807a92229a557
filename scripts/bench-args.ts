import { parseArgs } from 'node:util';

/** The parts `npm run bench` knows, in run order (see scripts/bench.ts). */
export const BENCH_PARTS = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'] as const;
export type BenchPart = (typeof BENCH_PARTS)[number];

/**
 * How big each part runs: `full` (no flag), `quick` (`--quick`, a few minutes in all) or `smoke`
 * (`--smoke`: each part's smallest sizes, seconds each, figures not judged against targets; CI
 * runs it, test/ops/bench-smoke.test.ts, so a part that throws cannot land).
 */
export type BenchSize = 'full' | 'quick' | 'smoke';

/** The bench's validated flags. */
export interface BenchArgs {
  /** `--quick`: shrink every part. */
  quick: boolean;
  /** `--smoke`: every part at its smallest sizes (see BenchSize). */
  smoke: boolean;
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

/** The size the flags ask for. */
export function benchSize(a: BenchArgs): BenchSize {
  return a.smoke ? 'smoke' : a.quick ? 'quick' : 'full';
}

/**
 * Parses `npm run bench` flags (`--quick` or `--smoke`, `--only a,c` or `--only=a,c`) with `util.parseArgs`
 * (strict: an unknown flag or a stray argument is an error, never silently ignored).
 * @throws BenchArgsError when a flag is unknown, `--quick` and `--smoke` are both given, `--only` is empty or names a part that does not exist.
 */
export function parseBenchArgs(argv: readonly string[]): BenchArgs {
  let values: { quick?: boolean; smoke?: boolean; only?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { quick: { type: 'boolean' }, smoke: { type: 'boolean' }, only: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new BenchArgsError(
      `${(err as Error).message}; usage: npm run bench -- [--quick | --smoke] [--only ${BENCH_PARTS.join(',')}]`,
    );
  }
  let parts: BenchPart[] = [...BENCH_PARTS];
  if (values.only !== undefined) {
    const asked = values.only.split(',').map((p) => p.trim());
    const unknown = asked.filter((p) => !(BENCH_PARTS as readonly string[]).includes(p));
    if (asked.length === 0 || unknown.length > 0) {
      throw new BenchArgsError(
        `--only: got "${values.only}", expected a comma-separated list of parts from ${BENCH_PARTS.join(',')}`,
      );
    }
    parts = BENCH_PARTS.filter((p) => asked.includes(p));
  }
  if (values.quick && values.smoke)
    throw new BenchArgsError('--quick and --smoke: pick one size (--smoke is the smaller)');
  return { quick: values.quick === true, smoke: values.smoke === true, parts };
}
