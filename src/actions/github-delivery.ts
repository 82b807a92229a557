import type { Octokit } from '@octokit/rest';
import { rateLimitWaitMs } from '../integrations/github/import.js';
import type { Logger } from '../log.js';
import type { EventDelivery } from '../store/events.js';
import type { MetaStore } from '../store/meta-store.js';
import type { Store } from '../store/whole-store.js';
import type { DeliveryAttempt } from '../worker/event-delivery.js';
import { ACTIONS_IDENTITY_META_KEY, parseChange, type LabelChange } from './actions.js';
import { isManagedLabel, keyAction, stricterMode, type ActionMode, type ActionsConfig } from './config.js';

/**
 * Delivery of label changes to GitHub (DESIGN §17): the sender the outbox's deliverer
 * (src/worker/event-delivery.ts, kind `github`) calls for each claimed row, with the real
 * `@octokit/rest`.
 *
 * One row, idempotent:
 * 1. the item must still be live and open in Verdict, and the row's (item, key) must still want a
 *    write (a newer plan wins: the write made is the one wanted now, never a stale one);
 * 2. `GET /repos/{o}/{r}/issues/{n}`: a deleted (404, 410) or closed issue gets no write;
 * 3. only the difference is written: `DELETE …/labels/{name}` for each label of the key's group
 *    the issue has and should not, `POST …/labels` for those it lacks; every label written is checked
 *    again against the allowlist and the key's group (gh-aw's safe outputs: nothing else is ever
 *    written, whatever a row says);
 * 4. the optional comment, once per (item, key), when a label was added;
 * 5. the labels now on the issue are recorded (`applied`).
 *
 * Rate limits (GitHub's "Rate limits for the REST API"): a 403 or 429 with `retry-after`, with
 * `x-ratelimit-remaining: 0` (until `x-ratelimit-reset`), or with the secondary-limit message
 * (at least a minute, doubling while it repeats) defers the row without counting an attempt, and
 * holds every other request of this process until then; a success that leaves
 * `x-ratelimit-remaining: 0` holds them until the reset. Other failures (5xx, the network, 401,
 * a 403 that is no limit) count an attempt and back off (30 s doubling to 1 h); nothing is dropped.
 *
 * Logs carry the repository, issue numbers, set, key, statuses and counts: never item text or
 * GitHub's error bodies, never the token.
 */

/** What the GitHub sender needs. */
export interface GitHubSenderOptions {
  store: Pick<Store, 'listItemActions' | 'loadItemForEvaluation' | 'now' | 'recordActionDelivery'>;
  config: ActionsConfig;
  /** The worker's `--actions`: a write of a set whose mode it caps to `off` is not sent. @defaultValue 'apply' */
  cap?: ActionMode;
  octokit: Octokit;
  logger: Logger;
}

/** Requests this process made, by kind (the tests and `actions apply` report them). */
export interface GitHubWriteCounts {
  reads: number;
  labelsAdded: number;
  labelsRemoved: number;
  comments: number;
  skipped: number;
  rateLimited: number;
}

interface HttpError {
  status?: number;
  message?: string;
  response?: { headers?: Record<string, string | number | undefined> };
}

/** Margin past a primary limit's reset, ms (its header is whole seconds). */
const RESET_MARGIN_MS = 1_000;

/**
 * Makes an Octokit for actions: a personal access token or a GitHub App installation token (both
 * are sent as `Authorization: token …`), GitHub's REST API version 2022-11-28, no logging.
 */
export async function createActionsOctokit(o: { token: string; baseUrl?: string }): Promise<Octokit> {
  // Loaded on use: @octokit/rest costs about 50 ms to load and most processes never write to GitHub.
  const { Octokit } = await import('@octokit/rest');
  return new Octokit({
    auth: o.token,
    baseUrl: o.baseUrl ?? 'https://api.github.com',
    userAgent: 'verdict-actions',
    headers: { 'x-github-api-version': '2022-11-28' },
    log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
  });
}

/**
 * Verdict's own GitHub login: the config's `identity`, else `GET /user` with the token (stored in
 * `verdict_meta` so a webhook process without the token knows it too). An App installation token
 * cannot read `/user` (403): then the config must name the App's `<slug>[bot]`; null.
 */
export async function learnIdentity(o: {
  store: MetaStore;
  config: ActionsConfig;
  octokit: Octokit;
  logger: Logger;
}): Promise<string | null> {
  if (o.config.identity) return o.config.identity;
  try {
    const r = await o.octokit.rest.users.getAuthenticated();
    const login = r.data.login;
    if ((await o.store.getMeta(ACTIONS_IDENTITY_META_KEY)) !== login)
      await o.store.setMeta(ACTIONS_IDENTITY_META_KEY, login);
    return login;
  } catch (err) {
    o.logger.warn(
      { status: (err as HttpError).status ?? null },
      "actions: cannot learn Verdict's GitHub login from the token; set actions.identity (an App's is <slug>[bot])",
    );
    return null;
  }
}

/** The label writer of the `github` outbox rows (see the file comment). */
export class GitHubSender {
  readonly counts: GitHubWriteCounts = {
    reads: 0,
    labelsAdded: 0,
    labelsRemoved: 0,
    comments: 0,
    skipped: 0,
    rateLimited: 0,
  };
  /** Store-clock ms until which no request is sent (a rate limit seen). */
  private heldUntil = 0;
  /** Consecutive secondary limits without a reset time (each waits twice as long). */
  private secondaryInARow = 0;

  constructor(private o: GitHubSenderOptions) {}

  /** Puts a reloaded config and cap in force (a worker's SIGHUP): writes of a key no longer acting are not sent. */
  setConfig(config: ActionsConfig, cap: ActionMode): void {
    this.o = { ...this.o, config, cap };
  }

  /** Sends one row (see the file comment); never throws. */
  readonly send = async (row: EventDelivery, signal: AbortSignal): Promise<DeliveryAttempt> => {
    if (signal.aborted) return { ok: 'stopped' };
    const change = parseChange(row.payload);
    if (!change) return { ok: false, error: 'bad payload' };
    const now = await this.o.store.now();
    if (this.heldUntil > now) return { ok: 'defer', error: 'github rate limit (held)', delayMs: this.heldUntil - now };
    try {
      return await this.apply(row, change, signal);
    } catch (err) {
      if (signal.aborted) return { ok: 'stopped' };
      return this.failure(err as HttpError, change);
    }
  };

  private async apply(row: EventDelivery, change: LabelChange, signal: AbortSignal): Promise<DeliveryAttempt> {
    const s = this.o.store;
    const key = { itemId: row.itemId, questionSet: change.set, questionKey: change.key };
    const current = (await s.listItemActions(row.itemId)).find(
      (r) => r.questionSet === change.set && r.questionKey === change.key,
    );
    const loaded = await s.loadItemForEvaluation(row.itemId);
    // A newer plan is the one written; a plan that wants nothing now writes nothing.
    const want = current?.want ?? null;
    if (!loaded || loaded.item.deletedAt !== null || want === null)
      return this.skip(key, 'item gone or nothing wanted');
    // Queued before a reload that stopped the key acting: not written (a later plan queues again if it acts again).
    if (
      !keyAction(this.o.config, change.set, change.key) ||
      stricterMode(this.o.config.modes[change.set] ?? 'off', this.o.cap ?? 'apply') === 'off'
    )
      return this.skip(key, 'key not acting');
    const group = change.group.filter((g) => isManagedLabel(this.o.config.labels, g));
    const unsafe = want.filter((l) => !group.some((g) => g.toLowerCase() === l.toLowerCase()));
    if (unsafe.length) return { ok: false, error: 'labels outside the allowlist' }; // never written; the row waits for a fixed config
    const [owner, repo] = change.repo.split('/');
    const request = { owner, repo, issue_number: change.number, request: { signal } };
    let issue;
    try {
      issue = await this.o.octokit.rest.issues.get(request);
      this.counts.reads++;
    } catch (err) {
      const status = (err as HttpError).status;
      if (status === 404 || status === 410) return this.skip(key, `issue ${status}`);
      throw err;
    }
    this.noteHeaders(issue.headers as Record<string, string | number | undefined>);
    if (issue.data.state === 'closed') return this.skip(key, 'issue closed');
    const names = (issue.data.labels ?? []).map((l) => (typeof l === 'string' ? l : (l.name ?? '')));
    const has = (l: string) => names.some((n) => n.toLowerCase() === l.toLowerCase());
    const remove = names.filter(
      (n) =>
        group.some((g) => g.toLowerCase() === n.toLowerCase()) &&
        !want.some((w) => w.toLowerCase() === n.toLowerCase()),
    );
    const add = want.filter((l) => !has(l));
    for (const name of remove) {
      try {
        await this.o.octokit.rest.issues.removeLabel({ ...request, name });
      } catch (err) {
        if ((err as HttpError).status !== 404) throw err; // already gone: what we wanted
      }
      this.counts.labelsRemoved++;
    }
    if (add.length) {
      const r = await this.o.octokit.rest.issues.addLabels({ ...request, labels: add });
      this.noteHeaders(r.headers as Record<string, string | number | undefined>);
      this.counts.labelsAdded += add.length;
    }
    let commented = false;
    if (change.comment && add.length && !current?.commentedAt) {
      await this.o.octokit.rest.issues.createComment({ ...request, body: change.comment });
      this.counts.comments++;
      commented = true;
    }
    await s.recordActionDelivery({ ...key, applied: [...want].sort(), skipped: false, commented });
    this.secondaryInARow = 0;
    if (add.length || remove.length)
      this.o.logger.info(
        {
          repo: change.repo,
          issue: change.number,
          set: change.set,
          key: change.key,
          added: add.length,
          removed: remove.length,
          commented,
        },
        'actions: labels written',
      );
    return { ok: true, status: 200 };
  }

  private async skip(
    key: { itemId: string; questionSet: string; questionKey: string },
    why: string,
  ): Promise<DeliveryAttempt> {
    await this.o.store.recordActionDelivery({ ...key, applied: null, skipped: true, commented: false });
    this.counts.skipped++;
    this.o.logger.debug({ set: key.questionSet, key: key.questionKey, why }, 'actions: nothing written');
    return { ok: true, status: 204 };
  }

  /** A success that spent the primary limit holds later requests until its reset. */
  private noteHeaders(h: Record<string, string | number | undefined>): void {
    if (String(h['x-ratelimit-remaining']) !== '0') return;
    const reset = Number(h['x-ratelimit-reset']);
    if (Number.isFinite(reset)) this.heldUntil = Math.max(this.heldUntil, reset * 1000 + RESET_MARGIN_MS);
  }

  private async failure(err: HttpError, change: LabelChange): Promise<DeliveryAttempt> {
    const status = typeof err.status === 'number' ? err.status : null;
    if (status === null) return { ok: false, error: 'network' };
    const now = await this.o.store.now();
    const wait = rateLimitWaitMs(status, err.response?.headers ?? {}, err.message ?? '', now, this.secondaryInARow + 1);
    if (wait !== null) {
      if (
        err.response?.headers?.['retry-after'] === undefined &&
        String(err.response?.headers?.['x-ratelimit-remaining']) !== '0'
      )
        this.secondaryInARow++;
      this.heldUntil = Math.max(this.heldUntil, now + wait);
      this.counts.rateLimited++;
      this.o.logger.warn(
        { repo: change.repo, issue: change.number, status, waitMs: wait },
        'actions: github rate limit: waiting',
      );
      return { ok: 'defer', error: `http ${status} rate limit`, delayMs: wait };
    }
    return { ok: false, error: `http ${status}` };
  }
}
