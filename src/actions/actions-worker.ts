import { errCode } from '../errors.js';
import { systemClock } from '../clock.js';
import type { Logger } from '../log.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { EventOutbox } from '../store/events.js';
import type { MetaStore } from '../store/meta-store.js';
import type { ActionStore } from '../store/actions.js';
import type { Store } from '../store/whole-store.js';
import { EventDeliverer } from '../worker/event-delivery.js';
import type { Actions } from './actions.js';
import type { ActionMode, ActionsConfig } from './config.js';
import { createActionsOctokit, GitHubSender, learnIdentity, type GitHubWriteCounts } from './github-delivery.js';

/**
 * The actions beside a worker's slots (DESIGN §17): the planning pass after answers and verdicts
 * are stored, and the deliverer of the outbox's `github` rows (with a token). A long-running
 * worker plans every tick (at once when woken by stored answers) and delivers until it stops; a
 * drain plans once its jobs are done and delivers every write due now.
 */

/** What the actions of a worker need. */
export interface ActionsWorkerOptions {
  store: Pick<TrackerStore, 'now'> &
    EventOutbox &
    MetaStore &
    Pick<ActionStore, 'listItemActions' | 'recordActionDelivery'> &
    Pick<Store, 'loadItemForEvaluation'>;
  actions: Actions;
  config: ActionsConfig;
  /** The worker's `--actions`: caps every set's mode. */
  cap: ActionMode;
  logger: Logger;
  /** Lease owner prefix, unique per process (`<workerId>`). */
  workerId: string;
  /** The wait between passes when nothing woke it, ms (the worker's tick). */
  tickMs: number;
  /** A token (or an App installation token) with Issues write; without it nothing is written, proposals still are made. */
  token?: string;
  /** @defaultValue https://api.github.com */
  baseUrl?: string;
}

/** What a drain's actions did. */
export interface ActionsDrainReport {
  planned: number;
  queued: number;
  delivered: number;
  failed: number;
  /** GitHub requests by kind; null without a token. */
  github: GitHubWriteCounts | null;
}

/** The actions of one worker (see the file comment). Nothing runs until `run` or `drain`. */
export class ActionsWorker {
  private nudge = new AbortController();
  private sender: GitHubSender | null = null;
  private deliverer: EventDeliverer | null = null;

  private constructor(private o: ActionsWorkerOptions) {}

  /**
   * Sets up the sender when a token is given, and learns Verdict's GitHub login from it when the
   * config names none. Null when the config has no acting key or the cap is `off`.
   */
  static async create(o: ActionsWorkerOptions): Promise<ActionsWorker | null> {
    if (o.config.keys.length === 0 || o.cap === 'off') return null;
    const w = new ActionsWorker(o);
    if (o.token) {
      const octokit = await createActionsOctokit({ token: o.token, baseUrl: o.baseUrl });
      await learnIdentity({ store: o.store, config: o.config, octokit, logger: o.logger });
      w.sender = new GitHubSender({ store: o.store, config: o.config, cap: o.cap, octokit, logger: o.logger });
      w.deliverer = new EventDeliverer({
        store: o.store,
        logger: o.logger,
        owner: `${o.workerId}/actions`,
        secret: '',
        kind: 'github',
        send: w.sender.send,
        pollMs: o.tickMs,
      });
    } else
      o.logger.info(
        'actions: no GitHub token (VERDICT_GITHUB_TOKEN or GITHUB_TOKEN): proposals are made, nothing is written to GitHub',
      );
    return w;
  }

  /** GitHub requests so far, or null without a token. */
  get github(): GitHubWriteCounts | null {
    return this.sender?.counts ?? null;
  }

  /**
   * Puts a reloaded actions config and cap in force (a worker's SIGHUP) and plans at once: a key
   * whose mode, gate or labels changed has its items planned again, and writes of a key no longer
   * acting are not sent (GitHubSender). Verdict's GitHub login learnt at start is kept.
   */
  reload(config: ActionsConfig, cap: ActionMode): void {
    this.o = { ...this.o, config, cap };
    this.o.actions.setConfig(config);
    this.sender?.setConfig(config, cap);
    this.wake();
  }

  /** Plans at once (answers were stored) instead of at the next tick. */
  wake(): void {
    const n = this.nudge;
    this.nudge = new AbortController();
    n.abort();
  }

  /** Plans every tick and delivers until `signal` aborts. Never throws: a failed pass is logged and tried again. */
  async run(signal: AbortSignal): Promise<void> {
    const delivering = this.deliverer?.run(signal) ?? Promise.resolve();
    while (!signal.aborted) {
      try {
        const r = await this.o.actions.planPass(this.o.cap, signal);
        if (r.queued > 0) this.deliverer?.wake();
      } catch (err) {
        this.o.logger.error({ err: errCode(err) }, 'actions: planning pass failed; retrying next tick');
      }
      await systemClock.wait(this.o.tickMs, AbortSignal.any([signal, this.nudge.signal]));
    }
    await delivering;
  }

  /** One planning pass, then every write due now (a failed one waits for its backoff and the next run). */
  async drain(signal: AbortSignal): Promise<ActionsDrainReport> {
    const p = await this.o.actions.planPass(this.o.cap, signal);
    const d = this.deliverer ? await this.deliverer.flush(signal) : { delivered: 0, failed: 0 };
    return { planned: p.items, queued: p.queued, ...d, github: this.github };
  }
}
