import { pino, type Logger, type DestinationStream } from 'pino';
import pinoPretty from 'pino-pretty';

export type { Logger };

/**
 * Paths redacted from every log line. Logs carry ids, counts and outcomes only (DESIGN §1
 * principle 9); these catch a key or header that reaches a log by accident.
 */
const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'key',
  '*.key',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.headers.authorization',
  '*.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'options.headers.authorization',
  'options.headers["x-api-key"]',
];

/**
 * Creates the process logger: JSON lines, pretty only when stdout is a TTY outside CI (DESIGN §10).
 * @param level pino level name (`info`, `debug`, ...)
 * @param destination where lines go; tests pass a stream to capture them.
 * @param opts.prettyFd pretty-print to this file descriptor instead (the CLI passes 2 when
 *   stderr is a TTY, so logs never mix into a command's stdout); redaction applies either way.
 */
export function createLogger(level = 'info', destination?: DestinationStream, opts: { prettyFd?: 1 | 2 } = {}): Logger {
  const pretty = opts.prettyFd !== undefined || (!destination && process.stdout.isTTY && !process.env.CI);
  return pino(
    {
      level,
      base: { service: 'verdict' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    },
    // Pretty lines are written synchronously, in this thread (not a transport worker): on a
    // terminal they land in order with what the command prints (a progress bar, its summary).
    pretty
      ? pinoPretty({
          colorize: true,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname',
          destination: opts.prettyFd ?? 1,
          sync: true,
        })
      : destination,
  );
}

/** A logger that drops everything (library use without logs). */
export const silentLogger: Logger = pino({ level: 'silent' });
