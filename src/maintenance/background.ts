import { errCode } from '../errors.js';
import { systemClock } from '../clock.js';
import { DecisionReader } from '../reads/reads.js';
import type { Registry } from '../decision/registry.js';
import { pruneDecisions, pruneThroughput } from './retention.js';
import type { Logger } from '../log.js';
import type { Provider } from '../providers/provider.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { AccessStore } from '../store/access-store.js';
import type { EventOutbox } from '../store/events.js';
import type { Store } from '../store/whole-store.js';
import type { ThroughputStore } from '../store/throughput.js';
import { DriftSweeper, runSweepLoop } from './drift.js';
import { ExpirySweeper } from './expiry.js';
import { OweBucket } from './owe-bucket.js';
import { pruneDeliveredEvents } from '../worker/event-delivery.js';
import { pruneDashboardSessions } from '../access/sessions.js';

/**
 * The long-running worker's background passes, beside its slots: the drift and expiry sweeps
 * (every `sweepIntervalMs`, one loop, one rate) and retention (every `pruneIntervalMs`). All stop
 * when `signal` aborts; the returned promise resolves once they have.
 */
export interface BackgroundOptions {
  store: TrackerStore &
    DecisionStore &
    QueueStore &
    MetaStore &
    HumanVerdictStore &
    AccessStore &
    EventOutbox &
    ThroughputStore &
    Pick<Store, 'loadItemForEvaluation'>;
  /**
   * The registry and provider in force, read at every pass, so a SIGHUP reload reaches the
   * background passes too (the sweep fingerprints under the provider's context; retention judges
   * currency against it).
   */
  runtime: () => { registry: Registry; provider: Provider };
  logger: Logger;
  signal: AbortSignal;
  /** Items re-owed per minute by the drift and expiry sweeps together; 0 turns both off. */
  driftSweepPerMinute: number;
  /** Interval between drift-sweep passes (ms). */
  sweepIntervalMs: number;
  /** Interval between retention passes (ms); 0 turns retention off. */
  pruneIntervalMs: number;
  /** Retention's history window (ms). */
  retentionHistoryMs: number;
}

/** Batches per retention pass of the worker: a bounded slice each interval, so a big backlog never hogs the database. */
const WORKER_PRUNE_MAX_BATCHES = 50;

export function startBackgroundPasses(o: BackgroundOptions): Promise<void> {
  const loops: Promise<void>[] = [];
  if (o.driftSweepPerMinute > 0) {
    const { registry, provider } = o.runtime();
    // One bucket: the drift and expiry sweeps together owe at most driftSweepPerMinute (DESIGN §5.2).
    const bucket = new OweBucket(o.store, o.driftSweepPerMinute);
    const drift = new DriftSweeper({
      store: o.store,
      registry,
      ctx: provider,
      logger: o.logger,
      perMinute: o.driftSweepPerMinute,
      bucket,
    });
    const expiry = new ExpirySweeper({
      store: o.store,
      registry,
      logger: o.logger,
      perMinute: o.driftSweepPerMinute,
      bucket,
    });
    loops.push(
      runSweepLoop(
        [
          { name: 'drift sweep', sweepOnce: () => drift.sweepOnce() },
          { name: 'expiry sweep', sweepOnce: () => expiry.sweepOnce() },
        ],
        {
          intervalMs: o.sweepIntervalMs,
          signal: o.signal,
          logger: o.logger,
          beforePass: () => {
            const now = o.runtime();
            drift.swap(now.registry, now.provider);
            expiry.swap(now.registry);
          },
        },
      ),
    );
  }
  if (o.pruneIntervalMs > 0) loops.push(runPruneLoop(o));
  return Promise.all(loops).then(() => undefined);
}

/** What `sweepUntilDone` did: passes run and jobs the drift and expiry sweeps owed. */
export interface SweepsDoneReport {
  passes: number;
  driftOwed: number;
  expiryOwed: number;
}

/**
 * The sweeps of a one-shot drain (DESIGN §7.4): the drift sweep (question, convention, model
 * drift) and the expiry sweep (§5.2) run pass after pass until a pass reads nothing (every walk
 * has reached its end), so the drain that follows asks what they owe before it calls itself idle.
 * No per-minute rate: a drain is run on purpose and ends; the daily spend cap still holds at the
 * claims. `driftSweepPerMinute` 0 keeps both sweeps off, as in a long-running worker.
 * @throws when the store fails (the drain reports it; what was owed stays owed).
 */
export async function sweepUntilDone(
  o: Pick<BackgroundOptions, 'store' | 'logger' | 'driftSweepPerMinute'> & {
    registry: Registry;
    provider: Provider;
    signal: AbortSignal;
  },
): Promise<SweepsDoneReport> {
  const report: SweepsDoneReport = { passes: 0, driftOwed: 0, expiryOwed: 0 };
  if (o.driftSweepPerMinute <= 0) return report;
  // Infinity tokens: the bucket never cuts a walk short (OweBucket keeps Infinity as it is).
  const bucket = new OweBucket(o.store, Number.POSITIVE_INFINITY);
  const drift = new DriftSweeper({
    store: o.store,
    registry: o.registry,
    ctx: o.provider,
    logger: o.logger,
    perMinute: o.driftSweepPerMinute,
    bucket,
  });
  const expiry = new ExpirySweeper({
    store: o.store,
    registry: o.registry,
    logger: o.logger,
    perMinute: o.driftSweepPerMinute,
    bucket,
  });
  while (!o.signal.aborted) {
    const d = await drift.sweepOnce();
    const e = await expiry.sweepOnce();
    report.passes++;
    report.driftOwed += d.owed;
    report.expiryOwed += e.owed;
    if (d.scanned === 0 && e.scanned === 0) break;
  }
  if (report.driftOwed + report.expiryOwed > 0) o.logger.info(report, 'sweeps run to the end before the drain');
  return report;
}

async function runPruneLoop(o: BackgroundOptions): Promise<void> {
  while (!o.signal.aborted) {
    if (!(await systemClock.wait(o.pruneIntervalMs, o.signal))) return;
    const { registry, provider } = o.runtime();
    const reader = new DecisionReader(
      o.store,
      registry,
      { name: provider.name, model: provider.model, promptVersion: provider.promptVersion, effort: provider.effort },
      o.logger,
    );
    try {
      await pruneDecisions(o.store, reader, {
        historyMs: o.retentionHistoryMs,
        maxBatches: WORKER_PRUNE_MAX_BATCHES,
        logger: o.logger,
      });
      // Delivered decision events past the same window (DESIGN §16.2); undelivered ones are kept.
      await pruneDeliveredEvents(o.store, o.retentionHistoryMs, o.logger);
      // The throughput chart's minutes past the same window (DESIGN §2 job_throughput).
      await pruneThroughput(o.store, o.retentionHistoryMs, o.logger);
      // Dashboard sessions that can no longer be used: expired, idle or of a revoked token (DESIGN §16.6).
      await pruneDashboardSessions(o.store, o.logger);
    } catch (err) {
      o.logger.error({ err: errCode(err) }, 'retention pass failed');
    }
  }
}
