/**
 * The one way a test file says a server it needs (PostgreSQL) is missing. Outside CI the tests that
 * need it skip, loudly: a warning on the console now, and the counts line at the end of the run
 * says how many tests were skipped for want of a server (their titles carry SERVER_SKIP_MARK).
 * In CI (`CI` set to `true` or `1`) a missing server is a failure, never a quiet green: the file
 * that asks fails to load, naming the server and how to start it.
 */
export const SERVER_SKIP_MARK = '(skipped: no server)';

export function serverMissing(server: string, reason: string): void {
  if (process.env.CI === 'true' || process.env.CI === '1') {
    throw new Error(`${server} is required in CI and is missing: ${reason}`);
  }
  console.warn(`WARNING: tests needing ${server} are SKIPPED: ${reason}`);
}
