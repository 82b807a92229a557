import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledSamplePath } from '../../src/importers/beads.js';
import { loadCli, runCliExit } from '../harness/cli-in-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * `verdict import` exits 1 when it rejected input, unless `--allow-rejects` (DESIGN §3.1); the
 * command in process (test/harness/cli-in-process.ts: the exit code and streams a process has).
 */

const { dir, cleanup } = tempDir('verdict-import-rejects-');
beforeAll(loadCli);
afterAll(cleanup);

describe('verdict import beads and rejected lines', () => {
  it('exits 1 with the report and a line on stderr; exits 0 with --allow-rejects; repairs are reported', async () => {
    const first = readFileSync(bundledSamplePath(), 'utf8').split('\n')[0];
    const file = join(dir, 'some.jsonl');
    writeFileSync(file, `${first}\nnot json\n`);
    const db = join(dir, 'v.db');
    const strict = await runCliExit(['import', 'beads', file, '--database-url', db]);
    expect(strict.code).toBe(1);
    expect(strict.stdout).toContain('  lines rejected: 1 (lines 2)\n  normalised: 0 lines\n');
    expect(strict.stderr).toContain(
      '1 input entry was rejected (see the report); pass --allow-rejects to exit 0 anyway',
    );
    const allowed = await runCliExit(['import', 'beads', file, '--database-url', db, '--allow-rejects']);
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toContain('  lines rejected: 1 (lines 2)\n');

    const broken = Buffer.concat([
      Buffer.from(first.replace('"title":"', '"title":"\u0000'.replace('\u0000', '\\u0000'))),
      Buffer.from('\n'),
    ]);
    writeFileSync(file, broken);
    const repaired = await runCliExit(['import', 'beads', file, '--database-url', db]);
    expect(repaired.code).toBe(0);
    expect(repaired.stdout).toContain('  normalised: 1 line (NUL removed 1; line 1)\n');
  }, 120_000);
});
