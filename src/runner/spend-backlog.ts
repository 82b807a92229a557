import type { Logger } from '../log.js';
import type { SpendRecord } from '../store/store.js';
import type { Store } from '../store/whole-store.js';
import { errCode } from './error-code.js';

/**
 * Spend of paid calls that could not be written (a full disk, a database outage), kept in the
 * process until it can be (DESIGN §10.5): the provider billed those calls, so dropping
 * the record would make `status`, the spend page and the daily token cap read low. The worker
 * holds one for all its slots; every write path that fails hands its record here, and `flush`
 * writes what is kept, oldest first, at the start of each run and when the worker stops. A record
 * is written in the hour of the write, not of the call. What is still kept when the process
 * exits is lost, and the worker's last log line counts it.
 */
export class SpendBacklog {
  private readonly kept: SpendRecord[] = [];
  private flushing: Promise<number> | null = null;

  constructor(private readonly logger: Logger) {}

  /** Records kept, not yet written. */
  get size(): number {
    return this.kept.length;
  }

  /** Keeps `record` after its write failed with `err` (logged by code, with the count kept). */
  keep(record: SpendRecord, err: unknown): void {
    this.kept.push(record);
    this.logger.warn(
      { set: record.questionSet, err: errCode(err), kept: this.kept.length },
      'spend record failed: kept until it can be written',
    );
  }

  /**
   * Writes the kept records, oldest first, one `Store.recordSpend` each, stopping at the first
   * failure (the rest stay kept). One flush at a time: a call during a flush gets that flush.
   * Never throws. @returns the records written by this call.
   */
  flush(store: Pick<Store, 'recordSpend'>): Promise<number> {
    if (this.kept.length === 0) return Promise.resolve(0);
    this.flushing ??= (async () => {
      let written = 0;
      try {
        while (this.kept.length > 0) {
          await store.recordSpend(this.kept[0]);
          this.kept.shift();
          written++;
        }
      } catch (err) {
        this.logger.warn({ err: errCode(err), kept: this.kept.length }, 'kept spend still not written');
      } finally {
        this.flushing = null;
      }
      if (written > 0) this.logger.info({ written, kept: this.kept.length }, 'kept spend written');
      return written;
    })();
    return this.flushing;
  }
}
