import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signatures of outbound decision events (DESIGN §16.2): each body Verdict POSTs carries
 * `X-Verdict-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`, the scheme GitHub uses for
 * `X-Hub-Signature-256`, so a receiver checks it with the same few lines (or with
 * `verifyEventSignature`). The HMAC covers the raw body bytes exactly as sent: verify before
 * parsing, never over a re-serialised object.
 */

/** The header a delivery carries its signature in (lower case, as Node reads request headers). */
export const EVENT_SIGNATURE_HEADER = 'x-verdict-signature-256';

const PREFIX = 'sha256=';

/**
 * The signature header value for `body`: `sha256=` and the lowercase hex HMAC-SHA256 of its bytes
 * (a string is hashed as UTF-8) under `secret`.
 * @throws TypeError when `secret` is empty: an empty key signs nothing a receiver could trust.
 * @example signEventBody('s3cret', '{"id":"e1"}') // 'sha256=…' (64 hex digits)
 */
export function signEventBody(secret: string, body: string | Uint8Array): string {
  if (typeof secret !== 'string' || secret.length === 0)
    throw new TypeError('signEventBody: secret must be a non-empty string');
  return PREFIX + createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * A receiver's check of an event delivery: true only when `header` (the `X-Verdict-Signature-256`
 * value as received) is `sha256=<hex>` for exactly these body bytes under `secret`. The comparison
 * is constant-time (`crypto.timingSafeEqual`) over the decoded digests, so a forger learns nothing
 * from how long a wrong guess took. A missing, malformed or wrong-length header is false, never an
 * error; hex digits may be of either case.
 * @param body the raw request body, before any JSON parse.
 * @throws TypeError when `secret` is empty (a configuration mistake, not a bad request).
 * @example
 * ```ts
 * if (!verifyEventSignature(process.env.VERDICT_EVENT_SECRET!, rawBody, req.headers[EVENT_SIGNATURE_HEADER] as string | undefined)) {
 *   res.writeHead(401).end();
 *   return;
 * }
 * ```
 */
export function verifyEventSignature(secret: string, body: string | Uint8Array, header: string | undefined): boolean {
  const expected = Buffer.from(signEventBody(secret, body).slice(PREFIX.length), 'hex');
  if (typeof header !== 'string' || !header.startsWith(PREFIX)) return false;
  const hex = header.slice(PREFIX.length).trim();
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return false;
  return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
}
