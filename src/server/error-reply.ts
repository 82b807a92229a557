import type { FastifyReply } from 'fastify';

/** An issue of an `invalid_request`: the member's path and what is wrong with it. */
export interface RequestIssue {
  path: string;
  message: string;
}

/**
 * An error answer of the HTTP API: `{error, message, param?, issues?}`, a stable code, a message
 * that never quotes a request body, a token or item text, and `param`, the request member at fault
 * when one is (see schemas.ts `errorBody`). The request id is in the `x-request-id` header of every
 * answer (api-server.ts), errors included.
 */
export function sendError(
  reply: FastifyReply,
  status: number,
  error: string,
  message: string,
  extra: { param?: string; issues?: RequestIssue[] } = {},
): FastifyReply {
  const body: { error: string; message: string; param?: string; issues?: RequestIssue[] } = { error, message };
  if (extra.param !== undefined) body.param = extra.param;
  if (extra.issues) body.issues = extra.issues;
  return reply.code(status).send(body);
}
