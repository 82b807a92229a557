/**
 * The one base class of every error Verdict throws on purpose (DESIGN §16.21). A host tells
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
}

/** True when `err` is one of Verdict's errors (any class). */
export function isVerdictError(err: unknown): err is VerdictError {
  return err instanceof VerdictError;
}
