import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '../log.js';
import type { DashboardSessionRow } from '../store/access-store.js';
import type { AccessStore } from '../store/access-store.js';
import { authenticateApiToken } from './tokens.js';

/**
 * Dashboard sessions (DESIGN §16.6): a login with a workspace token makes a server-side session;
 * the cookie carries only the session id, never the token. The id is `vds_` plus 43 base64url
 * characters (32 random bytes, 256 bits); the database keeps only its SHA-256 (hex), as for API
 * tokens. The id is no API credential: `/v1` takes only `vdt_` tokens, and no token hashes to a
 * session's row. Logout deletes the row; revoking the token deletes its sessions.
 */

/** The prefix every session id starts with: tells it apart from a `vdt_` token at a glance. */
const SESSION_ID_PREFIX = 'vds_';

/** A session's whole life from login, ms: a working day (12 h); then the person logs in again. */
export const SESSION_MAX_AGE_MS = 12 * 3_600_000;

/**
 * A session ends after this long without a request, ms: 1 h. An open dashboard tab keeps itself
 * seen (a live page refreshes its regions every 5 s), so mostly an abandoned browser goes idle; an
 * hour bounds how long a cookie left behind stays usable. DESIGN §16.6.
 */
export const SESSION_IDLE_MS = 3_600_000;

/** A session's last-seen mark is rewritten at most once per this interval, ms (60 s): a page view is not a write. */
const SESSION_TOUCH_MS = 60_000;

/** Sessions deleted per prune statement; the prune pass repeats it until none are left (at most `SESSION_PRUNE_MAX_BATCHES`). */
const SESSION_PRUNE_BATCH = 500;
const SESSION_PRUNE_MAX_BATCHES = 50;

/** Hex SHA-256 of a session id: the only form the database keeps. */
function hashSessionId(id: string): string {
  return createHash('sha256').update(id, 'utf8').digest('hex');
}

/** What `openDashboardSession` returns: the id for the cookie (never stored) and the session. */
export interface OpenedDashboardSession {
  sessionId: string;
  session: DashboardSessionRow;
}

/**
 * A login: when `token` is a live API token, stores a new session for it and returns its id.
 * @returns null for an unknown or revoked token, or one whose workspace is deleted.
 */
export async function openDashboardSession(
  store: Pick<AccessStore, 'createDashboardSession' | 'findApiToken'>,
  token: string,
): Promise<OpenedDashboardSession | null> {
  const row = await authenticateApiToken(store, token);
  if (!row) return null;
  const sessionId = SESSION_ID_PREFIX + randomBytes(32).toString('base64url');
  const session = await store.createDashboardSession({
    idHash: hashSessionId(sessionId),
    tokenId: row.id,
    maxAgeMs: SESSION_MAX_AGE_MS,
  });
  return session ? { sessionId, session } : null;
}

/**
 * The live session a cookie presented, or null (unknown, logged out, expired, idle, its token
 * revoked, its workspace deleted, or not shaped like a session id). One indexed read by hash.
 */
export async function findDashboardSession(
  store: Pick<AccessStore, 'findDashboardSession'>,
  sessionId: string,
): Promise<DashboardSessionRow | null> {
  if (!sessionId.startsWith(SESSION_ID_PREFIX) || sessionId.length > 200) return null;
  return store.findDashboardSession(hashSessionId(sessionId), {
    idleMs: SESSION_IDLE_MS,
    touchAfterMs: SESSION_TOUCH_MS,
  });
}

/** A logout: deletes the session. @returns false when there was none (already ended). */
export async function endDashboardSession(
  store: Pick<AccessStore, 'deleteDashboardSession'>,
  sessionId: string,
): Promise<boolean> {
  if (!sessionId.startsWith(SESSION_ID_PREFIX) || sessionId.length > 200) return false;
  return store.deleteDashboardSession(hashSessionId(sessionId));
}

/**
 * Retention: deletes the sessions that can no longer be used (expired, idle, or of a revoked
 * token), in batches of `SESSION_PRUNE_BATCH`. @returns rows deleted.
 */
export async function pruneDashboardSessions(
  store: Pick<AccessStore, 'pruneDashboardSessions'>,
  logger?: Logger,
): Promise<number> {
  let total = 0;
  for (let b = 0; b < SESSION_PRUNE_MAX_BATCHES; b++) {
    const n = await store.pruneDashboardSessions(SESSION_IDLE_MS, SESSION_PRUNE_BATCH);
    total += n;
    if (n < SESSION_PRUNE_BATCH) break;
  }
  if (total > 0) logger?.info({ deleted: total }, 'ended dashboard sessions pruned');
  return total;
}
