import { VerdictError } from '../errors.js';

/**
 * The errors of `store.transaction` (DESIGN §16.1), public through `verdict`. Kept apart from the
 * SQLite transaction code that throws them so the package's declarations reach no driver or
 * drizzle-orm types through them (a consumer compiles without `skipLibCheck`).
 */

/** Thrown by a call on a transaction handle after its transaction committed or rolled back. */
export class TransactionClosed extends VerdictError {
  readonly code = 'transaction_closed';
  constructor() {
    super('this transaction handle was used after its transaction ended; use the store instead');
  }
}

/**
 * Thrown when code inside a `store.transaction` callback calls the store itself instead of the
 * callback's `tx`: the store's calls wait for that very transaction to end, so the call could
 * never run (a deadlock that would also stall an in-process worker).
 */
export class TransactionMisuse extends VerdictError {
  readonly code = 'transaction_misuse';
  constructor() {
    super(
      "inside store.transaction(fn), call the doors on fn's tx argument, not on the store: the store waits for this transaction to end",
    );
  }
}
