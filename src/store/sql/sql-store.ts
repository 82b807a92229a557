import type { Registry } from '../../decision/registry.js';
import type { JobStore } from '../job-store.js';
import type { OweOptions } from '../queue-store.js';
import type { TrackerStore } from '../tracker-store.js';
import type { Store } from '../whole-store.js';
import * as access from './api-access.js';
import * as actions from './actions.js';
import { advanceCollectionOwes } from './collection-owe.js';
import * as decisions from './decisions.js';
import * as events from './events.js';
import { scanItemsForDrift } from './drift.js';
import * as jobs from './jobs.js';
import * as batches from './batches.js';
import * as ops from './operations.js';
import { owePairs } from './owe.js';
import * as retention from './retention.js';
import * as surfacing from './surfacing.js';
import * as throughput from './throughput.js';
import * as reservations from './spend-reservations.js';
import * as sessions from './sessions.js';
import { nowMs, read, type SqlContext } from './steps.js';
import * as reads from './tracker-reads.js';
import { readItemView } from './item-view.js';
import * as doors from './write-doors.js';

/**
 * The Store on SQL (DESIGN §3, §13), written once for SQLite and PostgreSQL (see steps.ts for
 * how), all but the job lifecycle. `OPERATIONS` maps each Store method to the function of its
 * module (`write-doors`, `decisions`, `operations`, …) where the statements and their reasons
 * live; the class installs one async method per entry that runs it through `call` with the
 * store's context. A dialect's store (`SqliteStore`, `PgStore`) adds opening, closing,
 * transactions, storage health and upkeep, and may wrap `call` (Postgres awaits its migrations
 * there) or the installed methods (SQLite wraps every async method for busy retries and its
 * connection gate). The job lifecycle (`JobStore`, ../job-store.ts) is not installed: each
 * dialect's store writes those methods out, so the runner's "go to definition" lands on them.
 *
 * Adding a method: write it once as a function of `SqlContext` in its module and add its entry
 * here; `implements Store` checks the signature.
 */
const OPERATIONS = {
  now: (c: SqlContext) => read(c, nowMs()),
  createWorkspace: doors.createWorkspace,
  softDeleteWorkspace: (c: SqlContext, id: string) => doors.setWorkspaceDeleted(c, id, true),
  restoreWorkspace: (c: SqlContext, id: string) => doors.setWorkspaceDeleted(c, id, false),
  createCollection: doors.createCollection,
  updateCollection: doors.updateCollection,
  softDeleteCollection: (c: SqlContext, id: string) => doors.updateCollection(c, id, { deleted: true }),
  restoreCollection: (c: SqlContext, id: string) => doors.updateCollection(c, id, { deleted: false }),
  createItem: doors.createItem,
  upsertItem: doors.upsertItem,
  moveItem: doors.moveItem,
  softDeleteItem: (c: SqlContext, id: string, opts?: OweOptions) => doors.setItemDeleted(c, id, true, opts),
  restoreItem: (c: SqlContext, id: string, opts?: OweOptions) => doors.setItemDeleted(c, id, false, opts),
  addComment: doors.addComment,
  upsertComment: doors.upsertComment,
  editComment: doors.editComment,
  deleteComment: doors.deleteComment,
  addLink: doors.addLink,
  removeLink: doors.removeLink,
  getWorkspaceBySlug: reads.getWorkspaceBySlug,
  listWorkspaces: reads.listWorkspaces,
  getWorkspace: reads.getWorkspace,
  listCollections: reads.listCollections,
  getItem: reads.getItem,
  getItemByRef: reads.getItemByRef,
  getComment: reads.getComment,
  getLink: reads.getLink,
  listComments: reads.listComments,
  listLinks: reads.listLinks,
  listItems: reads.listItems,
  countItems: reads.countItems,
  searchItems: reads.searchItems,
  advanceCollectionOwes,
  claimBatchJobs: batches.claimBatchJobs,
  recordBatch: batches.recordBatch,
  updateProviderBatch: batches.updateProviderBatch,
  listProviderBatches: batches.listProviderBatches,
  listBatchRequests: batches.listBatchRequests,
  batchJobCounts: batches.batchJobCounts,
  storeBatchResult: batches.storeBatchResult,
  closeBatch: batches.closeBatch,
  getJob: jobs.getJob,
  listJobs: jobs.listJobs,
  retryJobs: jobs.retryJobs,
  dropJobs: jobs.dropJobs,
  queueStats: jobs.queueStats,
  listDecisions: decisions.listDecisions,
  listWorkspaceDecisions: decisions.listWorkspaceDecisions,
  countDecisions: reads.countDecisions,
  spendSince: decisions.spendSince,
  reserveSpend: reservations.reserveSpend,
  settleSpendReservation: reservations.settleSpendReservation,
  recordSpooledSpend: decisions.recordSpooledSpend,
  forgetSpooledSpend: decisions.forgetSpooledSpend,
  spendRowsSince: ops.spendRowsSince,
  spendByHourSince: ops.spendByHourSince,
  throughputSince: throughput.throughputSince,
  pruneThroughput: throughput.pruneThroughput,
  countChunkJobs: ops.countChunkJobs,
  jobCountsBySet: ops.jobCountsBySet,
  getMeta: ops.getMeta,
  setMeta: ops.setMeta,
  deleteMeta: ops.deleteMeta,
  listMeta: ops.listMeta,
  scanItemsForDrift,
  listSupersededDecisions: retention.listSupersededDecisions,
  deleteDecisions: retention.deleteDecisions,
  createApiToken: access.createApiToken,
  listApiTokens: access.listApiTokens,
  revokeApiToken: access.revokeApiToken,
  findApiToken: access.findApiToken,
  readItemView,
  createDashboardSession: sessions.createDashboardSession,
  findDashboardSession: sessions.findDashboardSession,
  deleteDashboardSession: sessions.deleteDashboardSession,
  pruneDashboardSessions: sessions.pruneDashboardSessions,
  recordWebhookDelivery: access.recordWebhookDelivery,
  // outbound decision events (DESIGN §16.2)
  syncEventTargets: events.syncEventTargets,
  claimEventDeliveries: events.claimEventDeliveries,
  completeEventDelivery: events.completeEventDelivery,
  failEventDelivery: events.failEventDelivery,
  deferEventDelivery: events.deferEventDelivery,
  releaseEventDeliveries: events.releaseEventDeliveries,
  eventDeliveryStats: events.eventDeliveryStats,
  pruneDeliveredEvents: events.pruneDeliveredEvents,
  listDecisionEvents: events.listDecisionEvents,
  // people in the loop (DESIGN §8.1, §8.2)
  insertVerdict: surfacing.insertVerdict,
  listVerdicts: surfacing.listVerdicts,
  listSurfacingChanges: surfacing.listSurfacingChanges,
  // actions in GitHub (DESIGN §17)
  listItemActions: actions.listItemActions,
  listWorkspaceActions: actions.listWorkspaceActions,
  saveItemAction: actions.saveItemAction,
  recordActionDelivery: actions.recordActionDelivery,
  observeActionLabels: actions.observeActionLabels,
  actionRows: actions.actionRows,
  actionWritersEnded: actions.actionWritersEnded,
  actionItemsOfSet: actions.actionItemsOfSet,
  labelledAnswers: actions.labelledAnswers,
  pendingActionWrites: actions.pendingActionWrites,
  countDeliveredActionWrites: actions.countDeliveredActionWrites,
} satisfies Record<string, (c: SqlContext, ...args: never[]) => Promise<unknown>>;

type Tail<T extends unknown[]> = T extends [unknown, ...infer R] ? R : never;
type Operations = {
  [K in keyof typeof OPERATIONS]: (
    ...args: Tail<Parameters<(typeof OPERATIONS)[K]>>
  ) => ReturnType<(typeof OPERATIONS)[K]>;
};

// The installed methods (see the class's static block): the interface merges their types into the
// class, which the static block fills at load time, so the merge is the point here.
// eslint-disable-next-line @typescript-eslint/no-empty-object-type, @typescript-eslint/no-unsafe-declaration-merging
export interface SqlStore extends Operations {}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging -- see the interface above
export abstract class SqlStore implements Omit<Store, Exclude<keyof JobStore, 'now'>> {
  /** The dialect, the connection (or the transaction a handle is bound to) and the question sets. */
  protected abstract readonly c: SqlContext;

  static {
    for (const [name, op] of Object.entries(OPERATIONS) as Array<
      [string, (c: SqlContext, ...args: unknown[]) => Promise<unknown>]
    >) {
      Object.defineProperty(SqlStore.prototype, name, {
        value: async function (this: SqlStore, ...args: unknown[]) {
          return this.call((c) => op(c, ...args));
        },
        writable: true,
        configurable: true,
      });
    }
  }

  // Written out, not installed: SQLite overrides these two with its prepared statements
  // (sqlite/write-statements.ts); Postgres runs the shared doors.

  /** Store.updateItem: ../sql/write-doors.ts `updateItem`. */
  async updateItem(...a: Tail<Parameters<typeof doors.updateItem>>): ReturnType<typeof doors.updateItem> {
    return this.call((c) => doors.updateItem(c, ...a));
  }

  /** Store.oweJobs: ../sql/owe.ts `owePairs`. */
  async oweJobs(...a: Tail<Parameters<typeof owePairs>>): ReturnType<typeof owePairs> {
    return this.call((c) => owePairs(c, ...a));
  }

  /** Runs one store call. The Postgres store awaits its migrations here and records storage problems. */
  protected call<T>(fn: (c: SqlContext) => Promise<T>): Promise<T> {
    return fn(this.c);
  }

  abstract storageProblem(): string | null;
  abstract checkpoint(): Promise<number | null>;
  abstract walBytes(): Promise<number | null>;
  abstract close(): Promise<void>;
  abstract transaction<T>(fn: (tx: TrackerStore) => Promise<T>): Promise<T>;

  /** Swaps the registry (SIGHUP reload); later writes owe the new sets. */
  setRegistry(registry: Registry): void {
    this.c.registry = registry;
  }
}
