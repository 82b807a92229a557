import { errCode } from '../errors.js';
import type { Command } from 'commander';
import { createVerdict, type VerdictWorker } from '../compose/verdict.js';
import { createProvider } from '../providers/create.js';
import { configFrom, EXIT_FAILURE, loggerFor } from './common.js';

/**
 * `verdict serve [--worker] [--no-dashboard] [--no-mcp]` (DESIGN §16.2): the HTTP API on `--http-host:--http-port`
 * the MCP server at /mcp (src/mcp/) and the web dashboard under /ui (src/dashboard/), with
 * GitHub webhooks when VERDICT_GITHUB_WEBHOOK_SECRET is set, and with `--worker` an in-process
 * worker (the same settings as `verdict worker`) whose /healthz and /metrics the server serves.
 * Built on the public API: createVerdict, createApiServer, verdict.worker().
 *
 * SIGTERM/SIGINT: stop accepting requests (in-flight ones finish, for at most --grace-ms), stop
 * the worker within --grace-ms, close the database, exit 0. A second signal exits at once. No SIGHUP reload here
 * (run `verdict worker` apart for that).
 */
export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description(
      'serve the HTTP API (/v1, /hooks/github, /healthz, /metrics), the MCP server (/mcp) and the web dashboard (/ui); --worker also runs a worker in this process',
    )
    .option('--worker', 'run a worker in this process too')
    .option('--no-dashboard', 'do not serve the web dashboard under /ui')
    .option('--no-mcp', 'do not serve the MCP server at /mcp')
    .action(async (opts: { worker?: boolean; dashboard?: boolean; mcp?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const logger = loggerFor(cfg);
      // The same provider rules as `verdict worker`: nothing chosen is a ConfigError (exit 2).
      const provider = createProvider(cfg, logger);
      const v = await createVerdict({
        database: cfg.databaseUrl,
        configFile: cfg.configFile,
        provider: provider ?? 'none',
        logger,
        poolSize: Math.max(10, cfg.concurrency + 4),
        actions: cfg.actions,
      });
      let worker: VerdictWorker | undefined;
      try {
        if (opts.worker) {
          if (!provider) logger.info('provider is none: decisions are off, no worker runs');
          else {
            // The same worker settings as `verdict worker` (WorkerSettings is a pick of the config).
            worker = v.worker(cfg);
            worker.on('error', (err) => logger.error({ err: errCode(err) }, 'worker error'));
            await worker.start();
          }
        }
        // Loaded here, so the other commands never pay for fastify's import.
        const { createApiServer } = await import('../server/api-server.js');
        const server = await createApiServer(v, {
          logger,
          rateLimitPerMinute: cfg.httpRateLimitPerMinute,
          github: cfg.githubWebhookSecret
            ? { secret: cfg.githubWebhookSecret, workspace: cfg.githubWorkspace }
            : undefined,
          worker,
          dashboard: opts.dashboard !== false,
          mcp: opts.mcp !== false,
        });
        const address = await server.listen({ port: cfg.httpPort, host: cfg.httpHost });
        logger.info({ address, worker: !!worker, githubWebhooks: !!cfg.githubWebhookSecret }, 'http listening');
        process.stdout.write(
          `verdict serve: listening on ${address} (worker ${worker ? 'on' : 'off'}, GitHub webhooks ${cfg.githubWebhookSecret ? 'on' : 'off'}, dashboard ${opts.dashboard !== false ? `${address}/ui` : 'off'}, MCP ${opts.mcp !== false ? `${address}/mcp` : 'off'})\n`,
        );

        let stopping = false;
        const onSignal = (sig: NodeJS.Signals) => {
          if (stopping) {
            logger.warn({ signal: sig }, 'second signal: exiting at once');
            process.exit(EXIT_FAILURE);
          }
          stopping = true;
          logger.info({ signal: sig, graceMs: cfg.graceMs }, 'shutting down');
          signalled();
        };
        let signalled!: () => void;
        const stop = new Promise<void>((resolve) => (signalled = resolve));
        process.on('SIGTERM', onSignal);
        process.on('SIGINT', onSignal);
        await stop;
        // Requests in flight finish (a body still uploading too), for at most --grace-ms.
        const cut = setTimeout(() => server.server.closeAllConnections(), cfg.graceMs);
        cut.unref();
        await server.close();
        clearTimeout(cut);
        await worker?.stop({ graceMs: cfg.graceMs });
      } finally {
        await v.close();
        await provider?.close?.();
      }
    });
}
