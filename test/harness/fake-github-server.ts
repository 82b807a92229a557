import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake GitHub REST server of our own: a real `node:http` server on 127.0.0.1:0 that speaks the
 * endpoints the importer and the actions use, the way api.github.com does (API version 2022-11-28):
 *
 * - `GET /repos/:owner/:repo/issues` with `state` (open, closed, all; default open), `since`
 *   (updated at or after; inclusive), `sort` (created, updated; default created), `direction`
 *   (asc, desc; default desc), `per_page` (default 30, at most 100) and `page`;
 * - `GET /repos/:owner/:repo/issues/comments` with `since`, `sort` (created, updated; default
 *   created), `direction` (default asc), `per_page`, `page`;
 * - the actions' endpoints: `GET /user` (the token's login), `GET /repos/:o/:r/issues/:n` (404 for
 *   an issue not served, 410 for one in `deleted`), `POST …/issues/:n/labels` (`{labels}`: adds,
 *   answers the issue's labels), `DELETE …/issues/:n/labels/:name` (404 when the issue lacks it),
 *   `POST …/issues/:n/comments` (`{body}`). Every label change also appends the `issues.labeled` /
 *   `unlabeled` webhook payload GitHub would send (`hooks`, sender = the token's login), so a test can
 *   deliver Verdict's own changes back to it.
 *
 * Pagination by `Link` headers (`rel="next"`, `rel="last"`, and `prev`/`first` past page 1),
 * a weak ETag over the body and 304 on a matching `If-None-Match`, `x-ratelimit-*` headers,
 * pull requests returned by the issues list like any issue (they carry `pull_request`), and
 * scripted faults: a secondary rate limit (403 with `retry-after`, or without it) and a primary
 * one (403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset`), each answering the next
 * request. Every request is logged for assertions. Issues and comments are plain objects in the
 * REST shapes; tests may edit `issues` and `comments` between runs.
 */

/** One logged request. */
export interface FakeGitHubRequest {
  method: string;
  /** Path without the query. */
  path: string;
  query: Record<string, string>;
  ifNoneMatch: string | null;
  authorization: string | null;
  apiVersion: string | null;
  /** The status answered. */
  status: number;
  /** Wall-clock ms when it arrived. */
  at: number;
}

/** A scripted fault: answers one request instead of the data. */
export type FakeGitHubFault =
  /** Secondary rate limit: 403 (or 429) with the documented message, `retry-after` when given. */
  | { kind: 'secondary'; status?: 403 | 429; retryAfterSeconds?: number }
  /** Primary rate limit: 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (epoch seconds). */
  | { kind: 'primary'; resetEpochSeconds: number }
  /** Any other status, with a GitHub-shaped error body. */
  | { kind: 'status'; status: number };

export interface FakeGitHub {
  /** Base URL, e.g. `http://127.0.0.1:PORT` (pass as Octokit's `baseUrl`). */
  url: string;
  /** The repository served (`owner/name`); other repositories answer 404. */
  repo: string;
  issues: Array<Record<string, unknown>>;
  comments: Array<Record<string, unknown>>;
  requests: FakeGitHubRequest[];
  /** Faults answered, one per request, before any data is served. */
  faults: FakeGitHubFault[];
  /** Headers added to every successful response (e.g. `x-ratelimit-remaining: '0'` with a reset). */
  extraHeaders: Record<string, string>;
  /** Called with each request before it is answered (a test may edit `issues` here: a repository changing under the importer). */
  onRequest: ((r: FakeGitHubRequest) => void) | null;
  /** The token's login, answered by `GET /user`. @defaultValue 'verdict-bot' */
  login: string;
  /** Issue numbers deleted on GitHub: `GET` answers 410. */
  deleted: Set<number>;
  /** Webhook payloads (`issues` event) of every label change made through the API, in order. */
  hooks: Array<{ event: 'issues'; payload: Record<string, unknown> }>;
  /** Requests that wrote (POST, DELETE, PATCH, PUT) and were answered 2xx. */
  writes(): FakeGitHubRequest[];
  close(): Promise<void>;
}

/** The message GitHub sends with a secondary rate limit (docs: "Rate limits for the REST API"). */
const SECONDARY_MESSAGE = 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.';

/**
 * Starts the server. `token`, when given, must be sent (`Authorization: token …` or `Bearer …`),
 * else 401.
 */
export async function startFakeGitHub(o: {
  repo: string;
  issues?: Array<Record<string, unknown>>;
  comments?: Array<Record<string, unknown>>;
  token?: string;
}): Promise<FakeGitHub> {
  const fake: FakeGitHub = {
    url: '',
    repo: o.repo,
    issues: o.issues ?? [],
    comments: o.comments ?? [],
    requests: [],
    faults: [],
    extraHeaders: {},
    onRequest: null,
    login: 'verdict-bot',
    deleted: new Set(),
    hooks: [],
    writes: () => fake.requests.filter((r) => r.method !== 'GET' && r.status >= 200 && r.status < 300),
    close: async () => {},
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(fake, o.token, req, res, Buffer.concat(chunks).toString('utf8')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  fake.url = `http://127.0.0.1:${port}`;
  fake.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return fake;
}

function handle(
  fake: FakeGitHub,
  token: string | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  rawBody: string,
): void {
  const u = new URL(req.url ?? '/', fake.url);
  const query = Object.fromEntries(u.searchParams);
  const entry: FakeGitHubRequest = {
    method: req.method ?? 'GET',
    path: u.pathname,
    query,
    ifNoneMatch: header(req, 'if-none-match'),
    authorization: header(req, 'authorization'),
    apiVersion: header(req, 'x-github-api-version'),
    status: 0,
    at: Date.now(),
  };
  fake.requests.push(entry);
  fake.onRequest?.(entry);
  const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
    entry.status = status;
    const text = body === undefined ? '' : JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(text);
  };
  const error = (status: number, message: string, headers: Record<string, string> = {}) =>
    send(status, { message, documentation_url: 'https://docs.github.com/rest', status: String(status) }, headers);

  if (token !== undefined) {
    const auth = entry.authorization ?? '';
    if (auth !== `token ${token}` && auth !== `Bearer ${token}`) return error(401, 'Bad credentials');
  }
  const fault = fake.faults.shift();
  if (fault) {
    const reset = String(Math.floor(Date.now() / 1000) + 3600);
    if (fault.kind === 'secondary') {
      return error(fault.status ?? 403, SECONDARY_MESSAGE, {
        'x-ratelimit-limit': '5000',
        'x-ratelimit-remaining': '4990',
        'x-ratelimit-reset': reset,
        ...(fault.retryAfterSeconds !== undefined ? { 'retry-after': String(fault.retryAfterSeconds) } : {}),
      });
    }
    if (fault.kind === 'primary') {
      return error(403, 'API rate limit exceeded for user ID 1.', {
        'x-ratelimit-limit': '5000',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-used': '5000',
        'x-ratelimit-reset': String(fault.resetEpochSeconds),
        'x-ratelimit-resource': 'core',
      });
    }
    return error(fault.status, fault.status === 404 ? 'Not Found' : 'Server Error');
  }

  const limits = {
    'x-ratelimit-limit': '5000',
    'x-ratelimit-remaining': '4999',
    'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
    'x-ratelimit-resource': 'core',
    ...fake.extraHeaders,
  };
  if (req.method === 'GET' && u.pathname === '/user') return send(200, { login: fake.login, type: 'User' }, limits);
  const one = /^\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)(\/labels(?:\/([^/]+))?|\/comments)?$/.exec(u.pathname);
  if (one) {
    if (`${one[1]}/${one[2]}`.toLowerCase() !== fake.repo.toLowerCase()) return error(404, 'Not Found');
    const number = Number(one[3]);
    if (fake.deleted.has(number)) return error(410, 'This issue was deleted');
    const issue = fake.issues.find((i) => i.number === number);
    if (!issue) return error(404, 'Not Found');
    const labels = () => (issue.labels as Array<{ name: string }> | undefined) ?? [];
    const hook = (action: 'labeled' | 'unlabeled', name: string) =>
      fake.hooks.push({
        event: 'issues',
        payload: {
          action,
          issue: structuredClone(issue),
          label: { name },
          repository: { full_name: fake.repo },
          sender: { login: fake.login, type: 'Bot' },
        },
      });
    const body = rawBody ? (JSON.parse(rawBody) as Record<string, unknown>) : {};
    if (req.method === 'GET' && one[4] === undefined) return send(200, issue, limits);
    if (req.method === 'POST' && one[4] === '/labels') {
      for (const name of (body.labels as string[]) ?? []) {
        if (labels().some((l) => l.name.toLowerCase() === name.toLowerCase())) continue;
        issue.labels = [...labels(), { name }];
        hook('labeled', name);
      }
      return send(200, labels(), limits);
    }
    if (req.method === 'DELETE' && one[5] !== undefined) {
      const name = decodeURIComponent(one[5]);
      if (!labels().some((l) => l.name.toLowerCase() === name.toLowerCase())) return error(404, 'Label does not exist');
      issue.labels = labels().filter((l) => l.name.toLowerCase() !== name.toLowerCase());
      hook('unlabeled', name);
      return send(200, labels(), limits);
    }
    if (req.method === 'POST' && one[4] === '/comments') {
      const id = 100_000 + fake.comments.length + 1;
      const at = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      const comment = {
        id,
        body: body.body,
        user: { login: fake.login, type: 'Bot' },
        created_at: at,
        updated_at: at,
        issue_url: `${fake.url}/repos/${fake.repo}/issues/${number}`,
      };
      fake.comments.push(comment);
      return send(201, comment, limits);
    }
    return error(404, 'Not Found');
  }

  const m = /^\/repos\/([^/]+)\/([^/]+)\/issues(\/comments)?$/.exec(u.pathname);
  if (req.method !== 'GET' || !m) return error(404, 'Not Found');
  if (`${m[1]}/${m[2]}`.toLowerCase() !== fake.repo.toLowerCase()) return error(404, 'Not Found');
  const isComments = m[3] !== undefined;

  let rows = isComments ? [...fake.comments] : [...fake.issues];
  if (!isComments) {
    const state = query.state ?? 'open';
    if (state !== 'all') rows = rows.filter((r) => r.state === state);
  }
  if (query.since) {
    const since = Date.parse(query.since);
    if (Number.isNaN(since)) return error(422, 'Validation Failed');
    rows = rows.filter((r) => Date.parse(String(r.updated_at)) >= since);
  }
  const sort = query.sort === 'updated' ? 'updated_at' : 'created_at';
  const direction = query.direction ?? (isComments ? 'asc' : 'desc');
  const tie = (r: Record<string, unknown>) => Number(isComments ? r.id : r.number);
  rows.sort((a, b) => Date.parse(String(a[sort])) - Date.parse(String(b[sort])) || tie(a) - tie(b));
  if (direction === 'desc') rows.reverse();

  const perPage = Math.min(100, Math.max(1, Number(query.per_page ?? 30)));
  const page = Math.max(1, Number(query.page ?? 1));
  const last = Math.max(1, Math.ceil(rows.length / perPage));
  const body = rows.slice((page - 1) * perPage, page * perPage);
  const link = (p: number) => {
    const next = new URL(u.pathname, fake.url);
    for (const [k, v] of Object.entries(query)) next.searchParams.set(k, v);
    next.searchParams.set('page', String(p));
    return next.toString();
  };
  const links: string[] = [];
  if (page < last) links.push(`<${link(page + 1)}>; rel="next"`, `<${link(last)}>; rel="last"`);
  if (page > 1) links.push(`<${link(page - 1)}>; rel="prev"`, `<${link(1)}>; rel="first"`);

  const etag = `W/"${createHash('sha256').update(JSON.stringify(body)).digest('hex')}"`;
  const headers: Record<string, string> = {
    etag,
    'x-ratelimit-limit': '5000',
    'x-ratelimit-remaining': '4999',
    'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
    'x-ratelimit-resource': 'core',
    ...(links.length ? { link: links.join(', ') } : {}),
    ...fake.extraHeaders,
  };
  if (entry.ifNoneMatch !== null && entry.ifNoneMatch === etag) {
    entry.status = 304;
    res.writeHead(304, headers);
    res.end();
    return;
  }
  send(200, body, headers);
}

function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : (v ?? null);
}
