import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { InvalidInput } from '../errors.js';
import type { ApiTokenRole, ApiTokenRow } from '../store/access-store.js';
import type { AccessStore } from '../store/access-store.js';
import type { TrackerStore } from '../store/tracker-store.js';

/**
 * HTTP API tokens (DESIGN §16.2): bearer tokens scoped to one workspace and one role. A token is
 * `vdt_` plus 43 base64url characters (32 random bytes, 256 bits); it is shown once, and the
 * database keeps only its SHA-256 (hex), so a copy of the database lets no one call the API.
 */

/** The roles, lowest first; a token may do what its role and every lower role may. */
const API_TOKEN_ROLES: readonly ApiTokenRole[] = ['read', 'write', 'admin'];

/** The prefix every token starts with: lets secret scanners and humans recognise one. */
const API_TOKEN_PREFIX = 'vdt_';

/** Hex SHA-256 of a token: the only form the database keeps. */
function hashApiToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * How a verdict names the token that recorded it: `token:<id>`, or `token:<id> (<name>)` for a
 * named token. The HTTP API, the dashboard and the MCP server store this (beside the person or
 * agent they were told of), so every verdict traces back to a revocable credential.
 */
export function tokenAuthor(t: Pick<ApiTokenRow, 'id' | 'name'>): string {
  return t.name ? `token:${t.id} (${t.name})` : `token:${t.id}`;
}

/** True when `role` covers `needed` (admin ⊇ write ⊇ read). */
export function roleAllows(role: ApiTokenRole, needed: ApiTokenRole): boolean {
  return API_TOKEN_ROLES.indexOf(role) >= API_TOKEN_ROLES.indexOf(needed);
}

/** A role named on the command line or in a request. @throws InvalidInput for anything else. */
export function parseApiTokenRole(s: string): ApiTokenRole {
  if ((API_TOKEN_ROLES as readonly string[]).includes(s)) return s as ApiTokenRole;
  throw new InvalidInput(`role must be one of ${API_TOKEN_ROLES.join(', ')}; got "${s}"`);
}

/** What `createApiToken` returns: the token (shown once, never stored) and its row. */
export interface CreatedApiToken {
  token: string;
  row: ApiTokenRow;
  /** True when the workspace did not exist and was created for the token. */
  workspaceCreated: boolean;
}

/**
 * Makes a token for a workspace and stores its hash. The workspace must exist (a typo must not
 * make a new, empty one that the token then reaches alone); `createWorkspace: true` creates it
 * when it does not, so a new team's first step can be `verdict tokens create --create-workspace`.
 * @throws InvalidInput for an unknown role (`param: role`), an empty slug, a workspace that does
 *   not exist without `createWorkspace`, or a deleted workspace (`param: workspace`; the message
 *   lists the live workspaces).
 */
export async function createApiToken(
  store: Pick<TrackerStore, 'createWorkspace' | 'getWorkspaceBySlug' | 'listWorkspaces'> &
    Pick<AccessStore, 'createApiToken'>,
  o: { workspace: string; role: ApiTokenRole; name?: string; createWorkspace?: boolean },
): Promise<CreatedApiToken> {
  try {
    parseApiTokenRole(o.role);
  } catch (err) {
    throw new InvalidInput((err as Error).message, { param: 'role' });
  }
  if (!o.workspace.trim()) throw new InvalidInput('workspace slug must not be empty', { param: 'workspace' });
  let ws = await store.getWorkspaceBySlug(o.workspace);
  let workspaceCreated = false;
  if (ws && ws.deletedAt !== null)
    throw new InvalidInput(`workspace ${JSON.stringify(o.workspace)} is deleted; a token for it would reach nothing`, {
      param: 'workspace',
    });
  if (!ws) {
    if (!o.createWorkspace) {
      const known = (await store.listWorkspaces()).filter((w) => w.deletedAt === null).map((w) => w.slug);
      throw new InvalidInput(
        `no workspace ${JSON.stringify(o.workspace)}${known.length ? ` (workspaces: ${known.join(', ')})` : ''}; pass createWorkspace: true to create it`,
        { param: 'workspace' },
      );
    }
    ws = await store.createWorkspace({ slug: o.workspace });
    workspaceCreated = true;
  }
  const token = API_TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const row = await store.createApiToken({
    id: randomUUID(),
    workspaceId: ws.id,
    role: o.role,
    tokenHash: hashApiToken(token),
    name: o.name ?? '',
  });
  return { token, row, workspaceCreated };
}

/**
 * The live token a request presented, or null (unknown, revoked, its workspace deleted, or not
 * shaped like a token). One indexed read by hash: the token is never compared as text, so the
 * lookup leaks nothing about stored tokens through timing.
 */
export async function authenticateApiToken(
  store: Pick<AccessStore, 'findApiToken'>,
  token: string,
): Promise<ApiTokenRow | null> {
  if (!token.startsWith(API_TOKEN_PREFIX) || token.length > 200) return null;
  return store.findApiToken(hashApiToken(token));
}
