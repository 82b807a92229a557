import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import type { Provider } from '../providers/provider.js';

/**
 * The provider the CLI's reads are judged against (compose/reader.ts `openReader`, `readContext`):
 * `'none'`, the configured provider built, or undefined when none is configured (then the one the
 * worker last pinned). Building opens no connection.
 */
export function readsAgainst(cfg: Config, logger: Logger): Provider | 'none' | undefined {
  if (cfg.provider === 'none') return 'none';
  return cfg.provider === undefined ? undefined : (createProvider(cfg, logger) ?? undefined);
}
