import { sql } from 'drizzle-orm';
import type { ApiTokenRole, DashboardSessionRow, NewDashboardSession } from '../access-store.js';
import { autocommit, changes, nowMs, nowSql, one, read, write, type SqlContext } from './steps.js';

/**
 * Dashboard sessions (DESIGN §16.6): rows keyed by the SHA-256 of the session id the cookie
 * carries (`src/access/sessions.ts` makes the id and hashes it; the id never reaches the
 * database). A session is live while its token is unrevoked, its workspace live, `expires_at` is
 * ahead and it was last seen within the idle timeout; every check reads the store's clock.
 */

interface SessionDbRow {
  id: string;
  workspace_id: string;
  workspace_slug: string;
  role: string;
  name: string;
  token_created_at: number | string;
  created_at: number | string;
  expires_at: number | string;
  last_seen_at: number | string;
}

const SESSION_COLUMNS = sql`t.id, s.workspace_id, w.slug AS workspace_slug, s.role, t.name, t.created_at AS token_created_at,
  s.created_at, s.expires_at, s.last_seen_at`;

function toRow(r: SessionDbRow): DashboardSessionRow {
  return {
    token: {
      id: r.id,
      workspaceId: r.workspace_id,
      workspaceSlug: r.workspace_slug,
      role: r.role as ApiTokenRole,
      name: r.name,
      createdAt: Number(r.token_created_at),
      revokedAt: null,
    },
    createdAt: Number(r.created_at),
    expiresAt: Number(r.expires_at),
    lastSeenAt: Number(r.last_seen_at),
  };
}

/**
 * Stores a session for a token, in one statement that finds the token live (unrevoked, its
 * workspace not deleted), so a revocation racing a login leaves no session behind.
 * @returns the session, or null when the token is not live.
 */
export function createDashboardSession(c: SqlContext, s: NewDashboardSession): Promise<DashboardSessionRow | null> {
  return write(c, function* () {
    const now = yield* nowMs();
    const n = yield* changes(sql`
      INSERT INTO dashboard_sessions (id_hash, token_id, workspace_id, role, created_at, expires_at, last_seen_at)
      SELECT ${s.idHash}, t.id, t.workspace_id, t.role, ${c.d.int8(now)}, ${c.d.int8(now + Math.trunc(s.maxAgeMs))}, ${c.d.int8(now)}
      FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
      WHERE t.id = ${s.tokenId} AND t.revoked_at IS NULL AND w.deleted_at IS NULL`);
    if (n === 0) return null;
    const r = yield* one<SessionDbRow>(sql`
      SELECT ${SESSION_COLUMNS} FROM dashboard_sessions s JOIN api_tokens t ON t.id = s.token_id JOIN workspaces w ON w.id = s.workspace_id
      WHERE s.id_hash = ${s.idHash}`);
    return toRow(r!);
  });
}

/**
 * The live session with this hash, or null (unknown, logged out, expired, idle past `idleMs`, its
 * token revoked or its workspace deleted). Marks it seen now when it was last marked more than
 * `touchAfterMs` ago, so a page view writes at most once per that interval.
 */
export async function findDashboardSession(
  c: SqlContext,
  idHash: string,
  o: { idleMs: number; touchAfterMs: number },
): Promise<DashboardSessionRow | null> {
  const found = await read(c, function* () {
    const now = yield* nowMs();
    const r = yield* one<SessionDbRow>(sql`
      SELECT ${SESSION_COLUMNS} FROM dashboard_sessions s JOIN api_tokens t ON t.id = s.token_id JOIN workspaces w ON w.id = s.workspace_id
      WHERE s.id_hash = ${idHash} AND s.expires_at > ${c.d.int8(now)} AND s.last_seen_at > ${c.d.int8(now - Math.trunc(o.idleMs))}
        AND t.revoked_at IS NULL AND w.deleted_at IS NULL`);
    return r ? { row: toRow(r), now } : null;
  });
  if (!found) return null;
  if (found.now - found.row.lastSeenAt > o.touchAfterMs) {
    await autocommit(c, function* () {
      yield* changes(
        sql`UPDATE dashboard_sessions SET last_seen_at = ${c.d.int8(found.now)} WHERE id_hash = ${idHash} AND last_seen_at < ${c.d.int8(found.now)}`,
      );
    });
    found.row.lastSeenAt = found.now;
  }
  return found.row;
}

/** Deletes one session (logout). @returns false when no row had this hash. */
export function deleteDashboardSession(c: SqlContext, idHash: string): Promise<boolean> {
  return autocommit(c, function* () {
    return (yield* changes(sql`DELETE FROM dashboard_sessions WHERE id_hash = ${idHash}`)) > 0;
  });
}

/**
 * Deletes up to `limit` sessions that can no longer be used: past `expires_at`, idle past
 * `idleMs`, or of a revoked token. One short statement. @returns rows deleted.
 */
export function pruneDashboardSessions(c: SqlContext, idleMs: number, limit: number): Promise<number> {
  const d = c.d;
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return yield* changes(sql`
      DELETE FROM dashboard_sessions WHERE id_hash IN (
        SELECT s.id_hash FROM dashboard_sessions s JOIN api_tokens t ON t.id = s.token_id
        WHERE s.expires_at <= ${now} OR s.last_seen_at <= ${now} - ${d.int8(Math.trunc(idleMs))} OR t.revoked_at IS NOT NULL
        LIMIT ${d.int4(Math.trunc(limit))})`);
  });
}
