import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  doublePrecision,
  index,
  integer,
  pgTable,
  primaryKey,
  smallint,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

/**
 * PostgreSQL schema (DESIGN §2, §13), kept column for column identical to `../sqlite/schema.ts`:
 * the same tables, column names, nullability, defaults, keys and index names and columns
 * (test/store/schema-parity.test.ts compares the two). Dialect types only: epoch-millisecond
 * times and token totals are `bigint` (read as JS numbers: they stay below 2^53), SQLite's
 * 0/1 booleans are `boolean`, its `real` is `double precision`, and `item_decisions.id` is an
 * identity column where SQLite has AUTOINCREMENT. JSON columns stay `text` so their bytes
 * survive (never jsonb).
 */

const ms = (name: string) => bigint(name, { mode: 'number' });

export const workspaces = pgTable(
  'workspaces',
  {
    id: text('id').primaryKey(),
    slug: text('slug').notNull(),
    createdAt: ms('created_at').notNull(),
    deletedAt: ms('deleted_at'),
  },
  (t) => [uniqueIndex('workspaces_slug_uq').on(t.slug)],
);

export const collections = pgTable(
  'collections',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id')
      .notNull()
      .references(() => workspaces.id),
    slug: text('slug').notNull(),
    isSystem: boolean('is_system').notNull().default(false),
    /** JSON: `{fields: [{key, type, options?, terminal_options?}]}` */
    schema: text('schema').notNull().default('{"fields":[]}'),
    /** JSON: `{tracks_work?: boolean (default true), role?: "conventions"}` */
    settings: text('settings').notNull().default('{}'),
    createdAt: ms('created_at').notNull(),
    deletedAt: ms('deleted_at'),
  },
  (t) => [uniqueIndex('collections_ws_slug_uq').on(t.workspaceId, t.slug)],
);

export const items = pgTable(
  'items',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id')
      .notNull()
      .references(() => workspaces.id),
    collectionId: text('collection_id')
      .notNull()
      .references(() => collections.id),
    ref: text('ref').notNull(),
    title: text('title').notNull(),
    content: text('content').notNull().default(''),
    /** A JSON object, stored as text so its bytes (and number literals) survive. */
    fields: text('fields').notNull().default('{}'),
    /** Bumped by every write that changes a stored value. */
    seq: integer('seq').notNull().default(1),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
    deletedAt: ms('deleted_at'),
    /** Where the item lives in its tracker (a GitHub issue's `html_url`), an http(s) URL, or null. Not part of the state. */
    sourceUrl: text('source_url'),
  },
  (t) => [
    uniqueIndex('items_ws_ref_uq').on(t.workspaceId, t.ref),
    index('items_collection_idx').on(t.collectionId, t.id),
    // The drift sweep's batch read (workspace, id > cursor, ORDER BY id LIMIT n): without it SQLite
    // took items_ws_ref_uq and sorted the whole workspace, 40 ms a batch at 50,000 items whatever
    // the limit, which held the event loop beside a drain (DESIGN §10.1); with it, 1 ms.
    index('items_ws_id_idx').on(t.workspaceId, t.id),
  ],
);

export const comments = pgTable(
  'comments',
  {
    id: text('id').primaryKey(),
    itemId: text('item_id')
      .notNull()
      .references(() => items.id),
    parentCommentId: text('parent_comment_id'),
    author: text('author').notNull(),
    body: text('body').notNull(),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
    deletedAt: ms('deleted_at'),
  },
  (t) => [
    index('comments_item_idx').on(t.itemId, t.createdAt, t.id),
    index('comments_parent_idx').on(t.parentCommentId),
  ],
);

export const itemLinks = pgTable(
  'item_links',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id')
      .notNull()
      .references(() => workspaces.id),
    sourceId: text('source_id')
      .notNull()
      .references(() => items.id),
    targetId: text('target_id')
      .notNull()
      .references(() => items.id),
    /** `parent`: source's parent is target; `blocks`: source blocks target; others kept, not read. */
    linkType: text('link_type').notNull(),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('item_links_uq').on(t.sourceId, t.targetId, t.linkType),
    index('item_links_target_idx').on(t.targetId),
  ],
);

export const decisionJobs = pgTable(
  'decision_jobs',
  {
    itemId: text('item_id').notNull(),
    questionSet: text('question_set').notNull(),
    workspaceId: text('workspace_id').notNull(),
    /** 0 live writes, 1 backfill and drift sweep. */
    priority: integer('priority').notNull(),
    generation: integer('generation').notNull().default(1),
    enqueuedAt: ms('enqueued_at').notNull(),
    notBefore: ms('not_before').notNull(),
    claimedBy: text('claimed_by'),
    claimToken: text('claim_token'),
    leaseExpiresAt: ms('lease_expires_at'),
    attempts: integer('attempts').notNull().default(0),
    refusals: integer('refusals').notNull().default(0),
    abandons: integer('abandons').notNull().default(0),
    /**
     * Consecutive defers (DESIGN §3.7): bumped by every defer, reset by an enqueue and by any
     * other recorded outcome; past DEFER_LIMIT in a row the next defer is recorded as a fail.
     */
    defers: integer('defers').notNull().default(0),
    /** `owed`, `parked`, or `batched`: in a provider batch (DESIGN §7.3), not claimable until its result is stored or the batch re-owes it. */
    state: text('state', { enum: ['owed', 'parked', 'batched'] })
      .notNull()
      .default('owed'),
    /** The `provider_batches` row a batched job is in; null otherwise (a write that re-owes the job leaves it, and the batch then leaves the job alone). */
    batchId: text('batch_id'),
    lastError: text('last_error'),
    lastErrorAt: ms('last_error_at'),
    /** Fair-queuing tag across workspaces (see ../sqlite/schema.ts and ./owe.ts). */
    fairTag: bigint('fair_tag', { mode: 'number' }).notNull().default(0),
    /** Time of the latest enqueue (see ../sqlite/schema.ts): a completion that finds the generation moved makes it enqueued_at (DESIGN §3.4). */
    owedAt: ms('owed_at').notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.itemId, t.questionSet] }),
    index('decision_jobs_claim_idx').on(t.state, t.priority, t.notBefore, t.enqueuedAt),
    // The claim walks this index in order (FOR UPDATE SKIP LOCKED stops at the first free row).
    index('decision_jobs_claim_order_idx').on(t.state, t.priority, t.fairTag, t.enqueuedAt, t.itemId, t.questionSet),
    index('decision_jobs_ws_idx').on(t.workspaceId, t.questionSet),
    index('decision_jobs_ws_fair_idx').on(t.workspaceId, t.priority, t.fairTag),
    // The jobs of one provider batch (a sweep re-owes or completes them together).
    index('decision_jobs_batch_idx').on(t.batchId),
  ],
);

export const itemDecisions = pgTable(
  'item_decisions',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    workspaceId: text('workspace_id').notNull(),
    itemId: text('item_id').notNull(),
    questionSet: text('question_set').notNull(),
    /** Per-comment keys are `<key>@<commentId>`. */
    questionKey: text('question_key').notNull(),
    kind: text('kind', { enum: ['noul', 'choice', 'score'] }).notNull(),
    /** JSON: `{type, ...the kind's members}`. */
    answer: text('answer').notNull(),
    /** Null for nouls. */
    confidence: doublePrecision('confidence'),
    provider: text('provider').notNull(),
    model: text('model').notNull(),
    stateHash: text('state_hash').notNull(),
    questionHash: text('question_hash').notNull(),
    stateVersion: integer('state_version').notNull(),
    /** JSON: part name → hash. */
    stateParts: text('state_parts').notNull(),
    inputTokens: integer('input_tokens').notNull().default(0),
    outputTokens: integer('output_tokens').notNull().default(0),
    itemSeq: integer('item_seq').notNull(),
    stateTruncated: boolean('state_truncated').notNull().default(false),
    evaluatedAt: ms('evaluated_at').notNull(),
    rationale: text('rationale'),
    /** JSON `{model, prompt_version, effort}` the answer was asked under; tells question_changed from model_changed. */
    fingerprintContext: text('fingerprint_context'),
  },
  (t) => [
    // The idempotency key (DESIGN §2): an insert that conflicts does nothing.
    uniqueIndex('item_decisions_idem_uq').on(
      t.itemId,
      t.questionSet,
      t.questionKey,
      t.stateHash,
      t.questionHash,
      t.stateVersion,
    ),
    index('item_decisions_latest_idx').on(t.itemId, t.questionSet, t.questionKey, t.id),
    index('item_decisions_ws_idx').on(t.workspaceId, t.questionSet, t.itemId),
  ],
);

/**
 * Ways the shared rows (the hour's spend row, the minute's throughput count row) are split on
 * PostgreSQL (DESIGN §2 decision_spend): every finish of every process adds to them, and a row
 * lock is held from the add to the commit, so one row serialised every finish behind whichever
 * backend held it, a wait that grows with the processes and with a busy machine's preemptions
 * (bench part d, 4 processes: up to 15 backends waiting on it per sample). A backend writes the
 * shard of its process id, so two backends share a row only when their ids agree modulo 16;
 * readers sum over shards. 16 bounds the rows an hour (or a minute) adds: 16 × its keys.
 */
const SHARED_ROW_SHARDS = 16;
const SHARD_OF_BACKEND = sql.raw(`(pg_backend_pid() % ${SHARED_ROW_SHARDS})`);

export const decisionSpend = pgTable(
  'decision_spend',
  {
    /** Start of the hour, epoch ms. */
    hour: ms('hour').notNull(),
    questionSet: text('question_set').notNull(),
    provider: text('provider').notNull(),
    model: text('model').notNull(),
    outcome: text('outcome').notNull(),
    calls: bigint('calls', { mode: 'number' }).notNull().default(0),
    inputTokens: bigint('input_tokens', { mode: 'number' }).notNull().default(0),
    outputTokens: bigint('output_tokens', { mode: 'number' }).notNull().default(0),
    cacheReadTokens: bigint('cache_read_tokens', { mode: 'number' }).notNull().default(0),
    cacheWriteTokens: bigint('cache_write_tokens', { mode: 'number' }).notNull().default(0),
    /** The row's shard of its hour (DESIGN §2 decision_spend): the writing backend's, SHARED_ROW_SHARDS ways. */
    shard: smallint('shard').notNull().default(SHARD_OF_BACKEND),
  },
  (t) => [primaryKey({ columns: [t.hour, t.questionSet, t.provider, t.model, t.outcome, t.shard] })],
);

/**
 * Jobs per minute by outcome (DESIGN §2 job_throughput): the queue page's throughput chart. Each
 * outcome transaction adds its jobs to its minute's row in the same transaction (a group commit
 * adds one row per outcome it holds, not one per job); retention deletes rows past the history window.
 */
export const jobThroughput = pgTable(
  'job_throughput',
  {
    /** Start of the minute (UTC), epoch ms. */
    minute: ms('minute').notNull(),
    /** The recorded outcome (src/store/throughput.ts `JOB_OUTCOMES`). */
    outcome: text('outcome').notNull(),
    jobs: bigint('jobs', { mode: 'number' }).notNull().default(0),
    /** The row's shard of its minute (DESIGN §2 job_throughput): the writing backend's, SHARED_ROW_SHARDS ways. */
    shard: smallint('shard').notNull().default(SHARD_OF_BACKEND),
  },
  (t) => [primaryKey({ columns: [t.minute, t.outcome, t.shard] })],
);

/**
 * Daily-token-cap reservations (DESIGN §10.3): one row per provider call in flight, holding its
 * estimated input tokens plus its output ceiling until the call settles to its real usage (the
 * row is deleted and the spend recorded in one transaction). A row of a process that died
 * expires at `expires_at` (the call's lease), so a crash never holds the cap for longer.
 */
export const decisionSpendReservations = pgTable(
  'decision_spend_reservations',
  {
    id: text('id').primaryKey(),
    /** The runner that holds it (`host:pid/slot`), for diagnostics. */
    holder: text('holder').notNull(),
    /** Estimated input tokens plus the output ceiling. */
    tokens: bigint('tokens', { mode: 'number' }).notNull(),
    createdAt: ms('created_at').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [index('decision_spend_reservations_expires_idx').on(t.expiresAt)],
);

/** Key-value rows for cursors (backfill) and process-wide markers. */
export const verdictMeta = pgTable('verdict_meta', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
  updatedAt: ms('updated_at')
    .notNull()
    .default(sql`0`),
});

/**
 * HTTP API bearer tokens (DESIGN §16.2): scoped to one workspace and one role. Only the SHA-256
 * of the token is kept (hex); the token itself is shown once at creation.
 */
export const apiTokens = pgTable(
  'api_tokens',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id')
      .notNull()
      .references(() => workspaces.id),
    /** `read`, `write` or `admin`. */
    role: text('role').notNull(),
    /** Hex SHA-256 of the whole token. */
    tokenHash: text('token_hash').notNull(),
    /** A label for `tokens list`; never the token. */
    name: text('name').notNull().default(''),
    createdAt: ms('created_at').notNull(),
    revokedAt: ms('revoked_at'),
  },
  (t) => [uniqueIndex('api_tokens_hash_uq').on(t.tokenHash), index('api_tokens_ws_idx').on(t.workspaceId)],
);

/**
 * Dashboard sessions (DESIGN §16.6): one row per login. The cookie carries a random session id;
 * only its SHA-256 (hex) is kept, so a copy of the database opens no session. A session lives
 * while its token is unrevoked and its workspace live, until `expires_at` (12 h after login) or
 * until it has been idle past the idle timeout (`last_seen_at`). Logout deletes the row.
 */
export const dashboardSessions = pgTable(
  'dashboard_sessions',
  {
    /** Hex SHA-256 of the session id the cookie carries. */
    idHash: text('id_hash').primaryKey(),
    tokenId: text('token_id')
      .notNull()
      .references(() => apiTokens.id),
    workspaceId: text('workspace_id')
      .notNull()
      .references(() => workspaces.id),
    /** The token's role at login: `read`, `write` or `admin`. */
    role: text('role').notNull(),
    createdAt: ms('created_at').notNull(),
    expiresAt: ms('expires_at').notNull(),
    lastSeenAt: ms('last_seen_at').notNull(),
  },
  (t) => [index('dashboard_sessions_token_idx').on(t.tokenId), index('dashboard_sessions_expires_idx').on(t.expiresAt)],
);

/**
 * Inbound webhook deliveries already applied (DESIGN §16.2), keyed by the sender's delivery id
 * (`X-GitHub-Delivery`): a redelivery finds its row and is a no-op. Written in the transaction
 * of the writes the delivery made.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    source: text('source').notNull(),
    deliveryId: text('delivery_id').notNull(),
    /** The event name (`issues`, `issue_comment`, ...), for diagnostics. */
    event: text('event').notNull(),
    receivedAt: ms('received_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.source, t.deliveryId] }), index('webhook_deliveries_received_idx').on(t.receivedAt)],
);

/**
 * Outbound event receivers (DESIGN §16.2): one row per URL the worker is configured to deliver
 * to (`VERDICT_EVENT_URLS`). An event is queued once per live target when it is written, so a
 * target only receives events from the time it was configured.
 */
export const eventTargets = pgTable('event_targets', {
  url: text('url').primaryKey(),
  createdAt: ms('created_at').notNull(),
  /** Set when the URL left the configuration: no new events are queued for it. */
  disabledAt: ms('disabled_at'),
});

/**
 * The outbox of decision events (DESIGN §16.2), one row per (event, target): a noul started or
 * stopped surfacing for an item. Written in the transaction that stored the answer; delivered in
 * `id` order per (target, item), each row under a lease, retried with the job backoff until the
 * receiver answers 2xx.
 */
export const decisionEvents = pgTable(
  'decision_events',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    targetUrl: text('target_url').notNull(),
    /** The event's own id (the same for every target), sent as `X-Verdict-Event` for receivers to de-duplicate. */
    eventId: text('event_id').notNull(),
    workspaceId: text('workspace_id').notNull(),
    itemId: text('item_id').notNull(),
    /**
     * What the row delivers and to whom (DESIGN §17): `webhook` (a decision event POSTed to
     * `target_url`) or `github` (a label change on an issue, `target_url` = `github:<owner/name>`).
     * Each kind has its own deliverer, which claims only its rows.
     */
    kind: text('kind').notNull().default('webhook'),
    /** `decision.surfaced` or `decision.cleared`; `labels.set` for a `github` row. */
    type: text('type').notNull(),
    /** The JSON body sent, exactly (ids, ref, set, key, probability, state hash; never item text). */
    payload: text('payload').notNull(),
    createdAt: ms('created_at').notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: ms('next_attempt_at').notNull(),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: ms('lease_expires_at'),
    deliveredAt: ms('delivered_at'),
    /** The last failure's class and HTTP status (never the receiver's body). */
    lastError: text('last_error'),
  },
  (t) => [
    index('decision_events_due_idx').on(t.deliveredAt, t.nextAttemptAt),
    index('decision_events_target_item_idx').on(t.targetUrl, t.itemId, t.id),
  ],
);

/** People's verdicts (DESIGN §8.1); see ../sqlite/schema.ts. */
export const humanVerdicts = pgTable(
  'human_verdicts',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    workspaceId: text('workspace_id').notNull(),
    itemId: text('item_id').notNull(),
    questionSet: text('question_set').notNull(),
    questionKey: text('question_key').notNull(),
    verdict: text('verdict').notNull(),
    value: text('value'),
    stateHash: text('state_hash').notNull(),
    stateVersion: integer('state_version').notNull(),
    stateParts: text('state_parts').notNull(),
    decisionId: bigint('decision_id', { mode: 'number' }),
    author: text('author').notNull(),
    note: text('note'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [
    index('human_verdicts_key_idx').on(t.itemId, t.questionSet, t.questionKey, t.id),
    index('human_verdicts_ws_idx').on(t.workspaceId, t.questionSet, t.id),
  ],
);

/** Surfacing changes (DESIGN §8.2); see ../sqlite/schema.ts. */
export const surfacingChanges = pgTable(
  'surfacing_changes',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    workspaceId: text('workspace_id').notNull(),
    itemId: text('item_id').notNull(),
    questionSet: text('question_set').notNull(),
    questionKey: text('question_key').notNull(),
    surfaced: boolean('surfaced').notNull(),
    flip: boolean('flip').notNull(),
    probability: doublePrecision('probability').notNull(),
    cause: text('cause').notNull(),
    stateHash: text('state_hash').notNull(),
    changedAt: ms('changed_at').notNull(),
  },
  (t) => [
    index('surfacing_changes_key_idx').on(t.itemId, t.questionSet, t.questionKey, t.id),
    index('surfacing_changes_ws_idx').on(t.workspaceId, t.questionSet, t.changedAt),
  ],
);

/**
 * Provider batches (DESIGN §7.3), one row per batch this database submitted. The row is written
 * with its requests and the batched jobs *before* the submit (status `submitting`), so a crash
 * between the submit and recording the provider's id finds the batch again (by time and size in
 * the provider's list) instead of submitting it twice.
 */
export const providerBatches = pgTable(
  'provider_batches',
  {
    /** Ours (`vb` + 12 base-36 characters); every custom id of the batch starts with it. */
    id: text('id').primaryKey(),
    provider: text('provider').notNull(),
    model: text('model').notNull(),
    /** The provider's batch id; null until the submit returned. */
    providerBatchId: text('provider_batch_id'),
    /** `submitting`, `in_progress`, `ended` (results being stored) or `done`. */
    status: text('status', { enum: ['submitting', 'in_progress', 'ended', 'done'] }).notNull(),
    requestCount: integer('request_count').notNull(),
    createdAt: ms('created_at').notNull(),
    submittedAt: ms('submitted_at'),
    /** The provider's expiry (24 h after creation for Anthropic). */
    expiresAt: ms('expires_at'),
    endedAt: ms('ended_at'),
    /** Last time the sweep asked the provider about it. */
    polledAt: ms('polled_at'),
    /** How the batch ended for us: `results`, `expired`, `canceled`, `not_submitted`, `lost`. */
    outcome: text('outcome'),
  },
  (t) => [index('provider_batches_status_idx').on(t.status, t.createdAt)],
);

/**
 * One request of a provider batch: what was asked (the state's hash, version and parts; each
 * set's keys, fingerprints and questions; each job's generation at assembly), so its result is
 * stored for the state it was asked about. Deleted once its result is stored.
 */
export const batchRequests = pgTable(
  'batch_requests',
  {
    batchId: text('batch_id').notNull(),
    customId: text('custom_id').notNull(),
    workspaceId: text('workspace_id').notNull(),
    itemId: text('item_id').notNull(),
    /** JSON `BatchPlan` (see store/sql/batches.ts). */
    plan: text('plan').notNull(),
  },
  (t) => [primaryKey({ columns: [t.batchId, t.customId] })],
);

/**
 * Actions in GitHub (DESIGN §17): one row per (item, set, key) that acts, holding what Verdict
 * writes for it, what it proposes instead, what it handed to the outbox and what it last saw on the
 * issue. Label lists are JSON arrays of names, sorted.
 */
export const itemActions = pgTable(
  'item_actions',
  {
    itemId: text('item_id').notNull(),
    questionSet: text('question_set').notNull(),
    questionKey: text('question_key').notNull(),
    workspaceId: text('workspace_id').notNull(),
    /** The labels of the key's group Verdict writes now; null leaves the group alone (nothing to act on). */
    want: text('want'),
    /** `model` (past the gate) or `human` (a person's verdict in force) for `want`. */
    source: text('source'),
    /** The answer row `want` stands for (null for a person's value without one). */
    decisionId: bigint('decision_id', { mode: 'number' }),
    /** The labels the model's answer asks for that the gate holds back: the proposal; null when none. */
    proposal: text('proposal'),
    /** Why it is held back: `gate` (not calibrated), `mode` (actions on propose) or `person` (a person's verdict holds the key). */
    proposalReason: text('proposal_reason'),
    /** The answer row the proposal stands for: applying it is an `agree` on this row, dismissing it a `disagree`. */
    proposalDecisionId: bigint('proposal_decision_id', { mode: 'number' }),
    /** The `want` last handed to the outbox; null when none is pending (never queued, or its write was skipped). */
    queued: text('queued'),
    /** The group's labels on the issue as Verdict last saw them (a delivery, a webhook); null when unknown. */
    applied: text('applied'),
    /** When the one comment of this (item, key) was posted; null when none was. */
    commentedAt: ms('commented_at'),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.itemId, t.questionSet, t.questionKey] }),
    index('item_actions_ws_idx').on(t.workspaceId, t.questionSet, t.questionKey),
  ],
);
