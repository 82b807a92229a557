import { readFileSync } from 'node:fs';
import { parseEnv } from 'node:util';
import { z } from 'zod';
import { errCode, VerdictError } from './errors.js';

/**
 * Configuration (DESIGN §12): every option is a CLI flag and an environment variable, validated
 * at start with a message that names the option, the value given and what was expected. Flags
 * win over the environment. `.env.example` lists them all.
 */

export type ProviderName = 'anthropic' | 'openai' | 'fake' | 'none';

export interface Config {
  /** A path or `file:` URL (SQLite) or `postgres://` URL. @defaultValue ./data/verdict.db */
  databaseUrl: string;
  /** Which provider answers; undefined when none was chosen and no key is set. */
  provider: ProviderName | undefined;
  /** The pinned model id; undefined takes the provider's default. */
  model: string | undefined;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Worker slots. @defaultValue 4 */
  concurrency: number;
  /** Co-asking (DESIGN §7.2): one call asks every owed set of an item whose state bytes are identical. `off` asks each set alone. @defaultValue on */
  coAsk: 'on' | 'off';
  /**
   * Message Batches (DESIGN §7.3, §7.4): `auto` sends backfill-priority work (backfill, reask,
   * collection changes) through the provider's batch API at half price when the provider has one
   * and is paid, in a long-running worker only (a one-shot drain asks directly); `on` batches in a
   * drain too, which then waits for its batches; `off` asks it call by call. @defaultValue auto
   */
  batch: 'auto' | 'on' | 'off';
  /** Idle wait between claim attempts when nothing is claimable (ms). @defaultValue 5000 */
  tickMs: number;
  /** Claim lease (ms); must cover one provider call's worst case. @defaultValue 600000 */
  leaseMs: number;
  /** Jobs a slot runs per pass before it checks for shutdown and reload. @defaultValue 20 */
  passLimit: number;
  /** The fake provider's delay per call (ms). @defaultValue 0 */
  fakeLatencyMs: number;
  /** Port of /metrics and /healthz; undefined serves neither. 0 picks a free port (logged). */
  metricsPort: number | undefined;
  /** Address the metrics port binds. @defaultValue 127.0.0.1 (set 0.0.0.0 for a scraper on another host or container) */
  metricsHost: string;
  /** Items a backfill owes per chunk before it waits for them to drain. @defaultValue the per-pass limit (DESIGN §11) */
  backfillChunk: number | undefined;
  /** Question-set config file (JSON or YAML). */
  configFile: string | undefined;
  /** Shutdown grace period (ms). @defaultValue 10000 */
  graceMs: number;
  /** Claims that end without an outcome before a job parks. @defaultValue 8 */
  abandonLimit: number;
  /** Largest estimated input tokens of one call; above it the job parks. @defaultValue 200000 */
  inputBudgetTokens: number;
  /** Items the worker's drift and expiry sweeps (DESIGN §8, §5.2) re-owe per minute at most, together; 0 turns both off. @defaultValue 60 */
  driftSweepPerMinute: number;
  /** Retention keeps every answer row evaluated within this window (ms). @defaultValue 2592000000 (30 days) */
  retentionHistoryMs: number;
  /** How often the worker runs a retention pass (ms); 0 turns it off (`verdict prune` still works). @defaultValue 3600000 */
  pruneIntervalMs: number;
  /**
   * SQLite: the longest a busy worker goes without a `wal_checkpoint(TRUNCATE)` (ms); an idle worker
   * also checkpoints when it finds nothing to claim (DESIGN §10.2). @defaultValue 60000
   */
  walCheckpointMs: number;
  /**
   * Where a worker spools the spend of paid calls it could not write to the database (DESIGN
   * §10.5), on a local disk. @defaultValue beside a SQLite file (`<file>.spend-spool`); for
   * PostgreSQL `./data/spend-spool`
   */
  spendSpoolDir: string | undefined;
  /** Port `verdict serve` listens on; 0 picks a free one (logged). @defaultValue 8080 */
  httpPort: number;
  /** Address `verdict serve` binds. @defaultValue 127.0.0.1 (set 0.0.0.0 behind a proxy or in a container) */
  httpHost: string;
  /** HTTP API requests per minute per token (per client address without one); over it, 429 with Retry-After. @defaultValue 600 */
  httpRateLimitPerMinute: number;
  /** Workspace for GitHub webhook events of a repository never imported. @defaultValue github (the importer's default) */
  githubWorkspace: string;
  /** `VERDICT_GITHUB_WEBHOOK_SECRET` (environment only, like the keys): `/hooks/github` is served only when set. */
  githubWebhookSecret: string | undefined;
  /**
   * An environment file (`KEY=value` lines) read at start and again on every SIGHUP; its values win
   * over the inherited environment, flags win over both. Undefined reads none.
   */
  envFile: string | undefined;
  /** Anthropic API key: environment (or env file) only, never a flag, so it stays out of process listings. */
  /** Provider requests per minute, per worker process; undefined is no cap (DESIGN §10). */
  requestsPerMinute: number | undefined;
  /** Estimated input tokens per minute, per worker process; undefined is no cap. */
  inputTokensPerMinute: number | undefined;
  /** Billed tokens per UTC day across every process on the database; undefined is no cap. */
  dailyTokenCap: number | undefined;
  anthropicApiKey: string | undefined;
  /** Anthropic API base URL. @defaultValue the SDK's (https://api.anthropic.com) */
  anthropicBaseUrl: string | undefined;
  /** The OpenAI-compatible server's base URL, `/v1` included. */
  openaiBaseUrl: string | undefined;
  /** Bearer key of the OpenAI-compatible server: environment only, like the Anthropic key. */
  openaiApiKey: string | undefined;
  /**
   * Receivers of outbound decision events (DESIGN §16.2), http(s) URLs; the worker makes them the
   * store's event targets at start and delivers to them. Empty: this worker neither changes the
   * targets nor delivers. @defaultValue []
   */
  eventUrls: readonly string[];
  /** `VERDICT_EVENT_SECRET` (environment only, like the keys): the HMAC-SHA256 key events are signed with; required with `eventUrls`. */
  eventSecret: string | undefined;
  /** `VERDICT_MCP_TOKEN` (environment only, like the keys): the workspace token `verdict mcp` acts as. */
  mcpToken: string | undefined;
  /**
   * Actions in GitHub (DESIGN §17) for this worker: `off` plans and writes nothing; `propose` plans,
   * lists proposals and writes only what a person decided; `apply` also writes the changes of keys
   * past the gate in sets whose mode is `apply`. It caps each set's mode. @defaultValue propose
   */
  actions: 'off' | 'propose' | 'apply';
  /** `VERDICT_GITHUB_TOKEN`, else `GITHUB_TOKEN` (environment only): a token or a GitHub App installation token with Issues write; labels are written only with it. */
  githubToken: string | undefined;
  /** The GitHub REST API's base URL. @defaultValue https://api.github.com */
  githubApiUrl: string | undefined;
}

/** Thrown for a bad option value; exit code 2 (usage error). */
export class ConfigError extends VerdictError {
  readonly code = 'config_error';
}

interface OptionSpec {
  flag: string;
  env: string;
  schema: z.ZodType;
  expected: string;
}

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);

const httpUrl = z.url({ protocol: /^https?$/ });

/** A comma-separated list: entries trimmed, blanks and repeats dropped. */
const splitList = (s: string) => [
  ...new Set(
    s
      .split(',')
      .map((u) => u.trim())
      .filter((u) => u !== ''),
  ),
];

/** Every option: its flag, its environment variable, and its validator. Keys are environment-only. */
export const OPTIONS: Record<
  Exclude<
    keyof Config,
    'anthropicApiKey' | 'openaiApiKey' | 'githubWebhookSecret' | 'eventSecret' | 'mcpToken' | 'githubToken'
  >,
  OptionSpec
> = {
  databaseUrl: {
    flag: '--database-url',
    env: 'VERDICT_DATABASE_URL',
    schema: z.string().min(1),
    expected: 'a file path, file: URL or postgres:// URL',
  },
  provider: {
    flag: '--provider',
    env: 'VERDICT_PROVIDER',
    schema: z.enum(['anthropic', 'openai', 'fake', 'none']),
    expected: 'one of anthropic, openai, fake, none',
  },
  model: { flag: '--model', env: 'VERDICT_MODEL', schema: z.string().min(1), expected: 'a model id' },
  logLevel: {
    flag: '--log-level',
    env: 'VERDICT_LOG_LEVEL',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    expected: 'one of fatal, error, warn, info, debug, trace, silent',
  },
  concurrency: {
    flag: '--concurrency',
    env: 'VERDICT_CONCURRENCY',
    schema: int(1, 256),
    expected: 'an integer from 1 to 256',
  },
  coAsk: { flag: '--co-ask', env: 'VERDICT_CO_ASK', schema: z.enum(['on', 'off']), expected: 'on or off' },
  batch: { flag: '--batch', env: 'VERDICT_BATCH', schema: z.enum(['auto', 'on', 'off']), expected: 'auto, on or off' },
  tickMs: {
    flag: '--tick-ms',
    env: 'VERDICT_TICK_MS',
    schema: int(10, 3_600_000),
    expected: 'milliseconds from 10 to 3600000',
  },
  leaseMs: {
    flag: '--lease-ms',
    env: 'VERDICT_LEASE_MS',
    schema: int(100, 86_400_000),
    expected: 'milliseconds from 100 to 86400000',
  },
  passLimit: {
    flag: '--pass-limit',
    env: 'VERDICT_PASS_LIMIT',
    schema: int(1, 100_000),
    expected: 'an integer from 1 to 100000',
  },
  fakeLatencyMs: {
    flag: '--fake-latency-ms',
    env: 'VERDICT_FAKE_LATENCY_MS',
    schema: int(0, 600_000),
    expected: 'milliseconds from 0 to 600000',
  },
  metricsPort: {
    flag: '--metrics-port',
    env: 'VERDICT_METRICS_PORT',
    schema: int(0, 65_535),
    expected: 'a port from 0 to 65535',
  },
  metricsHost: {
    flag: '--metrics-host',
    env: 'VERDICT_METRICS_HOST',
    schema: z.string().regex(/^[0-9A-Za-z.:[\]-]+$/),
    expected: 'a host name or IP address to bind, such as 127.0.0.1 or 0.0.0.0',
  },
  backfillChunk: {
    flag: '--backfill-chunk',
    env: 'VERDICT_BACKFILL_CHUNK',
    schema: int(1, 100_000),
    expected: 'an integer from 1 to 100000',
  },
  configFile: { flag: '--config', env: 'VERDICT_CONFIG', schema: z.string().min(1), expected: 'a file path' },
  graceMs: {
    flag: '--grace-ms',
    env: 'VERDICT_GRACE_MS',
    schema: int(0, 600_000),
    expected: 'milliseconds from 0 to 600000',
  },
  abandonLimit: {
    flag: '--abandon-limit',
    env: 'VERDICT_ABANDON_LIMIT',
    schema: int(1, 1000),
    expected: 'an integer from 1 to 1000',
  },
  inputBudgetTokens: {
    flag: '--input-budget-tokens',
    env: 'VERDICT_INPUT_BUDGET_TOKENS',
    schema: int(1000, 10_000_000),
    expected: 'tokens from 1000 to 10000000',
  },
  driftSweepPerMinute: {
    flag: '--drift-sweep-per-minute',
    env: 'VERDICT_DRIFT_SWEEP_PER_MINUTE',
    schema: int(0, 100_000),
    expected: 'items per minute from 0 (off) to 100000',
  },
  retentionHistoryMs: {
    flag: '--retention-history-ms',
    env: 'VERDICT_RETENTION_HISTORY_MS',
    schema: int(0, 315_360_000_000),
    expected: 'milliseconds from 0 to 315360000000 (10 years)',
  },
  walCheckpointMs: {
    flag: '--wal-checkpoint-ms',
    env: 'VERDICT_WAL_CHECKPOINT_MS',
    schema: int(100, 3_600_000),
    expected: 'milliseconds from 100 to 3600000',
  },
  spendSpoolDir: {
    flag: '--spend-spool-dir',
    env: 'VERDICT_SPEND_SPOOL_DIR',
    schema: z.string().min(1),
    expected: 'a directory path on a local disk',
  },
  pruneIntervalMs: {
    flag: '--prune-interval-ms',
    env: 'VERDICT_PRUNE_INTERVAL_MS',
    schema: int(0, 604_800_000),
    expected: 'milliseconds from 0 (off) to 604800000',
  },
  envFile: { flag: '--env-vars-file', env: 'VERDICT_ENV_FILE', schema: z.string().min(1), expected: 'a file path' },
  anthropicBaseUrl: {
    flag: '--anthropic-base-url',
    env: 'ANTHROPIC_BASE_URL',
    schema: httpUrl,
    expected: 'an http(s) URL',
  },
  openaiBaseUrl: {
    flag: '--openai-base-url',
    env: 'VERDICT_OPENAI_BASE_URL',
    schema: httpUrl,
    expected: 'an http(s) URL, /v1 included (for example http://localhost:11434/v1)',
  },
  requestsPerMinute: {
    flag: '--requests-per-minute',
    env: 'VERDICT_REQUESTS_PER_MINUTE',
    schema: int(1, 1_000_000),
    expected: 'requests per minute from 1 to 1000000 (unset: no cap)',
  },
  inputTokensPerMinute: {
    flag: '--input-tokens-per-minute',
    env: 'VERDICT_INPUT_TOKENS_PER_MINUTE',
    schema: int(100, 1_000_000_000),
    expected: 'tokens per minute from 100 to 1000000000 (unset: no cap)',
  },
  httpPort: {
    flag: '--http-port',
    env: 'VERDICT_HTTP_PORT',
    schema: int(0, 65_535),
    expected: 'a port from 0 to 65535',
  },
  httpHost: {
    flag: '--http-host',
    env: 'VERDICT_HTTP_HOST',
    schema: z.string().regex(/^[0-9A-Za-z.:[\]-]+$/),
    expected: 'a host name or IP address to bind, such as 127.0.0.1 or 0.0.0.0',
  },
  httpRateLimitPerMinute: {
    flag: '--http-rate-limit-per-minute',
    env: 'VERDICT_HTTP_RATE_LIMIT_PER_MINUTE',
    schema: int(1, 1_000_000),
    expected: 'requests per minute from 1 to 1000000',
  },
  githubWorkspace: {
    flag: '--github-workspace',
    env: 'VERDICT_GITHUB_WORKSPACE',
    schema: z.string().min(1).max(200),
    expected: 'a workspace slug',
  },
  dailyTokenCap: {
    flag: '--daily-token-cap',
    env: 'VERDICT_DAILY_TOKEN_CAP',
    schema: int(1, Number.MAX_SAFE_INTEGER),
    expected: 'a positive number of tokens per UTC day (unset: no cap)',
  },
  actions: {
    flag: '--actions',
    env: 'VERDICT_ACTIONS',
    schema: z.enum(['off', 'propose', 'apply']),
    expected: 'one of off, propose, apply',
  },
  githubApiUrl: {
    flag: '--github-api-url',
    env: 'VERDICT_GITHUB_API_URL',
    schema: httpUrl,
    expected: 'an http(s) URL (for example https://api.github.com)',
  },
  eventUrls: {
    flag: '--event-urls',
    env: 'VERDICT_EVENT_URLS',
    schema: z.string().transform(splitList).pipe(z.array(httpUrl).min(1).max(32)),
    expected: 'comma-separated http(s) URLs (1 to 32), such as https://example.com/hooks/verdict',
  },
};

export const DEFAULTS = {
  databaseUrl: './data/verdict.db',
  logLevel: 'info',
  concurrency: 4,
  coAsk: 'on',
  batch: 'auto',
  tickMs: 5_000,
  leaseMs: 600_000,
  passLimit: 20,
  fakeLatencyMs: 0,
  metricsHost: '127.0.0.1',
  graceMs: 10_000,
  abandonLimit: 8,
  inputBudgetTokens: 200_000,
  driftSweepPerMinute: 60,
  retentionHistoryMs: 2_592_000_000,
  pruneIntervalMs: 3_600_000,
  walCheckpointMs: 60_000,
  eventUrls: [] as readonly string[],
  httpPort: 8080,
  httpHost: '127.0.0.1',
  httpRateLimitPerMinute: 600,
  githubWorkspace: 'github',
  actions: 'propose',
} as const;

/**
 * Reads an environment file (`KEY=value` lines, `#` comments, quotes as in Node's `--env-file`)
 * with Node's own parser.
 * @returns the variables it sets (values untouched).
 * @throws ConfigError naming the option and the file when it cannot be read.
 */
function readEnvFile(path: string, source = '--env-vars-file'): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`${source}: cannot read ${JSON.stringify(path)} (${errCode(err)})`);
  }
  return parseEnv(text) as Record<string, string>;
}

/**
 * Builds the config from flags (commander's camelCase option values) and the environment.
 * Blank environment values count as unset. With `--env-vars-file` / `VERDICT_ENV_FILE`, the file's
 * variables are laid over `env` first (the file wins over the inherited environment, so editing it
 * and sending SIGHUP changes a running worker; flags still win over both).
 * @throws ConfigError naming the option, the value and what was expected.
 */
export function loadConfig(flags: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): Config {
  const envFile = flags.envFile ?? (env.VERDICT_ENV_FILE?.trim() ? env.VERDICT_ENV_FILE : undefined);
  if (envFile !== undefined) {
    env = {
      ...env,
      ...readEnvFile(String(envFile), flags.envFile !== undefined ? '--env-vars-file' : 'VERDICT_ENV_FILE'),
    };
  }
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(OPTIONS)) {
    const fromFlag = flags[key];
    const fromEnv = env[spec.env];
    const raw =
      fromFlag !== undefined ? fromFlag : fromEnv !== undefined && fromEnv.trim() !== '' ? fromEnv : undefined;
    if (raw === undefined) {
      out[key] = (DEFAULTS as Record<string, unknown>)[key];
      continue;
    }
    const r = spec.schema.safeParse(raw);
    if (!r.success) {
      const source = fromFlag !== undefined ? spec.flag : spec.env;
      throw new ConfigError(`${source}: got ${JSON.stringify(String(raw))}, expected ${spec.expected}`);
    }
    out[key] = r.data;
  }
  const blank = (v: string | undefined) => (v === undefined || v.trim() === '' ? undefined : v);
  const cfg = out as unknown as Config;
  cfg.anthropicApiKey = blank(env.ANTHROPIC_API_KEY);
  cfg.openaiApiKey = blank(env.VERDICT_OPENAI_API_KEY);
  cfg.githubWebhookSecret = blank(env.VERDICT_GITHUB_WEBHOOK_SECRET);
  cfg.eventSecret = blank(env.VERDICT_EVENT_SECRET);
  cfg.mcpToken = blank(env.VERDICT_MCP_TOKEN);
  cfg.githubToken = blank(env.VERDICT_GITHUB_TOKEN) ?? blank(env.GITHUB_TOKEN);
  const tokenProblem = cfg.githubToken === undefined ? null : apiKeyProblem(cfg.githubToken);
  if (tokenProblem)
    throw new ConfigError(
      `${blank(env.VERDICT_GITHUB_TOKEN) ? 'VERDICT_GITHUB_TOKEN' : 'GITHUB_TOKEN'} ${tokenProblem}; set it to the token alone`,
    );
  const eventProblem = eventSettingsProblem(cfg.eventUrls, cfg.eventSecret);
  if (eventProblem)
    throw new ConfigError(
      `VERDICT_EVENT_SECRET ${eventProblem} (${flags.eventUrls !== undefined ? '--event-urls' : 'VERDICT_EVENT_URLS'} is set)`,
    );
  // The default provider is anthropic when a key is set (DESIGN §9); otherwise none is chosen.
  if (cfg.provider === undefined && cfg.anthropicApiKey) cfg.provider = 'anthropic';
  // A key that cannot be sent as a header is a configuration error at start (DESIGN §3.8), for
  // the provider that will send it. The key itself is never quoted.
  const key =
    cfg.provider === 'anthropic'
      ? ['ANTHROPIC_API_KEY', cfg.anthropicApiKey]
      : cfg.provider === 'openai'
        ? ['VERDICT_OPENAI_API_KEY', cfg.openaiApiKey]
        : null;
  const problem = key && key[1] !== undefined ? apiKeyProblem(key[1]) : null;
  if (problem) throw new ConfigError(`${key![0]} ${problem}; set it to the key alone`);
  return cfg;
}

/**
 * API keys travel as HTTP header values (`x-api-key`, `authorization: Bearer`). A value with a
 * control character (a newline read from a key file, a tab) cannot be sent at all: fetch throws a
 * TypeError on every request, which would otherwise be retried as an outage for ever. Non-ASCII
 * characters cannot be sent as a header either, and leading or trailing whitespace is silently
 * trimmed by fetch, so a key with it is not the key that was configured. DESIGN §3.8 makes all of
 * these a configuration error at start.
 */

/**
 * Says what is wrong with a key as a header value, without quoting any of it.
 * @returns null for a key that is printable ASCII without whitespace, else a short description.
 */
export function apiKeyProblem(key: string): string | null {
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(key)) {
    return 'contains a line break or another control character (often a trailing newline from the file it was read from)';
  }
  if (/[^\x20-\x7e]/.test(key)) return 'contains a non-ASCII character, which cannot be sent in an HTTP header';
  if (/\s/.test(key)) return 'contains whitespace, which a key never does (check for spaces around it)';
  return null;
}

/**
 * What is wrong with the outbound-event settings (DESIGN §16.2), without quoting the secret: with
 * receiver URLs a signing secret is required, and a secret with a control character (a trailing
 * newline from the file it was read from) would sign with a key the receiver does not have.
 * @returns null when fine (no URLs, or URLs and a usable secret), else a short description.
 */
export function eventSettingsProblem(urls: readonly string[], secret: string | undefined): string | null {
  if (urls.length === 0) return null;
  if (secret === undefined || secret === '')
    return 'must be set: every event delivery is signed with it (X-Verdict-Signature-256)';
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(secret))
    return 'contains a line break or another control character; set it to the secret alone';
  return null;
}
