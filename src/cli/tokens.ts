import type { Command } from 'commander';
import { parseApiTokenRole } from '../access/tokens.js';
import { createVerdict } from '../compose/verdict.js';
import { InvalidInput } from '../errors.js';
import { configFrom, loggerFor, UsageError } from './common.js';

/**
 * `verdict tokens create|list|revoke` (DESIGN §16.2): HTTP API bearer tokens, through the public
 * API (`verdict.tokens`). `create` prints the token once on stdout; the database keeps its SHA-256.
 */
export function registerTokensCommand(program: Command): void {
  const tokens = program
    .command('tokens')
    .description('HTTP API bearer tokens, scoped to a workspace and a role (read, write, admin)');

  const open = async (cmd: Command) => {
    const cfg = configFrom(cmd);
    // Tokens touch no decisions: provider none, so opening owes nothing.
    return createVerdict({ database: cfg.databaseUrl, provider: 'none', logger: loggerFor(cfg) });
  };

  tokens
    .command('create')
    .description('make a token and print it once')
    .requiredOption(
      '--workspace <slug>',
      'the workspace the token may reach (it must exist, unless --create-workspace)',
    )
    .option(
      '--create-workspace',
      'create the workspace when it does not exist (a typo would otherwise make a new, empty one)',
    )
    .requiredOption('--role <role>', 'read, write or admin')
    .option('--name <label>', 'a label shown by `tokens list`')
    .option('--json', 'print {token, id, workspace, role} as JSON')
    .action(
      async (
        opts: { workspace: string; role: string; name?: string; json?: boolean; createWorkspace?: boolean },
        cmd: Command,
      ) => {
        let role;
        try {
          role = parseApiTokenRole(opts.role);
        } catch (err) {
          if (err instanceof InvalidInput) throw new UsageError(`--role: ${err.message}`);
          throw err;
        }
        const v = await open(cmd);
        try {
          let r;
          try {
            r = await v.tokens.create({
              workspace: opts.workspace,
              role,
              name: opts.name,
              createWorkspace: opts.createWorkspace === true,
            });
          } catch (err) {
            if (err instanceof InvalidInput && err.param === 'workspace')
              throw new UsageError(
                `--workspace: ${err.message.replace('pass createWorkspace: true', 'add --create-workspace')}`,
              );
            throw err;
          }
          if (opts.json) {
            process.stdout.write(
              `${JSON.stringify({ token: r.token, id: r.row.id, workspace: r.row.workspaceSlug, role: r.row.role, workspaceCreated: r.workspaceCreated })}\n`,
            );
          } else {
            process.stdout.write(`${r.token}\n`);
            process.stderr.write(
              `token ${r.row.id}: ${r.row.role} on workspace ${r.row.workspaceSlug}${r.workspaceCreated ? ' (workspace created)' : ''}. ` +
                'It is shown this once; only its SHA-256 is kept. Send it as `Authorization: Bearer <token>` (or as VERDICT_MCP_TOKEN for `verdict mcp`).\n',
            );
          }
        } finally {
          await v.close();
        }
      },
    );

  tokens
    .command('list')
    .description('list tokens (never the tokens themselves): id, workspace, role, name, created, revoked')
    .option('--workspace <slug>', 'only this workspace')
    .option('--json', 'print JSON')
    .action(async (opts: { workspace?: string; json?: boolean }, cmd: Command) => {
      const v = await open(cmd);
      try {
        const rows = await v.tokens.list({ workspace: opts.workspace });
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
          return;
        }
        if (rows.length === 0) process.stdout.write('no tokens\n');
        for (const t of rows) {
          const state = t.revokedAt === null ? 'live' : `revoked ${new Date(t.revokedAt).toISOString()}`;
          process.stdout.write(
            `${t.id}  ${t.workspaceSlug}  ${t.role}  ${t.name || '-'}  created ${new Date(t.createdAt).toISOString()}  ${state}\n`,
          );
        }
      } finally {
        await v.close();
      }
    });

  tokens
    .command('revoke <id>')
    .description('revoke a token by id: every later request with it gets 401')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const v = await open(cmd);
      try {
        if (!(await v.tokens.revoke(id)))
          throw new UsageError(`no live token with id ${id} (see \`verdict tokens list\`)`);
        process.stdout.write(`revoked ${id}\n`);
      } finally {
        await v.close();
      }
    });
}
