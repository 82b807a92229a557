/**
 * API keys travel as HTTP header values (`x-api-key`, `authorization: Bearer`). A value with a
 * control character (a newline read from a key file, a tab) cannot be sent at all: fetch throws a
 * TypeError on every request, which would otherwise be retried as an outage for ever. Non-ASCII
 * characters cannot be sent as a header either, and leading or trailing whitespace is silently
 * trimmed by fetch, so a key with it is not the key that was configured. DESIGN §16.4 makes all of
 * these a configuration error at start.
 */

/**
 * Says what is wrong with a key as a header value, without quoting any of it.
 * @returns null for a key that is printable ASCII without whitespace, else a short description.
 */
export function apiKeyProblem(key: string): string | null {
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(key)) {
    return 'contains a line break or another control character (often a trailing newline from the file it was read from)';
  }
  if (/[^\x20-\x7e]/.test(key)) return 'contains a non-ASCII character, which cannot be sent in an HTTP header';
  if (/\s/.test(key)) return 'contains whitespace, which a key never does (check for spaces around it)';
  return null;
}
