import type { AccessStore } from './access-store.js';
import type { ActionStore } from './actions.js';
import type { BatchStore } from './batch-store.js';
import type { DecisionStore } from './decision-store.js';
import type { EventOutbox } from './events.js';
import type { MetaStore } from './meta-store.js';
import type { QueueStore } from './queue-store.js';
import type { SpendStore } from './spend-store.js';
import type { ThroughputStore } from './throughput.js';
import type { JobStore } from './job-store.js';
import type { ItemViewReads } from './item-view-store.js';
import type { TrackerStore } from './tracker-store.js';
import type { ItemSearchReads } from './tracker-reads.js';
import type { HumanVerdictStore } from './verdicts.js';

/** The database's health and upkeep (DESIGN §10.1, §10.2): for /healthz, status, /metrics and the worker's idle checkpoint. */
export interface StorageHealth {
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
}

/**
 * The whole Store: every SQL statement lives behind it (DESIGN §13). The runner, the CLI and
 * trackers see only it, or the parts of it they call; SQLite (`./sqlite/`) and Postgres (`./postgres/`) implement it,
 * and test/store/conformance.ts holds both to the same tests. Methods are async so both dialects
 * fit; the SQLite implementation does its work synchronously inside.
 *
 * Time: the store owns "now" (an injected clock on SQLite, the database's clock on Postgres).
 * Callers pass durations in milliseconds, never timestamps.
 *
 * It is the composition of one interface per concern (each in its own file beside this one); a
 * caller takes the part, or the `Pick` of it, that it calls. Only what opens, closes or hands on
 * the whole store takes `Store`.
 */
export interface Store
  extends
    TrackerStore,
    ItemSearchReads,
    QueueStore,
    BatchStore,
    DecisionStore,
    SpendStore,
    ThroughputStore,
    MetaStore,
    AccessStore,
    EventOutbox,
    HumanVerdictStore,
    ActionStore,
    JobStore,
    ItemViewReads,
    StorageHealth {
  close(): Promise<void>;
  /**
   * Runs `fn` with a TrackerStore whose write doors all join one transaction: it commits when `fn`
   * resolves and rolls back, leaving no row and no owed job, when `fn` throws (the error is
   * rethrown). Inside `fn`, use `tx`, not this store. Called on a connection the host has already
   * opened a transaction on, it joins that transaction as a savepoint. How each dialect does it
   * (SQLite's connection mutex, Postgres' pooled client) is described on the implementations.
   */
  transaction<T>(fn: (tx: TrackerStore) => Promise<T>): Promise<T>;
}
