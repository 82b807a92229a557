import cliProgress from 'cli-progress';
import type { Logger } from '../log.js';

/** A drain's progress bar; every method is a no-op when it is not shown. */
export interface DrainProgress {
  /** One job outcome recorded. */
  tick(): void;
  /** Removes nothing: stops redrawing, leaves the last frame, restores the log level. */
  stop(): void;
}

/**
 * A progress bar for `worker --until-idle` on a terminal: shown only when `stream` (stdout) is a
 * TTY, started at the first outcome (after the start line), `done/total jobs` where total is the
 * jobs claimable at start and grows if more are found. While it draws, `logger` is raised to warn
 * so info lines do not tear it (per-job lines are at debug anyway); `stop` restores the level, and
 * the caller prints its summary after, so the summary is the last thing on the screen.
 */
export function drainProgress(
  claimableAtStart: number,
  logger: Logger,
  stream: NodeJS.WriteStream = process.stdout,
): DrainProgress {
  if (!stream.isTTY) return { tick: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    { stream, format: 'draining [{bar}] {value}/{total} jobs', hideCursor: true, clearOnComplete: false },
    cliProgress.Presets.shades_classic,
  );
  const level = logger.level;
  let done = 0;
  let started = false;
  return {
    tick() {
      done++;
      if (!started) {
        started = true;
        logger.level = level === 'silent' || logger.levelVal >= 40 ? level : 'warn';
        bar.start(Math.max(claimableAtStart, done), done);
        return;
      }
      if (done > bar.getTotal()) bar.setTotal(done);
      bar.update(done);
    },
    stop() {
      if (!started) return;
      bar.stop();
      logger.level = level;
    },
  };
}
