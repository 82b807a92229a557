/** An HTTP API token's role (DESIGN §16.2): `read` < `write` < `admin`; a token may do what its role and every lower role may. */
export type ApiTokenRole = 'read' | 'write' | 'admin';

/** An API token as stored: never the token, never its hash. Times are epoch ms. */
export interface ApiTokenRow {
  id: string;
  workspaceId: string;
  workspaceSlug: string;
  role: ApiTokenRole;
  /** A label given at creation (`--name`), '' when none. */
  name: string;
  createdAt: number;
  revokedAt: number | null;
}

/** What `createDashboardSession` stores (DESIGN §16.6): the session id's hex SHA-256, never the id. */
export interface NewDashboardSession {
  idHash: string;
  /** The token the login presented; its workspace and role are copied from its row. */
  tokenId: string;
  /** Lifetime from now, ms: `expires_at` = now + this. */
  maxAgeMs: number;
}

/** A live dashboard session: the token it stands for (as `findApiToken` returns it) and its times (epoch ms). */
export interface DashboardSessionRow {
  token: ApiTokenRow;
  createdAt: number;
  expiresAt: number;
  lastSeenAt: number;
}

/** What `createApiToken` stores: the token's hex SHA-256, never the token. */
export interface NewApiToken {
  id: string;
  workspaceId: string;
  role: ApiTokenRole;
  tokenHash: string;
  name?: string;
}

/**
 * Who may use the HTTP API and the dashboard, and which inbound deliveries were seen (DESIGN
 * §16.2, §16.6; statements in sql/api-access.ts, sql/sessions.ts): API tokens, dashboard
 * sessions, and inbound webhook delivery ids.
 */
export interface AccessStore {
  /** Stores a new token's hash (see src/access/tokens.ts, which makes the token). */
  createApiToken(t: NewApiToken): Promise<ApiTokenRow>;
  /** Tokens, newest first, revoked ones included; of one workspace when given. */
  listApiTokens(workspaceId?: string): Promise<ApiTokenRow[]>;
  /** Revokes the token and deletes its dashboard sessions. @returns false when no unrevoked token has this id. */
  revokeApiToken(id: string): Promise<boolean>;
  /** The unrevoked token with this hex SHA-256 whose workspace is live, or null. */
  findApiToken(tokenHash: string): Promise<ApiTokenRow | null>;
  /** Stores a session for a live token. @returns null when the token is revoked or its workspace deleted. */
  createDashboardSession(s: NewDashboardSession): Promise<DashboardSessionRow | null>;
  /**
   * The live session with this hex SHA-256 (not expired, seen within `idleMs`, its token live), or
   * null; marks it seen when its mark is older than `touchAfterMs`.
   */
  findDashboardSession(
    idHash: string,
    o: { idleMs: number; touchAfterMs: number },
  ): Promise<DashboardSessionRow | null>;
  /** Deletes one session (logout). @returns false when none had this hash. */
  deleteDashboardSession(idHash: string): Promise<boolean>;
  /** Deletes up to `limit` expired, idle (past `idleMs`) or revoked sessions (retention). @returns rows deleted. */
  pruneDashboardSessions(idleMs: number, limit: number): Promise<number>;
  /**
   * Records an inbound delivery id (`X-GitHub-Delivery`); call inside the transaction of the
   * delivery's writes. @returns true when new, false for a redelivery (apply nothing).
   */
  recordWebhookDelivery(d: { source: string; deliveryId: string; event: string }): Promise<boolean>;
}
