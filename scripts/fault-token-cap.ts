import { parseArgs } from 'node:util';
import { ROOT, runTokenCap } from './fault-runs.js';

/**
 * The daily token cap under load (DESIGN §10.3): `--daily-token-cap 20000`, 4 slots per process, 200 ms
 * provider latency, with 1 and with 3 real worker processes on real tracker tasks. Prints the
 * billed tokens against the cap and the in-flight allowance (processes × slots × the largest
 * single call's usage).
 *
 *   npx tsx scripts/fault-token-cap.ts [--root DIR] [--items 200] [--cap 20000] [--timeout-s 120]
 *
 * `--root` is the checkout whose built dist/ runs (`npm run build` there first).
 */
const { values } = parseArgs({
  options: {
    root: { type: 'string', default: ROOT },
    items: { type: 'string', default: '200' },
    cap: { type: 'string', default: '20000' },
    'timeout-s': { type: 'string', default: '120' },
  },
});
console.log(`root: ${values.root}`);
for (const processes of [1, 3]) {
  const t0 = Date.now();
  const f = await runTokenCap(values.root!, {
    items: Number(values.items),
    processes,
    cap: Number(values.cap),
    timeoutMs: Number(values['timeout-s']) * 1000,
  });
  const allowance = f.processes * f.slots * f.maxCallTokens;
  console.log(
    `${processes} process(es) × ${f.slots} slots, --daily-token-cap ${f.cap}, --fake-latency-ms 200, ${values.items} open tasks: ` +
      `billed ${f.billedTokens} tokens in ${f.calls} calls = ${(f.billedTokens / f.cap).toFixed(2)}× the cap; ` +
      `cap + in-flight allowance = ${f.cap} + ${f.processes}×${f.slots}×${f.maxCallTokens} = ${f.cap + allowance}; ` +
      `${f.billedTokens <= f.cap + allowance ? 'within' : 'OVER'} it (${f.billedTokens <= f.cap ? 'within the cap itself' : 'past the cap itself'}); ` +
      `${f.keysAnsweredTwice} keys answered twice; ${((Date.now() - t0) / 1000).toFixed(0)} s${f.finished ? '' : ' (TIMED OUT)'}`,
  );
}
