import { EventEmitter } from 'node:events';
import { ConfigError, DEFAULTS, loadConfig, type ProviderName } from '../config.js';
import { productionSets } from '../decision/production-sets.js';
import { fieldsForDisplay, type DecisionView, type FlappingKey, type WorkspaceFlag } from '../reads/reads.js';
import { recordVerdict, type RecordedVerdict, type RecordVerdictInput } from './record-verdict.js';
import type { HumanVerdictRow } from '../store/verdicts.js';
import type { QuestionSet, Registry } from '../decision/registry.js';
import { errCode, VerdictError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { createProvider } from '../providers/create.js';
import { ProviderMisconfigured } from '../providers/errors.js';
import type { Provider } from '../providers/provider.js';
import type { RunReport } from '../runner/job-life.js';
import { toStoreError } from '../store/store.js';
import type { ItemRow } from '../store/tracker-reads.js';
import { TRACKER_STORE_METHODS, type TrackerStore, type VerdictStore } from '../store/tracker-store.js';
import type { Store } from '../store/whole-store.js';
import type { Worker, WorkerSummary } from '../worker/worker.js';
import { buildRegistry, openStoreOn, writeRegistryFor, type DatabaseOption } from './open.js';
import { openReader } from './reader.js';
import { runWorker, type WorkerMonitor, type WorkerSettings } from './run-worker.js';
import { databaseLabel } from '../store/database-errors.js';
import { defaultSpoolDir } from '../runner/spend-spool.js';
import { authenticateApiToken, createApiToken, type CreatedApiToken } from '../access/tokens.js';
import {
  endDashboardSession,
  findDashboardSession,
  openDashboardSession,
  type OpenedDashboardSession,
} from '../access/sessions.js';
import type { SetJobCounts } from '../store/queue-store.js';
import type { ApiTokenRole, ApiTokenRow, DashboardSessionRow } from '../store/access-store.js';
import {
  importGitHubFiles,
  importGitHubRepo,
  type GitHubImportReport,
  type ImportGitHubFilesOptions,
  type ImportGitHubRepoOptions,
} from '../integrations/github/import.js';
import { applyGitHubWebhook, type GitHubDelivery, type GitHubDeliveryResult } from '../integrations/github/webhooks.js';
import { evalWorkspace, type EvalOptions, type EvalReport } from '../eval/run-eval.js';
import { latestEvalResults, type EvalResult } from '../eval/eval-results.js';
import { queueView, type QueueView } from './queue-view.js';
import { spendWithDailyCap, type DailyCapView, type SpendSeries, type SpendSeriesOptions } from './spend-view.js';
import { throughputSeries, type ThroughputOptions, type ThroughputSeries } from './throughput-view.js';
import { searchItemsPage, type ItemSearchPage, type ItemSearchQuery } from './item-search.js';
import {
  jobsOn,
  surfacedPage,
  type ItemHistory,
  type SurfacedPage,
  type SurfacedQuery,
  type VerdictJobs,
} from './operations-reads.js';
import { itemListPage, type ItemListPage, type ItemListQuery } from './item-list.js';
import { explainItem, type ExplainReport } from './explain.js';
import { InvalidInput } from '../errors.js';
import { actionsApi, webhookActionOptions, type VerdictActions } from './actions-api.js';
import { loadActionsConfig, type ActionMode } from '../actions/config.js';

/** What `createVerdict` takes (DESIGN §16.1). */
export interface VerdictOptions {
  /** Where the tables live; see DatabaseOption. A host handle is never closed by Verdict. */
  database: DatabaseOption;
  /** The question sets of this process. @defaultValue the production sets (DESIGN §6) */
  sets?: readonly QuestionSet[];
  /** A question-set config file (JSON or YAML) whose sets are added to `sets`, as `--config` does. */
  configFile?: string;
  /**
   * Who answers: `'fake'` (offline, deterministic), `'anthropic'` (reads ANTHROPIC_API_KEY and the
   * other VERDICT_* provider variables from the environment, as the CLI does), `'openai'`
   * (VERDICT_OPENAI_BASE_URL and VERDICT_MODEL), `'none'` (decisions off: nothing is owed, reads
   * are empty, DESIGN §9), `'pinned'` (a process that only reads and records verdicts beside
   * workers elsewhere: writes owe as usual, and "current" is judged against the provider and model
   * the workers last pinned, as `verdict show` does with no provider configured; no worker, no
   * provider eval, no API key needed), or a Provider object. @defaultValue 'none'
   */
  provider?: ProviderName | 'pinned' | Provider;
  /**
   * Where `'anthropic'` and `'openai'` read their settings (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
   * VERDICT_MODEL, VERDICT_OPENAI_BASE_URL, ...), instead of the process environment; a test points
   * the provider at `verdict/testing`'s fake server with
   * `{ ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: 'test' }`. @defaultValue process.env
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** A pino logger. @defaultValue silent */
  logger?: Logger;
  /** Apply migrations at open; false leaves them to `verdict migrate`. @defaultValue true */
  migrate?: boolean;
  /**
   * `existing`: a SQLite path with no file is DatabaseNotFound and nothing is created (a process
   * that serves an existing tracker, such as `verdict mcp`, must not start an empty one on a
   * typo). @defaultValue 'create'
   */
  access?: 'create' | 'existing';
  /** Connections of a Postgres pool Verdict opens itself from a URL. @defaultValue 10 */
  poolSize?: number;
  /**
   * Actions in GitHub (DESIGN §17; the `actions` section of `configFile`): this process's cap on the
   * sets' modes when it plans (a decided proposal); a worker takes its own (`worker({ actions })`).
   * @defaultValue 'propose'
   */
  actions?: ActionMode;
}

/** Worker settings for `v.worker()`; every one defaults as the CLI's (DESIGN §12). Durations in ms. */
export type VerdictWorkerOptions = Partial<WorkerSettings> & {
  /** Worker id in claims and heartbeats. @defaultValue `<hostname>:<pid>` */
  workerId?: string;
};

/** The `outcome` event: one job's recorded outcome. Ids, codes and counts only, never text. */
export interface OutcomeEvent {
  itemId: string;
  questionSet: string;
  workspaceId: string;
  /** `complete`, `drop`, `park`, `refuse`, `fail`, `defer`, `release`, `misconfigured` or `lost`, with a reason code. */
  outcome: RunReport['outcome'];
  /** What the fenced store outcome did. */
  recorded: RunReport['recorded'];
  stats: RunReport['stats'];
  durationMs: number;
}

/** Thrown by `worker.stop({ graceMs })` when in-flight work is not recorded within the grace period (its leases bound it). */
export class GraceExceeded extends VerdictError {
  readonly code = 'grace_exceeded';
  constructor(graceMs: number) {
    super(`the worker did not finish within ${graceMs} ms; unrecorded jobs are claimable again when their leases end`);
  }
}

/** Thrown when a worker handle is started twice, or a worker is asked for with provider `none`. */
export class WorkerStateError extends VerdictError {
  readonly code = 'worker_state';
}

/** Events of a VerdictWorker. */
export interface VerdictWorkerEvents {
  outcome: [OutcomeEvent];
  error: [Error];
  idle: [];
}

/**
 * An in-process worker (DESIGN §10, §16.1): `start()` runs until `stop()`; `runUntilIdle()` drains
 * every job claimable now. Events: `outcome` per recorded job, `idle` when the queue has nothing
 * claimable after work, `error` when the run fails (without an `error` listener the failure is
 * logged, never thrown from the emitter).
 */
export class VerdictWorker extends EventEmitter<VerdictWorkerEvents> {
  private worker: Worker | null = null;
  private stopRequested = false;
  private running: Promise<WorkerSummary> | null = null;
  private monitor: WorkerMonitor | null = null;

  constructor(
    private readonly make: (
      untilIdle: boolean,
      hooks: {
        onStarted: (w: Worker) => void;
        onOutcome: (r: RunReport) => void;
        onIdle?: () => void;
        onMetrics: (m: WorkerMonitor) => void;
      },
    ) => Promise<WorkerSummary>,
    private readonly logger: Logger,
  ) {
    super();
  }

  /**
   * The running worker's metrics and health (what its `/metrics` and `/healthz` would serve), for
   * a host's own server; null before `start()` has set up and after the run ends.
   */
  get monitoring(): WorkerMonitor | null {
    return this.monitor;
  }

  /**
   * Starts the slots, the heartbeat and the background passes; resolves once the worker claims.
   * @throws WorkerStateError when already running; the store's error when the start writes fail.
   */
  async start(): Promise<void> {
    const started = this.launch(false);
    await Promise.race([started.ready, started.done.then(() => undefined)]);
  }

  /**
   * Drains every job claimable now (live writes still in their quiet period are not), then
   * resolves with what the run did and emits `idle`.
   * @throws WorkerStateError when already running; the run's error.
   */
  async runUntilIdle(): Promise<WorkerSummary> {
    const summary = await this.launch(true).done;
    this.emit('idle');
    return summary;
  }

  /**
   * Stops claiming, aborts in-flight provider calls (their jobs are released without an attempt)
   * and waits for the bookkeeping. Resolves with the summary; a worker never started resolves null.
   * @param opts.graceMs how long to wait. @defaultValue 10 000 ms (DESIGN §10)
   * @throws GraceExceeded after `graceMs` with work unrecorded (leases bound it).
   */
  async stop(opts: { graceMs?: number } = {}): Promise<WorkerSummary | null> {
    if (!this.running) return null;
    this.stopRequested = true; // honoured at start when the worker is still setting up
    this.worker?.stop('stop()');
    const graceMs = opts.graceMs ?? DEFAULTS.graceMs;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new GraceExceeded(graceMs)), graceMs);
    });
    try {
      return await Promise.race([this.running, grace]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** True from `start()`/`runUntilIdle()` until the run ends. */
  get isRunning(): boolean {
    return this.running !== null;
  }

  private launch(untilIdle: boolean): { ready: Promise<void>; done: Promise<WorkerSummary> } {
    if (this.running) throw new WorkerStateError('this worker is already running');
    let onReady!: () => void;
    const ready = new Promise<void>((r) => (onReady = r));
    const done = this.make(untilIdle, {
      onStarted: (w) => {
        this.worker = w;
        if (this.stopRequested) w.stop('stop()');
        onReady();
      },
      onOutcome: (r) => {
        // A provider-wide error (401, unknown model, billing): the worker cools off (DESIGN §3); the host hears of it.
        if (r.outcome.kind === 'misconfigured')
          this.fail(
            new ProviderMisconfigured(`provider misconfigured (${r.outcome.reason}); the worker is cooling off`),
          );
        this.safeEmit('outcome', {
          itemId: r.claim.itemId,
          questionSet: r.claim.questionSet,
          workspaceId: r.claim.workspaceId,
          outcome: r.outcome,
          recorded: r.recorded,
          stats: r.stats,
          durationMs: r.durationMs,
        });
      },
      onIdle: untilIdle ? undefined : () => this.safeEmit('idle'),
      onMetrics: (m) => (this.monitor = m),
    }).then(
      (summary) => summary,
      (err: unknown) => {
        this.fail(err instanceof Error ? err : new Error(String(err)));
        throw err;
      },
    );
    const running = done.finally(() => {
      this.running = null;
      this.stopRequested = false;
      this.worker = null;
      this.monitor = null;
    });
    running.catch(() => undefined); // the caller of runUntilIdle/start sees it; `error` reports it
    this.running = running;
    return { ready, done };
  }

  /** Emits to the host's listeners; a listener that throws is logged, never let into the worker's slots. */
  private safeEmit<K extends 'outcome' | 'idle'>(event: K, ...args: VerdictWorkerEvents[K]): void {
    try {
      (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args);
    } catch (err) {
      this.logger.error({ event, err: errCode(err) }, 'a worker event listener threw');
    }
  }

  private fail(err: Error): void {
    if (this.listenerCount('error') > 0) {
      try {
        this.emit('error', err);
      } catch (thrown) {
        this.logger.error({ err: errCode(thrown) }, 'a worker error listener threw');
      }
    } else this.logger.error({ err: errCode(err) }, 'worker error');
  }
}

/**
 * Where one question set stands on an item, so a reader can tell "not asked" from "pending":
 * whether it applies now (and why not, in words: `item is terminal (status: done)`), and its job
 * if one exists (`owed` with `dueAt`, epoch ms, or `parked`; `lastError` is a class and code,
 * never provider text).
 */
export interface ItemSetStatus {
  questionSet: string;
  applies: boolean;
  reason: string | null;
  job: {
    state: 'owed' | 'parked' | 'batched';
    dueAt: number;
    attempts: number;
    refusals: number;
    lastError: string | null;
  } | null;
}

/** Reads of decisions (DESIGN §8), judged against the provider this Verdict was created with. */
export interface VerdictReader {
  /**
   * One item by ref with every stored decision, each `current` or with its `staleReason`; where
   * each set of its collection stands; its collection's slug; and people's verdicts on it, oldest
   * first (the latest of a key is in force), as `store.listVerdicts` returns them. One store read.
   * @returns null when the workspace or the item does not exist.
   */
  item(
    ref: string,
    opts: { workspace: string },
  ): Promise<{
    item: ItemRow & { fieldsObject: Record<string, unknown> };
    collection: string;
    decisions: DecisionView[];
    sets: ItemSetStatus[];
    verdicts: HumanVerdictRow[];
  } | null>;
  /**
   * The surfaced nouls of one set in a workspace, keyed by the item's ref: ref → { ref, key → probability in force,
   * `human`: the keys a person's value decides }, plus `failing` (a job of the set is parked or
   * failing). People's values override the model (DESIGN §8.1); hysteresis holds a surfaced key
   * down to threshold − hysteresis (§8.2, at the set's own threshold only). @param opts.threshold overrides the set's (0 to 1).
   * @returns null when the workspace does not exist.
   */
  flags(
    set: string,
    opts: { workspace: string; threshold?: number },
  ): Promise<{ flags: Record<string, WorkspaceFlag>; failing: boolean } | null>;
  /**
   * One workspace's counts: live items, and its jobs by set (due, waiting, in flight, parked,
   * failing; times in epoch ms). @returns null when the workspace does not exist.
   */
  status(opts: { workspace: string }): Promise<{ workspace: string; items: number; jobs: SetJobCounts[] } | null>;
  /**
   * Keys of one set whose surfacing the model flipped at least `minFlips` times (default 3) within
   * `windowMs` (default 30 days) (DESIGN §8.2), most flips first. @returns null when the workspace does not exist.
   */
  flapping(
    set: string,
    opts: { workspace: string; minFlips?: number; windowMs?: number },
  ): Promise<FlappingKey[] | null>;
  /**
   * A workspace's live items as a list people can use: sorted by `updated` (default, newest
   * first), `created` or `ref`, filtered by collection, field values (`{status: 'open'}`), update
   * time, title text and surfacing in a set, paged by an opaque cursor (`hasMore`, `nextCursor`),
   * without their full text unless `includeContent` (compose/item-list.ts `ItemListQuery`).
   * @returns null when the workspace does not exist.
   * @throws InvalidInput with `param` naming the member for a bad sort, order, limit (1 to 500), cursor, collection or set.
   */
  items(q: ItemListQuery): Promise<ItemListPage | null>;
  /**
   * The surfaced keys of one set as a list: each with its item's ref, title and collection, the
   * probability in force, currency (a surfaced key may be stale while its re-ask is owed) and who
   * decided, sorted highest first, filtered by collection, key and currency and paged (see
   * compose/operations-reads.ts `SurfacedQuery`). @returns null when the workspace or the set does not exist.
   * @throws InvalidInput for a bad offset, limit (1 to 500), threshold or currency.
   */
  surfaced(set: string, opts: SurfacedQuery): Promise<SurfacedPage | null>;
  /**
   * The question keys a set asks in a workspace (a conventions set's, one per convention), sorted:
   * what a key filter or a verdict may name. Per-comment sets' keys are given without `@<commentId>`.
   * @returns null when the workspace or the set does not exist, or its questions cannot be read now.
   */
  keys(set: string, opts: { workspace: string }): Promise<string[] | null>;
  /**
   * One workspace's items whose ref or title contains `text`, filtered by collection and deleted
   * state, newest write first, one page at a time, with the total matching (compose/item-search.ts
   * `ItemSearchQuery`). @returns null when the workspace does not exist.
   * @throws InvalidInput for a text over 200 characters, a bad `deleted`, offset or limit (1 to 200).
   */
  searchItems(opts: ItemSearchQuery): Promise<ItemSearchPage | null>;
  /**
   * One item's answers over time, newest first: per evaluation the state hash, the model, when, the
   * answers and the state parts that moved since the previous one (`HistoryEntry`).
   * @returns null when the workspace or the item does not exist.
   */
  history(ref: string, opts: { workspace: string }): Promise<ItemHistory | null>;
  /**
   * One workspace's queue: jobs by set with the oldest owed age, parked jobs with their reasons
   * (the first `parkedShown`, default 50), failing sets, and the server's workers (last heartbeat)
   * and provider batches in flight (`QueueView`). @returns null when the workspace does not exist.
   */
  queue(opts: { workspace: string; parkedShown?: number }): Promise<QueueView | null>;
  /**
   * Provider calls, tokens and cost per bucket (`hour` or `day`, UTC) and per model over a window
   * (default 24 h, at most 90 days), with the daily token cap of the live workers and today's use
   * of it (`SpendSeries`, `DailyCapView`). Spend is kept for the whole database, not per workspace.
   */
  spend(opts?: SpendSeriesOptions): Promise<SpendSeries & { dailyCap: DailyCapView }>;
  /**
   * Jobs per minute by outcome over the last `minutes` (default 60, at most 1,440), the current
   * minute last (`ThroughputSeries`): what the workers recorded, counted in each outcome's own
   * transaction. Kept for the whole database, not per workspace, as spend is.
   * @throws InvalidInput (param `minutes`) for a window outside 1 to 1,440 minutes.
   */
  throughput(opts?: ThroughputOptions): Promise<ThroughputSeries>;
  /**
   * Decision quality per set of a workspace: the latest `eval` result of each set (recorded by
   * every eval run, `EvalResult`, with the calibration bins a reliability diagram draws) and the
   * keys flipping surfacing (`flapping`, 3 or more flips in 30 days). @returns null when the workspace does not exist.
   */
  quality(opts: {
    workspace: string;
  }): Promise<{ sets: Array<{ set: string; eval: EvalResult | null; flapping: FlappingKey[] }> } | null>;
}

/**
 * HTTP API tokens (DESIGN §16.2): scoped to a workspace and a role; only their SHA-256 is stored.
 * See src/access/tokens.ts.
 */
export interface VerdictTokens {
  /**
   * Makes a token (`vdt_` + 43 base64url characters) for an existing workspace, or creates the
   * workspace first when `createWorkspace: true`. The token is in the result only: show it once.
   * @throws InvalidInput (with `param`) for an unknown role, an empty slug, a workspace that does
   *   not exist without `createWorkspace` (the message lists the workspaces), or a deleted one.
   */
  create(o: {
    workspace: string;
    role: ApiTokenRole;
    name?: string;
    createWorkspace?: boolean;
  }): Promise<CreatedApiToken>;
  /** Tokens (never the tokens themselves), newest first; of one workspace when given. */
  list(opts?: { workspace?: string }): Promise<ApiTokenRow[]>;
  /** @returns false when no unrevoked token has this id. */
  revoke(id: string): Promise<boolean>;
  /** The live token a request presented (its row), or null for unknown, revoked, or a deleted workspace. */
  authenticate(token: string): Promise<ApiTokenRow | null>;
}

/**
 * Dashboard sessions (DESIGN §16.6; src/access/sessions.ts): a login with a workspace token makes
 * a server-side session whose random id is all a cookie carries; only its SHA-256 is stored. A
 * session ends at logout, when its token is revoked or its workspace deleted, 12 h after login
 * (SESSION_MAX_AGE_MS), or after 1 h without a request (SESSION_IDLE_MS), by the store's clock.
 * The id is no API token: the `/v1` routes refuse it.
 */
export interface VerdictSessions {
  /** A login: a new session for a live token, its id (`vds_…`, show it once: only the cookie keeps it). @returns null for an unknown, revoked or deleted-workspace token. */
  open(token: string): Promise<OpenedDashboardSession | null>;
  /** The live session this id names (its token's row and its times), or null; marks it seen. */
  authenticate(sessionId: string): Promise<DashboardSessionRow | null>;
  /** A logout: deletes the session. @returns false when it had already ended. */
  end(sessionId: string): Promise<boolean>;
}

/** GitHub issues in and out of the store (DESIGN §16.2; src/integrations/github/). */
export interface VerdictGitHub {
  /**
   * Imports a repository's issues and comments over the REST API (@octokit/rest): every page,
   * pull requests left out, incremental from the last run's high-water mark, ETags, rate limits
   * waited out. @throws GitHubRequestFailed, InvalidInput, store errors (see importGitHubRepo).
   */
  importRepo(o: Omit<ImportGitHubRepoOptions, 'logger'>): Promise<GitHubImportReport>;
  /** The same mapping from JSON saved with `gh api --paginate`. @throws InputNotFound, InvalidInput (see importGitHubFiles). */
  importFiles(o: Omit<ImportGitHubFilesOptions, 'logger'>): Promise<GitHubImportReport>;
  /**
   * Applies one webhook delivery whose signature the caller has verified (verifyGitHubSignature),
   * once per delivery id. @throws InvalidInput / InvalidWrite for a repository mapped to a deleted
   * or another workspace; store errors (nothing written, the delivery id included).
   */
  applyWebhook(d: GitHubDelivery): Promise<GitHubDeliveryResult>;
}

/** What `createVerdict` returns. */
export interface Verdict {
  /** The tracker's write doors and reads, and `transaction` (DESIGN §3, §16.1). */
  readonly store: VerdictStore & {
    /**
     * Records a person's verdict on (item, question key) (DESIGN §8.1; src/compose/record-verdict.ts):
     * `agree`, `disagree`, a `value` of the question's kind, or `withdrawn`. A verdict with a value
     * overrides the model for reads and `flags` (`source: 'human'`) until a later one withdraws it;
     * the model's later answers that disagree read as `proposed`. Never pruned.
     * @throws NotFound (workspace, item), InvalidInput (key, set, value, author, note; see recordVerdict).
     */
    recordVerdict(input: RecordVerdictInput): Promise<RecordedVerdict>;
    /**
     * People's verdicts in a workspace, oldest first, every one kept (the latest of a key is in
     * force); of one set, or one item by ref, when given. [] for an unknown workspace or ref.
     */
    listVerdicts(q: { workspace: string; set?: string; ref?: string }): Promise<HumanVerdictRow[]>;
    /**
     * Postgres only: the tracker part bound to a host's open transaction (a drizzle transaction or
     * a node-postgres client after BEGIN), so the doors commit or roll back with the host's writes.
     * @throws ConfigError on SQLite (use `transaction`, or write inside a transaction the host opened on the same connection).
     */
    joinTransaction(host: unknown): TrackerStore;
  };
  /** An in-process worker; nothing runs until `start()` or `runUntilIdle()`. @throws WorkerStateError with provider `none` or `'pinned'`. */
  worker(opts?: VerdictWorkerOptions): VerdictWorker;
  readonly reader: VerdictReader;
  /** One workspace's owed-job queue: list, retry, drop (compose/operations-reads.ts `VerdictJobs`). */
  readonly jobs: VerdictJobs;
  readonly tokens: VerdictTokens;
  readonly sessions: VerdictSessions;
  readonly github: VerdictGitHub;
  /** Labels in GitHub behind a calibration gate: the plan, proposals, the gate, delivery (DESIGN §17; compose/actions-api.ts). */
  readonly actions: VerdictActions;
  /**
   * Measures decision quality on a gold set (DESIGN §8.3; src/eval/run-eval.ts): the stored answers
   * (`stored: true`, no calls) or this Verdict's provider asked now, and with `compare` a second model
   * side by side. Asked answers are never stored; their spend is (outcome `eval`).
   * @throws EvalCostNotConfirmed before any call when a priced model's estimate passes `maxCostUsd` (or none is given).
   */
  eval(opts: EvalOptions): Promise<EvalReport>;
  /**
   * "Why did it say that" (src/compose/explain.ts): for each set of the item's collection (or only
   * `set`), the exact system prompt and user message Verdict would send for the item's current
   * state, the state hash, and the stored answers with whether each was asked about that state and
   * their rationale when the set asks for one. Item and question text: return it to the one who
   * asked, never log it (Verdict logs none of it).
   * @returns null when the workspace or the item does not exist.
   * @throws InvalidInput (param `set`) for a set not registered for the item's collection.
   */
  explain(ref: string, opts: { workspace: string; set?: string }): Promise<ExplainReport | null>;
  /** The question sets in force: `get(name)`, `all()` (sorted by name), `setsFor(collectionSlug)`. */
  readonly registry: Registry;
  /** The provider in force, or null for `none`. */
  readonly provider: Provider | null;
  /** Stops every worker this Verdict started, closes the provider and (unless it is the host's) the database. */
  close(): Promise<void>;
}

/** Resolves the `provider` option. @throws ConfigError / ProviderMisconfigured as the CLI would. */
function resolveProvider(
  p: VerdictOptions['provider'],
  logger: Logger,
  env: VerdictOptions['env'] = process.env,
): Provider | null {
  if (p === undefined || p === 'none' || p === 'pinned') return null;
  if (typeof p === 'object') return p;
  return createProvider(loadConfig({ provider: p }, env as NodeJS.ProcessEnv), logger);
}

/**
 * Opens Verdict in this process (DESIGN §16.1): the store (migrated unless `migrate: false`), the
 * registry, the provider, and factories for workers and reads.
 * @throws ConfigError for a bad option or provider setting; InvalidQuestionSet for clashing sets;
 * DatabaseNotFound for a missing SQLite file with `access: 'existing'`; the database's error when SQLite cannot be opened or migrated, or (Postgres) when the first
 * read here fails.
 */
export async function createVerdict(options: VerdictOptions): Promise<Verdict> {
  const logger = options.logger ?? silentLogger;
  const registry = buildRegistry(options.configFile, options.sets ?? productionSets());
  const actionsConfig = loadActionsConfig(options.configFile, registry);
  const provider = resolveProvider(options.provider, logger, options.env);
  const pinned = options.provider === 'pinned';
  /** What reads judge "current" against: the provider, the workers' pinned one (undefined), or 'none'. */
  const readsAgainst: Provider | 'none' | undefined = provider ?? (pinned ? undefined : 'none');
  // With no provider the doors owe nothing (DESIGN §9 "none"); any provider, or workers elsewhere ('pinned'), owes the registry's sets.
  const inner: Store = openStoreOn(
    options.database,
    writeRegistryFor(provider || pinned ? undefined : 'none', registry),
    { migrate: options.migrate, poolSize: options.poolSize, access: options.access },
  );
  try {
    await inner.now(); // Postgres: connect and migrate now, so a bad URL fails here
  } catch (err) {
    await inner.close().catch(() => undefined);
    throw err;
  }
  const workers = new Set<VerdictWorker>();

  const facade = {} as Record<string, unknown>;
  for (const name of TRACKER_STORE_METHODS) facade[name] = mappingErrors(inner, name);
  facade.transaction = <T>(fn: (tx: TrackerStore) => Promise<T>) => inner.transaction((tx) => fn(trackerOnly(tx)));
  facade.joinTransaction = (host: unknown) => {
    const join = (inner as { joinTransaction?: (h: unknown) => TrackerStore }).joinTransaction;
    if (!join)
      throw new ConfigError(
        'joinTransaction needs a Postgres database; on SQLite use store.transaction (or BEGIN on your own connection)',
      );
    return trackerOnly(join.call(inner, host));
  };

  const readers: VerdictReader = {
    async items(q) {
      const ws = await inner.getWorkspaceBySlug(q.workspace);
      if (!ws || ws.deletedAt !== null) return null;
      return itemListPage(inner, registry, () => openReader(inner, registry, readsAgainst, logger), ws, q);
    },
    async item(ref, opts) {
      const rows = await inner.readItemView(opts.workspace, ref);
      if (!rows) return null;
      const { decisions, sets: applicability } = await (
        await openReader(inner, registry, readsAgainst, logger)
      ).itemView(rows);
      const jobs = new Map(rows.jobs.map((j) => [j.questionSet, j]));
      const sets: ItemSetStatus[] = applicability.map((a) => {
        const j = jobs.get(a.questionSet);
        return {
          ...a,
          job: j
            ? { state: j.state, dueAt: j.notBefore, attempts: j.attempts, refusals: j.refusals, lastError: j.lastError }
            : null,
        };
      });
      return {
        item: { ...rows.item, fieldsObject: fieldsForDisplay(rows.item.fields) },
        collection: rows.collection.slug,
        decisions,
        sets,
        verdicts: rows.verdicts,
      };
    },
    async flags(set, opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws) return null;
      const out = await (
        await openReader(inner, registry, readsAgainst, logger)
      ).workspaceFlags(ws.id, set, opts.threshold);
      // A host knows its items by ref; the internal id is Verdict's own (refs are unique in a workspace).
      return { flags: Object.fromEntries(Object.values(out.flags).map((f) => [f.ref, f])), failing: out.failing };
    },
    async status(opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws) return null;
      return { workspace: ws.slug, items: await inner.countItems(ws.id), jobs: await inner.jobCountsBySet(ws.id) };
    },
    async flapping(set, opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws) return null;
      return (await openReader(inner, registry, readsAgainst, logger)).flapping(ws.id, set, opts);
    },
    async surfaced(set, opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws || !registry.get(set)) return null;
      return surfacedPage(inner, await openReader(inner, registry, readsAgainst, logger), ws, set, opts);
    },
    async keys(set, opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws) return null;
      return (await openReader(inner, registry, readsAgainst, logger)).setKeys(set, ws.id);
    },
    async searchItems(opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws || ws.deletedAt !== null) return null;
      return searchItemsPage(inner, ws, opts);
    },
    async history(ref, opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws) return null;
      const item = await inner.getItemByRef(ws.id, ref);
      if (!item) return null;
      return {
        itemId: item.id,
        ref: item.ref,
        entries: await (await openReader(inner, registry, readsAgainst, logger)).history(item.id),
      };
    },
    async queue(opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws) return null;
      return queueView(inner, ws.id, opts.parkedShown ?? 50);
    },
    async spend(opts = {}) {
      return spendWithDailyCap(inner, opts);
    },
    async throughput(opts = {}) {
      return throughputSeries(inner, opts);
    },
    async quality(opts) {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws) return null;
      const results = new Map((await latestEvalResults(inner, ws.id)).map((r) => [r.set, r]));
      const r = await openReader(inner, registry, readsAgainst, logger);
      const sets = [];
      for (const set of registry.all())
        sets.push({ set: set.name, eval: results.get(set.name) ?? null, flapping: await r.flapping(ws.id, set.name) });
      return { sets };
    },
  };
  // Driver errors reach the host as Verdict's (toStoreError), like the store's.
  const mappedRead =
    <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
    (...a: A) =>
      fn(...a).catch((err) => Promise.reject(toStoreError(err)));
  const reader: VerdictReader = {
    items: mappedRead(readers.items),
    item: mappedRead(readers.item),
    flags: mappedRead(readers.flags),
    status: mappedRead(readers.status),
    flapping: mappedRead(readers.flapping),
    surfaced: mappedRead(readers.surfaced),
    keys: mappedRead(readers.keys),
    searchItems: mappedRead(readers.searchItems),
    history: mappedRead(readers.history),
    queue: mappedRead(readers.queue),
    spend: mappedRead(readers.spend),
    throughput: mappedRead(readers.throughput),
    quality: mappedRead(readers.quality),
  };
  const rawJobs = jobsOn(inner);
  const jobs: VerdictJobs = {
    list: mappedRead(rawJobs.list),
    retry: mappedRead(rawJobs.retry),
    drop: mappedRead(rawJobs.drop),
  };
  facade.recordVerdict = async (input: RecordVerdictInput) => {
    try {
      return await recordVerdict(inner, await openReader(inner, registry, readsAgainst, logger), input);
    } catch (err) {
      throw toStoreError(err);
    }
  };
  facade.listVerdicts = async (q: { workspace: string; set?: string; ref?: string }) => {
    try {
      const ws = await inner.getWorkspaceBySlug(q.workspace);
      if (!ws) return [];
      let itemId: string | undefined;
      if (q.ref !== undefined) {
        const item = await inner.getItemByRef(ws.id, q.ref);
        if (!item) return [];
        itemId = item.id;
      }
      return await inner.listVerdicts({ workspaceId: ws.id, questionSet: q.set, itemId });
    } catch (err) {
      throw toStoreError(err);
    }
  };
  const tokens: VerdictTokens = {
    create: (o) => createApiToken(inner, o).catch((err) => Promise.reject(toStoreError(err))),
    list: async (opts = {}) => {
      if (opts.workspace === undefined) return inner.listApiTokens();
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      return ws ? inner.listApiTokens(ws.id) : [];
    },
    revoke: (id) => inner.revokeApiToken(id),
    authenticate: (token) => authenticateApiToken(inner, token),
  };
  const sessions: VerdictSessions = {
    open: (token) => openDashboardSession(inner, token).catch((err) => Promise.reject(toStoreError(err))),
    authenticate: (id) => findDashboardSession(inner, id).catch((err) => Promise.reject(toStoreError(err))),
    end: (id) => endDashboardSession(inner, id).catch((err) => Promise.reject(toStoreError(err))),
  };
  const actionDeps = { store: inner, registry, config: actionsConfig, readsAgainst, logger, cap: options.actions };
  const webhookOptions = webhookActionOptions(actionDeps);
  const github: VerdictGitHub = {
    importRepo: mappedRead((o) => importGitHubRepo(inner, { labelRule: actionsConfig.labels, ...o, logger })),
    importFiles: mappedRead((o) => importGitHubFiles(inner, { labelRule: actionsConfig.labels, ...o, logger })),
    applyWebhook: mappedRead((d) => applyGitHubWebhook(inner, d, webhookOptions)),
  };

  return {
    store: Object.freeze(facade) as unknown as Verdict['store'],
    registry,
    provider,
    reader,
    jobs,
    tokens,
    sessions,
    github,
    actions: actionsApi(actionDeps),
    explain: mappedRead(async (ref: string, opts: { workspace: string; set?: string }) => {
      const ws = await inner.getWorkspaceBySlug(opts.workspace);
      if (!ws || ws.deletedAt !== null) return null;
      const item = await inner.getItemByRef(ws.id, ref);
      if (!item) return null;
      if (opts.set !== undefined) {
        const collection = (await inner.listCollections(ws.id)).find((c) => c.id === item.collectionId);
        if (!registry.setsFor(collection?.slug ?? '').some((s) => s.name === opts.set))
          throw new InvalidInput(`set: no question set ${JSON.stringify(opts.set)} reads this item's collection`, {
            param: 'set',
          });
      }
      return explainItem(inner, registry, await openReader(inner, registry, readsAgainst, logger), item.id, opts.set);
    }),
    eval: (opts) =>
      evalWorkspace(
        {
          store: inner,
          registry,
          provider,
          logger,
          reader: () => openReader(inner, registry, readsAgainst, logger),
          makeProvider: (model) =>
            provider && ['fake', 'anthropic', 'openai'].includes(provider.name)
              ? createProvider(
                  loadConfig({ provider: provider.name, model }, (options.env ?? process.env) as NodeJS.ProcessEnv),
                  logger,
                )
              : null,
        },
        opts,
      ).catch((err) => Promise.reject(toStoreError(err))),
    worker(opts = {}) {
      if (!provider)
        throw new WorkerStateError(
          pinned
            ? "provider is 'pinned': this Verdict reads beside workers elsewhere and runs none"
            : 'provider is none: decisions are off, there is nothing for a worker to do',
        );
      const { workerId, ...settings } = opts;
      const cfg: WorkerSettings = {
        concurrency: DEFAULTS.concurrency,
        tickMs: DEFAULTS.tickMs,
        leaseMs: DEFAULTS.leaseMs,
        passLimit: DEFAULTS.passLimit,
        abandonLimit: DEFAULTS.abandonLimit,
        metricsPort: undefined,
        metricsHost: DEFAULTS.metricsHost,
        requestsPerMinute: undefined,
        inputTokensPerMinute: undefined,
        dailyTokenCap: undefined,
        driftSweepPerMinute: DEFAULTS.driftSweepPerMinute,
        pruneIntervalMs: DEFAULTS.pruneIntervalMs,
        retentionHistoryMs: DEFAULTS.retentionHistoryMs,
        walCheckpointMs: DEFAULTS.walCheckpointMs,
        ...settings,
      };
      const w = new VerdictWorker(
        (untilIdle, hooks) =>
          runWorker({
            cfg,
            store: inner,
            registry,
            provider,
            logger,
            untilIdle,
            workerId,
            database: describeDatabaseOption(options.database),
            spendSpoolDir: settings.spendSpoolDir ?? spoolDirOf(options.database),
            actionsConfig,
            ...hooks,
          }),
        logger,
      );
      workers.add(w);
      return w;
    },
    async close() {
      for (const w of workers) await w.stop().catch(() => undefined);
      if (typeof options.provider === 'string') await provider?.close?.(); // a Provider object is the host's
      await inner.close();
    },
  };
}

/**
 * `s[name]` bound to `s`, with driver errors mapped to Verdict's (toStoreError: Conflict,
 * StoreFailure), so a host branches on `code` alone. Errors a host's own callback throws inside
 * `transaction` are not touched: only the doors are wrapped.
 */
function mappingErrors(
  s: TrackerStore,
  name: (typeof TRACKER_STORE_METHODS)[number],
): (...a: unknown[]) => Promise<unknown> {
  const fn = s[name] as (...a: unknown[]) => Promise<unknown>;
  return async (...args: unknown[]) => {
    try {
      return await fn.apply(s, args);
    } catch (err) {
      throw toStoreError(err);
    }
  };
}

/** The TrackerStore methods of `s` only, bound to it: a transaction handle exposes nothing internal. */
function trackerOnly(s: TrackerStore): TrackerStore {
  const out = {} as Record<string, unknown>;
  for (const name of TRACKER_STORE_METHODS) out[name] = mappingErrors(s, name);
  out.transaction = (fn: (tx: TrackerStore) => Promise<unknown>) => (s as Store).transaction(fn);
  return Object.freeze(out) as unknown as TrackerStore;
}

/**
 * The spend spool's default directory (DESIGN §10.5): beside a SQLite file (a path or the host's
 * connection to a file), `./data/spend-spool` for a Postgres URL; none for an in-memory database or
 * the host's Postgres pool (give `spendSpoolDir`).
 */
function spoolDirOf(database: DatabaseOption): string | null {
  if (typeof database === 'string') return defaultSpoolDir(database);
  return 'sqlite' in database ? defaultSpoolDir(database.sqlite.name) : null;
}

/** How the worker's start line names the database (a path, host/db for Postgres, or the host's handle). */
function describeDatabaseOption(database: DatabaseOption): string {
  if (typeof database === 'string') return databaseLabel(database);
  return 'sqlite' in database ? `${database.sqlite.name} (the host's connection)` : "the host's Postgres pool";
}
