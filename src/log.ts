import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Paths redacted from every log line. Logs carry ids, counts and outcomes only (DESIGN §1
 * principle 9); these catch a key or header that reaches a log by accident.
 */
export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'key',
  '*.key',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.headers.authorization',
  '*.headers["x-api-key"]',
];

/**
 * Creates the process logger: JSON lines, pretty only when stdout is a TTY outside CI (STACK.md §6).
 * @param level pino level name (`info`, `debug`, ...)
 * @param destination where lines go; tests pass a stream to capture them.
 */
export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  const pretty = !destination && process.stdout.isTTY && !process.env.CI;
  return pino(
    {
      level,
      base: { service: 'verdict' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      ...(pretty
        ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
        : {}),
    },
    destination,
  );
}

/** A logger that drops everything (library use without logs). */
export const silentLogger: Logger = pino({ level: 'silent' });
