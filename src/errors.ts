/**
 * The one base class of every error Verdict throws on purpose (DESIGN §16.1). A host tells
 * Verdict's errors from its own with `err instanceof VerdictError` and branches on `code`, a stable
 * machine-readable string (`config_error`, `not_found`, `provider_refusal`, ...) that never
 * changes between versions; messages may. Messages never carry item text, comment text, question
 * text, answers, provider error bodies or keys (DESIGN §1 principle 9), so they are safe to log.
 *
 * This module imports nothing, so every layer may extend it without adding an import cycle.
 */
export abstract class VerdictError extends Error {
  /** Stable machine-readable code (snake_case). */
  abstract readonly code: string;

  /**
   * The input member at fault when one is (`cursor`, `limit`, `fields.status`): the HTTP API
   * answers it as `param`, the CLI names it. Absent when the error is not about one input.
   */
  readonly param?: string;

  constructor(message?: string, options?: { cause?: unknown; param?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    // Every subclass is named after itself (`err.name` in logs and stacks), without repeating it.
    this.name = new.target.name;
    if (options?.param !== undefined) this.param = options.param;
  }
}

/** True when `err` is one of Verdict's errors (any class). */
export function isVerdictError(err: unknown): err is VerdictError {
  return err instanceof VerdictError;
}

/**
 * An input the caller named is not there (a file to import, a config file): exit 2 in the CLI.
 * The message reads `<what>; <how to fix>`.
 */
export class InputNotFound extends VerdictError {
  readonly code = 'input_not_found';
}

/**
 * An input that was read but holds nothing usable (e.g. not beads JSONL at all): nothing was
 * written. Exit 1 in the CLI. The message reads `<what>; <how to fix>`.
 */
export class InvalidInput extends VerdictError {
  readonly code = 'invalid_input';
}

/**
 * The database named does not exist and the caller did not ask to create it (a worker without
 * `--create`, a read on a mistyped path): nothing was created. Exit 2 in the CLI.
 */
export class DatabaseNotFound extends VerdictError {
  readonly code = 'database_not_found';
}

/**
 * The database cannot be opened or reached (server down, permission denied, not a database
 * file). Exit 1 in the CLI. `cause` keeps the driver's error; the message names the database
 * (path, or host/db for Postgres, never a password) and its error code only.
 */
export class DatabaseUnavailable extends VerdictError {
  readonly code = 'database_unavailable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The `code` an error carries itself (a driver's `SQLITE_BUSY`, Node's `ENOENT`, a SQLSTATE,
 * Verdict's own `not_found`), or undefined when it has no non-empty string code; its `cause` is
 * not read (`errCode` walks the chain). Any value may be passed: null, a string, an abort reason.
 */
export function ownCode(err: unknown): string | undefined {
  const code = err !== null && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code !== '' ? code : undefined;
}

/**
 * A loggable name for an error: its code or class, never its message (it may carry provider text).
 * Along the `cause` chain (up to 5 deep) the innermost code wins, for every caller: a wrapper's
 * code says which door failed, the code it wraps says why, and a log line or a stored reason wants
 * the why. So `StoreFailure` (store_failure) around `SQLITE_FULL` names `SQLITE_FULL`,
 * `DatabaseUnavailable` around `SQLITE_NOTADB` names `SQLITE_NOTADB`, and drizzle's
 * `DrizzleQueryError` (no code) around a Postgres error names its SQLSTATE (`40P01`). A caller that
 * branches on Verdict's own code reads `err.code` instead. Without any code, the first class name
 * along the chain that says more than `Error`.
 */
export function errCode(err: unknown): string {
  const chain: object[] = [];
  for (
    let e: unknown = err;
    e && typeof e === 'object' && chain.length < 5 && !chain.includes(e);
    e = (e as { cause?: unknown }).cause
  )
    chain.push(e);
  for (const e of [...chain].reverse()) {
    const code = ownCode(e);
    if (code) return code;
  }
  const names = chain
    .map((e) => (e as { name?: unknown }).name)
    .filter((n): n is string => typeof n === 'string' && n !== '');
  return names.find((n) => n !== 'Error') ?? names[0] ?? typeof err;
}
