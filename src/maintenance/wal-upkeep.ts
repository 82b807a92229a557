import { errCode } from '../errors.js';
import { DEFAULTS } from '../config.js';
import type { Logger } from '../log.js';
import type { StorageHealth } from '../store/whole-store.js';

/**
 * The worker's write-ahead-log upkeep (DESIGN §10.2): a `wal_checkpoint(TRUNCATE)` when a slot
 * finds nothing to claim (idle), and at least every `everyMs` while busy. A reader that holds an
 * old snapshot (an outside `sqlite3` shell, a backup) stops any checkpoint from resetting the log,
 * so the WAL grows while it reads (1.34 GB measured behind a reader during three imports); once the
 * reader lets go, the next checkpoint truncates the file to zero. Without it the file kept its peak
 * size until the worker exited. On Postgres `Store.checkpoint()` does nothing.
 */

/** Default `everyMs`: the config's `--wal-checkpoint-ms` default (DESIGN §10.2: at most every 60 s while busy). */
export const WAL_CHECKPOINT_EVERY_MS = DEFAULTS.walCheckpointMs;

/** An idle slot checkpoints at most this often (ms): every idle tick of every slot would be wasteful. */
const IDLE_CHECKPOINT_MIN_MS = 1_000;

/** The WAL size above which `doctor` warns and the worker logs a warning after a checkpoint, bytes (DESIGN §10.2: 256 MiB). */
export const WAL_WARN_BYTES = 256 * 1024 * 1024;

export interface WalUpkeepOptions {
  store: Pick<StorageHealth, 'checkpoint'>;
  logger: Logger;
  /** The longest the worker goes without a checkpoint while busy, ms. @defaultValue WAL_CHECKPOINT_EVERY_MS */
  everyMs?: number;
  /** Stops the periodic checkpoints. */
  signal: AbortSignal;
}

/**
 * Starts the periodic checkpoint; returns `idle`, for the worker to call when a slot found nothing
 * to claim, and `stop`, which resolves once no checkpoint is running. Never throws: a failed
 * checkpoint (a lock held elsewhere) is logged at debug and tried again at the next occasion.
 */
export function startWalUpkeep(o: WalUpkeepOptions): { idle: () => void; stop: () => Promise<void> } {
  const everyMs = o.everyMs ?? WAL_CHECKPOINT_EVERY_MS;
  let lastAt = Date.now();
  let running: Promise<void> | null = null;
  let warned = false;
  const run = (why: 'idle' | 'periodic') => {
    if (running || o.signal.aborted) return;
    lastAt = Date.now();
    running = (async () => {
      try {
        const bytes = await o.store.checkpoint();
        o.logger.debug({ walBytes: bytes, why }, 'wal checkpoint');
        if (bytes !== null && bytes > WAL_WARN_BYTES) {
          // Still large after a TRUNCATE checkpoint: a reader holds an old snapshot. Once per episode.
          if (!warned)
            o.logger.warn(
              { walBytes: bytes, why },
              'write-ahead log still large after a checkpoint: a reader holds an old snapshot',
            );
          warned = true;
        } else warned = false;
      } catch (err) {
        o.logger.debug({ err: errCode(err) }, 'wal checkpoint failed; will retry');
      } finally {
        running = null;
      }
    })();
  };
  const timer = setInterval(
    () => {
      if (Date.now() - lastAt >= everyMs) run('periodic');
    },
    Math.min(everyMs, 1_000),
  );
  timer.unref();
  const onAbort = () => clearInterval(timer);
  o.signal.addEventListener('abort', onAbort, { once: true });
  return {
    idle: () => {
      if (Date.now() - lastAt >= Math.min(IDLE_CHECKPOINT_MIN_MS, everyMs)) run('idle');
    },
    stop: async () => {
      clearInterval(timer);
      o.signal.removeEventListener('abort', onAbort);
      await running;
    },
  };
}
