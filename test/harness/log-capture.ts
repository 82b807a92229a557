import { createLogger, type Logger } from '../../src/log.js';

/**
 * A real pino logger (the production redaction and serializers) whose JSON lines are captured in
 * memory, for tests that check what is and is not logged.
 */
export function captureLog(level = 'trace'): {
  logger: Logger;
  lines: string[];
  records: () => Array<Record<string, unknown>>;
} {
  const lines: string[] = [];
  const logger = createLogger(level, { write: (s: string) => void lines.push(s) });
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}
