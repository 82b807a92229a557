import type { FastifyInstance } from 'fastify';
import type { Verdict } from '../compose/verdict.js';
import type { ApiServerOptions } from './api-server.js';

export type { ApiServerOptions } from './api-server.js';

/**
 * The HTTP API server over a Verdict (DESIGN §16.2; see api-server.ts for the routes, the
 * refusals and what is logged): a fastify instance, not yet listening. Call
 * `await server.listen({ port, host })`, and `server.close()` before `verdict.close()`.
 * fastify is loaded on the first call, so a library user who never serves never loads it.
 * @throws InvalidInput for a rate limit that is not a positive integer.
 */
export async function createApiServer(verdict: Verdict, options: ApiServerOptions = {}): Promise<FastifyInstance> {
  const m = await import('./api-server.js');
  return m.createApiServer(verdict, options);
}
