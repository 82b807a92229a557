import { errCode } from '../errors.js';
import { systemClock } from '../clock.js';
import { planDrift, readDriftMarker, scanDriftBatch, writeDriftMarker, type DriftMarker } from './drift-plan.js';
import type { FingerprintContext } from '../decision/questions.js';
import type { Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/whole-store.js';
import { OweBucket, passReads, walkSweep } from './owe-bucket.js';

/**
 * The worker's drift sweep (DESIGN §8 "Drift sweep"): re-owes, at backfill priority and a
 * bounded rate, the open items whose answers went stale without an item write (see
 * `maintenance/drift-plan.ts` for what counts).
 *
 * It does not rescan the database every pass. For each (set, workspace) a marker in
 * `verdict_meta` stores the signature of the questions last swept to the end, and the cursor of
 * a pass in progress. A pass first computes each signature (no table scan: fixed sets need no
 * read, resolved sets one resolve); only a (set, workspace) whose signature differs from its
 * marker is walked, from its cursor, in item-id order. When the questions change again during a
 * walk, the walk restarts from the first item, since items already passed may have drifted anew.
 * A (set, workspace) that has never been swept is walked once.
 *
 * Rate: at most `perMinute` items owed per minute (a token bucket on the store's clock, shared
 * with the expiry sweep: maintenance/owe-bucket.ts), and at most `scanPerPass` items read per pass.
 * Spend stays under the worker's limits as well: the owed jobs are claimed and asked like any
 * other.
 */

export interface DriftSweepOptions {
  store: Pick<
    Store,
    | 'getMeta'
    | 'listCollections'
    | 'listItems'
    | 'listMeta'
    | 'listWorkspaces'
    | 'now'
    | 'oweJobs'
    | 'scanItemsForDrift'
    | 'setMeta'
  >;
  registry: Registry;
  /** The configured provider's fingerprint context. */
  ctx: FingerprintContext;
  logger: Logger;
  /** Items owed per minute at most; 0 turns the sweep off. @defaultValue 60 (config `driftSweepPerMinute`) */
  perMinute: number;
  /** Items read per pass at most, across sets and workspaces. @defaultValue 1000 */
  scanPerPass?: number;
  /** Items read per store call. @defaultValue 200 */
  batchSize?: number;
  /**
   * The token bucket to owe from; the worker gives the drift and expiry sweeps one bucket, so
   * together they owe at most `perMinute` (DESIGN §5.2). @defaultValue a bucket of its own
   */
  bucket?: OweBucket;
}

/** What one pass did. */
export interface DriftPassReport {
  scanned: number;
  owed: number;
  /** (set, workspace) pairs whose walk reached the end in this pass. */
  completed: Array<{ set: string; workspaceId: string }>;
  /** (set, workspace) pairs whose questions could not be read this pass (resolve failed). */
  unreadable: Array<{ set: string; workspaceId: string }>;
}

/**
 * Items read per pass, and per store call. Our choice, not DESIGN's: each batch is one range read
 * of items plus one indexed read of their latest rows, and at the default 5 s tick 1,000 items a
 * pass walks 720,000 items an hour, once per change of a set's questions.
 */
export const DRIFT_SCAN_PER_PASS = 1_000;
export const DRIFT_BATCH_SIZE = 200;

/** The sweep itself: `sweepOnce` is one pass; `runDriftSweepLoop` runs passes on an interval. */
export class DriftSweeper {
  private readonly bucket: OweBucket;

  constructor(private opts: DriftSweepOptions) {
    this.bucket = opts.bucket ?? new OweBucket(opts.store, opts.perMinute);
  }

  /** Installs a new registry and fingerprint context (a reload); markers make the next pass find what changed. */
  swap(registry: Registry, ctx: FingerprintContext): void {
    this.opts = { ...this.opts, registry, ctx };
  }

  /**
   * One pass over every (set, live workspace), within the rate and the scan bound.
   * @throws when the store fails (the caller logs and tries again next interval; nothing is lost).
   */
  async sweepOnce(): Promise<DriftPassReport> {
    const { store, registry, ctx, logger } = this.opts;
    const report: DriftPassReport = { scanned: 0, owed: 0, completed: [], unreadable: [] };
    if (this.opts.perMinute <= 0) return report;
    await this.bucket.refill();
    let scanBudget = this.opts.scanPerPass ?? DRIFT_SCAN_PER_PASS;
    const batchSize = this.opts.batchSize ?? DRIFT_BATCH_SIZE;
    const workspaces = (await store.listWorkspaces()).filter((w) => w.deletedAt === null);
    const reads = passReads(store, 'drift:');
    for (const set of registry.all()) {
      for (const ws of workspaces) {
        if (scanBudget <= 0) return report;
        let plan;
        try {
          plan = await planDrift(reads.tracker, set, ws.id, ctx, logger);
        } catch (err) {
          report.unreadable.push({ set: set.name, workspaceId: ws.id });
          logger.warn(
            { set: set.name, workspaceId: ws.id, err: errCode(err) },
            'drift sweep: questions could not be read',
          );
          continue;
        }
        const marker = await readDriftMarker(reads.markers, set.name, ws.id);
        if (marker.swept === plan.signature) continue;
        const next: DriftMarker =
          marker.target === plan.signature
            ? { ...marker }
            : { swept: marker.swept, target: plan.signature, cursor: null };
        const walked = await walkSweep(
          store,
          this.bucket,
          { setName: set.name, workspaceId: ws.id, cursor: next.cursor, scanBudget, batchSize },
          (collections, cursor, limit) => scanDriftBatch(store, plan, collections, cursor, limit),
        );
        report.owed += walked.owed;
        report.scanned += walked.scanned;
        scanBudget -= walked.scanned;
        next.cursor = walked.cursor;
        if (walked.finished) {
          await writeDriftMarker(store, set.name, ws.id, { swept: plan.signature, target: null, cursor: null });
          report.completed.push({ set: set.name, workspaceId: ws.id });
        } else {
          await writeDriftMarker(store, set.name, ws.id, next);
        }
      }
    }
    if (report.owed > 0 || report.completed.length > 0) {
      logger.info({ scanned: report.scanned, owed: report.owed, completed: report.completed.length }, 'drift sweep');
    }
    return report;
  }
}

/** One sweep a sweep loop runs each interval: its name (for the failure log line) and one pass. */
export interface SweepPass {
  readonly name: string;
  sweepOnce(): Promise<unknown>;
}

/**
 * Runs each sweep's pass in turn every `intervalMs` until `signal` aborts, calling `beforePass`
 * first. A failed pass is logged (`<name> pass failed`, error code only) and does not stop the
 * sweeps after it; each is tried again at the next interval. The worker runs the drift sweep and
 * the expiry sweep (DESIGN §5.2) in one loop, so they share its interval and their bucket.
 */
export async function runSweepLoop(
  sweeps: readonly SweepPass[],
  o: { intervalMs: number; signal: AbortSignal; logger: Logger; beforePass?: () => void },
): Promise<void> {
  while (!o.signal.aborted) {
    try {
      o.beforePass?.();
    } catch (err) {
      o.logger.error({ err: errCode(err) }, 'sweep set-up failed');
    }
    for (const sweep of sweeps) {
      if (o.signal.aborted) return;
      try {
        await sweep.sweepOnce();
      } catch (err) {
        o.logger.error({ err: errCode(err) }, `${sweep.name} pass failed`);
      }
    }
    if (!(await systemClock.wait(o.intervalMs, o.signal))) return;
  }
}
