import { z } from 'zod';

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
  /** Idle wait between claim attempts when nothing is claimable (ms). @defaultValue 5000 */
  tickMs: number;
  /** Claim lease (ms); must cover one provider call's worst case. @defaultValue 600000 */
  leaseMs: number;
  /** Jobs a slot runs per pass before it checks for shutdown and reload. @defaultValue 20 */
  passLimit: number;
  /** The fake provider's delay per call (ms). @defaultValue 0 */
  fakeLatencyMs: number;
  /** Port of /metrics and /healthz; undefined serves neither. */
  metricsPort: number | undefined;
  /** Question-set config file (JSON or YAML). */
  configFile: string | undefined;
  /** Shutdown grace period (ms). @defaultValue 10000 */
  graceMs: number;
  /** Claims that end without an outcome before a job parks. @defaultValue 8 */
  abandonLimit: number;
  /** Largest estimated input tokens of one call; above it the job parks. @defaultValue 200000 */
  inputBudgetTokens: number;
  /** Provider requests per minute, per worker process; undefined is no cap (DESIGN §10). */
  requestsPerMinute: number | undefined;
  /** Estimated input tokens per minute, per worker process; undefined is no cap. */
  inputTokensPerMinute: number | undefined;
  /** Billed tokens per UTC day across every process on the database; undefined is no cap. */
  dailyTokenCap: number | undefined;
  anthropicApiKey: string | undefined;
  anthropicBaseUrl: string | undefined;
  openaiBaseUrl: string | undefined;
  openaiApiKey: string | undefined;
}

/** Thrown for a bad option value; exit code 2 (usage error). */
export class ConfigError extends Error {
  readonly code = 'config_error';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

interface OptionSpec {
  flag: string;
  env: string;
  schema: z.ZodType;
  expected: string;
}

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max);

/** Every option: its flag, its environment variable, and its validator. */
export const OPTIONS: Record<Exclude<keyof Config, 'anthropicApiKey' | 'anthropicBaseUrl' | 'openaiBaseUrl' | 'openaiApiKey'>, OptionSpec> = {
  databaseUrl: { flag: '--database-url', env: 'VERDICT_DATABASE_URL', schema: z.string().min(1), expected: 'a file path, file: URL or postgres:// URL' },
  provider: { flag: '--provider', env: 'VERDICT_PROVIDER', schema: z.enum(['anthropic', 'openai', 'fake', 'none']), expected: 'one of anthropic, openai, fake, none' },
  model: { flag: '--model', env: 'VERDICT_MODEL', schema: z.string().min(1), expected: 'a model id' },
  logLevel: { flag: '--log-level', env: 'VERDICT_LOG_LEVEL', schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), expected: 'one of fatal, error, warn, info, debug, trace, silent' },
  concurrency: { flag: '--concurrency', env: 'VERDICT_CONCURRENCY', schema: int(1, 256), expected: 'an integer from 1 to 256' },
  tickMs: { flag: '--tick-ms', env: 'VERDICT_TICK_MS', schema: int(10, 3_600_000), expected: 'milliseconds from 10 to 3600000' },
  leaseMs: { flag: '--lease-ms', env: 'VERDICT_LEASE_MS', schema: int(100, 86_400_000), expected: 'milliseconds from 100 to 86400000' },
  passLimit: { flag: '--pass-limit', env: 'VERDICT_PASS_LIMIT', schema: int(1, 100_000), expected: 'an integer from 1 to 100000' },
  fakeLatencyMs: { flag: '--fake-latency-ms', env: 'VERDICT_FAKE_LATENCY_MS', schema: int(0, 600_000), expected: 'milliseconds from 0 to 600000' },
  metricsPort: { flag: '--metrics-port', env: 'VERDICT_METRICS_PORT', schema: int(0, 65_535), expected: 'a port from 0 to 65535' },
  configFile: { flag: '--config', env: 'VERDICT_CONFIG', schema: z.string().min(1), expected: 'a file path' },
  graceMs: { flag: '--grace-ms', env: 'VERDICT_GRACE_MS', schema: int(0, 600_000), expected: 'milliseconds from 0 to 600000' },
  abandonLimit: { flag: '--abandon-limit', env: 'VERDICT_ABANDON_LIMIT', schema: int(1, 1000), expected: 'an integer from 1 to 1000' },
  inputBudgetTokens: { flag: '--input-budget-tokens', env: 'VERDICT_INPUT_BUDGET_TOKENS', schema: int(1000, 10_000_000), expected: 'tokens from 1000 to 10000000' },
  requestsPerMinute: { flag: '--requests-per-minute', env: 'VERDICT_REQUESTS_PER_MINUTE', schema: int(1, 1_000_000), expected: 'requests per minute from 1 to 1000000 (unset: no cap)' },
  inputTokensPerMinute: { flag: '--input-tokens-per-minute', env: 'VERDICT_INPUT_TOKENS_PER_MINUTE', schema: int(100, 1_000_000_000), expected: 'tokens per minute from 100 to 1000000000 (unset: no cap)' },
  dailyTokenCap: { flag: '--daily-token-cap', env: 'VERDICT_DAILY_TOKEN_CAP', schema: int(1, Number.MAX_SAFE_INTEGER), expected: 'a positive number of tokens per UTC day (unset: no cap)' },
};

export const DEFAULTS = {
  databaseUrl: './data/verdict.db',
  logLevel: 'info',
  concurrency: 4,
  tickMs: 5_000,
  leaseMs: 600_000,
  passLimit: 20,
  fakeLatencyMs: 0,
  graceMs: 10_000,
  abandonLimit: 8,
  inputBudgetTokens: 200_000,
} as const;

/**
 * Builds the config from flags (commander's camelCase option values) and the environment.
 * Blank environment values count as unset.
 * @throws ConfigError naming the option, the value and what was expected.
 */
export function loadConfig(flags: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): Config {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(OPTIONS)) {
    const fromFlag = flags[key];
    const fromEnv = env[spec.env];
    const raw = fromFlag !== undefined ? fromFlag : fromEnv !== undefined && fromEnv.trim() !== '' ? fromEnv : undefined;
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
  cfg.anthropicBaseUrl = blank(env.ANTHROPIC_BASE_URL);
  cfg.openaiBaseUrl = blank(env.VERDICT_OPENAI_BASE_URL);
  cfg.openaiApiKey = blank(env.VERDICT_OPENAI_API_KEY);
  // The default provider is anthropic when a key is set (DESIGN §9); otherwise none is chosen.
  if (cfg.provider === undefined && cfg.anthropicApiKey) cfg.provider = 'anthropic';
  return cfg;
}
