import { parseArgs } from 'node:util';
import { KEYS_PER_TASK, ROOT, runLeaseLimiter } from './fault-runs.js';

/**
 * Leases against the limiter (DESIGN §3.6): two real worker processes, `--lease-ms 4000`, a limiter of 7
 * requests per minute, on real tracker tasks. Prints what DESIGN §3.6 bounds: jobs parked,
 * "claim lost" log lines, and answers per key.
 *
 *   npx tsx scripts/fault-lease-limiter.ts [--root DIR] [--items 12] [--timeout-s 240]
 *
 * `--root` is the checkout whose built dist/ runs (`npm run build` there first): point it at an
 * old worktree for the "before" figures.
 */
const { values } = parseArgs({
  options: {
    root: { type: 'string', default: ROOT },
    items: { type: 'string', default: '12' },
    'timeout-s': { type: 'string', default: '240' },
  },
});
const items = Number(values.items);
const t0 = Date.now();
const f = await runLeaseLimiter(values.root!, { items, timeoutMs: Number(values['timeout-s']) * 1000 });
const expectedKeys = items * KEYS_PER_TASK;
console.log(`root: ${values.root}`);
console.log(
  `run: 2 processes × 4 slots, --lease-ms 4000, --fake-latency-ms 3000, --requests-per-minute 7, ${items} open tasks (${expectedKeys} keys), ${((Date.now() - t0) / 1000).toFixed(0)} s, ${f.finished ? 'every job answered or parked' : 'TIMED OUT with jobs owed'}`,
);
console.log(`parked: ${f.parked} ${JSON.stringify(f.parkReasons)}`);
console.log(`"claim lost" lines: ${f.claimLostLines}`);
console.log(`defer lines: ${f.deferLines}`);
console.log(`owed left: ${f.owed}`);
console.log(
  `answers: ${f.answerKeys} of ${expectedKeys} keys answered, ${f.keysAnsweredTwice} answered more than once; calls billed: ${f.calls}`,
);
