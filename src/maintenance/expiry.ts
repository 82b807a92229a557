import { errCode } from '../errors.js';
import { questionsOf, type QuestionSet, type Registry } from '../decision/registry.js';
import type { Logger } from '../log.js';
import { readExpiryMarker, scanExpiryBatch, writeExpiryMarker, type ExpiryPlan } from './expiry-plan.js';
import type { Store } from '../store/whole-store.js';
import { DRIFT_BATCH_SIZE, DRIFT_SCAN_PER_PASS, type DriftPassReport } from './drift.js';
import { OweBucket, passReads, walkSweep } from './owe-bucket.js';

/**
 * The worker's expiry sweep (DESIGN §5.2): re-owes, at backfill priority and a bounded rate, the
 * (item, set) jobs whose latest answer is older than the set's `maxAgeMs` (maintenance/expiry-plan.ts says
 * what counts), for live items the set applies to. Only sets that declare `maxAgeMs` are walked;
 * with none registered a pass reads nothing.
 *
 * Expiry comes with time, not with a change, so unlike the drift sweep there is no signature to
 * wait for: each (set, workspace) is walked in item-id order from a cursor kept in `verdict_meta`,
 * and once a walk reaches the end the next one starts `rewalkMs` later (default one hour). An
 * answer is therefore owed at most about `rewalkMs` plus one walk after it expires, plus the
 * rate's wait; with `maxAgeMs` at least a day, that is a small share of its life.
 *
 * Rate: owes come from the token bucket it shares with the drift sweep (maintenance/owe-bucket.ts), so
 * the two together owe at most `perMinute` items a minute; at most `scanPerPass` items are read
 * per pass. The owed jobs are claimed and asked like any other, within the worker's limiter and
 * spend cap.
 */

export interface ExpirySweepOptions {
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
  logger: Logger;
  /** Items owed per minute at most; 0 turns the sweep off. @defaultValue 60 (config `driftSweepPerMinute`, shared with the drift sweep) */
  perMinute: number;
  /** Items read per pass at most, across sets and workspaces. @defaultValue 1000 */
  scanPerPass?: number;
  /** Items read per store call. @defaultValue 200 */
  batchSize?: number;
  /** Wait after a complete walk of a (set, workspace) before the next, ms. @defaultValue 3 600 000 (`EXPIRY_REWALK_MS`) */
  rewalkMs?: number;
  /** The token bucket to owe from (the worker shares the drift sweep's). @defaultValue a bucket of its own */
  bucket?: OweBucket;
}

/** What one pass did: the drift sweep's report (scanned, owed, completed and unreadable pairs). */
export type ExpiryPassReport = DriftPassReport;

/**
 * Wait between complete walks of one (set, workspace), ms: one hour. Our choice, not DESIGN's: at
 * the smallest `maxAgeMs` (one day) an answer is re-owed within about 4 % of its life after it
 * expires, and an idle deployment reads each item at most once an hour per set with `maxAgeMs`.
 */
export const EXPIRY_REWALK_MS = 3_600_000;

/** The sweep: `sweepOnce` is one pass; the worker runs it beside the drift sweep (maintenance/background.ts). */
export class ExpirySweeper {
  private readonly bucket: OweBucket;

  constructor(private opts: ExpirySweepOptions) {
    this.bucket = opts.bucket ?? new OweBucket(opts.store, opts.perMinute);
  }

  /** Installs a new registry (a reload); a set that gained `maxAgeMs` is walked from the next pass. */
  swap(registry: Registry): void {
    this.opts = { ...this.opts, registry };
  }

  /**
   * One pass over every (set with `maxAgeMs`, live workspace) that is due, within the rate and the
   * scan bound.
   * @throws when the store fails (the caller logs and tries again next interval; nothing is lost).
   */
  async sweepOnce(): Promise<ExpiryPassReport> {
    const { store, registry, logger } = this.opts;
    const report: ExpiryPassReport = { scanned: 0, owed: 0, completed: [], unreadable: [] };
    if (this.opts.perMinute <= 0) return report;
    const sets = registry.all().filter((s): s is QuestionSet & { maxAgeMs: number } => s.maxAgeMs !== null);
    if (sets.length === 0) return report;
    await this.bucket.refill();
    const nowMs = await store.now();
    const rewalkMs = this.opts.rewalkMs ?? EXPIRY_REWALK_MS;
    const batchSize = this.opts.batchSize ?? DRIFT_BATCH_SIZE;
    let scanBudget = this.opts.scanPerPass ?? DRIFT_SCAN_PER_PASS;
    const workspaces = (await store.listWorkspaces()).filter((w) => w.deletedAt === null);
    const reads = passReads(store, 'expiry:');
    walk: for (const set of sets) {
      for (const ws of workspaces) {
        if (scanBudget <= 0 || this.bucket.tokens < 1) break walk;
        const marker = await readExpiryMarker(reads.markers, set.name, ws.id);
        if (marker.cursor === null && marker.walkedAt !== null && nowMs - marker.walkedAt < rewalkMs) continue;
        let plan: ExpiryPlan;
        try {
          plan = {
            set,
            workspaceId: ws.id,
            keys: Object.keys(await questionsOf(set, { workspaceId: ws.id, store: reads.tracker, logger })).sort(),
          };
        } catch (err) {
          report.unreadable.push({ set: set.name, workspaceId: ws.id });
          logger.warn(
            { set: set.name, workspaceId: ws.id, err: errCode(err) },
            'expiry sweep: questions could not be read',
          );
          continue;
        }
        const walked = await walkSweep(
          store,
          this.bucket,
          { setName: set.name, workspaceId: ws.id, cursor: marker.cursor, scanBudget, batchSize },
          (collections, cursor, limit) => scanExpiryBatch(store, plan, collections, cursor, limit, nowMs),
        );
        report.owed += walked.owed;
        report.scanned += walked.scanned;
        scanBudget -= walked.scanned;
        if (walked.finished) {
          await writeExpiryMarker(store, set.name, ws.id, { cursor: null, walkedAt: nowMs });
          report.completed.push({ set: set.name, workspaceId: ws.id });
        } else {
          await writeExpiryMarker(store, set.name, ws.id, { ...marker, cursor: walked.cursor });
        }
      }
    }
    if (report.owed > 0 || report.completed.length > 0) {
      logger.info({ scanned: report.scanned, owed: report.owed, completed: report.completed.length }, 'expiry sweep');
    }
    return report;
  }
}
