import type { Command } from 'commander';
import { createVerdict, type VerdictOptions } from '../compose/verdict.js';
import { createProvider } from '../providers/create.js';
import { DatabaseNotFound } from '../errors.js';
import { databaseLabel } from '../store/database-errors.js';
import { configFrom, loggerFor, UsageError } from './common.js';

/**
 * `verdict mcp`: the MCP server (src/mcp/mcp-server.ts) over stdio, for an agent host that runs it
 * as a child process. It acts as the workspace token in `VERDICT_MCP_TOKEN` (environment only, so
 * it stays out of process listings), checked at start and again before every tool call, so a
 * revoked token stops working at once. stdout carries only the protocol; logs go to stderr.
 *
 * Currency is judged against the configured provider and model (`--provider`, `--model`), or, with
 * none configured, against the ones the workers last pinned (no API key needed: this process asks
 * no model). It runs until the host closes stdin or stdout, or SIGTERM/SIGINT, then closes the database.
 *
 * @throws UsageError (exit 2) without a token, with one this database does not know, or for a
 * SQLite path with no database (nothing is created).
 */
export function registerMcpCommand(program: Command): void {
  program
    .command('mcp')
    .description('serve the MCP server over stdio for a coding agent, as the workspace token in VERDICT_MCP_TOKEN')
    .action(async (_opts: unknown, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      const secret = cfg.mcpToken;
      if (!secret)
        throw new UsageError(
          'verdict mcp needs VERDICT_MCP_TOKEN in the environment; create one with `verdict tokens create --workspace SLUG --role read` (write to record verdicts)',
        );
      const provider: VerdictOptions['provider'] =
        cfg.provider === undefined
          ? 'pinned'
          : cfg.provider === 'none'
            ? 'none'
            : (createProvider(cfg, logger) ?? 'none');
      const v = await createVerdict({
        database: cfg.databaseUrl,
        configFile: cfg.configFile,
        provider,
        logger,
        access: 'existing',
      }).catch((err: unknown) => {
        // An agent's configuration with a mistyped path must not start an empty tracker.
        if (err instanceof DatabaseNotFound)
          throw new UsageError(
            `no database at ${databaseLabel(cfg.databaseUrl)}; give the path the demo, an import or a worker wrote (--database-url / VERDICT_DATABASE_URL)`,
          );
        throw err;
      });
      try {
        const first = await v.tokens.authenticate(secret);
        if (!first)
          throw new UsageError(
            `VERDICT_MCP_TOKEN is not a live token of ${databaseLabel(cfg.databaseUrl)} (unknown, revoked, or its workspace deleted); check it and --database-url`,
          );
        // Loaded here, so the other commands never pay for the MCP SDK's import (as serve does for fastify's).
        const [{ createMcpServer }, { StdioServerTransport }] = await Promise.all([
          import('../mcp/mcp-server.js'),
          import('@modelcontextprotocol/sdk/server/stdio.js'),
        ]);
        const server = createMcpServer(v, { principal: () => v.tokens.authenticate(secret), logger });
        const transport = new StdioServerTransport();
        const closed = new Promise<void>((resolve) => {
          transport.onclose = resolve;
          process.stdin.once('end', resolve);
          // A host that closes its end of stdout (EPIPE) has gone: shut down as on a closed stdin.
          process.stdout.on('error', () => resolve());
          process.once('SIGTERM', resolve);
          process.once('SIGINT', resolve);
        });
        await server.connect(transport);
        logger.info({ token: first.id, workspace: first.workspaceSlug, role: first.role }, 'mcp serving on stdio');
        await closed;
        await server.close();
      } finally {
        await v.close();
      }
    });
}
