import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SESSION_MAX_AGE_MS } from '../access/sessions.js';
import { roleAllows, tokenAuthor } from '../access/tokens.js';
import type { Verdict } from '../compose/verdict.js';
import { VerdictError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ApiTokenRole, ApiTokenRow } from '../store/access-store.js';
import type { LinkRow } from '../store/tracker-reads.js';
import { FLAGS_PAGE_SIZE, flagsBody, itemHref, type FlagsQuery } from './flags-page.js';
import { html, type Html } from './html.js';
import { itemBody, type ItemPageLink } from './item-page.js';
import { ITEMS_PAGE_SIZE, itemsBody, type ItemsQuery } from './items-page.js';
import { ITEM_SEARCH_MAX_TEXT } from '../compose/item-search.js';
import { page, type NavId, type Viewer } from './layout.js';
import { qualityBody } from './quality-page.js';
import { dropConfirmBody, jobDetailBody } from './job-page.js';
import {
  jobHref,
  parseJobKey,
  QUEUE_JOBS_SHOWN,
  queueBody,
  throughputFigure,
  warmThroughputChart,
} from './queue-page.js';
import { spendBody, spendRefused, warmSpendCharts } from './spend-page.js';
import { LIVE_SCRIPT } from './live-script.js';
import { DASHBOARD_CSS } from './styles.js';
import { registerProposalsPage } from './proposals-page.js';

/**
 * The dashboard (DESIGN §16.4), under `/ui` of `verdict serve`: server-rendered HTML, a thin user of
 * the public API like the `/v1` routes. Server-rendered because each page answers one question
 * from one or two reads, so HTML from the server is the least code and the fastest first render:
 * no client bundle, no build step, every control a link or a form, and charts as SVG drawn by
 * Vega on the server (charts.ts). Every page reads without JavaScript; pages that change while
 * open load one small script of ours that refreshes their regions in place (live-script.ts,
 * DESIGN §16.4).
 *
 * Sessions (DESIGN §16.6): the login form takes a workspace token (`verdict tokens create`, the
 * API's) and opens a server-side session (`v.sessions`); the cookie holds only the session's
 * random id (HttpOnly, SameSite=Strict, Path=/ui, Secure over https, 12 h), never the token, so it
 * is no API credential. Every request finds the session again, so logout, a revoked token, a
 * deleted workspace, the 12 h life or an hour idle ends it at once. Every form carries a CSRF token (@fastify/csrf-protection, the secret in its
 * own HttpOnly SameSite=Strict cookie); a POST without a valid one is refused with 403 before
 * anything is read. Roles as in the API: `read` sees, `write` records verdicts, `admin` retries
 * and drops jobs and sees spend (the server's, across workspaces). Every read names the token's
 * workspace, so a page never shows another workspace's items.
 *
 * No item text goes in a URL (items are addressed by ref) or a log (the server's request log has
 * the route pattern, status and token id). Pages send a strict Content-Security-Policy: only
 * the dashboard's own script file runs (no inline script), nothing loads from another origin.
 */

/** Name of the session cookie. */
const SESSION_COOKIE = 'verdict_session';
/** Name of the CSRF secret cookie. */
const CSRF_COOKIE = 'verdict_csrf';
/** How long the session cookie lasts, seconds: the session's own life (SESSION_MAX_AGE_MS, 12 h). */
const SESSION_MAX_AGE_S = SESSION_MAX_AGE_MS / 1000;
/** Form bodies above this are refused (413): the largest form is a verdict with a 2,000-code-point note. */
const FORM_BODY_LIMIT_BYTES = 64 * 1024;

const CSP =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

declare module 'fastify' {
  interface FastifyRequest {
    /** The dashboard session's viewer (set by the /ui auth hook), or null. */
    viewer: Viewer | null;
  }
}

type Form = Record<string, string | string[] | undefined>;
const field = (body: unknown, name: string): string | undefined => {
  const v = (body as Form | undefined)?.[name];
  return typeof v === 'string' ? v : undefined;
};

/**
 * Draws the dashboard's charts once (see the `onListen` hook) and logs the process's CPU time over
 * it (requests served meanwhile count too), or a warning naming the error's class if it fails.
 */
async function warmCharts(logger: Logger): Promise<void> {
  const c0 = process.cpuUsage();
  try {
    await warmSpendCharts();
    await warmThroughputChart();
    const c = process.cpuUsage(c0);
    logger.info({ cpuMs: Math.round((c.user + c.system) / 1000) }, 'dashboard charts parsed');
  } catch (err) {
    // The pages still draw their charts, parsing them on first use.
    logger.warn({ err: err instanceof Error ? err.name : typeof err }, 'dashboard charts could not be drawn ahead');
  }
}

/** Registers the dashboard routes in their own scope (the form parser and cookies stay out of /v1). */
export async function registerDashboard(scope: FastifyInstance, v: Verdict, logger: Logger): Promise<void> {
  await scope.register(fastifyCookie);
  await scope.register(fastifyFormbody, { bodyLimit: FORM_BODY_LIMIT_BYTES });
  await scope.register(fastifyCsrf, {
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: '/ui', httpOnly: true, sameSite: 'strict', secure: 'auto' },
    getToken: (req) => field(req.body, '_csrf'),
  });
  scope.decorateRequest('viewer', null);
  // A chart's first drawing imports Vega (0.4 s CPU) and parses its spec (about 60 ms CPU a chart),
  // measured 2026-12-03: on a loaded machine that made the first spend page after a start take 3 s
  // to paint. A listening server draws every chart of its pages once, in the background (the
  // listen does not wait), so a person's first page only sets the data of views already parsed.
  // `inject` (most tests) never listens and skips it.
  scope.addHook('onListen', async () => {
    void warmCharts(logger);
  });

  // Behind a TLS-terminating proxy the socket is http: the proxy's X-Forwarded-Proto marks cookies
  // Secure too. Trusting it is safe either way: a Secure cookie is only ever more restricted.
  const secure = (req: FastifyRequest) =>
    req.protocol === 'https' ||
    String(req.headers['x-forwarded-proto'] ?? '')
      .split(',')[0]
      .trim()
      .toLowerCase() === 'https';
  // The dashboard is not part of the JSON API's OpenAPI document.
  scope.addHook('onRoute', (route) => {
    route.schema = { ...(route.schema ?? {}), hide: true };
  });

  scope.addHook('onRequest', async (req) => {
    const sessionId = req.cookies[SESSION_COOKIE];
    if (!sessionId) return;
    const session = await v.sessions.authenticate(sessionId);
    if (!session) return;
    req.apiToken = session.token; // the request log and the per-token rate limit name it
    req.viewer = { token: session.token, csrf: '' };
  });
  scope.addHook('onSend', async (_req, reply, payload) => {
    reply.header('content-security-policy', CSP);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'no-referrer');
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  const send = (
    reply: FastifyReply,
    status: number,
    title: string,
    nav: NavId,
    viewer: Viewer | null,
    body: ReturnType<typeof html>,
    live = false,
  ) => reply.code(status).type('text/html; charset=utf-8').send(page({ title, nav, viewer, body, live }));

  /** The viewer with a fresh CSRF token for the page's forms; null (and a redirect to the login page) without a session. */
  const viewerOf = (req: FastifyRequest, reply: FastifyReply): Viewer | null => {
    if (!req.viewer) return null;
    return {
      token: req.viewer.token,
      csrf: reply.generateCsrf({ path: '/ui', httpOnly: true, sameSite: 'strict', secure: secure(req) }),
    };
  };
  const needLogin = (reply: FastifyReply) => reply.code(303).header('location', '/ui/login').send();
  const refuse = (reply: FastifyReply, viewer: Viewer, role: ApiTokenRole) =>
    send(
      reply,
      403,
      'Not allowed',
      'login',
      viewer,
      html`<h1>Not allowed</h1><p>This needs a token of role ${role} or above; yours is ${viewer.token.role}.</p>`,
    );
  /** A POST's session and role, or the refusal already sent (the CSRF check ran before). */
  const poster = (req: FastifyRequest, reply: FastifyReply, role: ApiTokenRole): ApiTokenRow | null => {
    if (!req.viewer) {
      void send(
        reply,
        401,
        'Log in',
        'login',
        null,
        html`<h1>Log in first</h1><p><a href="/ui/login">Log in</a> with a workspace token.</p>`,
      );
      return null;
    }
    if (!roleAllows(req.viewer.token.role, role)) {
      void refuse(reply, { token: req.viewer.token, csrf: '' }, role);
      return null;
    }
    return req.viewer.token;
  };
  const csrf = { preHandler: scope.csrfProtection };

  scope.setErrorHandler((err: FastifyError, req, reply) => {
    const viewer = req.viewer ? { token: req.viewer.token, csrf: '' } : null;
    if (err.code === 'FST_CSRF_INVALID_TOKEN' || err.code === 'FST_CSRF_MISSING_SECRET') {
      return send(
        reply,
        403,
        'Form refused',
        'login',
        viewer,
        html`<h1>Form refused</h1><p>The form did not carry a valid CSRF token (it expired, or did not come from this dashboard). Go back, reload the page and try again.</p>`,
      );
    }
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return send(
        reply,
        413,
        'Too large',
        'login',
        viewer,
        html`<h1>Too large</h1><p>Forms are limited to ${FORM_BODY_LIMIT_BYTES} bytes.</p>`,
      );
    if (err instanceof VerdictError && ['invalid_input', 'invalid_write', 'not_found'].includes(err.code)) {
      return send(
        reply,
        err.code === 'not_found' ? 404 : 400,
        'Refused',
        'login',
        viewer,
        html`<h1>Refused</h1><p>${err.message}</p>`,
      );
    }
    if (err.statusCode === 429)
      return send(
        reply,
        429,
        'Too many requests',
        'login',
        viewer,
        html`<h1>Too many requests</h1><p>This token (or address) is over the server's rate limit. Wait a minute and reload.</p>`,
      );
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500)
      return send(reply, err.statusCode, 'Bad request', 'login', viewer, html`<h1>Bad request</h1>`);
    logger.error({ route: req.routeOptions.url, err: err.code ?? err.name }, 'dashboard request failed');
    return send(
      reply,
      500,
      'Error',
      'login',
      viewer,
      html`<h1>Something failed</h1><p>The error is in the server's log (by code). Try again.</p>`,
    );
  });
  scope.setNotFoundHandler((req, reply) =>
    send(
      reply,
      404,
      'Not found',
      'login',
      req.viewer ? { token: req.viewer.token, csrf: '' } : null,
      html`<h1>Not found</h1><p><a href="/ui/flags">Flags</a></p>`,
    ),
  );

  // ------------------------------------------------------------------ login, logout, assets
  scope.get('/assets/live.js', async (_req, reply) =>
    reply.header('cache-control', 'public, max-age=3600').type('text/javascript; charset=utf-8').send(LIVE_SCRIPT),
  );
  scope.get('/assets/dashboard.css', async (_req, reply) =>
    reply.header('cache-control', 'public, max-age=3600').type('text/css; charset=utf-8').send(DASHBOARD_CSS),
  );
  scope.get('/', async (_req, reply) => reply.code(303).header('location', '/ui/flags').send());

  const loginPage = (req: FastifyRequest, reply: FastifyReply, status: number, refused: boolean) => {
    const csrfToken = reply.generateCsrf({ path: '/ui', httpOnly: true, sameSite: 'strict', secure: secure(req) });
    return send(
      reply,
      status,
      'Log in',
      'login',
      null,
      html`<div class="login"><h1>Log in</h1>${refused ? html`<p class="notice error" role="alert">That token is not valid: it is unknown, revoked, or its workspace is deleted.</p>` : ''}
<form method="post" action="/ui/login"><input type="hidden" name="_csrf" value="${csrfToken}">
<label>Workspace token<input type="password" name="token" autocomplete="off" required autofocus spellcheck="false"></label>
<p class="muted">A token from <code>verdict tokens create --workspace SLUG --role read|write|admin</code>. You stay logged in for 12 hours, or until an hour without use; the token itself is not kept in the browser.</p>
<button type="submit">Log in</button></form></div>`,
    );
  };
  scope.get('/login', async (req, reply) => loginPage(req, reply, 200, false));
  scope.post('/login', csrf, async (req, reply) => {
    const token = field(req.body, 'token')?.trim() ?? '';
    const opened = token ? await v.sessions.open(token) : null;
    if (!opened) return loginPage(req, reply, 401, true);
    reply.setCookie(SESSION_COOKIE, opened.sessionId, {
      path: '/ui',
      httpOnly: true,
      sameSite: 'strict',
      secure: secure(req),
      maxAge: SESSION_MAX_AGE_S,
    });
    return reply.code(303).header('location', '/ui/flags').send();
  });
  scope.post('/logout', csrf, async (req, reply) => {
    const sessionId = req.cookies[SESSION_COOKIE];
    if (sessionId) await v.sessions.end(sessionId);
    reply.clearCookie(SESSION_COOKIE, { path: '/ui', httpOnly: true, sameSite: 'strict', secure: secure(req) });
    return reply.code(303).header('location', '/ui/login').send();
  });

  // ------------------------------------------------------------------ pages
  scope.get('/flags', async (req, reply) => {
    const viewer = viewerOf(req, reply);
    if (!viewer) return needLogin(reply);
    const qs = req.query as Form;
    const sets = v.registry.all().map((s) => s.name);
    const str = (k: string) => (typeof qs[k] === 'string' ? (qs[k] as string) : '');
    const set = sets.includes(str('set')) ? str('set') : (sets[0] ?? '');
    const currency = (['current', 'stale'] as const).find((c) => c === str('currency')) ?? 'all';
    const pageNo = Math.max(1, Math.min(1_000_000, Number.parseInt(str('page') || '1', 10) || 1));
    const q: FlagsQuery = { set, collection: str('collection'), key: str('key'), currency, page: pageNo };
    const read = (page: number) =>
      set
        ? v.reader.surfaced(set, {
            workspace: viewer.token.workspaceSlug,
            collection: q.collection || undefined,
            key: q.key || undefined,
            currency,
            offset: (page - 1) * FLAGS_PAGE_SIZE,
            limit: FLAGS_PAGE_SIZE,
          })
        : Promise.resolve(null);
    let data = await read(pageNo);
    // A page past the end shows the last one.
    const last = Math.max(1, Math.ceil((data?.total ?? 0) / FLAGS_PAGE_SIZE));
    if (data && pageNo > last) {
      q.page = last;
      data = await read(last);
    }
    return send(
      reply,
      200,
      'Flags',
      'flags',
      viewer,
      flagsBody({
        sets,
        q,
        data: data ?? { rows: [], total: 0, failing: false, keys: [], collections: [] },
        notice: qs.notice,
      }),
      true,
    );
  });

  scope.get('/items', async (req, reply) => {
    const viewer = viewerOf(req, reply);
    if (!viewer) return needLogin(reply);
    const qs = req.query as Form;
    const str = (k: string) => (typeof qs[k] === 'string' ? (qs[k] as string) : '');
    const workspace = viewer.token.workspaceSlug;
    const collections = (await v.store.listCollections(viewer.token.workspaceId))
      .filter((c) => c.deletedAt === null)
      .map((c) => c.slug);
    // Out-of-range input falls back to the default view rather than a refusal: these are a link's filters, not a write.
    const q: ItemsQuery = {
      text: [...str('q')].slice(0, ITEM_SEARCH_MAX_TEXT).join(''),
      collection: collections.includes(str('collection')) ? str('collection') : '',
      deleted: (['deleted', 'all'] as const).find((d) => d === str('deleted')) ?? 'live',
      page: Math.max(1, Math.min(1_000_000, Number.parseInt(str('page') || '1', 10) || 1)),
    };
    const read = async (page: number) =>
      (await v.reader.searchItems({
        workspace,
        text: q.text,
        collection: q.collection || undefined,
        deleted: q.deleted,
        offset: (page - 1) * ITEMS_PAGE_SIZE,
        limit: ITEMS_PAGE_SIZE,
      })) ?? { rows: [], total: 0 };
    let data = await read(q.page);
    const last = Math.max(1, Math.ceil(data.total / ITEMS_PAGE_SIZE));
    if (q.page > last) {
      q.page = last;
      data = await read(last);
    }
    return send(reply, 200, 'Items', 'items', viewer, itemsBody({ q, collections, data }));
  });

  /** The item page; `shown` is the `?notice=` code, or a refusal's own words (the form's POST answers with the page itself). */
  const itemPage = async (reply: FastifyReply, viewer: Viewer, ref: string, status: number, shown: unknown) => {
    const workspace = viewer.token.workspaceSlug;
    const read = await v.reader.item(ref, { workspace });
    if (!read)
      return send(
        reply,
        404,
        'Not found',
        'item',
        viewer,
        html`<h1>No such item</h1><p>No item of that ref in workspace ${workspace}. <a href="/ui/items">Items</a></p>`,
      );
    const history = (await v.reader.history(ref, { workspace }))!;
    const comments = await v.store.listComments(read.item.id);
    const itemLinks = await v.store.listLinks(read.item.id);
    const otherEnd = (l: LinkRow) => (l.sourceId === read.item.id ? l.targetId : l.sourceId);
    // Every link's other end in one read; only this workspace's items: links stay inside a
    // workspace (DESIGN §2), and the filter keeps it so if a row ever says otherwise.
    const ends =
      itemLinks.length === 0
        ? []
        : await v.store.listItems({
            workspaceId: viewer.token.workspaceId,
            ids: [...new Set(itemLinks.map(otherEnd))],
            includeDeleted: true,
          });
    const byId = new Map(ends.map((i) => [i.id, i]));
    const links: ItemPageLink[] = itemLinks.map((l) => {
      const other = byId.get(otherEnd(l));
      return {
        linkType: l.linkType,
        direction: l.sourceId === read.item.id ? 'out' : 'in',
        ref: other?.ref ?? null,
        title: other?.title ?? null,
      };
    });
    const body = await itemBody(
      viewer,
      {
        item: read.item,
        collection: read.collection,
        comments,
        links,
        decisions: read.decisions,
        sets: read.sets,
        history,
        verdicts: read.verdicts,
        now: Date.now(),
      },
      shown,
    );
    // Live while a job of the item is owed or batched: its answers are about to change.
    return send(
      reply,
      status,
      read.item.ref,
      'item',
      viewer,
      body,
      read.sets.some((x) => x.job !== null && x.job.state !== 'parked'),
    );
  };

  scope.get('/items/:ref', async (req, reply) => {
    const viewer = viewerOf(req, reply);
    if (!viewer) return needLogin(reply);
    return itemPage(reply, viewer, (req.params as { ref: string }).ref, 200, (req.query as Form).notice);
  });

  scope.post('/items/:ref/verdicts', csrf, async (req, reply) => {
    const t = poster(req, reply, 'write');
    if (!t) return reply;
    const { ref } = req.params as { ref: string };
    const kind = field(req.body, 'verdict');
    if (kind !== 'agree' && kind !== 'disagree' && kind !== 'value' && kind !== 'withdrawn') {
      return itemPage(
        reply,
        viewerOf(req, reply)!,
        ref,
        400,
        html`<p class="notice error" role="alert">That verdict was refused: verdict must be agree, disagree, value or withdrawn.</p>`,
      );
    }
    const raw = field(req.body, 'value');
    const value = kind !== 'value' ? undefined : raw === 'true' ? true : raw === 'false' ? false : raw;
    const author = tokenAuthor(t);
    try {
      await v.store.recordVerdict({
        workspace: t.workspaceSlug,
        ref,
        key: field(req.body, 'key') ?? '',
        set: field(req.body, 'set') || undefined,
        verdict: kind,
        value,
        author,
        note: field(req.body, 'note') || undefined,
      });
    } catch (err) {
      // The library's own reason, as the API and MCP give it (it names the field; shown escaped, never logged).
      if (err instanceof VerdictError && (err.code === 'invalid_input' || err.code === 'not_found')) {
        return itemPage(
          reply,
          viewerOf(req, reply)!,
          ref,
          err.code === 'not_found' ? 404 : 400,
          html`<p class="notice error" role="alert">That verdict was refused: ${err.message}</p>`,
        );
      }
      throw err;
    }
    return reply
      .code(303)
      .header('location', `${itemHref(ref)}?notice=verdict-recorded`)
      .send();
  });

  /** The jobs a job form names: its `only` button's job, else its checked `job` boxes, else its `ref` and `set` fields (the item page's Retry). */
  const formJobs = (body: unknown): Array<{ ref: string; set: string }> | null => {
    const only = field(body, 'only');
    if (only !== undefined) {
      const one = parseJobKey(only);
      return one ? [one] : null;
    }
    const raw = (body as Form | undefined)?.job;
    const keys = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
    if (keys.length) {
      const parsed = keys.map(parseJobKey);
      return parsed.every((j) => j !== null) ? (parsed as Array<{ ref: string; set: string }>) : null;
    }
    const ref = field(body, 'ref');
    const set = field(body, 'set');
    return ref && set ? [{ ref, set }] : [];
  };
  /** The refusal of a form that names no job or a malformed one, already sent; null when the jobs are fine. */
  const namedJobs = (reply: FastifyReply, t: ApiTokenRow, jobs: Array<{ ref: string; set: string }> | null) => {
    if (jobs === null)
      return send(
        reply,
        400,
        'Refused',
        'queue',
        { token: t, csrf: '' },
        html`<h1>Refused</h1><p>The form named a job that is not one (its <code>job</code> value is not an item ref and a set). Go back and reload the queue.</p>`,
      );
    if (!jobs.length)
      return send(
        reply,
        400,
        'Refused',
        'queue',
        { token: t, csrf: '' },
        html`<h1>Refused</h1><p>No job was selected: tick the jobs first, or use a row's own button.</p>`,
      );
    return null;
  };
  const backTo = (body: unknown, jobs: Array<{ ref: string; set: string }>) => {
    const back = field(body, 'back');
    if (back === 'item' && jobs.length === 1) return itemHref(jobs[0].ref);
    if (back === 'job' && jobs.length === 1) return jobHref(jobs[0].ref, jobs[0].set);
    return '/ui/queue';
  };

  /**
   * Why `action` changed none of these jobs, job by job, read from each job as it stands now: the
   * refusal names the actual reason (in flight, batched, not parked, due already, gone), not the
   * list of what it might be.
   */
  const unchangedReasons = async (
    t: ApiTokenRow,
    action: 'retry' | 'due' | 'drop',
    jobs: Array<{ ref: string; set: string }>,
  ): Promise<Html> => {
    const now = Date.now();
    const lines: Html[] = [];
    for (const j of jobs) {
      const [job] = await v.jobs.list({ workspace: t.workspaceSlug, ref: j.ref, set: j.set, limit: 1 });
      const why = !job
        ? 'no job of this set is owed for the item: it was answered or dropped already'
        : job.inFlight
          ? 'it is in flight: a worker holds it now'
          : job.state === 'batched'
            ? 'it is in a provider batch: it ends with the batch'
            : action === 'retry' && job.state !== 'parked'
              ? 'it is not parked (retry re-owes parked jobs); it is owed already'
              : action === 'due' && job.state === 'parked'
                ? 'it is parked: retry it instead'
                : action === 'due' && job.notBefore <= now
                  ? 'it is due already'
                  : 'it changed while the form was open; reload and look again';
      lines.push(html`<li><a href="${jobHref(j.ref, j.set)}"><bdi>${j.ref}</bdi> ${j.set}</a>: ${why}.</li>`);
    }
    return html`<ul>${lines}</ul>`;
  };
  const noneChanged = async (
    reply: FastifyReply,
    req: FastifyRequest,
    t: ApiTokenRow,
    action: 'retry' | 'due' | 'drop',
    jobs: Array<{ ref: string; set: string }>,
  ) => {
    const verb = action === 'retry' ? 'retried' : action === 'due' ? 'made due now' : 'dropped';
    return send(
      reply,
      409,
      'No job changed',
      'queue',
      viewerOf(req, reply) ?? { token: t, csrf: '' },
      html`<h1>No job changed</h1><p class="notice error" role="alert">No job was ${verb}:</p>${await unchangedReasons(t, action, jobs)}<p><a href="/ui/queue">Back to the queue</a></p>`,
    );
  };

  // Retry re-owes parked jobs; make-due-now sets waiting owed jobs due now (the library's retry with state owed).
  for (const [path, state, done] of [
    ['retry', 'parked', 'jobs-retried'],
    ['due', 'owed', 'jobs-due'],
  ] as const) {
    scope.post(`/jobs/${path}`, csrf, async (req, reply) => {
      const t = poster(req, reply, 'admin');
      if (!t) return reply;
      const jobs = formJobs(req.body);
      const refused = namedJobs(reply, t, jobs);
      if (refused) return refused;
      let changed = 0;
      for (const j of jobs!)
        changed += await v.jobs.retry({ workspace: t.workspaceSlug, ref: j.ref, set: j.set, state });
      if (changed === 0) return noneChanged(reply, req, t, path, jobs!);
      return reply
        .code(303)
        .header('location', `${backTo(req.body, jobs!)}?notice=${done}`)
        .send();
    });
  }

  // Dropping asks first: the first POST shows what would go, the confirming POST (confirm=yes) drops.
  scope.post('/jobs/drop', csrf, async (req, reply) => {
    const t = poster(req, reply, 'admin');
    if (!t) return reply;
    const jobs = formJobs(req.body);
    const refused = namedJobs(reply, t, jobs);
    if (refused) return refused;
    if (field(req.body, 'confirm') !== 'yes') {
      const viewer = viewerOf(req, reply)!;
      return send(reply, 200, 'Drop jobs?', 'queue', viewer, dropConfirmBody(viewer, jobs!, field(req.body, 'back')));
    }
    let changed = 0;
    for (const j of jobs!) changed += await v.jobs.drop({ workspace: t.workspaceSlug, ref: j.ref, set: j.set });
    // A dropped job has no detail page left to go back to.
    if (changed === 0) return noneChanged(reply, req, t, 'drop', jobs!);
    const back = field(req.body, 'back') === 'item' && jobs!.length === 1 ? itemHref(jobs![0].ref) : '/ui/queue';
    return reply.code(303).header('location', `${back}?notice=jobs-dropped`).send();
  });

  scope.get('/items/:ref/jobs/:set', async (req, reply) => {
    const viewer = viewerOf(req, reply);
    if (!viewer) return needLogin(reply);
    const { ref, set } = req.params as { ref: string; set: string };
    const [job] = await v.jobs.list({ workspace: viewer.token.workspaceSlug, ref, set, limit: 1 });
    if (!job || job.ref === null)
      return send(
        reply,
        404,
        'No such job',
        'queue',
        viewer,
        html`<h1>No such job</h1><p>No job of set ${set} is owed for <bdi>${ref}</bdi> in workspace ${viewer.token.workspaceSlug}: it may have finished or been dropped. <a href="/ui/queue">Queue</a></p>`,
      );
    return send(
      reply,
      200,
      `${ref} ${set} job`,
      'queue',
      viewer,
      jobDetailBody(viewer, { ...job, ref: job.ref }, Date.now(), (req.query as Form).notice),
    );
  });

  /** The throughput chart for admins: its counts are the whole server's, across workspaces, as spend is. */
  const throughputOf = async (viewer: Viewer): Promise<Html> =>
    roleAllows(viewer.token.role, 'admin') ? throughputFigure(await v.reader.throughput()) : html``;
  scope.get('/queue', async (req, reply) => {
    const viewer = viewerOf(req, reply);
    if (!viewer) return needLogin(reply);
    const qs = req.query as Form;
    const workspace = viewer.token.workspaceSlug;
    const sets = v.registry.all().map((s) => s.name);
    const state = (['owed', 'parked', 'batched'] as const).find((x) => x === qs.state) ?? 'all';
    const set = typeof qs.set === 'string' && sets.includes(qs.set) ? qs.set : '';
    const q = (await v.reader.queue({ workspace }))!;
    const jobs = await v.jobs.list({
      workspace,
      state: state === 'all' ? undefined : state,
      set: set || undefined,
      limit: QUEUE_JOBS_SHOWN,
    });
    return send(
      reply,
      200,
      'Queue',
      'queue',
      viewer,
      queueBody(viewer, q, { q: { state, set }, sets, jobs }, await throughputOf(viewer), qs.notice),
      true,
    );
  });

  scope.get('/spend', async (req, reply) => {
    const viewer = viewerOf(req, reply);
    if (!viewer) return needLogin(reply);
    if (!roleAllows(viewer.token.role, 'admin')) return send(reply, 200, 'Spend', 'spend', viewer, spendRefused());
    const day = await v.reader.spend({ windowMs: 24 * 3_600_000, bucket: 'hour' });
    const month = await v.reader.spend({ windowMs: 30 * 86_400_000, bucket: 'day' });
    return send(reply, 200, 'Spend', 'spend', viewer, await spendBody({ day, month, cap: day.dailyCap }));
  });

  registerProposalsPage(scope, v, { send, viewerOf, needLogin, poster, csrf }); // DESIGN §17

  scope.get('/quality', async (req, reply) => {
    const viewer = viewerOf(req, reply);
    if (!viewer) return needLogin(reply);
    const q = (await v.reader.quality({ workspace: viewer.token.workspaceSlug }))!;
    return send(reply, 200, 'Quality', 'quality', viewer, await qualityBody(q.sets));
  });
}
