import { Option, type Command } from 'commander';
import { OPTIONS } from '../config.js';

/**
 * What each global option means and its default, in the words of `.env.example` (which the
 * test test/cli/help-options.test.ts holds this table to). Typed over every key of OPTIONS, so a
 * new option does not compile until it is described here.
 */
export const OPTION_HELP: Readonly<Record<keyof typeof OPTIONS, { meaning: string; default: string }>> = {
  databaseUrl: {
    meaning: 'the database: a file path or file: URL selects SQLite; a postgres:// URL selects PostgreSQL',
    default: './data/verdict.db',
  },
  provider: {
    meaning:
      'anthropic, openai, fake or none; `none` turns decisions off. With nothing set, `verdict worker` refuses to start',
    default: 'anthropic when ANTHROPIC_API_KEY is set',
  },
  model: { meaning: 'pinned model id; a -latest alias is refused', default: 'claude-haiku-5-5 (anthropic)' },
  logLevel: {
    meaning: 'fatal, error, warn, info, debug, trace or silent; JSON lines, pretty only on a TTY',
    default: 'info',
  },
  concurrency: { meaning: 'worker slots, each evaluating one job at a time', default: '4' },
  coAsk: {
    meaning:
      'on or off: one provider call asks every owed question set of an item whose state is byte-identical (DESIGN §7.2); spend is split by keys',
    default: 'on',
  },
  batch: {
    meaning:
      "auto, on or off: auto sends backfill-priority work (backfill, reask, collection changes) through the provider's batch API at half price, results within 24 h (anthropic only), in a long-running worker; a one-shot drain (worker --until-idle, backfill --drain) asks directly unless given on, and then waits for its batches",
    default: 'auto',
  },
  tickMs: { meaning: 'idle wait (ms) when nothing is claimable', default: '5000' },
  leaseMs: {
    meaning: "claim lease (ms); must cover one provider call's worst case (anthropic: 330000)",
    default: '600000',
  },
  passLimit: { meaning: 'jobs one slot runs before it re-checks shutdown and cooling-off', default: '20' },
  fakeLatencyMs: { meaning: "the fake provider's delay per call (ms), for tests, demos and benchmarks", default: '0' },
  metricsPort: {
    meaning:
      'port for Prometheus /metrics and /healthz on `verdict worker` (and `backfill --drain`); 0 picks a free port and logs it',
    default: 'unset: serves neither',
  },
  metricsHost: {
    meaning: 'address the metrics port binds; 0.0.0.0 for a scraper on another host or container',
    default: '127.0.0.1',
  },
  backfillChunk: {
    meaning: 'items `verdict backfill` owes per chunk before it waits for them to drain',
    default: 'the pass limit (20)',
  },
  configFile: {
    meaning:
      "question-set config file (JSON or YAML) with a team's own sets (example: examples/verdict.config.yaml); validated at start",
    default: 'unset: the production sets only',
  },
  graceMs: { meaning: 'shutdown grace period (ms) after SIGTERM/SIGINT', default: '10000' },
  abandonLimit: { meaning: 'claims that end without an outcome (the worker died) before a job parks', default: '8' },
  inputBudgetTokens: {
    meaning: 'largest estimated input tokens of one provider call; a bigger request parks its job',
    default: '200000',
  },
  driftSweepPerMinute: {
    meaning:
      "items the worker re-owes per minute at most when answers went stale without an item write (a reworded question, a changed convention, another model, an answer past its set's maxAge); 0 turns it off",
    default: '60',
  },
  walCheckpointMs: {
    meaning:
      'SQLite: the longest a busy worker goes without a wal_checkpoint(TRUNCATE) (ms); an idle worker also checkpoints when it finds nothing to claim, so the write-ahead log stays small',
    default: '60000',
  },
  spendSpoolDir: {
    meaning:
      'where a worker spools (fsynced, on a local disk) the spend of paid calls it could not write to the database (a full disk, an outage); the next worker to start writes it',
    default: 'beside a SQLite file (<file>.spend-spool); for PostgreSQL ./data/spend-spool',
  },
  retentionHistoryMs: {
    meaning:
      'answer rows evaluated within this window (ms) are kept; older superseded rows are pruned (the latest per key and any current row are always kept)',
    default: '2592000000 (30 days)',
  },
  pruneIntervalMs: {
    meaning: 'how often the worker runs a retention pass (ms); 0 turns it off (`verdict prune` still works)',
    default: '3600000',
  },
  envFile: {
    meaning:
      'an env file (KEY=value lines) read at start and again on SIGHUP; its values win over the inherited environment, flags win over both',
    default: 'unset',
  },
  anthropicBaseUrl: {
    meaning: 'Anthropic API base URL, read as the SDK reads it (the key, ANTHROPIC_API_KEY, is environment-only)',
    default: 'the SDK default',
  },
  openaiBaseUrl: {
    meaning:
      'OpenAI-compatible server (Ollama, vLLM, llama.cpp server, OpenAI), /v1 included (its key, VERDICT_OPENAI_API_KEY, is environment-only)',
    default: 'unset',
  },
  requestsPerMinute: { meaning: 'provider requests per minute, per worker process', default: 'unset: no cap' },
  inputTokensPerMinute: { meaning: 'estimated input tokens per minute, per worker process', default: 'unset: no cap' },
  httpPort: { meaning: '`verdict serve`: the HTTP API port; 0 picks a free port and logs it', default: '8080' },
  httpHost: {
    meaning: '`verdict serve`: the address the HTTP API binds; 0.0.0.0 behind a proxy or in a container',
    default: '127.0.0.1',
  },
  httpRateLimitPerMinute: {
    meaning:
      '`verdict serve`: requests per minute per token (per client address without one); over it 429 with Retry-After',
    default: '600',
  },
  githubWorkspace: {
    meaning: '`verdict serve`: workspace for GitHub webhook events of a repository never imported',
    default: 'github',
  },
  dailyTokenCap: {
    meaning:
      'billed tokens per UTC day across every process on the database; when reached, claims stop until the next day',
    default: 'unset: no cap',
  },
  actions: {
    meaning:
      "labels in GitHub (DESIGN §17): off, propose (proposals only; what a person decided is written) or apply (also changes of keys past the calibration gate, in sets whose mode is apply); caps each set's mode",
    default: 'propose',
  },
  githubApiUrl: {
    meaning:
      'GitHub REST API base URL for `import github --repo` and label writes (the token, VERDICT_GITHUB_TOKEN or GITHUB_TOKEN, is environment-only)',
    default: 'https://api.github.com',
  },
  eventUrls: {
    meaning:
      'receivers of decision.surfaced / decision.cleared events (comma-separated URLs); the worker signs each POST with VERDICT_EVENT_SECRET (environment-only, required with it)',
    default: 'unset: no events are delivered',
  },
};

/** Flags whose value is text rather than a number. */
const TEXT_OPTIONS = new Set([
  'provider',
  'model',
  'databaseUrl',
  'logLevel',
  'configFile',
  'envFile',
  'anthropicBaseUrl',
  'openaiBaseUrl',
  'metricsHost',
  'httpHost',
  'githubWorkspace',
  'eventUrls',
  'coAsk',
  'batch',
  'actions',
  'githubApiUrl',
  'spendSpoolDir',
]);

/** The `verdict help options` text: every global option once, with its variable, meaning, values and default. */
function formatGlobalOptions(): string {
  const lines = [
    'Global options: every command takes them, as a flag or as an environment variable (flags win;',
    'blank variables count as unset). The same list, commented, is in .env.example.',
    '',
  ];
  for (const [key, spec] of Object.entries(OPTIONS) as Array<
    [keyof typeof OPTIONS, (typeof OPTIONS)[keyof typeof OPTIONS]]
  >) {
    const h = OPTION_HELP[key];
    lines.push(`  ${spec.flag} ${TEXT_OPTIONS.has(key) ? '<value>' : '<n>'}   (env ${spec.env})`);
    lines.push(`      ${h.meaning}`);
    lines.push(`      values: ${spec.expected}; default: ${h.default}`);
  }
  return lines.join('\n');
}

/**
 * Adds every config option as a hidden flag (parsed by every command, listed once by
 * `verdict help options`) and the `options` command that `verdict help options` shows.
 */
export function addGlobalOptions(program: Command): Command {
  for (const [key, spec] of Object.entries(OPTIONS)) {
    program.addOption(
      new Option(
        `${spec.flag} ${TEXT_OPTIONS.has(key) ? '<value>' : '<n>'}`,
        `${spec.expected} (env ${spec.env})`,
      ).hideHelp(),
    );
  }
  program
    .command('options')
    .description('list the global options every command takes (also: verdict help options)')
    .configureHelp({ formatHelp: () => `${formatGlobalOptions()}\n` })
    .action(() => {
      process.stdout.write(`${formatGlobalOptions()}\n`);
    });
  return program;
}

/** The line under every command's help that points at the one list of global options. */
const GLOBAL_OPTIONS_POINTER = `\nGlobal options (--database-url, --provider, --log-level, ... ${Object.keys(OPTIONS).length} in all): \`verdict help options\``;

/** Adds GLOBAL_OPTIONS_POINTER under the help of `cmd` and of every command below it. */
export function pointAtGlobalOptions(cmd: Command): void {
  if (cmd.name() !== 'options') cmd.addHelpText('after', GLOBAL_OPTIONS_POINTER);
  for (const sub of cmd.commands) pointAtGlobalOptions(sub);
}
