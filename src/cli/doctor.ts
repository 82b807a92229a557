import type { Command } from 'commander';
import { defaultSpoolDir, readSpoolDir, type SpoolContents } from '../runner/spend-spool.js';
import { errCode } from '../runner/error-code.js';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { AnthropicProvider } from '../providers/anthropic.js';
import { ProviderError, ProviderMisconfigured, ProviderRefusal, ProviderUnavailable } from '../providers/errors.js';
import { OpenAICompatibleProvider } from '../providers/openai-compatible.js';
import type { Provider } from '../providers/provider.js';
import { checkSqliteHealth } from '../store/sqlite/health.js';
import { databaseError, databaseLabel } from '../store/database-errors.js';
import { checkPgHealth } from '../store/postgres/health.js';
import type { DatabaseHealth } from '../store/sql/health.js';
import { isPostgresUrl } from '../store/postgres/open.js';
import { HEARTBEAT_PREFIX, heartbeatAlive, parseHeartbeats } from '../worker/heartbeat.js';
import { sqlitePathFromUrl } from '../store/sqlite/open.js';
import { WAL_CHECKPOINT_EVERY_MS, WAL_WARN_BYTES } from '../maintenance/wal-upkeep.js';
import { configFrom, EXIT_FAILURE, EXIT_OK, formatBytes, loggerFor } from './common.js';
import { buildRuntime } from './reload.js';

/**
 * `verdict doctor` (DESIGN §12): checks the config, the database, the spend spool and the provider (reachability
 * and model), and prints what is wrong and how to fix it. Exit 1 when anything is wrong.
 * It sends no item data: the provider check only asks about the model. It never prints a key.
 */

/** One check's verdict. `fix` says what to do when it failed. */
export interface DoctorCheck {
  name: 'config' | 'database' | 'spend' | 'provider';
  ok: boolean;
  detail: string;
  fix?: string;
  /** Something to look at that does not stop anything working (printed as WARN; doctor still exits 0). */
  warning?: string;
}

/** How long the provider check waits for an answer (ms). */
const DOCTOR_PROVIDER_TIMEOUT_MS = 15_000;

/** Where the key of each provider comes from, for fix hints. */
function keyVar(provider: string): string {
  return provider === 'openai' ? 'VERDICT_OPENAI_API_KEY' : 'ANTHROPIC_API_KEY';
}

function baseVar(provider: string): string {
  return provider === 'openai'
    ? 'VERDICT_OPENAI_BASE_URL (--openai-base-url)'
    : 'ANTHROPIC_BASE_URL (--anthropic-base-url)';
}

/** Turns a provider error of the doctor call into a check with a fix. Messages hold status and type names only. */
function providerProblem(provider: Provider, err: unknown): DoctorCheck {
  const name = provider.name;
  const status = (err as { status?: number }).status;
  const what = err instanceof ProviderError ? err.message : `${name}: ${(err as Error)?.name ?? 'error'}`;
  if (err instanceof ProviderMisconfigured) {
    if (status === 401) {
      return {
        name: 'provider',
        ok: false,
        detail: `the API key was rejected (${what})`,
        fix: `set ${keyVar(name)} to a valid key`,
      };
    }
    if (status === 403) {
      return {
        name: 'provider',
        ok: false,
        detail: `the key may not use this API or model (${what})`,
        fix: `check the key's permissions, or set ${keyVar(name)} to another key`,
      };
    }
    if (status === 404) {
      return {
        name: 'provider',
        ok: false,
        detail: `model "${provider.model}" is unknown to the API (${what})`,
        fix:
          name === 'openai'
            ? `check that ${baseVar(name)} is the server's /v1 base, and set --model / VERDICT_MODEL to a model it serves`
            : `set --model / VERDICT_MODEL to a model id the API lists (default claude-haiku-5-5; no -latest aliases)`,
      };
    }
    return {
      name: 'provider',
      ok: false,
      detail: `the provider refuses this account or setup (${what})`,
      fix: "check the account's billing and the key",
    };
  }
  if (err instanceof ProviderUnavailable) {
    return {
      name: 'provider',
      ok: false,
      detail: `unreachable or failing (${what})`,
      fix: `check ${baseVar(name)} and the network; if the provider reports an outage, try again later`,
    };
  }
  if (err instanceof ProviderRefusal) {
    return {
      name: 'provider',
      ok: false,
      detail: `the model check was refused (${what})`,
      fix: `check ${baseVar(name)} points at the provider's API`,
    };
  }
  if ((err as Error)?.name === 'TimeoutError') {
    return {
      name: 'provider',
      ok: false,
      detail: `no answer within ${DOCTOR_PROVIDER_TIMEOUT_MS / 1000} s`,
      fix: `check ${baseVar(name)} and the network`,
    };
  }
  return {
    name: 'provider',
    ok: false,
    detail: `unexpected failure (${what})`,
    fix: 'run again with VERDICT_LOG_LEVEL=debug',
  };
}

/** Asks the provider about its model (no item data is sent). */
export async function checkProvider(provider: Provider | null, signal: AbortSignal): Promise<DoctorCheck> {
  if (!provider)
    return { name: 'provider', ok: true, detail: 'none: decisions are off (nothing is owed, reads are empty)' };
  if (provider instanceof AnthropicProvider) {
    try {
      const m = await provider.doctor({ signal });
      if (m.model === null) {
        return {
          name: 'provider',
          ok: false,
          detail: `the models endpoint answered without a model id, so model "${provider.model}" is not confirmed`,
          fix: `check that ${baseVar('anthropic')} points at the Anthropic API (or a proxy that forwards /v1/models), not another service`,
        };
      }
      const same = m.model === provider.model ? '' : ` (the API reports it as ${m.model})`;
      return {
        name: 'provider',
        ok: true,
        detail: `anthropic reachable; model ${provider.model}${same}${m.displayName ? ` (${m.displayName})` : ''} is available`,
      };
    } catch (err) {
      return providerProblem(provider, err);
    }
  }
  if (provider instanceof OpenAICompatibleProvider) {
    try {
      const m = await provider.doctor({ signal });
      if (!m.listed) {
        return {
          name: 'provider',
          ok: false,
          detail: `openai-compatible server reachable, but model "${m.model}" is not among the ${m.models} it lists`,
          fix: 'load or pull the model on the server (for Ollama: `ollama pull MODEL`), or set --model / VERDICT_MODEL to one it lists',
        };
      }
      return { name: 'provider', ok: true, detail: `openai-compatible server reachable; model ${m.model} is listed` };
    } catch (err) {
      return providerProblem(provider, err);
    }
  }
  return {
    name: 'provider',
    ok: true,
    detail: `${provider.name}: offline and deterministic, nothing to reach (answers are not a model's)`,
  };
}

/**
 * Opens nothing for writing: reads the database's migrations, queue and worker heartbeats
 * (store/sql/health.ts, the same on both dialects); on Postgres also whether it is reachable.
 */
export async function checkDatabase(cfg: Config): Promise<DoctorCheck> {
  if (isPostgresUrl(cfg.databaseUrl)) return checkPostgres(cfg.databaseUrl);
  const h = await checkSqliteHealth(sqlitePathFromUrl(cfg.databaseUrl), HEARTBEAT_PREFIX);
  if (!h.exists) {
    return {
      name: 'database',
      ok: true,
      detail: `${h.path} does not exist yet; verdict import, verdict demo or verdict worker --create creates and migrates it`,
    };
  }
  if (h.driverProblem) {
    // The file was never reached: restoring it from a backup would not help.
    const cut = h.driverProblem.lastIndexOf('; ');
    return { name: 'database', ok: false, detail: h.driverProblem.slice(0, cut), fix: h.driverProblem.slice(cut + 2) };
  }
  if (h.error) {
    return {
      name: 'database',
      ok: false,
      detail: `${h.path} cannot be read (${h.error})`,
      fix: 'check the path, its permissions and free disk space; a corrupt file needs restoring from a backup',
    };
  }
  if (h.migrationsPending > 0) {
    return {
      name: 'database',
      ok: false,
      detail: `${h.path}: ${h.migrationsPending} of ${h.migrationsKnown} migrations not applied`,
      fix: 'run `verdict migrate` against it (or start `verdict worker`, or any command such as `verdict status`: migrations apply at open)',
    };
  }
  return {
    name: 'database',
    ok: true,
    detail: `${h.path}: ${plural(h.migrationsApplied, 'migration')} applied, queue readable (${h.queue!.owed} owed, ${h.queue!.parked} parked), ${plural(liveWorkers(h.heartbeats), 'worker')} alive, write-ahead log ${formatBytes(h.walBytes)}`,
    ...(h.walBytes > WAL_WARN_BYTES
      ? {
          warning: `the write-ahead log is ${formatBytes(h.walBytes)} (above ${formatBytes(WAL_WARN_BYTES)}): a process holding a long read transaction keeps it from being checkpointed; end it, and a running worker truncates the log within ${WAL_CHECKPOINT_EVERY_MS / 1000} s`,
        }
      : {}),
  };
}

/**
 * The spend spool on this host (DESIGN §10.5): records of paid calls a worker could not write to
 * the database. Holding some is a warning, not a failure: the next worker to start writes them.
 * Null when no spool directory applies (an in-memory database).
 */
function checkSpendSpool(cfg: Config): DoctorCheck | null {
  const dir = cfg.spendSpoolDir ?? defaultSpoolDir(cfg.databaseUrl);
  if (dir === null) return null;
  let c: SpoolContents;
  try {
    c = readSpoolDir(dir);
  } catch (err) {
    return {
      name: 'spend',
      ok: false,
      detail: `the spend spool ${dir} cannot be read (${errCode(err)})`,
      fix: 'check the directory and its permissions (--spend-spool-dir / VERDICT_SPEND_SPOOL_DIR)',
    };
  }
  if (c.records === 0) return { name: 'spend', ok: true, detail: `spool ${dir}: empty` };
  const running = c.files.filter((f) => f.ownerAlive).reduce((a, f) => a + f.records, 0);
  return {
    name: 'spend',
    ok: true,
    detail: `spool ${dir}: ${plural(c.records, 'record')} in ${plural(c.files.length, 'file')}`,
    warning: `${plural(c.records, 'paid call record')} not yet in the database (${running} of running workers); the next worker to start writes the rest, once the database takes writes`,
  };
}

/** Workers whose heartbeat is fresh at the database's now. */
function liveWorkers(h: DatabaseHealth['heartbeats']): number {
  return h ? parseHeartbeats(h.rows).filter((b) => heartbeatAlive(b, h.now)).length : 0;
}

/** The check on Postgres: reachable, migrations applied, queue and workers read. */
async function checkPostgres(url: string): Promise<DoctorCheck> {
  const h = await checkPgHealth(url, HEARTBEAT_PREFIX);
  if (!h.reachable || h.error) {
    const e = databaseError(Object.assign(new Error(h.error ?? 'error'), { code: h.error ?? undefined }), h.label);
    const [detail, fix] = e.message.split('; ');
    return { name: 'database', ok: false, detail, fix: fix ?? 'check --database-url / VERDICT_DATABASE_URL' };
  }
  if (h.migrationsPending > 0) {
    return {
      name: 'database',
      ok: false,
      detail: `${h.label}: ${h.migrationsPending} of ${h.migrationsKnown} migrations not applied`,
      fix: 'run `verdict migrate` against it (or start `verdict worker`: migrations apply at open)',
    };
  }
  return {
    name: 'database',
    ok: true,
    detail: `${h.label}: reachable, ${plural(h.migrationsApplied, 'migration')} applied, queue readable (${h.queue!.owed} owed, ${h.queue!.parked} parked), ${plural(liveWorkers(h.heartbeats), 'worker')} alive`,
  };
}

/**
 * Runs every check. A config that cannot be read stops there (nothing else can be checked); a
 * provider that cannot be built still lets the database be checked.
 */
async function runDoctor(readConfig: () => Config, logger: (cfg: Config) => Logger): Promise<DoctorCheck[]> {
  let cfg: Config;
  try {
    cfg = readConfig();
  } catch (err) {
    return [
      {
        name: 'config',
        ok: false,
        detail: (err as Error).message,
        fix: 'see `verdict --help` and .env.example for every option and its environment variable',
      },
    ];
  }
  const checks: DoctorCheck[] = [];
  let provider: Provider | null = null;
  let built = false;
  try {
    provider = buildRuntime(cfg, logger(cfg)).provider;
    built = true;
    if (provider && cfg.leaseMs < provider.worstCaseCallMs) {
      checks.push({
        name: 'config',
        ok: false,
        detail: `--lease-ms ${cfg.leaseMs} is shorter than one ${provider.name} call's worst case (${provider.worstCaseCallMs} ms)`,
        fix: `set --lease-ms / VERDICT_LEASE_MS to at least ${provider.worstCaseCallMs}`,
      });
    } else {
      checks.push({
        name: 'config',
        ok: true,
        detail: `provider ${provider ? `${provider.name}, model ${provider.model}` : 'none'}; database ${databaseLabel(cfg.databaseUrl)}${cfg.envFile ? `; env file ${cfg.envFile}` : ''}`,
      });
    }
  } catch (err) {
    const msg = (err as Error).message;
    checks.push({
      name: 'config',
      ok: false,
      detail: msg,
      fix:
        cfg.provider === undefined
          ? 'set ANTHROPIC_API_KEY (anthropic is then the default), or choose one with --provider / VERDICT_PROVIDER'
          : 'fix the option the message names (flags and environment variables: `verdict --help`, .env.example)',
    });
  }
  checks.push(await checkDatabase(cfg));
  const spool = checkSpendSpool(cfg);
  if (spool) checks.push(spool);
  if (built) {
    checks.push(await checkProvider(provider, AbortSignal.timeout(DOCTOR_PROVIDER_TIMEOUT_MS)));
    await provider?.close?.();
  }
  return checks;
}

/** The human report: one line per check, a fix line under each failure, a closing count. */
function formatDoctor(checks: DoctorCheck[]): string {
  const lines = ['verdict doctor'];
  for (const c of checks) {
    lines.push(`  ${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(8)}  ${c.detail}`);
    if (!c.ok && c.fix) lines.push(`        ${''.padEnd(8)}  fix: ${c.fix}`);
    if (c.warning) lines.push(`  WARN  ${c.name.padEnd(8)}  ${c.warning}`);
  }
  const bad = checks.filter((c) => !c.ok).length;
  lines.push(bad === 0 ? 'everything looks right.' : `${bad} problem${bad === 1 ? '' : 's'} found.`);
  return lines.join('\n');
}

export function registerDoctorCommand(program: Command): void {
  program
    .command('doctor')
    .description(
      'check the config, the database and the provider (reachability and model); say what is wrong and how to fix it',
    )
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const checks = await runDoctor(
        () => configFrom(cmd),
        (cfg) => loggerFor({ ...cfg, logLevel: cfg.logLevel === 'info' ? 'warn' : cfg.logLevel }),
      );
      const ok = checks.every((c) => c.ok);
      process.stdout.write(opts.json ? `${JSON.stringify({ ok, checks }, null, 2)}\n` : `${formatDoctor(checks)}\n`);
      process.exitCode = ok ? EXIT_OK : EXIT_FAILURE;
    });
}

/** `1 migration`, `10 migrations`. */
function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
