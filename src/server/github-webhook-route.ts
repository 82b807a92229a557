import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Verdict } from '../compose/verdict.js';
import { verifyGitHubSignature } from '../integrations/github/webhooks.js';
import type { Logger } from '../log.js';
import { sendError } from './error-reply.js';

/** What the GitHub webhook route needs. */
export interface GitHubWebhookOptions {
  /** The webhook's secret (`VERDICT_GITHUB_WEBHOOK_SECRET`): every delivery must be signed with it. */
  secret: string;
  /**
   * The workspace for events of a repository never imported (`import github` records each repo's
   * workspace; a repo it knows goes there). @defaultValue the repository's full name, `owner/name`
   */
  workspace?: string;
}

/** GitHub's delivery id header: a UUID, at most this long here (anything longer is refused). */
const MAX_DELIVERY_ID_LENGTH = 100;

/**
 * `POST /hooks/github` (DESIGN §16.2). The raw body is kept as bytes so the signature is checked
 * over exactly what GitHub signed: `X-Hub-Signature-256` = `sha256=` + HMAC-SHA256(secret, body),
 * compared in constant time (@octokit/webhooks-methods `verify`, `crypto.timingSafeEqual`). Only
 * then is the body parsed and applied, in one transaction with its `X-GitHub-Delivery` id, so a
 * redelivery is a 200 no-op. `ping` is answered 200. Statuses: 401 bad or missing signature, 400
 * missing headers, bad JSON or a payload not of the documented shape, 202 an event or action Verdict does not map (nothing written).
 */
export function registerGitHubWebhook(
  scope: FastifyInstance,
  v: Verdict,
  o: GitHubWebhookOptions,
  logger: Logger,
): void {
  scope.removeContentTypeParser('application/json'); // this scope's own: the raw bytes, for the signature
  scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  const answer = z.object({ status: z.string() }).loose();
  const refusal = z.object({ error: z.string(), message: z.string() }).loose();
  const schema = {
    tags: ['webhooks'],
    summary: 'GitHub webhook deliveries (issues, issue comments)',
    description:
      'Signed with the webhook secret: `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body>`, with `X-GitHub-Event` and `X-GitHub-Delivery`. No bearer token. Applied in one transaction with the delivery id, so a redelivery is a 200 no-op; `ping` answers `{status: pong}`. 202: an event or action Verdict does not map (nothing written). 404 when the server has no webhook secret.',
    security: [],
    response: {
      200: answer,
      202: answer,
      400: z
        .union([refusal, answer])
        .describe('Missing headers, bad JSON, or a payload not of the documented shape (`{status: invalid, issues}`)'),
      401: refusal,
      413: refusal,
      415: refusal,
    },
  };
  scope.post('/hooks/github', { schema, config: { rateLimit: false } }, async (req, reply) => {
    const raw = req.body as Buffer;
    const signature = req.headers['x-hub-signature-256'];
    if (typeof signature !== 'string' || !(await verifyGitHubSignature(o.secret, raw, signature))) {
      logger.warn({ delivery: headerId(req.headers['x-github-delivery']) }, 'github webhook: bad signature');
      return sendError(reply, 401, 'bad_signature', 'X-Hub-Signature-256 is missing or does not match the body');
    }
    const event = req.headers['x-github-event'];
    const delivery = headerId(req.headers['x-github-delivery']);
    if (typeof event !== 'string' || !delivery)
      return sendError(reply, 400, 'invalid_request', 'X-GitHub-Event and X-GitHub-Delivery are required');
    if (event === 'ping') return { status: 'pong' };
    let payload: unknown;
    try {
      payload = JSON.parse(raw.toString('utf8'));
    } catch {
      return sendError(reply, 400, 'invalid_json', 'the body is not valid JSON');
    }
    const r = await v.github.applyWebhook({ event, deliveryId: delivery, payload, workspace: o.workspace });
    logger.info({ event, delivery, status: r.status, owed: r.owed }, 'github webhook');
    return reply.code(r.status === 'ignored' ? 202 : r.status === 'invalid' ? 400 : 200).send(r);
  });
}

/** A delivery id header, or null when missing or implausible. */
function headerId(h: string | string[] | undefined): string | null {
  return typeof h === 'string' && h.length > 0 && h.length <= MAX_DELIVERY_ID_LENGTH ? h : null;
}
