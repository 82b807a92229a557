import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { systemClock, type Clock } from '../clock.js';
import type { Verdict } from '../compose/verdict.js';
import type { Logger } from '../log.js';
import type { ApiTokenRow } from '../store/access-store.js';
import { createMcpServer } from './mcp-server.js';

/**
 * The MCP server over Streamable HTTP at `/mcp` of `verdict serve` (MCP 2025-06-18 transport),
 * under the same bearer tokens as `/v1`: the server's auth hook authenticates every request
 * (401 without a valid token, before the body is read) and its rate limit counts them per token.
 *
 * Sessions: an `initialize` POST without `Mcp-Session-Id` opens one (a server of its own, so the
 * client's name from the handshake is its verdicts' author); the id it answers with is bound to
 * the token that opened it, and any other token presenting it is told "Session not found" (404),
 * as is an unknown or expired id. A session idle for `MCP_SESSION_IDLE_MS` is closed; a token holds
 * at most `MCP_SESSIONS_PER_TOKEN` (opening one more closes its least recently used), the server
 * `MCP_SESSIONS_MAX` (then 503). `DELETE` ends a session. A JSON-RPC batch (an array body) is 400:
 * the protocol version served (2025-06-18) has none, and each call must count against the rate limit. `GET` is 405: this server sends nothing
 * unasked, so it offers no standalone SSE stream (the transport allows 405 there). Answers are
 * JSON, not SSE (no tool streams).
 *
 * Origin: a request carrying an `Origin` header whose host is not the request's `Host` is 403
 * (the transport's rule against DNS rebinding; agent hosts send no Origin).
 */

/** Longest `clientInfo` of an `initialize`, characters of JSON: a name, a version, a title. */
const CLIENT_INFO_MAX_CHARS = 4_096;

/** A session idle this long is closed, ms. Our choice: an agent's working session, with room for a pause. */
const MCP_SESSION_IDLE_MS = 30 * 60_000;
/** Sessions one token may hold; one more closes its least recently used. */
const MCP_SESSIONS_PER_TOKEN = 16;
/** Sessions the server holds in all; beyond it `initialize` is 503. */
const MCP_SESSIONS_MAX = 1_000;

interface Session {
  transport: StreamableHTTPServerTransport;
  /** The row the auth hook read for the latest request (always the opening token's id): what this session's tools act as. */
  token: ApiTokenRow;
  lastUsedAt: number;
}

/** A JSON-RPC error answer with no id (the transport's own shape for transport-level refusals). */
function rpcError(reply: FastifyReply, status: number, code: number, message: string): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'application/json')
    .send({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/** Session limits of `/mcp`; each defaults to the constant of its name. Tests shorten them. */
export interface McpHttpOptions {
  /** @defaultValue MCP_SESSION_IDLE_MS */
  sessionIdleMs?: number;
  /** @defaultValue MCP_SESSIONS_PER_TOKEN */
  sessionsPerToken?: number;
  /** @defaultValue MCP_SESSIONS_MAX */
  sessionsMax?: number;
  /** How often idle sessions are looked for, ms; every request also looks first. @defaultValue 60 000 */
  sweepMs?: number;
  /** The source of now for idle times (epoch ms); tests move a ManualClock. @defaultValue systemClock */
  clock?: Clock;
}

/**
 * Registers `POST|GET|DELETE /mcp` on `app`, whose auth hook sets `req.apiToken` for routes with a
 * `role` (see server/api-server.ts). Sessions are closed when `app` closes.
 */
export function registerMcpRoute(app: FastifyInstance, v: Verdict, logger: Logger, o: McpHttpOptions = {}): void {
  const idleMs = o.sessionIdleMs ?? MCP_SESSION_IDLE_MS;
  const perToken = o.sessionsPerToken ?? MCP_SESSIONS_PER_TOKEN;
  const max = o.sessionsMax ?? MCP_SESSIONS_MAX;
  /** Open sessions by id, least recently used first: a use moves its session to the end (Map keeps insertion order). */
  const sessions = new Map<string, Session>();
  const close = (id: string, why: string) => {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
    logger.info({ token: s.token.id, why, sessions: sessions.size }, 'mcp session closed');
    void s.transport.close().catch(() => undefined);
  };
  const clock = o.clock ?? systemClock;
  const closeIdle = () => {
    const cutoff = clock.now() - idleMs;
    for (const [id, s] of sessions) if (s.lastUsedAt < cutoff) close(id, 'idle');
  };
  const sweep = setInterval(closeIdle, o.sweepMs ?? 60_000);
  sweep.unref();
  app.addHook('onClose', async () => {
    clearInterval(sweep);
    for (const id of [...sessions.keys()]) close(id, 'server closing');
  });

  /** Hands the request to the session's transport; the reply is the transport's from here. */
  const serve = async (req: FastifyRequest, reply: FastifyReply, s: Session): Promise<void> => {
    s.lastUsedAt = clock.now();
    s.token = req.apiToken!;
    reply.hijack();
    await s.transport.handleRequest(req.raw, reply.raw, req.body);
  };

  // Every /mcp route of this scope: an Origin that is not this server is refused before the route runs.
  app.addHook('preHandler', async (req, reply) => {
    const origin = req.headers.origin;
    if (origin === undefined) return;
    let same = false;
    try {
      same = new URL(origin).host === req.headers.host;
    } catch {
      // not a URL: not this server
    }
    if (!same) return rpcError(reply, 403, -32000, 'Forbidden: the Origin is not this server');
  });

  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    const token = req.apiToken!;
    // A session past its idle limit is closed before any request can use it, not only at the next sweep.
    closeIdle();
    // One HTTP request, one message: MCP 2025-06-18 has no JSON-RPC batches, and a batch would run
    // up to 100 calls as one request of the per-token rate limit.
    if (Array.isArray(req.body))
      return rpcError(
        reply,
        400,
        -32600,
        'Invalid Request: JSON-RPC batches are not accepted; send one message per request',
      );
    const sid = req.headers['mcp-session-id'];
    if (typeof sid === 'string') {
      const s = sessions.get(sid);
      // Another token's session reads as unknown: an id proves nothing about who holds it.
      if (!s || s.token.id !== token.id) return rpcError(reply, 404, -32001, 'Session not found');
      // The order of use, not the clock, ranks sessions for eviction: two uses in one millisecond
      // would tie on lastUsedAt.
      sessions.delete(sid);
      sessions.set(sid, s);
      await serve(req, reply, s);
      if (req.method === 'DELETE') close(sid, 'deleted');
      return reply;
    }
    if (req.method !== 'POST' || !isInitializeRequest(req.body))
      return rpcError(reply, 400, -32000, 'Bad Request: send initialize first, or the Mcp-Session-Id it answered with');
    // The session keeps the handshake's clientInfo for its life: a name is a name, not a megabyte.
    if (JSON.stringify(req.body.params.clientInfo).length > CLIENT_INFO_MAX_CHARS)
      return rpcError(reply, 400, -32602, `clientInfo is limited to ${CLIENT_INFO_MAX_CHARS} characters of JSON`);
    // A token at its own cap makes room when its new session is open (below), so it is not counted here.
    const others = [...sessions.values()].filter((s) => s.token.id !== token.id).length;
    if (others + Math.min(perToken - 1, [...sessions.values()].filter((s) => s.token.id === token.id).length) >= max)
      return rpcError(
        reply.header('retry-after', '60'),
        503,
        -32000,
        'Too many MCP sessions on this server; try again later',
      );

    let session: Session | null = null;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        // Only an initialize the transport accepted costs the token its least recently used session.
        const mine = [...sessions].filter(([, s]) => s.token.id === token.id);
        for (const [old] of mine.slice(0, Math.max(0, mine.length - perToken + 1)))
          close(old, 'the token opened one more');
        sessions.set(id, session!);
        logger.info({ token: token.id, sessions: sessions.size }, 'mcp session opened');
      },
    });
    session = { transport, token, lastUsedAt: clock.now() };
    const opened = session;
    const server = createMcpServer(v, { principal: async () => opened.token, logger });
    transport.onclose = () => {
      if (transport.sessionId && sessions.get(transport.sessionId) === opened) sessions.delete(transport.sessionId);
      void server.close().catch(() => undefined);
    };
    await server.connect(transport);
    await serve(req, reply, opened);
    // An initialize the transport refused (a bad Accept, a bad protocol version) opened nothing.
    if (transport.sessionId === undefined || !sessions.has(transport.sessionId))
      void transport.close().catch(() => undefined);
    return reply;
  };

  const config = { role: 'read' as const };
  // Documented in /v1/openapi.json; the JSON-RPC messages themselves are MCP's (its specification, not this document).
  const rpcRefusal = z
    .object({ jsonrpc: z.string(), error: z.object({ code: z.number(), message: z.string() }) })
    .loose();
  const refusal = z.object({ error: z.string(), message: z.string() }).loose();
  const doc = (summary: string, description: string) => ({
    tags: ['mcp'],
    summary,
    description,
    // 403 is the Origin check's JSON-RPC refusal, or the token check's plain one.
    response: {
      400: rpcRefusal,
      401: refusal,
      403: z.union([rpcRefusal, refusal]),
      404: rpcRefusal,
      405: rpcRefusal,
      429: refusal,
      503: rpcRefusal,
    },
  });
  const streamable =
    'The MCP server over Streamable HTTP (JSON responses, no SSE stream), under the same bearer tokens as `/v1` (read role; `verdict_record` and `proposal_decide` need write). A session starts with `initialize` and continues with the `Mcp-Session-Id` it answered; a session belongs to its token.';
  app.post('/mcp', { config, schema: doc('MCP messages (JSON-RPC)', streamable) }, handler);
  app.delete(
    '/mcp',
    { config, schema: doc('End an MCP session', 'Closes the session named by `Mcp-Session-Id`. ' + streamable) },
    handler,
  );
  app.get(
    '/mcp',
    {
      config,
      schema: doc(
        'No SSE stream (405)',
        'This server offers no server-to-client stream: always 405 with `Allow: POST, DELETE`.',
      ),
    },
    async (_req, reply) => {
      return rpcError(
        reply.header('allow', 'POST, DELETE'),
        405,
        -32000,
        'Method not allowed: this server offers no SSE stream',
      );
    },
  );
}
