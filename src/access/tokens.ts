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
 * Makes a token for a workspace (created when it does not exist yet, so a new team's first step is
 * `verdict tokens create`) and stores its hash.
 * @throws InvalidInput for an unknown role or an empty slug.
 */
export async function createApiToken(store: Pick<TrackerStore, 'createWorkspace' | 'getWorkspaceBySlug'> & Pick<AccessStore, 'createApiToken'>, o: { workspace: string; role: ApiTokenRole; name?: string }): Promise<CreatedApiToken> {
  parseApiTokenRole(o.role);
  if (!o.workspace.trim()) throw new InvalidInput('workspace slug must not be empty');
  let ws = await store.getWorkspaceBySlug(o.workspace);
  let workspaceCreated = false;
  if (!ws) {
    ws = await store.createWorkspace({ slug: o.workspace });
    workspaceCreated = true;
  }
  const token = API_TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const row = await store.createApiToken({ id: randomUUID(), workspaceId: ws.id, role: o.role, tokenHash: hashApiToken(token), name: o.name ?? '' });
  return { token, row, workspaceCreated };
}

/**
 * The live token a request presented, or null (unknown, revoked, its workspace deleted, or not
 * shaped like a token). One indexed read by hash: the token is never compared as text, so the
 * lookup leaks nothing about stored tokens through timing.
 */
export async function authenticateApiToken(store: Pick<AccessStore, 'findApiToken'>, token: string): Promise<ApiTokenRow | null> {
  if (!token.startsWith(API_TOKEN_PREFIX) || token.length > 200) return null;
  return store.findApiToken(hashApiToken(token));
}
