import { existsSync, statSync } from 'node:fs';
import { Command, Option } from 'commander';
import { ConfigError, loadConfig, OPTIONS, type Config } from '../config.js';
import { InvalidConfigFile, loadQuestionSetConfig } from '../decision/config-file.js';
import { productionSets } from '../decision/production-sets.js';
import { Registry } from '../decision/registry.js';
import { createLogger, type Logger } from '../log.js';
import { isPostgresUrl } from '../store/postgres/open.js';
import { PgStore } from '../store/postgres/pg-store.js';
import { sqlitePathFromUrl } from '../store/sqlite/open.js';
import { SqliteStore } from '../store/sqlite/sqlite-store.js';
import type { Store, WorkspaceRow } from '../store/store.js';

/** Exit codes (DESIGN §12). */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** Options whose flag takes text rather than a number. */
const TEXT_OPTIONS = new Set(['provider', 'model', 'databaseUrl', 'logLevel', 'configFile', 'envFile', 'anthropicBaseUrl', 'openaiBaseUrl', 'metricsHost']);

/** Adds every config option as a flag (its environment variable is named in the help). */
export function addConfigOptions(cmd: Command): Command {
  for (const [key, spec] of Object.entries(OPTIONS)) {
    const arg = TEXT_OPTIONS.has(key) ? '<value>' : '<n>';
    cmd.addOption(new Option(`${spec.flag} ${arg}`, `${spec.expected} (env ${spec.env})`));
  }
  return cmd;
}

/** Reads the validated config from a command's flags and the environment. @throws ConfigError */
export function configFrom(cmd: Command, env: NodeJS.ProcessEnv = process.env): Config {
  const flags = { ...cmd.optsWithGlobals() };
  // commander names `--config` `config`; the config key is `configFile`.
  if (flags.config !== undefined) flags.configFile = flags.config;
  // `--env-vars-file` (not `--env-file`, which Node and tsx take for themselves) fills `envFile`.
  if (flags.envVarsFile !== undefined) flags.envFile = flags.envVarsFile;
  return loadConfig(flags, env);
}

/**
 * The registry every process loads: the production sets plus the sets of the config file
 * (`--config` / `VERDICT_CONFIG`), validated by the same rules. The same registry in every
 * process means the CLI, the worker and a tracker enqueue alike.
 * @throws ConfigError naming the file, the set and the problem when the config file is invalid.
 */
export function buildRegistry(cfg: Config): Registry {
  const builtIn = productionSets();
  if (!cfg.configFile) return new Registry(builtIn);
  try {
    return new Registry([...builtIn, ...loadQuestionSetConfig(cfg.configFile, builtIn.map((s) => s.name))]);
  } catch (err) {
    if (err instanceof InvalidConfigFile) throw new ConfigError(err.message);
    throw err;
  }
}

/**
 * The registry the write doors owe jobs for: the process registry, or none at all when the provider
 * is `none` (DESIGN §9: decisions off, nothing is enqueued).
 */
export function writeRegistryFor(cfg: Config, registry: Registry): Registry {
  return cfg.provider === 'none' ? new Registry([]) : registry;
}

/**
 * Opens the configured store and applies migrations: SQLite for a path or `file:` URL, Postgres
 * for a `postgres://` URL (migrated on first use; a bad URL fails the first call). With provider
 * `none` its write doors owe nothing (see writeRegistryFor).
 */
export function openStore(cfg: Config, registry: Registry, opts: { mustExist?: boolean } = {}): Store & { setRegistry?(r: Registry): void } {
  const writes = writeRegistryFor(cfg, registry);
  if (isPostgresUrl(cfg.databaseUrl)) {
    // A worker slot holds one connection at a time; the rest serve the CLI's reads and the limiter.
    return PgStore.connect(cfg.databaseUrl, { registry: writes, poolSize: Math.max(10, cfg.concurrency + 4) });
  }
  const path = sqlitePathFromUrl(cfg.databaseUrl);
  if (path !== ':memory:') {
    // A read command given a mistyped path would otherwise create an empty database there and
    // report zeros as if all were well.
    if (opts.mustExist && !existsSync(path)) {
      throw new UsageError(`no database at ${path}: pass --database-url (or set VERDICT_DATABASE_URL) to the one the demo, an import or a worker wrote`);
    }
    if (existsSync(path) && statSync(path).isDirectory()) throw new UsageError(`--database-url: ${path} is a directory, not a database file`);
  }
  try {
    return new SqliteStore({ url: cfg.databaseUrl, registry: writes });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    throw new UsageError(`cannot open the database at ${path}: ${e.code ?? ''} ${e.message ?? ''}`.replace(/\s+/g, ' ').trim());
  }
}

/**
 * The process logger; commands log to stderr so their stdout stays clean for --json: pretty when
 * stderr is a terminal (outside CI), JSON lines otherwise.
 */
export function loggerFor(cfg: Config): Logger {
  if (process.stderr.isTTY && !process.env.CI) return createLogger(cfg.logLevel, undefined, { prettyFd: 2 });
  return createLogger(cfg.logLevel, process.stderr as never);
}

/**
 * The workspace a read command means: `--workspace SLUG`, or the only live workspace.
 * @throws UsageError when it is ambiguous or unknown.
 */
export async function resolveWorkspace(store: Store, slug: string | undefined): Promise<WorkspaceRow> {
  if (slug) {
    const ws = await store.getWorkspaceBySlug(slug);
    if (!ws) throw new UsageError(`no workspace "${slug}"`);
    return ws;
  }
  const all = (await store.listWorkspaces()).filter((w) => w.deletedAt === null);
  if (all.length === 1) return all[0];
  if (all.length === 0) throw new UsageError('no workspace yet: run `verdict import beads FILE` or `verdict demo` first');
  throw new UsageError(`several workspaces (${all.map((w) => w.slug).join(', ')}): pass --workspace SLUG`);
}

/** A usage error: exit code 2. */
export class UsageError extends Error {
  readonly code = 'usage_error';
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Bytes for humans: `512 B`, `3.2 KiB`, `37.0 MiB`, `1.34 GiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(v >= 100 ? 0 : 1)} ${units[u]}`;
}

/** Formats milliseconds as a short human duration (`1h 02m`, `45s`, `320ms`). */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${String(m % 60).padStart(2, '0')}m`;
}
