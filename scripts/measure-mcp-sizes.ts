/**
 * Sizes of MCP results on the demo database, as an agent receives them:
 * `npx tsx scripts/measure-mcp-sizes.ts [--cli path/to/dist/cli/main.js] [--ref REF]`.
 *
 * Makes the demo database (`verdict demo`, the bundled sample drained by the fake provider) with
 * the given build (default this checkout's dist/; another revision's build compares revisions),
 * makes a read token with it, starts its `verdict mcp` over stdio and calls `item_get` (on REF, by
 * default the item with the most stored decisions) and `flags_list {}` with the official MCP SDK
 * client. Prints, per call, the bytes of the text content (UTF-8) and of the structured content
 * (as JSON.stringify writes it; 0 when the result has none), the wall time of the call and the CPU
 * time the server process spent on it (/proc, 10 ms ticks). A figure to report, not an assertion.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import Database from 'better-sqlite3';

const { values } = parseArgs({
  options: { cli: { type: 'string', default: 'dist/cli/main.js' }, ref: { type: 'string' } },
});
const cli = resolve(values.cli!);
const env = { ...(process.env as Record<string, string>), ANTHROPIC_API_KEY: '', NO_COLOR: '1', CI: '1' };

/** CPU time of a process so far, ms (utime + stime of /proc/PID/stat, in USER_HZ ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

const dir = mkdtempSync(join(tmpdir(), 'verdict-mcp-sizes-'));
const db = join(dir, 'demo.db');
try {
  execFileSync(process.execPath, [cli, 'demo', '--database-url', db], { env, stdio: 'ignore' });
  const token = execFileSync(
    process.execPath,
    [cli, 'tokens', 'create', '--workspace', 'beads', '--role', 'read', '--name', 'measure', '--database-url', db],
    { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
  )
    .split('\n')[0]
    .trim(); // the token is the first line, the note about it the second
  if (!token) throw new Error('measure-mcp-sizes: no token in the output of `tokens create`');
  const ref =
    values.ref ??
    (() => {
      const sql = new Database(db, { readonly: true });
      const r = sql
        .prepare(
          `SELECT i.ref AS ref FROM item_decisions d JOIN items i ON i.id = d.item_id GROUP BY i.id ORDER BY count(*) DESC, i.ref LIMIT 1`,
        )
        .get() as { ref: string };
      sql.close();
      return r.ref;
    })();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [cli, 'mcp'],
    env: { ...env, VERDICT_DATABASE_URL: db, VERDICT_PROVIDER: 'fake', VERDICT_MCP_TOKEN: token },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'measure-mcp-sizes', version: '1.0.0' });
  await client.connect(transport);
  process.stdout.write(`${cli} (${execFileSync(process.execPath, [cli, '--version'], { encoding: 'utf8' }).trim()})\n`);
  for (const [name, args] of [
    ['item_get', { ref }],
    ['flags_list', {}],
  ] as const) {
    const c0 = cpuMs(transport.pid!);
    const t0 = performance.now();
    const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
    const wall = performance.now() - t0;
    const cpu = cpuMs(transport.pid!) - c0;
    if (r.isError) throw new Error(`${name}: an error result`);
    const text = r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
    const structured = r.structuredContent === undefined ? 0 : Buffer.byteLength(JSON.stringify(r.structuredContent));
    process.stdout.write(
      `${name} ${JSON.stringify(args)}: text ${Buffer.byteLength(text)} B (${r.content.length} part${r.content.length === 1 ? '' : 's'}), structuredContent ${structured} B; ${wall.toFixed(0)} ms wall, ${cpu} ms server CPU\n`,
    );
  }
  await client.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
