import type { Command } from 'commander';
import { loadConfig, type Config } from '../config.js';
import {
  buildRegistry as buildRegistryFrom,
  openStoreOn,
  writeRegistryFor as writeRegistryForProvider,
  type DatabaseAccess,
  type OpenedStore,
} from '../compose/open.js';
import type { Registry } from '../decision/registry.js';
import { createLogger, type Logger } from '../log.js';
import { isPostgresUrl } from '../store/postgres/open.js';
import type { ItemRow, WorkspaceRow } from '../store/tracker-reads.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import { VerdictError } from '../errors.js';

/** Exit codes (DESIGN §12). */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

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
 * (`--config` / `VERDICT_CONFIG`); see compose/open.ts buildRegistry.
 * @throws ConfigError naming the file, the set and the problem when the config file is invalid.
 */
export function buildRegistry(cfg: Config): Registry {
  return buildRegistryFrom(cfg.configFile);
}

/** The registry the write doors owe jobs for (none with provider `none`); see compose/open.ts. */
function writeRegistryFor(cfg: Config, registry: Registry): Registry {
  return writeRegistryForProvider(cfg.provider, registry);
}

/**
 * Opens the configured store and applies migrations (compose/open.ts openStoreOn). `access` says
 * whether a missing database may be created (`create`, the default), must exist (`existing`, or
 * the older `mustExist: true`), or is opened read-only (`read`); see DatabaseAccess.
 * With provider `none` its write doors owe nothing (see writeRegistryFor).
 * @throws DatabaseNotFound when the path is missing and `access` is not `create` (nothing is created).
 * @throws DatabaseUnavailable when it is a folder or cannot be opened (the message names the path and the fix).
 */
export function openStore(
  cfg: Config,
  registry: Registry,
  opts: { mustExist?: boolean; migrate?: boolean; access?: DatabaseAccess } = {},
): OpenedStore {
  const writes = writeRegistryFor(cfg, registry);
  const access: DatabaseAccess = opts.access ?? (opts.mustExist ? 'existing' : 'create');
  // A worker slot holds one connection at a time; the rest serve the CLI's reads and the limiter.
  const poolSize = Math.max(10, cfg.concurrency + 4);
  if (isPostgresUrl(cfg.databaseUrl))
    return openStoreOn(cfg.databaseUrl, writes, { poolSize, migrate: opts.migrate, access });
  return openStoreOn(cfg.databaseUrl, writes, { migrate: opts.migrate, access });
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
export async function resolveWorkspace(
  store: Pick<TrackerReads, 'getWorkspaceBySlug' | 'listWorkspaces'>,
  slug: string | undefined,
): Promise<WorkspaceRow> {
  if (slug) {
    const ws = await store.getWorkspaceBySlug(slug);
    if (!ws) throw new UsageError(`no workspace "${slug}"`);
    return ws;
  }
  const all = (await store.listWorkspaces()).filter((w) => w.deletedAt === null);
  if (all.length === 1) return all[0];
  if (all.length === 0)
    throw new UsageError('no workspace yet: run `verdict import beads FILE` or `verdict demo` first');
  throw new UsageError(`several workspaces (${all.map((w) => w.slug).join(', ')}): pass --workspace SLUG`);
}

/**
 * The item a command names by ref, in the workspace `resolveWorkspace` gives.
 * @throws UsageError when the workspace is ambiguous or unknown, or it holds no item of that ref.
 */
export async function resolveItem(
  store: Pick<TrackerReads, 'getItemByRef' | 'getWorkspaceBySlug' | 'listWorkspaces'>,
  slug: string | undefined,
  ref: string,
): Promise<{ ws: WorkspaceRow; item: ItemRow }> {
  const ws = await resolveWorkspace(store, slug);
  const item = await store.getItemByRef(ws.id, ref);
  if (!item)
    throw new UsageError(
      `no item ${ref} in workspace ${ws.slug}; check the ref (\`verdict flags --set SET\` lists items)`,
    );
  return { ws, item };
}

/** A usage error: exit code 2. */
export class UsageError extends VerdictError {
  readonly code = 'usage_error';
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

/** Formats milliseconds as a short human duration (`1h 02m`, `45s`, `320ms`); shared with the dashboard. */
export { formatElapsed as formatDuration } from '../duration.js';
