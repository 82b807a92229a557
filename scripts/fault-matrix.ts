/**
 * Prints the provider fault matrix (DESIGN §9, §14) as a Markdown table: one row per fault, each measured
 * through the real worker on a real SQLite file, with the real AnthropicProvider (the official
 * SDK) against the fake Anthropic server on 127.0.0.1.
 *
 *   npx tsx scripts/fault-matrix.ts [NAME-SUBSTRING]
 *
 * Columns: the requests the server saw (and the most it had open at once), the outcomes the runner
 * recorded, the job's attempt number at each claim, the job row afterwards (state, attempts,
 * refusals, and how far not_before lies ahead), the answers stored, and a digest of the log lines
 * (their msg, outcome and reason fields). Provider timings are shrunk (MATRIX_TIMINGS); the store's
 * clock is a manual one moved past not_before between passes, so backoffs show in full without
 * waiting for them.
 */
import { faultCases, MATRIX_TIMINGS, runFaultCase, TABLE_HEADER, tableRow } from '../test/harness/fault-matrix.js';

const filter = process.argv[2];
const cases = faultCases().filter((c) => !filter || c.name.includes(filter));
const rows: string[] = [];
const started = performance.now();
for (const c of cases) rows.push(tableRow(await runFaultCase(c)));
process.stdout.write(
  [
    `Provider timings: ${Object.entries(MATRIX_TIMINGS)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}. Job backoff and cooling-off are the production values.`,
    '',
    ...TABLE_HEADER,
    ...rows,
    '',
    `${cases.length} cases in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    '',
  ].join('\n'),
);
