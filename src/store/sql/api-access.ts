import { sql } from 'drizzle-orm';
import type { ApiTokenRow, ApiTokenRole, NewApiToken } from '../access-store.js';
import { autocommit, bind, changes, nowSql, one, read, rows, shape, write, type SqlContext } from './steps.js';

/**
 * The HTTP API's rows (DESIGN §16.2): bearer tokens, kept as the SHA-256 of the token only, and
 * the inbound webhook deliveries already applied. The token itself never reaches the database:
 * `src/access/tokens.ts` makes it and hashes it.
 */

interface TokenDbRow {
  id: string;
  workspace_id: string;
  workspace_slug: string;
  role: string;
  name: string;
  created_at: number | string;
  revoked_at: number | string | null;
}

const TOKEN_COLUMNS = sql`t.id, t.workspace_id, w.slug AS workspace_slug, t.role, t.name, t.created_at, t.revoked_at`;

function toRow(r: TokenDbRow): ApiTokenRow {
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    workspaceSlug: r.workspace_slug,
    role: r.role as ApiTokenRole,
    name: r.name,
    createdAt: Number(r.created_at),
    revokedAt: r.revoked_at === null ? null : Number(r.revoked_at),
  };
}

/** Stores a token's hash. @throws the driver's unique violation if the hash is already stored (never in practice: 256 random bits). */
export function createApiToken(c: SqlContext, t: NewApiToken): Promise<ApiTokenRow> {
  return write(c, function* () {
    const now = yield* nowSql();
    yield* changes(sql`
      INSERT INTO api_tokens (id, workspace_id, role, token_hash, name, created_at)
      VALUES (${t.id}, ${t.workspaceId}, ${t.role}, ${t.tokenHash}, ${t.name ?? ''}, ${now})`);
    const row = yield* one<TokenDbRow>(
      sql`SELECT ${TOKEN_COLUMNS} FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id WHERE t.id = ${t.id}`,
    );
    return toRow(row!);
  });
}

/** Tokens, newest first, revoked ones included (with `revokedAt`); of one workspace when given. */
export function listApiTokens(c: SqlContext, workspaceId?: string): Promise<ApiTokenRow[]> {
  return read(c, function* () {
    const where = workspaceId === undefined ? sql`` : sql`WHERE t.workspace_id = ${workspaceId}`;
    const list = yield* rows<TokenDbRow>(sql`
      SELECT ${TOKEN_COLUMNS} FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id ${where}
      ORDER BY t.created_at DESC, t.id`);
    return list.map(toRow);
  });
}

/**
 * Revokes one token (idempotent) and deletes its dashboard sessions in the same transaction
 * (DESIGN §16.6). @returns false when no unrevoked token has this id.
 */
export function revokeApiToken(c: SqlContext, id: string): Promise<boolean> {
  return write(c, function* () {
    const now = yield* nowSql();
    const revoked =
      (yield* changes(sql`UPDATE api_tokens SET revoked_at = ${now} WHERE id = ${id} AND revoked_at IS NULL`)) > 0;
    yield* changes(sql`DELETE FROM dashboard_sessions WHERE token_id = ${id}`);
    return revoked;
  });
}

/**
 * The live token with this hash: not revoked, its workspace not soft-deleted.
 * @returns null otherwise (the caller answers 401 without saying which).
 */
export function findApiToken(c: SqlContext, tokenHash: string): Promise<ApiTokenRow | null> {
  return read(c, function* () {
    const r = yield* one<TokenDbRow>(bind(findTokenShape, { tokenHash }));
    return r ? toRow(r) : null;
  });
}

/**
 * Every authenticated request reads its token (one indexed read, api_tokens_hash_uq): a shape, so
 * SQLite prepares it once and a request only binds the hash. The read is not cached in memory, so
 * a revocation, from this process or another, refuses the token's next request.
 */
const findTokenShape = shape<'tokenHash'>(
  'token by hash',
  (_d, p) => sql`
    SELECT ${TOKEN_COLUMNS} FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
    WHERE t.token_hash = ${p.tokenHash} AND t.revoked_at IS NULL AND w.deleted_at IS NULL`,
);

/**
 * Records an inbound delivery id; call it inside the transaction of the writes the delivery makes,
 * so a crash between them cannot apply a delivery twice or mark one applied that was not.
 * @returns true when the id is new (apply the delivery), false for a redelivery (a no-op).
 */
export function recordWebhookDelivery(
  c: SqlContext,
  d: { source: string; deliveryId: string; event: string },
): Promise<boolean> {
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return (
      (yield* changes(sql`
      INSERT INTO webhook_deliveries (source, delivery_id, event, received_at) VALUES (${d.source}, ${d.deliveryId}, ${d.event}, ${now})
      ON CONFLICT (source, delivery_id) DO NOTHING`)) > 0
    );
  });
}
