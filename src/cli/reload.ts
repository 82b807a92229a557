import { errCode } from '../errors.js';
import type { Config } from '../config.js';
import { pinnedProviderValue, PINNED_PROVIDER_META_KEY } from '../decision/pinned-provider.js';
import { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/whole-store.js';
import { LeaseTooShort, type Worker } from '../worker/worker.js';
import { buildRegistry } from './common.js';
import type { ActionsWorker } from '../actions/actions-worker.js';
import { loadActionsConfig } from '../actions/config.js';

/**
 * SIGHUP reload (DESIGN §10): re-read the config; if it is invalid keep the old one and log why;
 * otherwise install the new resolver (the registry the write doors and the runner read) first, then
 * the runner's provider, then cancel the in-flight pass so the old provider gets no more item data.
 * Its jobs are released without an attempt and claimed again at once under the new config.
 *
 * What a reload re-reads is the config as at start: the same flags, the inherited environment and,
 * when given, the `--env-vars-file` / `VERDICT_ENV_FILE` file (read again, so edits to it take effect),
 * plus the question-set config file the registry loads. The inherited environment itself cannot
 * change under a running process.
 */

/** What a worker runs with: the config, the registry, and the provider (null for `none`). */
export interface Runtime {
  cfg: Config;
  registry: Registry;
  provider: Provider | null;
}

/**
 * Options a reload cannot apply to a running worker (slots, timers, the open database and port
 * are set up at start); a change to one is logged as needing a restart, by name only.
 */
const RESTART_ONLY: ReadonlyArray<keyof Config> = [
  'databaseUrl',
  'concurrency',
  'tickMs',
  'leaseMs',
  'passLimit',
  'abandonLimit',
  'graceMs',
  'metricsPort',
  'envFile',
  // The background passes read their rate and intervals at start (the sets and model they use do follow a reload).
  'driftSweepPerMinute',
  'retentionHistoryMs',
  'pruneIntervalMs',
  'walCheckpointMs',
  'spendSpoolDir',
];

/** What a reload did. */
export type ReloadResult =
  /** The new config is in force; `restartNeeded` names changed options it could not apply. */
  | { status: 'applied'; provider: string; model: string; restartNeeded: string[] }
  /** The new config was invalid; the old one stays in force. `reason` is the validation message. */
  | { status: 'refused'; reason: string }
  /** The provider is now `none`: nothing is owed any more and the worker stops. */
  | { status: 'disabled' };

/**
 * Builds the runtime a config describes.
 * @throws ConfigError, ProviderMisconfigured, InvalidQuestionSet (whatever start would refuse).
 */
export function buildRuntime(cfg: Config, logger: Logger): Runtime {
  const registry = buildRegistry(cfg);
  const provider = createProvider(cfg, logger);
  return { cfg, registry, provider };
}

/** The message of a refused reload: validation messages name the option, never a key's value. */
function refusalReason(err: unknown): string {
  if (
    err instanceof Error &&
    /^(ConfigError|ProviderMisconfigured|InvalidQuestionSet|InvalidQuestion|LeaseTooShort|TypeError)$/.test(err.name)
  ) {
    return err.message;
  }
  return errCode(err);
}

/**
 * Re-reads the config with `read` and applies it to a running worker (see the file comment).
 * Synchronous from the read to the cancel, so no job is claimed between installing the registry
 * and the provider.
 * @param p.current the runtime in force; on success the caller replaces it with `runtime`.
 * @returns the result, and the new runtime when it was applied or disabled.
 */
export function reloadWorker(p: {
  worker: Worker;
  store: Store & { setRegistry?(r: Registry): void };
  current: Runtime;
  read: () => Config;
  logger: Logger;
}): { result: ReloadResult; runtime: Runtime } {
  const { worker, store, current, logger } = p;
  let next: Runtime;
  try {
    next = buildRuntime(p.read(), logger);
    const provider = next.provider;
    if (provider && current.cfg.leaseMs < provider.worstCaseCallMs)
      throw new LeaseTooShort(current.cfg.leaseMs, provider.worstCaseCallMs);
  } catch (err) {
    const reason = refusalReason(err);
    logger.error({ reason }, 'reload refused: the new config is invalid; keeping the old one');
    return { result: { status: 'refused', reason }, runtime: current };
  }
  const restartNeeded = RESTART_ONLY.filter((k) => next.cfg[k] !== current.cfg[k]);
  if (next.cfg.logLevel !== current.cfg.logLevel) logger.level = next.cfg.logLevel;

  if (!next.provider) {
    // Decisions off: owe nothing from now on, stop the in-flight pass and the worker.
    store.setRegistry?.(new Registry([]));
    worker.cancelPass('reload');
    worker.stop('provider none');
    logger.warn({}, 'reload: provider is none, decisions are off; the worker stops');
    void current.provider?.close?.();
    return { result: { status: 'disabled' }, runtime: next };
  }

  store.setRegistry?.(next.registry); // the resolver first: writes from now on owe the new sets
  worker.swap(next.provider, next.registry); // then the runner: every later claim uses them
  worker.cancelPass('reload'); // then the in-flight pass: released, no attempt counted
  // Readers in other processes judge "current" against the newly pinned provider.
  void store
    .setMeta(PINNED_PROVIDER_META_KEY, pinnedProviderValue(next.provider))
    .catch((err: unknown) => logger.warn({ err: errCode(err) }, 'could not record the pinned provider'));
  if (current.provider !== next.provider) void current.provider?.close?.();
  const result: ReloadResult = {
    status: 'applied',
    provider: next.provider.name,
    model: next.provider.model,
    restartNeeded,
  };
  logger.info({ provider: result.provider, model: result.model, restartNeeded }, 'config reloaded');
  if (restartNeeded.length) logger.warn({ restartNeeded }, 'reload: these options change only at a restart');
  return { result, runtime: next };
}

/**
 * The actions part of a SIGHUP reload (DESIGN §17), after `reloadWorker` applied the new config:
 * re-reads the config file's `actions` section against the new registry and puts it, with the new
 * `--actions` cap, in force in the running worker's actions. An invalid section is refused (logged
 * with its reason; the old one stays in force). A worker that started with no acting key, or with
 * `--actions off`, has no actions to reload into: a section that now acts needs a restart.
 * @returns what it did: `applied`, `refused` (with the reason) or `restart`.
 */
export function reloadActions(p: {
  actions: ActionsWorker | null;
  runtime: { cfg: Pick<Config, 'configFile' | 'actions'>; registry: Registry };
  logger: Logger;
}): { status: 'applied' | 'restart' } | { status: 'refused'; reason: string } {
  const { runtime, logger } = p;
  let config;
  try {
    config = loadActionsConfig(runtime.cfg.configFile, runtime.registry);
  } catch (err) {
    const reason = err instanceof Error && err.name === 'InvalidActionsConfig' ? err.message : refusalReason(err);
    logger.error({ reason }, 'actions reload refused: the new actions section is invalid; keeping the old one');
    return { status: 'refused', reason };
  }
  const cap = runtime.cfg.actions ?? 'propose';
  if (!p.actions) {
    if (config.keys.length > 0 && cap !== 'off')
      logger.warn({ restartNeeded: ['actions'] }, 'reload: actions start acting only at a restart');
    return { status: 'restart' };
  }
  p.actions.reload(config, cap);
  logger.info({ keys: config.keys.length, cap }, 'actions config reloaded');
  return { status: 'applied' };
}
