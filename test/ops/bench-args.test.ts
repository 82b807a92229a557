import { describe, expect, it } from 'vitest';
import { BenchArgsError, parseBenchArgs } from '../../scripts/bench-args.js';

/**
 * `npm run bench` flags (scripts/bench-args.ts): `--quick` alone used to run no part at all
 * (`args[indexOf('--only') + 1]` read `--quick` as the part list when `--only` was absent).
 */
describe('parseBenchArgs', () => {
  it('--quick alone runs every part, shrunk', () => {
    expect(parseBenchArgs(['--quick'])).toEqual({
      quick: true,
      smoke: false,
      parts: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'],
    });
  });

  it('no flags run every part at full size', () => {
    expect(parseBenchArgs([])).toEqual({
      quick: false,
      smoke: false,
      parts: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'],
    });
  });

  it('--only takes its value in either spelling, in run order, without repeats', () => {
    expect(parseBenchArgs(['--only', 'c,a', '--quick'])).toEqual({ quick: true, smoke: false, parts: ['a', 'c'] });
    expect(parseBenchArgs(['--quick', '--only=e,e'])).toEqual({ quick: true, smoke: false, parts: ['e'] });
    expect(parseBenchArgs(['--only', 'h,f,g'])).toEqual({ quick: false, smoke: false, parts: ['f', 'g', 'h'] });
  });

  it('--smoke runs every part at its smallest sizes; with --quick it is an error', () => {
    expect(parseBenchArgs(['--smoke', '--only', 'f'])).toEqual({ quick: false, smoke: true, parts: ['f'] });
    expect(() => parseBenchArgs(['--smoke', '--quick'])).toThrow(/--quick and --smoke/);
  });

  it.each([
    [['--only', 'x'], /--only: got "x"/],
    [['--only', 'f,k'], /--only: got "f,k".*a,b,c,d,e,f,g,h,i,j/],
    [['--only', 'a,'], /--only: got "a,"/],
    [['--only'], /--only/],
    [['--quik'], /--quik/],
    [['a'], /positional|Unexpected argument/i],
  ])('%j is an error naming the flag, never a silent empty run', (argv, message) => {
    expect(() => parseBenchArgs(argv)).toThrow(BenchArgsError);
    expect(() => parseBenchArgs(argv)).toThrow(message);
  });
});
