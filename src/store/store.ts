import type { NormaliseReport } from './input-rules.js';
import type { StateLink, TrailComment } from '../decision/state.js';
import type { CollectionRow, CollectionSchema, CollectionSettings, FieldDef, ItemRow } from '../decision/rows.js';
import type { Usage } from '../decision/usage.js';
import type { CollectionOweStep } from './collection-owe.js';
import type { DecisionEventRow, EventClaimRequest, EventDelivery, EventDeliveryStats, OutboxKind, SurfacingContext } from './events.js';
import type { HumanVerdictRow, NewVerdict, SurfacingChangeRow, VerdictSurfacing } from './verdicts.js';
import type { ActionStore } from './actions.js';
import type { JobStore } from './job-store.js';
import { VerdictError } from '../errors.js';
import type { Question } from '../decision/questions.js';

export type { CollectionOweStep };
export type { JobStore };
export type { DecisionEventRow, EventClaimRequest, EventDelivery, EventDeliveryStats, OutboxKind, SurfacingContext };
export type { HumanVerdictRow, NewVerdict, SurfacingChangeRow, VerdictSurfacing };

/**
 * The Store: every SQL statement lives behind this interface (DESIGN §13). The runner, the
 * CLI and trackers see only this; SQLite (`./sqlite/`) and Postgres (`./postgres/`) implement it,
 * and test/store/conformance.ts holds both to the same tests. Methods are async so both dialects
 * fit; the SQLite implementation does its work synchronously inside.
 *
 * Time: the store owns "now" (an injected clock on SQLite, the database's clock on Postgres).
 * Callers pass durations in milliseconds, never timestamps.
 */

/** Job priorities: live writes are claimed before backfill and drift-sweep work. */
export const PRIORITY_LIVE = 0;
export const PRIORITY_BACKFILL = 1;

export interface WorkspaceRow {
  id: string;
  slug: string;
  createdAt: number;
  deletedAt: number | null;
}

/** Re-exported: the tracker rows the decision rules read live in decision/rows.ts (the store imports decision, never the reverse). */
export type { FieldDef, CollectionSchema, CollectionSettings, CollectionRow, ItemRow };

export interface CommentRow {
  id: string;
  itemId: string;
  parentCommentId: string | null;
  author: string;
  body: string;
  createdAt: number;
  updatedAt: number;
  deletedAt: number | null;
}

export interface LinkRow {
  id: string;
  workspaceId: string;
  sourceId: string;
  targetId: string;
  linkType: string;
  createdAt: number;
}

/** How a write owes work. Live writes: priority 0 with the quiet period; imports: backfill, no quiet period. */
export interface OweOptions {
  /** @defaultValue PRIORITY_LIVE */
  priority?: number;
  /** Apply each set's quiet period. @defaultValue true */
  quietPeriod?: boolean;
  /**
   * Apply each set's re-ask debounce (latest stored answer + `reaskDebounce`). The drift sweep and
   * `verdict reask` pass false: their re-asks are not edits to coalesce, and they are bounded by
   * the sweep's own rate. @defaultValue true
   */
  reaskDebounce?: boolean;
}

/** What a write door did. */
export interface WriteResult<T> {
  /** The row after the write (null after a hard delete). */
  row: T;
  /** False when the write changed no stored value: no seq bump, nothing owed. */
  changed: boolean;
  /** Lone surrogates replaced and NULs removed (DESIGN §2). */
  normalised: NormaliseReport;
  /** Job rows upserted in the same transaction. */
  owed: number;
}

export interface NewItem {
  /** Defaults to a fresh random id; importers pass a derived one. */
  id?: string;
  workspaceId: string;
  collectionId: string;
  ref: string;
  title: string;
  content?: string;
  /** A JSON object (or its text). Stored as text. */
  fields?: Record<string, unknown> | string;
  /** Defaults to now. Importers pass the source's times. */
  createdAt?: number;
  /** Create the item already soft-deleted (imported tombstones). */
  deletedAt?: number | null;
  /**
   * Where the item lives in its tracker (`ItemRow.sourceUrl`): an absolute http(s) URL of at most
   * 2,048 characters, or null. `upsertItem` leaves the stored one alone when this is undefined.
   * @defaultValue null
   */
  sourceUrl?: string | null;
}

/**
 * An item edit. Fields edits keep every byte of the stored fields they do not touch (DESIGN
 * §3.2); a value equal to the stored one (the same number however written) is no change, and a
 * patch that changes nothing is a no-op (no seq bump, nothing owed).
 */
export interface ItemPatch {
  title?: string;
  content?: string;
  /**
   * The whole fields object. As text: stored exactly as given. As an object: every key set to its
   * value and keys it lacks removed, with unchanged members keeping their stored bytes.
   */
  fields?: Record<string, unknown> | string;
  /**
   * Sets only these keys, leaving every other member's bytes alone; not with `fields`. Pass a
   * lossless-json `LosslessNumber` to store a number literal exactly (`3.0`, integers beyond 2^53).
   */
  setFields?: Record<string, unknown>;
}

export interface NewComment {
  id?: string;
  itemId: string;
  parentCommentId?: string | null;
  author: string;
  body: string;
  createdAt?: number;
}

export interface NewLink {
  id?: string;
  workspaceId: string;
  sourceId: string;
  targetId: string;
  linkType: string;
  createdAt?: number;
}

/** The live claim of one job, handed to every outcome as its fence. */
export interface Claim {
  itemId: string;
  questionSet: string;
  workspaceId: string;
  /** The job's generation at claim time; a later enqueue bumps it. */
  generation: number;
  claimToken: string;
  claimedBy: string;
  /** Claims since the last enqueue, counting this one. */
  attempts: number;
  refusals: number;
  abandons: number;
  /** Consecutive defers before this claim (DESIGN §3.7). */
  defers: number;
  priority: number;
  enqueuedAt: number;
  /** Jobs of the same item claimed with this one for co-asking (DESIGN §7.2; `ClaimRequest.coAsk`), under the same lease. */
  coAsked?: Claim[];
}

/**
 * What an outcome did:
 * - `applied`: the outcome took effect;
 * - `superseded`: a write landed during the evaluation (generation moved); only the claim was
 *   cleared and `not_before` recomputed, so the newer generation runs;
 * - `lost`: the claim token no longer matches (the lease ran out and another runner claimed the
 *   job, or the row is gone); nothing was changed.
 */
export type OutcomeResult = 'applied' | 'superseded' | 'lost';

/** What a claim asks for (see `Store.claimNextJob`): the claimant, its lease in milliseconds, the abandon limit, sets to pass over. */
export interface ClaimRequest {
  workerId: string;
  leaseMs: number;
  abandonLimit: number;
  /** Sets whose jobs are passed over (a set cooling off after a rejected schema, DESIGN §3.8). */
  skipSets?: readonly string[];
  /** Live work only (priority 0): backfill-priority jobs are left to a provider batch (DESIGN §7.3). */
  liveOnly?: boolean;
  /**
   * Co-asking (DESIGN §7.2): set → the sets whose jobs of the same item are claimed with it when
   * due (`Claim.coAsked`), in the claim's own statements, so another slot cannot take them between.
   */
  coAsk?: Readonly<Record<string, readonly string[]>>;
}

/**
 * What `Store.finishJob` does besides completing the job, in the same transaction: one commit
 * per evaluation in the steady state instead of five (a commit is one fsync at `synchronous=FULL`).
 */
export interface JobFinish {
  /**
   * The answers of the job's last call and that call's spend. They are stored whatever the fence
   * says (lost, superseded or applied): the call was paid for, and its answers are keyed by the
   * state they answer, so a newer generation finds them current or asks again (DESIGN §7 step 6).
   * With `reservationId` the spend settles that daily-cap reservation (DESIGN §10.3).
   */
  answers?: {
    decisions: NewDecision[];
    spend: SpendRecord;
    reservationId: string | null;
    /** The item's ref and the set's threshold: the answers' surfacing events are queued in the same transaction (DESIGN §16.2; see `insertDecisions`). */
    surfacing?: SurfacingContext;
  };
  /** Claims the slot's next job (as `claimNextJob` would) after the completion. */
  claimNext?: ClaimRequest;
}

// ------------------------------------------------------------- provider batches (DESIGN §7.3)

/** A provider batch as this database records it (`provider_batches`). Times are epoch ms. */
export interface ProviderBatchRow {
  /** Ours; every custom id of the batch starts with it. */
  id: string;
  provider: string;
  model: string;
  /** The provider's id; null while `submitting` (the submit has not returned, or the process died before recording it). */
  providerBatchId: string | null;
  status: 'submitting' | 'in_progress' | 'ended' | 'done';
  requestCount: number;
  createdAt: number;
  submittedAt: number | null;
  expiresAt: number | null;
  endedAt: number | null;
  polledAt: number | null;
  /** How it ended for us (`results`, `expired`, `canceled`, `not_submitted`, `lost`), once `done`. */
  outcome: string | null;
}

/** A batch about to be submitted: its id (see `ProviderBatchRow.id`), provider and model. */
export interface NewProviderBatch {
  id: string;
  provider: string;
  model: string;
}

/** Fields of a batch row to change. */
export type ProviderBatchPatch = Partial<Pick<ProviderBatchRow, 'providerBatchId' | 'status' | 'submittedAt' | 'expiresAt' | 'endedAt' | 'polledAt' | 'outcome'>>;

/**
 * What one batch request asked, kept until its result is stored (DESIGN §7.3): the state (hash,
 * version, parts) and, per job co-asked in it, the set's stored keys, fingerprints, questions,
 * surfacing settings and the job's generation at assembly.
 */
export interface BatchPlan {
  stateHash: string;
  stateVersion: number;
  stateParts: Readonly<Record<string, string>>;
  stateTruncated: boolean;
  explain: boolean;
  itemSeq: number;
  ref: string;
  /** Estimated input tokens and the output ceiling of the request, as a call's permit would take them. */
  estimate: { inputTokens: number; maxOutputTokens: number };
  /** The request's reservation against the daily token cap (DESIGN §10.3), when one is set; its result or the batch's close settles it. */
  reservationId?: string | null;
  parts: Array<{
    questionSet: string;
    generation: number;
    /** [stored key, question key] pairs. */
    storedKeys: Array<[string, string]>;
    fingerprints: Record<string, string>;
    questions: Record<string, Question>;
    threshold: number;
    hysteresis: number;
    unsurfaced: string[];
  }>;
}

/** One request of a batch to record with it. */
export interface NewBatchRequest {
  customId: string;
  workspaceId: string;
  itemId: string;
  plan: BatchPlan;
}

/** A recorded request whose result is not stored yet. */
export interface BatchRequestRow extends NewBatchRequest {
  batchId: string;
}

/**
 * What a batch result does to one of its jobs, applied only while the job is still batched in
 * that batch: `complete`/`drop` delete it; `fail` re-owes it after `backoffMs` (the attempt was
 * counted at assembly); `refuse` counts a refusal and parks at `refusalLimit`; `release` re-owes
 * it at once, the attempt given back.
 */
export interface BatchJobOutcome {
  itemId: string;
  questionSet: string;
  outcome: 'complete' | 'drop' | 'fail' | 'refuse' | 'release';
  backoffMs?: number;
  error?: string;
  refusalLimit?: number;
}

/**
 * One request's result to store (`Store.storeBatchResult`). With answers, the item's liveness is
 * checked in the storing transaction: an item (or collection) deleted since keeps none of them and
 * its jobs drop; a deleted workspace's jobs are released.
 */
export interface BatchResultWrite {
  itemId: string;
  answers: Array<{ decisions: NewDecision[]; surfacing: SurfacingContext }>;
  /** The request's daily-cap reservation (`BatchPlan.reservationId`), settled by this spend. */
  reservationId?: string | null;
  spend: SpendRecord[];
  jobs: BatchJobOutcome[];
}

/**
 * One entry's result in `Store.finishJobs`: what its `finishJob` did, or the error its own
 * statements threw (nothing of that entry was written; the other entries are unaffected).
 */
export type JobFinishResult = { ok: true; finished: FinishedJob } | { ok: false; error: unknown };

/** What `Store.finishJob` did: the completion's fenced result, the answers inserted, and the next claim (null when none was asked for or none is claimable). */
export interface FinishedJob {
  result: OutcomeResult;
  answersStored: number;
  next: Claim | null;
}

export interface JobRow {
  itemId: string;
  questionSet: string;
  workspaceId: string;
  priority: number;
  generation: number;
  enqueuedAt: number;
  notBefore: number;
  claimedBy: string | null;
  claimToken: string | null;
  leaseExpiresAt: number | null;
  attempts: number;
  refusals: number;
  abandons: number;
  /** Consecutive defers since the last enqueue or other recorded outcome (DESIGN §3.7). */
  defers: number;
  /** `batched`: in a provider batch (DESIGN §7.3), not claimable until its result is stored or the batch re-owes it. */
  state: 'owed' | 'parked' | 'batched';
  /** The provider batch (`provider_batches.id`) a batched job is in; may outlive it on a job a write re-owed. */
  batchId: string | null;
  lastError: string | null;
  lastErrorAt: number | null;
  /** Fair-queuing tag: the claim order across workspaces after priority (set once, at insert). */
  fairTag: number;
  /** Epoch ms of the latest enqueue; 0 on rows stored before it was kept (DESIGN §3.4). */
  owedAt: number;
}

export interface JobFilter {
  questionSet?: string;
  state?: 'owed' | 'parked' | 'batched';
  workspaceId?: string;
  itemId?: string;
  /** `listJobs` only: jobs whose last error was recorded within this many milliseconds. */
  errorWithinMs?: number;
  limit?: number;
}

/** Everything the state builder needs about an item, read in one go. */
export interface ItemForEvaluation {
  item: ItemRow;
  collection: CollectionRow;
  workspace: WorkspaceRow;
  /** Live comments (tombstones excluded), any order. */
  comments: TrailComment[];
  /** Links to and from live items, as the state reads them. */
  links: StateLink[];
}

/**
 * What an item view shows, read at once (`Store.readItemView`): the item with its workspace and
 * collection, its stored answers (oldest first), its jobs (by set), people's verdicts on it (oldest
 * first), and, only when it has answers, what judging them needs: its surfacing changes (oldest
 * first) and its live comments and links as the state builder reads them.
 */
export interface ItemViewRows {
  workspace: WorkspaceRow;
  item: ItemRow;
  collection: CollectionRow;
  decisions: DecisionRow[];
  jobs: JobRow[];
  verdicts: HumanVerdictRow[];
  judging: { surfacingChanges: SurfacingChangeRow[]; comments: TrailComment[]; links: StateLink[] } | null;
}

/** Liveness right before a send (DESIGN §7 step 6). */
/**
 * Liveness right before a send (DESIGN §7 step 6): `item_gone` (item or collection deleted),
 * `workspace_gone`, and, when the claim is given, `superseded` (a write bumped the job's
 * generation since the claim: the state built for this evaluation may hold text that was since
 * edited or deleted, so it must not be sent) or `lost` (the claim token no longer matches).
 */
export type Liveness = 'live' | 'item_gone' | 'workspace_gone' | 'superseded' | 'lost';

/** A claim's liveness and the lease it has left (`Store.checkClaim`). */
export interface ClaimCheck {
  liveness: Liveness;
  /** The lease's expiry less the store's now, ms: ≤ 0 once it ran out, -Infinity when the row holds no lease. */
  leaseLeftMs: number;
}

/** One answer row to insert (DESIGN §2 item_decisions). */
export interface NewDecision {
  workspaceId: string;
  itemId: string;
  questionSet: string;
  questionKey: string;
  kind: 'noul' | 'choice' | 'score';
  /** JSON text of the answer. */
  answer: string;
  confidence: number | null;
  provider: string;
  model: string;
  stateHash: string;
  questionHash: string;
  stateVersion: number;
  /** JSON text: part → hash. */
  stateParts: string;
  inputTokens: number;
  outputTokens: number;
  itemSeq: number;
  stateTruncated: boolean;
  rationale?: string | null;
  /**
   * The fingerprint context the question was asked under (`fingerprintContextText`): canonical
   * JSON of the configured model id, prompt-template version and effort. Null on older rows.
   */
  fingerprintContext?: string | null;
}

export interface DecisionRow extends NewDecision {
  id: number;
  evaluatedAt: number;
}

/** One item as the drift sweep reads it (`scanItemsForDrift`). */
export interface DriftScanItem {
  item: ItemRow;
  /**
   * The latest stored row per question key of the set (per-comment keys included): its question
   * hash, state version, and when it was stored (epoch ms; the expiry sweep, DESIGN §5.2).
   */
  latest: Array<{ questionKey: string; questionHash: string; stateVersion: number; evaluatedAt: number }>;
  /** Ids of the newest 10 live comments, oldest first; [] unless `withComments`. */
  commentIds: string[];
  /** The item's job of this set, if one exists. */
  job: 'owed' | 'parked' | null;
}

/** A stored answer that a newer row of the same (item, set, key) supersedes (retention). */
export interface SupersededDecision {
  id: number;
  itemId: string;
  questionSet: string;
  questionKey: string;
  evaluatedAt: number;
}

/** The currency key of one wanted answer: is there a row at exactly this key? */
export interface AnswerKey {
  questionKey: string;
  stateHash: string;
  questionHash: string;
  stateVersion: number;
}

export interface SpendRecord {
  questionSet: string;
  provider: string;
  model: string;
  /** `ok`, `refused`, `defect`, `unavailable`, ... */
  outcome: string;
  calls: number;
  usage: Usage;
}

export interface SpendTotals {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** What `reserveSpend` asks for (DESIGN §10.3). Tokens and milliseconds. */
export interface SpendReservationRequest {
  /** Estimated input tokens plus the call's output ceiling. */
  tokens: number;
  /** The daily token cap: billed tokens of the store's current UTC day plus live reservations may not pass it. */
  capTokens: number;
  /** How long the reservation holds if it is never settled (its holder died), ms: the call's lease. */
  ttlMs: number;
  /** Who holds it (`claimed_by` of the job), for diagnostics. */
  holder: string;
}

/**
 * What `reserveSpend` decided. `settledTokens` are the billed tokens of the current UTC day
 * (every kind: input, output, cache read and write), `reservedTokens` the live reservations of
 * other calls, both read in the deciding transaction; `windowEndsInMs` is the time left until the
 * next UTC day.
 */
export type SpendReservation =
  | { granted: true; id: string; settledTokens: number; reservedTokens: number; windowEndsInMs: number }
  | { granted: false; settledTokens: number; reservedTokens: number; windowEndsInMs: number };

export interface QueueStats {
  /** Rows by state: owed (due now, waiting, in flight) and parked. */
  owedDue: number;
  owedWaiting: number;
  inFlight: number;
  parked: number;
  /** In a provider batch (DESIGN §7.3): neither due nor in flight here; their results come from the batch. */
  batched: number;
  /** Age in ms of the oldest owed job (now − enqueued_at), or null. */
  oldestOwedAgeMs: number | null;
  /** Epoch ms when the next waiting job becomes due, or null. */
  nextDueAt: number | null;
  /** Epoch ms when the last live lease of the jobs in flight ends, or null when none is in flight. */
  leasesEndAt: number | null;
  bySet: Array<{ questionSet: string; state: string; count: number }>;
}

/** Where the jobs of one backfill chunk stand (DESIGN §11: a chunk is drained when none of its jobs is claimable or in flight). */
export interface ChunkJobCounts {
  /** Owed, due, no live lease, workspace live: a runner may claim these now. */
  claimable: number;
  /** Under a live lease. */
  inFlight: number;
  /** Owed but not claimable: backing off, debounced, deferred, or held by a deleted workspace. */
  waiting: number;
  parked: number;
  /** Pairs with no job row: completed, dropped, or never owed. */
  gone: number;
}

/** Jobs of one question set by state (`status`). Times are epoch milliseconds. */
export interface SetJobCounts {
  questionSet: string;
  due: number;
  waiting: number;
  inFlight: number;
  parked: number;
  /** Jobs with a last error that counts as failing: parked, or retried after an attempt or refusal. */
  failing: number;
  /** enqueued_at of the oldest owed job, or null. */
  oldestOwedAt: number | null;
  /** The newest last_error_at among failing jobs, or null. */
  lastErrorAt: number | null;
}

/** Spend of one (provider, model, set, outcome) summed over hour buckets. */
export interface SpendRow extends SpendTotals {
  provider: string;
  model: string;
  questionSet: string;
  outcome: string;
}

/** Spend of one (hour, provider, model, set, outcome). */
export interface SpendHourRow extends SpendRow {
  /** Start of the hour bucket, epoch ms. */
  hour: number;
}

/** A `verdict_meta` row: cursors (backfill) and process markers (worker heartbeats). */
export interface MetaRow {
  key: string;
  value: string;
  /** Epoch ms of the last write. */
  updatedAt: number;
}

/** An HTTP API token's role (DESIGN §16.2): `read` < `write` < `admin`; a token may do what its role and every lower role may. */
export type ApiTokenRole = 'read' | 'write' | 'admin';

/** An API token as stored: never the token, never its hash. Times are epoch ms. */
export interface ApiTokenRow {
  id: string;
  workspaceId: string;
  workspaceSlug: string;
  role: ApiTokenRole;
  /** A label given at creation (`--name`), '' when none. */
  name: string;
  createdAt: number;
  revokedAt: number | null;
}

/** What `createDashboardSession` stores (DESIGN §16.6): the session id's hex SHA-256, never the id. */
export interface NewDashboardSession {
  idHash: string;
  /** The token the login presented; its workspace and role are copied from its row. */
  tokenId: string;
  /** Lifetime from now, ms: `expires_at` = now + this. */
  maxAgeMs: number;
}

/** A live dashboard session: the token it stands for (as `findApiToken` returns it) and its times (epoch ms). */
export interface DashboardSessionRow {
  token: ApiTokenRow;
  createdAt: number;
  expiresAt: number;
  lastSeenAt: number;
}

/** What `createApiToken` stores: the token's hex SHA-256, never the token. */
export interface NewApiToken {
  id: string;
  workspaceId: string;
  role: ApiTokenRole;
  tokenHash: string;
  name?: string;
}

/**
 * The tracker-facing part of the Store (public, DESIGN §16.1): the write doors a tracker calls and
 * the tracker reads. Everything else (the queue, answers, operations) is internal to Verdict's
 * worker and CLI; a host reaches it only through `createVerdict`'s worker and reader.
 * `TRACKER_STORE_METHODS` lists exactly these names (the public facade exposes only them).
 */
export interface TrackerStore {
  /** Epoch milliseconds, from the store's clock. */
  now(): Promise<number>;

  // ------------------------------------------------------------- tracker write doors
  createWorkspace(w: { id?: string; slug: string }): Promise<WorkspaceRow>;
  /** Holds the workspace's jobs (the claim skips them) until a restore. */
  softDeleteWorkspace(id: string): Promise<WriteResult<WorkspaceRow>>;
  restoreWorkspace(id: string): Promise<WriteResult<WorkspaceRow>>;
  createCollection(c: {
    id?: string;
    workspaceId: string;
    slug: string;
    isSystem?: boolean;
    schema?: CollectionSchema;
    settings?: CollectionSettings;
  }): Promise<CollectionRow>;
  /**
   * Rename or change settings; owes every live item of the collection at backfill priority, in
   * chunks of 1,000 per transaction (DESIGN §3.3): the first chunk in the door's transaction
   * (`owed` counts its rows), the rest through a continuation that `advanceCollectionOwes` works
   * off and a crash resumes. Soft delete and restore do the same.
   */
  updateCollection(id: string, patch: { slug?: string; settings?: CollectionSettings; schema?: CollectionSchema }): Promise<WriteResult<CollectionRow>>;
  softDeleteCollection(id: string): Promise<WriteResult<CollectionRow>>;
  restoreCollection(id: string): Promise<WriteResult<CollectionRow>>;

  createItem(item: NewItem, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  /** @throws NotFound when the item does not exist; InvalidWrite for bad fields (nothing written). */
  updateItem(id: string, patch: ItemPatch, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  /**
   * Creates the item, or updates it to exactly these values (including its deleted state), or
   * does nothing when nothing differs. The importer's door: a re-import owes nothing.
   */
  upsertItem(item: NewItem & { id: string }, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  moveItem(id: string, collectionId: string, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  softDeleteItem(id: string, opts?: OweOptions): Promise<WriteResult<ItemRow>>;
  restoreItem(id: string, opts?: OweOptions): Promise<WriteResult<ItemRow>>;

  addComment(c: NewComment, opts?: OweOptions): Promise<WriteResult<CommentRow>>;
  /** Creates the comment or sets its author/body; nothing when unchanged. */
  upsertComment(c: NewComment & { id: string }, opts?: OweOptions): Promise<WriteResult<CommentRow>>;
  /** Owes work only when the body changes. */
  editComment(id: string, body: string, opts?: OweOptions): Promise<WriteResult<CommentRow>>;
  /** A comment with replies stays as a tombstone with its body blanked; one without is removed. */
  deleteComment(id: string, opts?: OweOptions): Promise<WriteResult<CommentRow | null>>;

  /** Adds a link (nothing when the same source, target and type exist). Owes both ends for sets that read links. */
  addLink(l: NewLink, opts?: OweOptions): Promise<WriteResult<LinkRow>>;
  removeLink(id: string, opts?: OweOptions): Promise<WriteResult<LinkRow | null>>;

  // ------------------------------------------------------------- tracker reads
  getWorkspaceBySlug(slug: string): Promise<WorkspaceRow | null>;
  /** Every workspace, deleted ones included, by slug. */
  listWorkspaces(): Promise<WorkspaceRow[]>;
  getWorkspace(id: string): Promise<WorkspaceRow | null>;
  listCollections(workspaceId: string): Promise<CollectionRow[]>;
  getItem(id: string): Promise<ItemRow | null>;
  getItemByRef(workspaceId: string, ref: string): Promise<ItemRow | null>;
  /** One comment by id, tombstones included (`deletedAt` set). */
  getComment(id: string): Promise<CommentRow | null>;
  /** One link by id. */
  getLink(id: string): Promise<LinkRow | null>;
  /** An item's comments, tombstones included (`deletedAt` set), oldest first. */
  listComments(itemId: string): Promise<CommentRow[]>;
  /** The links with the item at either end, oldest first. */
  listLinks(itemId: string): Promise<LinkRow[]>;
  /**
   * Items in id order (ids are time-ordered), after the cursor id when given, live ones unless
   * `includeDeleted`; narrowed by workspace, collection, ref prefix and field equality (ItemQuery).
   */
  listItems(q: ItemQuery): Promise<ItemRow[]>;
  countItems(workspaceId?: string): Promise<number>;
}

/** A JSON scalar a field is compared with (`ItemQuery.fieldsEqual`). */
export type FieldScalar = string | number | boolean | null;

/** What `listItems` filters on; every filter given must hold. */
export interface ItemQuery {
  workspaceId?: string;
  collectionId?: string;
  /** Soft-deleted items too. @defaultValue false */
  includeDeleted?: boolean;
  /** Refs that start with this, compared code point by code point (case matters; `''` is no filter). */
  refPrefix?: string;
  /**
   * Top-level fields equal to these JSON scalars: a string equals a JSON string, a number a JSON
   * number (`1` equals `1.0`), a boolean a boolean, `null` a field present and null. A field that
   * holds an array or object never equals a scalar; a missing field equals nothing.
   */
  fieldsEqual?: Readonly<Record<string, FieldScalar>>;
  /** Items with an id after this one (the previous page's last id). Only with the id order. */
  afterId?: string;
  /** Items updated at or after this time (epoch ms). */
  updatedSince?: number;
  /**
   * Titles holding this text, ignoring case (`lower()` on both databases: ASCII letters on SQLite,
   * every letter on Postgres); `%` and `_` match themselves.
   */
  titleContains?: string;
  /** Only these item ids (at most `ITEM_IDS_FILTER_MAX`). */
  ids?: readonly string[];
  /**
   * The order: `id` (time-ordered ids, the primary key's index), `updated` (`updatedAt`), `created`
   * (`createdAt`) or `ref` (byte order); ties broken by id. @defaultValue 'id'
   */
  orderBy?: 'id' | 'updated' | 'created' | 'ref';
  /** Reverse the order (ties too). @defaultValue false */
  descending?: boolean;
  /**
   * Keyset paging for `orderBy` other than `id`: only rows strictly after this one in the order
   * (its sort value, a number for times and a string for `ref`, and its id).
   */
  after?: { value: number | string; id: string };
  /** At most this many. @defaultValue no limit */
  limit?: number;
}

/** What `searchItems` filters and pages by. */
export interface ItemSearch {
  workspaceId: string;
  /**
   * Items whose ref or title contains this (surrounding spaces ignored; `''` matches all). `%`,
   * `_` and `\` are literal. Case is ignored for ASCII letters on both databases; other letters
   * are folded by the database's `lower()` (PostgreSQL folds them, SQLite does not).
   */
  text?: string;
  collectionId?: string;
  /** @defaultValue 'live' */
  deleted?: 'live' | 'deleted' | 'all';
  offset: number;
  limit: number;
}

/**
 * Most ids `ItemQuery.ids` takes: each is one bound parameter, and SQLite allows 32,766 a
 * statement; well below, so the other filters keep their parameters.
 */
export const ITEM_IDS_FILTER_MAX = 20_000;

/**
 * The names of the TrackerStore methods, for facades that must expose exactly the public part
 * (`createVerdict`'s `store`). A test holds it equal to the interface.
 */
export const TRACKER_STORE_METHODS = [
  'now',
  'createWorkspace',
  'softDeleteWorkspace',
  'restoreWorkspace',
  'createCollection',
  'updateCollection',
  'softDeleteCollection',
  'restoreCollection',
  'createItem',
  'updateItem',
  'upsertItem',
  'moveItem',
  'softDeleteItem',
  'restoreItem',
  'addComment',
  'upsertComment',
  'editComment',
  'deleteComment',
  'addLink',
  'removeLink',
  'getWorkspaceBySlug',
  'listWorkspaces',
  'getWorkspace',
  'listCollections',
  'getItem',
  'getItemByRef',
  'getComment',
  'getLink',
  'listComments',
  'listLinks',
  'listItems',
  'countItems',
] as const satisfies ReadonlyArray<keyof TrackerStore>;

// Every TrackerStore method is listed (a compile error names the missing one).
const _everyTrackerMethodListed: [Exclude<keyof TrackerStore, (typeof TRACKER_STORE_METHODS)[number]>] extends [never] ? true : never = true;
void _everyTrackerMethodListed;

/**
 * The store `createVerdict` hands a tracker (DESIGN §16.1): the write doors and tracker reads,
 * plus `transaction` to run several doors all or nothing (see Store.transaction).
 */
export interface VerdictStore extends TrackerStore {
  transaction<T>(fn: (tx: TrackerStore) => Promise<T>): Promise<T>;
}

/**
 * The whole Store (internal): the tracker part, one job's lifecycle (`JobStore`, job-store.ts),
 * plus the rest of the owed-job queue (DESIGN §3), the evaluation reads and answers (§7), and the
 * operations reads and passes (§10–12).
 */
export interface Store extends TrackerStore, ActionStore, JobStore {
  close(): Promise<void>;
  /**
   * Why the database cannot take writes now, for /healthz (DESIGN §10.1): `database locked`,
   * `disk full`, `disk I/O error` (SQLite), `database unreachable` (Postgres); null once a write
   * (Postgres: any statement) succeeds again. Synchronous and cheap: read on every probe.
   */
  storageProblem(): string | null;
  /**
   * Storage upkeep for an idle moment and at most every minute while busy (DESIGN §10.2): on SQLite
   * `wal_checkpoint(TRUNCATE)`; nothing on Postgres (the server checkpoints its own log).
   * @returns the write-ahead log's size afterwards, bytes; null where the store has none to report.
   */
  checkpoint(): Promise<number | null>;
  /** The write-ahead log's size now, bytes (DESIGN §10.2: in status, doctor, /metrics); null on Postgres and `:memory:`. */
  walBytes(): Promise<number | null>;

  /**
   * Runs `fn` with a TrackerStore whose write doors all join one transaction: it commits when `fn`
   * resolves and rolls back, leaving no row and no owed job, when `fn` throws (the error is
   * rethrown). Inside `fn`, use `tx`, not this store. Called on a connection the host has already
   * opened a transaction on, it joins that transaction as a savepoint. How each dialect does it
   * (SQLite's connection mutex, Postgres' pooled client) is described on the implementations.
   */
  transaction<T>(fn: (tx: TrackerStore) => Promise<T>): Promise<T>;

  // ------------------------------------------------------------- jobs (DESIGN §3)
  /**
   * Owes (item, set) pairs without any tracker write: backfill, drift sweep, reask.
   * With `insertOnly`, existing rows are left alone (backfill never un-parks or resets).
   * @returns the number of rows inserted or updated.
   */
  oweJobs(
    pairs: Array<{ itemId: string; questionSet: string }>,
    opts: OweOptions & {
      insertOnly?: boolean;
      /** A `verdict_meta` row written in the same transaction (the backfill cursor), so a cursor never runs ahead of the work it records. */
      meta?: { key: string; value: string };
    },
  ): Promise<number>;
  /**
   * Owes the next chunk (at most 1,000 items) of a pending collection change, the one that waited
   * longest, in one transaction with its continuation's cursor (DESIGN §3.3). The worker calls it
   * until `pending` is 0; a crash between calls loses nothing (the cursor commits with its chunk).
   */
  advanceCollectionOwes(): Promise<CollectionOweStep>;
  /**
   * Claims up to `limit` due owed jobs at backfill priority (≥ 1) for a provider batch (DESIGN
   * §7.3), under a lease of `leaseMs` while it is assembled, counting their attempts; jobs at
   * the abandon limit are parked instead. @returns the claims, by item then set.
   */
  claimBatchJobs(workerId: string, o: { leaseMs: number; limit: number; abandonLimit: number; skipSets?: readonly string[] }): Promise<Claim[]>;
  /**
   * Records a batch before its submit: the batch row (`submitting`), its requests, and its claimed
   * jobs moved to `batched`, in one transaction.
   * @throws BatchClaimLost (store/sql/batches.ts) when a claim was lost; nothing is written then.
   */
  recordBatch(b: NewProviderBatch, requests: readonly NewBatchRequest[], claims: readonly Claim[]): Promise<void>;
  updateProviderBatch(id: string, p: ProviderBatchPatch): Promise<void>;
  /** Batch rows, oldest first; only those in `statuses` when given. */
  listProviderBatches(statuses?: readonly ProviderBatchRow['status'][]): Promise<ProviderBatchRow[]>;
  /** A batch's requests whose results are not stored yet. */
  listBatchRequests(batchId: string): Promise<BatchRequestRow[]>;
  /**
   * Jobs of `batchId`, one read: `batched`, those still batched in it; `named`, those naming it in
   * any state (batched, or re-owed by a write since: the result still serves them), 0 once
   * `jobs retry` / `jobs drop` took every job out (DESIGN §7.5).
   */
  batchJobCounts(batchId: string): Promise<{ batched: number; named: number }>;
  /**
   * Stores one request's result (answers, spend, its jobs' outcomes) and deletes the request, in
   * one transaction; a request already stored does nothing. @returns answers inserted.
   */
  storeBatchResult(batchId: string, customId: string, r: BatchResultWrite): Promise<number>;
  /**
   * Ends a batch: every job still batched in it re-owed (claimable from now + `holdMs`, ms; default
   * at once) without counting the attempt,
   * its remaining requests deleted, the row `done` with `outcome`. @returns jobs re-owed.
   */
  closeBatch(batchId: string, outcome: string, error?: string, holdMs?: number): Promise<number>;

  getJob(itemId: string, questionSet: string): Promise<JobRow | null>;
  listJobs(f: JobFilter): Promise<JobRow[]>;
  /** `jobs retry`: owed, counters 0, not_before now. @returns rows changed. */
  retryJobs(f: JobFilter): Promise<number>;
  /** `jobs drop`: deletes matching rows that are not in flight. @returns rows deleted. */
  dropJobs(f: JobFilter): Promise<number>;
  queueStats(): Promise<QueueStats>;

  // ------------------------------------------------------------- evaluation reads and answers
  /** Every stored answer of an item (all sets, or only `questionSet`'s), oldest first. */
  listDecisions(itemId: string, questionSet?: string): Promise<DecisionRow[]>;
  /** Stored answers of a set within a workspace (latest per key and any matching keys are picked by the reader). */
  listWorkspaceDecisions(workspaceId: string, questionSet: string): Promise<DecisionRow[]>;
  countDecisions(): Promise<number>;

  /** Spend since `sinceMs` milliseconds ago, summed. */
  spendSince(windowMs: number): Promise<SpendTotals>;
  /**
   * Reserves `tokens` against the daily token cap before a call is sent (DESIGN §10.3), across
   * processes: in one serialised transaction (SQLite BEGIN IMMEDIATE; a transaction-scoped
   * advisory lock on Postgres) it drops expired reservations, reads the current UTC day's billed
   * tokens and the live reservations, and inserts a reservation only when
   * `settled + reserved + tokens <= capTokens`. A single call larger than the whole cap is granted
   * only on a day with nothing billed or reserved, so no job waits forever (the rule of the
   * per-minute token bucket, DESIGN §10).
   */
  reserveSpend(r: SpendReservationRequest): Promise<SpendReservation>;
  /**
   * Settles a reservation to the call's real usage: records `spend` (when given; null when no
   * call was sent) and deletes the reservation, in one transaction, so the call is never counted
   * twice or not at all. Recording happens even when the reservation had already expired.
   * @returns true when the reservation was still held.
   */
  settleSpendReservation(id: string, spend: SpendRecord | null): Promise<boolean>;

  // ------------------------------------------------------------- operations (DESIGN §10–12)
  /**
   * Spend grouped by (provider, model, set, outcome) over the hour buckets that overlap the last
   * `windowMs` (so "the last hour" reads the current and the previous bucket).
   * @returns `sinceHour`, the start (epoch ms) of the oldest bucket read, and the rows.
   */
  spendRowsSince(windowMs: number): Promise<{ sinceHour: number; rows: SpendRow[] }>;
  /**
   * The same rows kept apart per bucket, oldest first: the dashboard's spend charts. `bucket`
   * `hour` (the default) keeps the stored hours; `day` sums them per UTC day in the query, so a
   * 30-day series reads a row per (day, provider, model, set, outcome), not 720 hours of them.
   * Each row's `hour` is the start of its bucket (epoch ms).
   */
  spendByHourSince(windowMs: number, bucket?: 'hour' | 'day'): Promise<{ sinceHour: number; rows: SpendHourRow[] }>;
  /** Where the jobs of these (set, item) pairs stand; `itemIds` may be empty. */
  countChunkJobs(questionSet: string, itemIds: readonly string[]): Promise<ChunkJobCounts>;
  /**
   * One workspace's items whose ref or title contains `text` (ItemSearch), newest write first
   * (then by id), one page at a time, with how many match in all: the dashboard's items page.
   */
  searchItems(q: ItemSearch): Promise<{ rows: ItemRow[]; total: number }>;
  /** Jobs by set and state, with failing counts and the oldest owed time, by set name; one workspace's jobs only when `workspaceId` is given. */
  jobCountsBySet(workspaceId?: string): Promise<SetJobCounts[]>;
  /** One `verdict_meta` value, or null. */
  getMeta(key: string): Promise<string | null>;
  /** Inserts or replaces one `verdict_meta` row (updated_at = now). */
  setMeta(key: string, value: string): Promise<void>;
  deleteMeta(key: string): Promise<void>;
  /** `verdict_meta` rows whose key starts with `prefix` (compared byte for byte, no wildcards), by key. */
  listMeta(prefix: string): Promise<MetaRow[]>;
  // ------------------------------------------------------------- drift sweep and retention (DESIGN §2, §8)
  /**
   * The drift sweep's walk: live items of a workspace with an id after `afterItemId` (all when
   * null), in id order, at most `limit`, each with the question hash of its latest row per key of
   * `questionSet`, its job state for that set, and (with `withComments`) the ids of its newest 10
   * live comments. One read; no lock held between calls.
   */
  scanItemsForDrift(q: { workspaceId: string; questionSet: string; afterItemId: string | null; limit: number; withComments: boolean }): Promise<DriftScanItem[]>;
  /**
   * Retention's walk: rows with id > `afterId`, evaluated more than `olderThanMs` milliseconds
   * ago, that a newer row of the same (item, set, key) supersedes; in id order, at most `limit`.
   * The latest row per key is never listed.
   */
  listSupersededDecisions(q: { olderThanMs: number; afterId: number; limit: number }): Promise<SupersededDecision[]>;
  /**
   * Deletes these answer rows in one short write transaction, each only while a newer row of its
   * (item, set, key) still exists, so the latest row per key survives any caller. Callers pass
   * small batches (hundreds) so the write lock stays short. @returns rows deleted.
   */
  deleteDecisions(ids: readonly number[]): Promise<number>;
  // ------------------------------------------------------------- HTTP API tokens and inbound webhooks (DESIGN §16.2)
  /** Stores a new token's hash (see src/access/tokens.ts, which makes the token). */
  createApiToken(t: NewApiToken): Promise<ApiTokenRow>;
  /** Tokens, newest first, revoked ones included; of one workspace when given. */
  listApiTokens(workspaceId?: string): Promise<ApiTokenRow[]>;
  /** Revokes the token and deletes its dashboard sessions. @returns false when no unrevoked token has this id. */
  revokeApiToken(id: string): Promise<boolean>;
  /** The unrevoked token with this hex SHA-256 whose workspace is live, or null. */
  findApiToken(tokenHash: string): Promise<ApiTokenRow | null>;
  /**
   * One item view's rows in one read (see `ItemViewRows`): the reads behind `VerdictReader.item`.
   * @returns null when the workspace (by slug, deleted or not) or the item (by ref) does not exist.
   */
  readItemView(workspaceSlug: string, ref: string): Promise<ItemViewRows | null>;
  // ---- dashboard sessions (DESIGN §16.6; src/access/sessions.ts makes and hashes the id)
  /** Stores a session for a live token. @returns null when the token is revoked or its workspace deleted. */
  createDashboardSession(s: NewDashboardSession): Promise<DashboardSessionRow | null>;
  /**
   * The live session with this hex SHA-256 (not expired, seen within `idleMs`, its token live), or
   * null; marks it seen when its mark is older than `touchAfterMs`.
   */
  findDashboardSession(idHash: string, o: { idleMs: number; touchAfterMs: number }): Promise<DashboardSessionRow | null>;
  /** Deletes one session (logout). @returns false when none had this hash. */
  deleteDashboardSession(idHash: string): Promise<boolean>;
  /** Deletes up to `limit` expired, idle (past `idleMs`) or revoked sessions (retention). @returns rows deleted. */
  pruneDashboardSessions(idleMs: number, limit: number): Promise<number>;
  /**
   * Records an inbound delivery id (`X-GitHub-Delivery`); call inside the transaction of the
   * delivery's writes. @returns true when new, false for a redelivery (apply nothing).
   */
  recordWebhookDelivery(d: { source: string; deliveryId: string; event: string }): Promise<boolean>;
  // ---- outbound decision events (DESIGN §16.2)
  /**
   * Makes `urls` exactly the enabled event targets: new ones are inserted, disabled ones re-enabled,
   * every other enabled target disabled (its queued events wait, undelivered, until it is enabled
   * again). Events are queued only for targets enabled when their answer is stored. One transaction.
   * @returns targets enabled now, and how many this call disabled.
   */
  syncEventTargets(urls: readonly string[]): Promise<{ enabled: number; disabled: number }>;
  /**
   * Claims up to `limit` due deliveries under a lease of `leaseMs` for `owner`, in one statement:
   * undelivered, `next_attempt_at <= now`, no live lease, target enabled, and the head of its
   * (target, item) line (no earlier undelivered row of the same target and item), so each item's
   * events reach a receiver in order. Postgres: SKIP LOCKED. @returns the rows, by id.
   */
  claimEventDeliveries(r: EventClaimRequest): Promise<EventDelivery[]>;
  /** The receiver took it (2xx): delivered. @returns false when `owner` no longer holds the row (nothing changed). */
  completeEventDelivery(id: number, owner: string): Promise<boolean>;
  /**
   * A failed delivery: attempts + 1, due again at now + `backoffMs`, lease released; never given up.
   * `error` is a class and status, never the receiver's body (bounded to 1 KiB).
   * @returns false when `owner` no longer holds the row (nothing changed).
   */
  failEventDelivery(id: number, owner: string, o: { backoffMs: number; error: string }): Promise<boolean>;
  /** A row not sent (its target is held as unreachable): due again in `delayMs`, lease released, no attempt counted. @returns false when `owner` no longer holds it. */
  deferEventDelivery(id: number, owner: string, delayMs: number): Promise<boolean>;
  /** Releases every undelivered row `owner` holds (a stop), without an attempt. @returns rows released. */
  releaseEventDeliveries(owner: string): Promise<number>;
  /** Undelivered events of enabled targets: pending, due now, earliest next attempt (epoch ms). */
  eventDeliveryStats(): Promise<EventDeliveryStats>;
  /** Deletes up to `limit` rows delivered more than `olderThanMs` ago (retention); undelivered rows never. @returns rows deleted. */
  pruneDeliveredEvents(olderThanMs: number, limit: number): Promise<number>;
  /** Outbox rows in id order, of one target and/or item when given (diagnostics, tests). */
  listDecisionEvents(f?: { targetUrl?: string; itemId?: string; kind?: OutboxKind }): Promise<DecisionEventRow[]>;

  // people in the loop (DESIGN §8.1, §8.2; sql/surfacing.ts)
  /**
   * Appends a person's verdict. With `surfacing` (the key is a noul that may surface), a verdict
   * that changes what is in force moves the key's surfacing (change row and events) in the same
   * transaction. Validation (the key exists, the value fits the question) is the caller's
   * (src/compose/verdicts.ts). @returns the stored row.
   */
  insertVerdict(v: NewVerdict, surfacing: VerdictSurfacing): Promise<HumanVerdictRow>;
  /** Verdicts of a workspace (one set, one item when given), oldest first; never pruned. */
  listVerdicts(q: { workspaceId: string; questionSet?: string; itemId?: string }): Promise<HumanVerdictRow[]>;
  /** Surfacing changes of an item (every set) or of a (workspace, set), oldest first, since `sinceMs` (epoch ms) when given. */
  listSurfacingChanges(q: { itemId: string; sinceMs?: number } | { workspaceId: string; questionSet: string; sinceMs?: number }): Promise<SurfacingChangeRow[]>;
}

/** Thrown by a write door when a row it needs does not exist. */
export class NotFound extends VerdictError {
  readonly code = 'not_found';
  constructor(what: string, id: string) {
    super(`${what} ${id} not found`);
  }
}

/**
 * Thrown by a tracker door when the write would break a uniqueness rule (a workspace slug, a
 * collection slug in its workspace, an item ref in its workspace, a fixed id): nothing was written.
 * The message names the table and columns, never a value.
 */
export class Conflict extends VerdictError {
  readonly code = 'conflict';
  constructor(readonly constraint: string) {
    super(`already exists: ${constraint}`);
  }
}

/**
 * Thrown by a tracker door or read when the database could not do it: the store is closed, the
 * server is unreachable, the disk is full, or another driver error. `driverCode` is the driver's
 * own code (`SQLITE_FULL`, `ECONNREFUSED`, a SQLSTATE) for diagnosis; the driver error is `cause`.
 */
export class StoreFailure extends VerdictError {
  readonly code = 'store_failure';
  constructor(
    message: string,
    readonly driverCode: string | null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Maps an error from a store call to one of Verdict's (DESIGN §16.1: every error a host sees
 * extends VerdictError): a unique violation (SQLite `SQLITE_CONSTRAINT_UNIQUE` or
 * `SQLITE_CONSTRAINT_PRIMARYKEY`, Postgres SQLSTATE 23505) becomes Conflict; any other driver or
 * runtime error becomes StoreFailure with the driver's code. Verdict's own errors pass unchanged.
 */
export function toStoreError(err: unknown): VerdictError {
  if (err instanceof VerdictError) return err;
  const e = err as { code?: unknown; message?: unknown; constraint?: unknown; table?: unknown };
  const code = typeof e.code === 'string' ? e.code : null;
  const message = typeof e.message === 'string' ? e.message : String(err);
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return new Conflict(message.replace(/^UNIQUE constraint failed: /, '').replace(/^PRIMARY KEY constraint failed: /, ''));
  }
  if (code === '23505') return new Conflict(typeof e.constraint === 'string' ? e.constraint : 'a unique constraint');
  if (/connection is not open|pool after calling end|Client was closed/i.test(message)) {
    return new StoreFailure('the store is closed (verdict.close() was called)', code, { cause: err });
  }
  // SQLite's messages name tables and columns, never values, so they are kept; other drivers'
  // (Postgres' can quote an input value) are left to `cause`.
  const detail = code?.startsWith('SQLITE_') ? `: ${message}` : '';
  return new StoreFailure(`the database failed: ${code ?? (err as Error)?.name ?? 'error'}${detail}`, code, { cause: err });
}

/** Thrown by a write door for bad input (fields not an object, unknown collection ...). */
export class InvalidWrite extends VerdictError {
  readonly code = 'invalid_write';
}
