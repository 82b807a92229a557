import type { FastifyReply } from 'fastify';

/**
 * An error answer of the HTTP API: `{error, message, issues?}`, a stable code and a message that
 * never quotes a request body, a token or item text (see schemas.ts `errorBody`).
 */
export function sendError(reply: FastifyReply, status: number, error: string, message: string, issues?: Array<{ path: string; message: string }>): FastifyReply {
  return reply.code(status).send(issues ? { error, message, issues } : { error, message });
}
