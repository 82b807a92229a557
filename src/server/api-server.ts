import fastifyRateLimit from '@fastify/rate-limit';
import fastifySwagger from '@fastify/swagger';
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { Counter, Registry } from 'prom-client';
import type { Verdict, VerdictWorker } from '../compose/verdict.js';
import { InvalidInput, VerdictError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { Conflict } from '../store/store.js';
import type { ApiTokenRole, ApiTokenRow } from '../store/access-store.js';
import { sendError } from './error-reply.js';
import { errorBody } from './schemas.js';
import { z as zod } from 'zod';
import { registerGitHubWebhook, type GitHubWebhookOptions } from './github-webhook-route.js';
import { SnapshotLocalStore } from './rate-limit-store.js';
import { registerV1Routes } from './v1-routes.js';
import { roleAllows } from '../access/tokens.js';
import { isoTimesBySchema, isoTimesSchema } from '../compose/iso-times.js';
import type { McpHttpOptions } from '../mcp/mcp-http.js';

/**
 * `verdict serve`'s HTTP server (DESIGN §16.2), a thin user of the public API: every route calls
 * a `Verdict` method. Fastify 5, because it validates and serialises from schemas, which with
 * fastify-type-provider-zod are the same zod objects the OpenAPI document is generated from
 * (@fastify/swagger), and because its body limit, content-type parsing and error codes are
 * already right (413, 400 for bad JSON, 415); @fastify/rate-limit gives the per-token 429.
 *
 * - `/v1/...`: the write doors and the reads, scoped to the bearer token's workspace; the same
 *   routes under `/v1/workspaces/{workspace}/...` name it (another workspace is 403, whether or
 *   not it exists). `/v1/openapi.json` needs no token.
 * - `/hooks/github`: signed GitHub webhooks (see github-webhook-route.ts). Not rate-limited: its
 *   deliveries come from GitHub's addresses (or one proxy's), and a limit shared with anonymous
 *   traffic would refuse, and so lose, signed deliveries; an unsigned one costs one HMAC.
 * - `/healthz`, `/metrics`: the worker's when one runs in this process, else the server's own.
 * - `/ui/...`: the web dashboard (src/dashboard/), a session cookie over the same tokens.
 * - `/mcp`: the MCP server over Streamable HTTP (src/mcp/mcp-http.ts), bearer tokens as `/v1`.
 *
 * Logs: one line per request with method, route pattern, status, duration and the token id;
 * never a token, a body, item text or an answer. CORS: no Access-Control headers are sent, so
 * browsers on other origins cannot call the API (off by default; nothing turns it on yet).
 */

/** Request bodies above this are refused with 413 (DESIGN §16.2: 1 MiB). */
const BODY_LIMIT_BYTES = 1024 * 1024;

/** Longest path parameter, in URL-encoded bytes: a 500-character ref at 9 bytes a character, rounded up. */
const MAX_PARAM_LENGTH = 4_608;

/** Default per-token rate limit: requests per minute (a fast tracker sync stays well under). */
const DEFAULT_RATE_LIMIT_PER_MINUTE = 600;

/** What `createApiServer` takes. */
export interface ApiServerOptions {
  /** @defaultValue silent */
  logger?: Logger;
  /** Requests per minute per token (per client address without one). @defaultValue 600 */
  rateLimitPerMinute?: number;
  /** GitHub webhooks; the route answers 404 without a secret. */
  github?: GitHubWebhookOptions;
  /** A worker running in this process: `/healthz` and `/metrics` report it. */
  worker?: VerdictWorker;
  /** The web dashboard under `/ui` (src/dashboard/dashboard-routes.ts), logged into with the same tokens. @defaultValue true */
  dashboard?: boolean;
  /** The MCP server over Streamable HTTP at `/mcp` (src/mcp/mcp-http.ts), under the same tokens; an object sets its session limits. @defaultValue true */
  mcp?: boolean | McpHttpOptions;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated token of a /v1 request (set by the auth hook). */
    apiToken: ApiTokenRow | null;
    /** Why the auth hook refuses this request (answered before the body is read), or null. */
    refusal: { status: 401 | 403; error: string; message: string } | null;
  }
  interface FastifyContextConfig {
    /** The role a /v1 route needs; routes without one need no token. */
    role?: ApiTokenRole;
  }
}

/**
 * Builds the server (not listening: call `listen({ port, host })`, or `inject` in tests).
 * @throws InvalidInput for a rate limit that is not a positive integer.
 */
export async function createApiServer(v: Verdict, o: ApiServerOptions = {}): Promise<FastifyInstance> {
  const logger = o.logger ?? silentLogger;
  const perMinute = o.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
  if (!Number.isInteger(perMinute) || perMinute < 1)
    throw new InvalidInput(`rateLimitPerMinute must be a positive integer; got ${perMinute}`);

  const app = Fastify({
    bodyLimit: BODY_LIMIT_BYTES,
    logger: false,
    return503OnClosing: true,
    // Our own id per request, never the client's: it goes into the log line, and a client-chosen
    // one could forge or flood it. Answered in `x-request-id` (Stripe's request id, DESIGN §16.2).
    genReqId: () => randomUUID(),
    // At close, idle keep-alive sockets go at once; requests in flight finish (`verdict serve`
    // bounds the wait by --grace-ms).
    forceCloseConnections: 'idle',
    // A path parameter may hold a 500-character ref, URL-encoded (up to 3 bytes a character, 3
    // characters a byte): fastify's default of 100 made long refs writable but not readable.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Fastify's own answers for a URL it cannot route (bad percent-encoding) would echo the path.
    frameworkErrors: (err, _req, reply) => {
      void sendError(
        reply,
        err.statusCode ?? 400,
        'bad_request',
        err.code === 'FST_ERR_BAD_URL' ? 'the URL is not valid (bad percent-encoding)' : 'bad request',
      );
    },
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // A DELETE or restore sent with `content-type: application/json` and no body (many clients send
  // the header on every request) is no body, not a 400; any body is parsed by fastify's own JSON
  // parser (it refuses __proto__ and constructor.prototype keys).
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (body === '') {
      done(null, undefined);
      return;
    }
    json(req, body as string, done);
  });
  // JSON only: fastify's default text/plain parser would hand a string to a JSON route's validator
  // (a 400 about types) where the answer is 415, send application/json.
  app.removeContentTypeParser('text/plain');
  app.decorateRequest('apiToken', null);
  app.decorateRequest('refusal', null);

  const metrics = new Registry();
  const requests = new Counter({
    name: 'verdict_http_requests_total',
    help: 'HTTP API requests by route pattern, method and status code.',
    labelNames: ['route', 'method', 'status'],
    registers: [metrics],
  });

  await app.register(fastifySwagger, {
    openapi: {
      info: {
        title: 'Verdict HTTP API',
        version: '1',
        description: 'Write doors and decision reads (DESIGN §16.2). Bearer tokens scoped to a workspace and a role.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
  });

  // Hooks, in fastify's order: authenticate (global onRequest), then rate-limit per token id, or
  // per client address for requests without a valid token (the plugin's route-level onRequest),
  // then refuse (preParsing: before any body is read or validated, so an unauthenticated request
  // learns nothing from a 400 and costs no parse).
  app.addHook('onRequest', async (req) => {
    const role = req.routeOptions.config.role;
    if (!role) return;
    const token = bearer(req);
    const row = token ? await v.tokens.authenticate(token) : null;
    if (!row) {
      req.refusal = { status: 401, error: 'unauthorized', message: 'a valid bearer token is required' };
      return;
    }
    req.apiToken = row;
    const wanted = (req.params as { workspace?: string }).workspace;
    if (wanted !== undefined && wanted !== row.workspaceSlug)
      req.refusal = { status: 403, error: 'forbidden', message: 'this token is not for that workspace' };
    else if (!roleAllows(row.role, role))
      req.refusal = {
        status: 403,
        error: 'forbidden',
        message: `this route needs a token of role ${role} or above; this one is ${row.role}`,
      };
  });
  await app.register(fastifyRateLimit, {
    global: true,
    store: SnapshotLocalStore as never, // the plugin's store type is a constructor it calls with its params
    max: perMinute,
    timeWindow: 60_000,
    keyGenerator: (req) => (req.apiToken ? `token:${req.apiToken.id}` : `ip:${req.ip}`),
    errorResponseBuilder: (_req, ctx) => ({
      statusCode: 429,
      error: 'rate_limited',
      message: `rate limit: ${ctx.max} requests per minute; retry after ${Math.ceil(ctx.ttl / 1000)} s`,
    }),
  });
  app.addHook('preParsing', async (req, reply) => {
    const r = req.refusal;
    if (!r) return;
    if (r.status === 401) reply.header('www-authenticate', 'Bearer');
    return sendError(reply, r.status, r.error, r.message);
  });

  // The hooks that never wait are callback hooks: an async one costs every request a promise and
  // fastify's wrapping of it (bench part j under --cpu-prof).
  app.addHook('preSerialization', (req, reply, payload: unknown, done) => {
    const schema = (req.routeOptions.schema?.response as Record<string, zod.ZodType> | undefined)?.[
      String(reply.statusCode)
    ];
    done(null, schema && req.routeOptions.url?.startsWith('/v1/') ? isoTimesBySchema(schema, payload) : payload);
  });
  app.addHook('onSend', (req, reply, payload, done) => {
    reply.header('x-request-id', req.id);
    done(null, payload);
  });
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    requests.inc({ route, method: req.method, status: String(reply.statusCode) });
    // A flood of 429s would write a line per refusal; the counter above still counts them.
    (reply.statusCode === 429 ? logger.debug : logger.info).call(
      logger,
      {
        method: req.method,
        route,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
        token: req.apiToken?.id ?? null,
        requestId: req.id,
      },
      'http request',
    );
    done();
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (hasZodFastifySchemaValidationErrors(err)) {
      const members = err.validation.map((i) => String(i.instancePath).split('/').filter(Boolean).join('.'));
      const issues = err.validation.map((i, n) => ({
        path: [err.validationContext ?? 'body', ...(members[n] ? [members[n]] : [])].join('.'),
        message: i.message ?? 'invalid',
      }));
      const param = members.find(Boolean);
      return sendError(
        reply,
        400,
        'invalid_request',
        `invalid ${err.validationContext ?? 'request'}: ${issues.map((i) => i.path).join(', ')}`,
        { param, issues },
      );
    }
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return sendError(reply, 413, 'payload_too_large', `bodies are limited to ${BODY_LIMIT_BYTES} bytes`);
    if (err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (err instanceof SyntaxError && err.statusCode === 400)) {
      return sendError(
        reply,
        400,
        'invalid_json',
        'the body is not valid JSON, or has a __proto__ or constructor.prototype key (refused)',
      );
    }
    if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return sendError(reply, 400, 'invalid_json', 'the body is empty');
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
      return sendError(reply, 415, 'unsupported_media_type', 'send application/json');
    if (err.statusCode === 429) return reply.code(429).send({ error: 'rate_limited', message: err.message });
    if (err instanceof VerdictError) {
      const status =
        { not_found: 404, invalid_write: 400, invalid_input: 400, conflict: 409 }[err.code as string] ?? 500;
      if (err instanceof Conflict) return sendError(reply, 409, err.code, ...conflictWords(err.constraint));
      if (status < 500) return sendError(reply, status, err.code, err.message, { param: (err as VerdictError).param });
      logger.error({ route: req.routeOptions.url, err: err.code }, 'http request failed');
      return sendError(reply, 503, err.code, 'the store failed; try again');
    }
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500)
      return sendError(reply, err.statusCode, 'bad_request', err.code ?? 'bad request');
    logger.error({ route: req.routeOptions.url, err: err.code ?? err.name }, 'http request failed');
    return sendError(reply, 500, 'internal', 'internal error');
  });
  // A path that exists under other methods is 405 with `Allow` (RFC 9110 §15.5.6), not 404.
  const routes: Array<{ pattern: RegExp; method: string }> = [];
  app.addHook('onRoute', (r) => {
    // A stable operationId for every documented operation that names none: the method and the
    // path's words (`GET /v1/items/:ref` is `getItemsByRef`), so client generators get names.
    if (r.schema && !(r.schema as { hide?: boolean }).hide && !(r.schema as { operationId?: string }).operationId) {
      const words = r.url
        .split('/')
        .filter((w) => w && w !== 'v1')
        .map((w) => (w.startsWith(':') ? `by-${w.slice(1)}` : w));
      const id = [
        [r.method].flat()[0].toLowerCase(),
        ...words
          .flatMap((w) => w.split(/[^A-Za-z0-9]+/))
          .filter(Boolean)
          .map((w) => w[0].toUpperCase() + w.slice(1)),
      ].join('');
      (r.schema as { operationId?: string }).operationId = id;
    }
    // `/v1` answers give times as ISO 8601 (DESIGN §16.3): the documented schema here, the value
    // in the preSerialization hook below, both from the same `…At` members.
    const response = (r.schema as { response?: Record<string, zod.ZodType> } | undefined)?.response;
    if (r.url.startsWith('/v1/') && response) {
      for (const code of Object.keys(response)) response[code] = isoTimesSchema(response[code]);
      // The answers every route can give beyond its own: a body over the limit or not JSON (on the
      // methods that take one), and the store failing (the error handler below).
      if ([r.method].flat().some((m) => m === 'POST' || m === 'PATCH' || m === 'PUT' || m === 'DELETE'))
        Object.assign(response, { 413: errorBody, 415: errorBody });
      Object.assign(response, { 503: errorBody });
    }
    const pattern = new RegExp(
      `^${r.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z0-9_]+/g, '[^/]+')}/?$`,
    );
    for (const m of [r.method].flat()) if (m !== 'HEAD') routes.push({ pattern, method: m });
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0];
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))].sort();
    if (allowed.length > 0)
      return sendError(
        reply.header('allow', allowed.join(', ')),
        405,
        'method_not_allowed',
        `${req.method} is not allowed here; allowed: ${allowed.join(', ')}`,
      );
    return sendError(reply, 404, 'not_found', 'no such route');
  });

  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  const health = zod.object({ status: zod.string().describe('`ok`, or the worker\u2019s status') }).loose();
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['operations'],
        summary: 'Liveness and the worker\u2019s health',
        description:
          'No token. 200 while the worker in this process (if any) is healthy, 503 with its reasons otherwise; `worker: none` when no worker runs here.',
        security: [],
        response: { 200: health, 503: health },
      },
      config: { rateLimit: false },
    },
    async (_req, reply) => {
      const h = o.worker?.monitoring?.health();
      if (!h) return { status: 'ok', worker: o.worker ? 'starting' : 'none' };
      return reply
        .code(h.healthy ? 200 : 503)
        .send({ status: h.status, reasons: h.reasons, lastLoopAgeMs: h.lastLoopAgeMs });
    },
  );
  app.get('/metrics', { schema: { hide: true }, config: { rateLimit: false } }, async (_req, reply) => {
    const worker = o.worker?.monitoring?.registry;
    const merged = worker ? Registry.merge([metrics, worker]) : metrics;
    return reply.header('content-type', merged.contentType).send(await merged.metrics());
  });

  await app.register(async (scope) => registerV1Routes(scope, v, false, logger), { prefix: '/v1' });
  await app.register(async (scope) => registerV1Routes(scope, v, true, logger), {
    prefix: '/v1/workspaces/:workspace',
  });
  if (o.dashboard !== false) {
    const { registerDashboard } = await import('../dashboard/dashboard-routes.js');
    await app.register(async (scope) => registerDashboard(scope, v, logger), { prefix: '/ui' });
    // A person typing the server's address lands on the dashboard; the redirect itself reveals
    // nothing, and /ui asks for the token as before.
    app.get('/', { schema: { hide: true } }, async (_req, reply) => reply.redirect('/ui', 302));
  }
  if (o.mcp !== false) {
    const { registerMcpRoute } = await import('../mcp/mcp-http.js');
    const limits = typeof o.mcp === 'object' ? o.mcp : {};
    await app.register(async (scope) => registerMcpRoute(scope, v, logger, limits));
  }
  if (o.github) {
    const github = o.github;
    await app.register(async (scope) => registerGitHubWebhook(scope, v, github, logger));
  }
  return app;
}

/** The bearer token of a request, or null. */
function bearer(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1] : null;
}

/**
 * A uniqueness conflict in the API's words: the member that clashes and what it clashes with,
 * never the store's table and column names (`Conflict.constraint` keeps those for logs).
 */
function conflictWords(constraint: string): [string, { param?: string }] {
  if (/items\.ref/.test(constraint)) return ['an item of that ref already exists in this workspace', { param: 'ref' }];
  if (/collections\.slug/.test(constraint))
    return ['a collection of that slug already exists in this workspace', { param: 'slug' }];
  if (/workspaces\.slug/.test(constraint)) return ['a workspace of that slug already exists', { param: 'slug' }];
  return ['it already exists', {}];
}
