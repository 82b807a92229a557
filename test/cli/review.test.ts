import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../harness/cli-in-process.js';
import { ROOT } from '../harness/cli-process.js';
import { tempDir } from '../harness/store-fixture.js';

/**
 * `verdict review`, `verdict reviews` and `flags --flapping` as a user runs them (DESIGN §8.1,
 * §8.2), through the CLI's commander program (in process) on a demo of the sample's first 40 open items.
 */

let dir: { dir: string; cleanup: () => void };
let db: string;
/** The demo's top flagged item, read once after it. */
let flaggedTop: { ref: string; keys: Record<string, number> };
const env = { VERDICT_PROVIDER: 'fake', VERDICT_LOG_LEVEL: 'warn', VERDICT_AUTHOR: 'ana' };
const cli = (args: string[]) => runCli([...args, '--database-url', db], env);

beforeAll(async () => {
  dir = tempDir('verdict-review-cli-');
  db = join(dir.dir, 'demo.db');
  // The first 40 open items: closed ones are never asked.
  const lines = readFileSync(join(ROOT, 'sample/beads-issues.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() && (JSON.parse(l) as { status?: string }).status === 'open')
    .slice(0, 40);
  const sample = join(dir.dir, 'sample.jsonl');
  writeFileSync(sample, `${lines.join('\n')}\n`);
  await runCli(['demo', '--sample', sample, '--database-url', db], env);
  flaggedTop = (
    JSON.parse((await cli(['flags', '--set', 'attention', '--json'])).stdout) as {
      items: Array<{ ref: string; keys: Record<string, number> }>;
    }
  ).items[0];
}, 60_000);
afterAll(() => dir?.cleanup());

describe('verdict review', () => {
  it('a person’s "false" takes an item off flags, show says who and the model’s answer, reviews lists it; withdraw hands it back', async () => {
    const top = flaggedTop;
    expect(top).toBeDefined();
    const key = Object.keys(top.keys)[0];

    const rec = await cli(['review', top.ref, key, 'false', '--note', 'checked with the owner']);
    expect(rec.stdout).toMatch(
      new RegExp(`^${top.ref} attention/${key}: value recorded by ana \\(verdict \\d+\\); in force: p=0\\.00\\n$`),
    );
    const after = JSON.parse((await cli(['flags', '--set', 'attention', '--json'])).stdout) as {
      items: Array<{ ref: string; keys: Record<string, number> }>;
    };
    expect(after.items.find((i) => i.ref === top.ref)?.keys[key]).toBeUndefined();

    const show = (await cli(['show', top.ref])).stdout;
    expect(show).toContain(`attention/${key}  p=0.00  [human: value by ana,`);
    expect(show).toMatch(new RegExp(`model p=${top.keys[key].toFixed(2)} current`));

    const listed = JSON.parse((await cli(['reviews', '--json'])).stdout) as {
      overrides: Array<{ ref: string; questionKey: string; source: string; verdict: { note: string } }>;
    };
    expect(listed.overrides).toEqual([
      expect.objectContaining({
        ref: top.ref,
        questionKey: key,
        source: 'human',
        verdict: expect.objectContaining({ note: 'checked with the owner' }),
      }),
    ]);
    expect((await cli(['reviews', '--stale'])).stdout).toMatch(
      /^0 verdicts in force in \S+ made at an older state \(override_stale\)\n$/,
    ); // made at the state as it is

    // An edit: the override stays in force, and reads override_stale until a person looks again.
    await cli(['edit', top.ref, '--append', 'Update from the owner.']);
    expect((await cli(['reviews', '--stale'])).stdout).toMatch(
      new RegExp(
        `^1 verdict in force in \\S+ made at an older state \\(override_stale\\): look again\\n  ${top.ref}\\s+attention/${key}  p=0\\.00 \\(value by ana, \\d{4}-\\d\\d-\\d\\d\\)  override_stale \\(body\\)`,
      ),
    );

    expect((await cli(['review', top.ref, key, 'withdraw'])).stdout).toContain('withdrawn: the model decides again');
    const again = await cli(['review', top.ref, key, 'withdraw']).catch((e: { code: number; stderr: string }) => e);
    expect(again).toMatchObject({ code: 1, stderr: expect.stringContaining('has no verdict to withdraw') });
  });

  it('refuses a value that does not fit, an unknown key, with exit 1 and the reason; flags --flapping lists none on a fresh demo', async () => {
    const err = await cli(['review', flaggedTop.ref, 'blocked', 'maybe']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(err).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('a noul takes true, false or a probability in [0, 1]'),
    });
    const unknown = await cli(['review', flaggedTop.ref, 'nope', 'agree']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringContaining('asks "nope"') });
    expect((await cli(['flags', '--set', 'attention', '--flapping'])).stdout).toMatch(
      /^0 keys of attention in \S+ flipped 3 or more times in 30 days\n$/,
    );
  });
});
