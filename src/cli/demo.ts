import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { ConfigError } from '../config.js';
import { bundledSamplePath, importBeads } from '../importers/beads.js';
import { importConventions, InvalidConventionsFile, readConventionsFile } from '../importers/conventions.js';
import { createProvider } from '../providers/create.js';
import { sqlitePathFromUrl } from '../store/sqlite/open.js';
import {
  buildRegistry,
  configFrom,
  EXIT_FAILURE,
  EXIT_USAGE,
  formatDuration,
  loggerFor,
  openStore,
  UsageError,
} from './common.js';
import { estimateDrain } from './demo-estimate.js';
import { formatImportReport } from './import.js';
import { openReader } from '../compose/reader.js';
import { readsAgainst } from './reader.js';
import { printLeftover, runWorker } from './worker.js';

/** The demo's own database, so it never touches a real one. */
const DEMO_DATABASE = './data/demo.db';

export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description('import the bundled sample of a real tracker and drain it with the fake provider (offline)')
    .option('--keep', 'keep the demo database from an earlier run instead of starting fresh')
    .option('--sample <file>', 'a beads JSONL export to use instead of the bundled sample')
    .option('--yes', 'with a paid provider (--provider anthropic or openai): spend after the printed estimate')
    .option(
      '--conventions <file>',
      'also import these conventions (JSON or YAML, e.g. examples/beads-conventions.yaml) into the sample workspace before draining',
    )
    .action(async (opts: { keep?: boolean; sample?: string; yes?: boolean; conventions?: string }, cmd: Command) => {
      const started = Date.now();
      const flags = cmd.optsWithGlobals();
      const env = { ...process.env };
      const cfg = configFrom(cmd, {
        ...env,
        VERDICT_DATABASE_URL: flags.databaseUrl ?? DEMO_DATABASE,
        VERDICT_PROVIDER: flags.provider ?? 'fake',
        VERDICT_TICK_MS: flags.tickMs ?? '50',
      });
      const logger = loggerFor({ ...cfg, logLevel: flags.logLevel ?? 'warn' });
      const registry = buildRegistry(cfg);
      const provider = createProvider(cfg, logger);
      if (!provider) throw new ConfigError('demo needs a provider; --provider none turns decisions off');
      const paid = provider.name !== 'fake';
      // Check the inputs before touching any database.
      const sample = opts.sample ?? bundledSamplePath();
      if (!existsSync(sample) || !statSync(sample).isFile()) throw new UsageError(`--sample: no file at ${sample}`);
      let conventionsDoc: ReturnType<typeof readConventionsFile> | undefined;
      if (opts.conventions) {
        try {
          conventionsDoc = readConventionsFile(opts.conventions);
        } catch (err) {
          if (err instanceof InvalidConventionsFile) throw new UsageError(err.message);
          throw err;
        }
      }
      let path = sqlitePathFromUrl(cfg.databaseUrl);
      let scratch: string | null = null;
      if (paid && !opts.yes) {
        // The estimate needs the sample imported; do it in a scratch database so that asking for
        // an estimate never resets the demo's own.
        scratch = mkdtempSync(join(tmpdir(), 'verdict-demo-estimate-'));
        path = join(scratch, 'estimate.db');
      } else if (!opts.keep && path !== ':memory:' && existsSync(path)) {
        // The demo starts fresh only in its own database: never reset one it did not make.
        if (resolve(path) !== resolve(DEMO_DATABASE)) {
          throw new UsageError(
            `demo resets its database, and ${path} is not the demo's own (${DEMO_DATABASE}); pass --keep to add the sample to it, or choose a new path`,
          );
        }
        for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
      }
      const store = openStore({ ...cfg, databaseUrl: path }, registry);
      const out = (s: string) => process.stdout.write(`${s}\n`);
      try {
        out(
          `Verdict demo: provider ${provider.name}${paid ? `, model ${provider.model} (real calls)` : ' (offline and deterministic: answers are derived from hashes, not from a model)'}, database ${cfg.databaseUrl}`,
        );
        const report = await importBeads(store, sample, { workspaceSlug: 'beads', logger });
        out(formatImportReport(report));
        if (opts.conventions && conventionsDoc) {
          const doc = conventionsDoc;
          const c = await importConventions(store, doc, report.workspaceSlug);
          out(
            `conventions from ${opts.conventions}: ${c.created} created, ${c.updated} updated, ${c.unchanged} unchanged (collection ${doc.collection}, a system collection with role "conventions")`,
          );
        }
        if (paid) {
          // DESIGN §12: a paid provider only with --yes, after a printed estimate. The import above is
          // local; nothing has been sent yet.
          const e = await estimateDrain(store, registry);
          out(
            `estimate: ${e.jobs} jobs owed, about ${e.calls} calls to ${provider.name} ${provider.model}, about ${e.inputTokens} input tokens, at most ${e.maxOutputTokens} output tokens${e.notEstimated ? ` (${e.notEstimated} jobs not estimated)` : ''}`,
          );
          if (!opts.yes) {
            process.stderr.write(
              `verdict: demo with --provider ${provider.name} sends item text to a paid model; nothing was sent and ${cfg.databaseUrl} was not touched. Rerun with --yes to spend the estimate above.\n`,
            );
            process.exitCode = EXIT_USAGE;
            return;
          }
        }
        // The demo shows its answers now: call by call, never a provider batch, whose results can
        // take up to 24 h (DESIGN §7.3). Co-asking stays on.
        const summary = await runWorker({
          cfg: { ...cfg, batch: 'off' },
          store,
          registry,
          provider,
          logger,
          untilIdle: true,
          handleSignals: true,
        });
        const outcomes = Object.entries(summary.outcomes)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ');
        out(
          `worker: ${summary.claimed} jobs run (${outcomes}); ${summary.calls} provider calls to ${provider.name}, ${summary.answersStored} answers stored, ${summary.inputTokens} input / ${summary.outputTokens} output tokens`,
        );
        await printLeftover(store, out);
        if (summary.misconfigured) {
          process.stderr.write(`verdict: provider misconfigured (${summary.misconfigured}); run \`verdict doctor\`\n`);
          process.exitCode = EXIT_FAILURE;
          return;
        }
        const { flags: flagged } = await (
          await openReader(store, registry, readsAgainst(cfg, logger), logger)
        ).workspaceFlags(report.workspaceId, 'attention');
        const top = Object.values(flagged)
          .map((f) => ({ ref: f.ref, keys: f.keys, top: Math.max(...Object.values(f.keys)) }))
          .sort((a, b) => b.top - a.top || (a.ref < b.ref ? -1 : 1))
          .slice(0, 5);
        out(
          `top flagged items (attention, ${Object.keys(flagged).length} flagged${paid ? '' : '; fake answers, so the flags show the pipeline, not real judgments'}):`,
        );
        for (const t of top)
          out(
            `  ${t.ref.padEnd(12)} ${Object.entries(t.keys)
              .map(([k, p]) => `${k}=${p.toFixed(2)}`)
              .join(' ')}`,
          );
        // Reads judge currency against the configured provider, so the hint names the demo's.
        out(
          `wall time ${formatDuration(Date.now() - started)}. Next: \`export VERDICT_DATABASE_URL=${cfg.databaseUrl} VERDICT_PROVIDER=${provider.name}\`, then \`npx verdict show ${top[0]?.ref ?? 'REF'}\``,
        );
      } finally {
        await provider.close?.();
        await store.close();
        if (scratch) rmSync(scratch, { recursive: true, force: true });
      }
    });
}
