import { randomUUID } from 'node:crypto';
import type { Logger } from '../log.js';
import type { SpendStore } from '../store/spend-store.js';
import type { SpendRecord } from '../store/store.js';
import { errCode } from './error-code.js';
import { dropTaken, takeOrphans, type SpendSpool, type SpooledSpend } from './spend-spool.js';

/**
 * Spend of paid calls that could not be written (a full disk, a database outage), kept until it
 * can be (DESIGN §10.5): the provider billed those calls, so dropping the record would make
 * `status`, the spend page and the daily token cap read low. The worker holds one for all its
 * slots; every write path that fails hands its record here. Each kept record gets a random id and
 * is written, fdatasynced, to the worker's spool file (`SpendSpool`) before `keep` returns, so a
 * crash or a kill does not lose it: the next worker to start takes the file (`adoptOrphans`).
 * `flush` writes what is kept, oldest first, each through `recordSpooledSpend` (its id's marker and
 * the spend in one transaction, so a record is added once however often it is replayed), at the
 * start of each run, at start-up and when the worker stops. A record is written in the hour of the
 * write, not of the call. Without a spool (none configured, or it could not be made or written)
 * records are kept in memory only and what is still kept at exit is lost; the worker's last log
 * line counts both.
 */
export class SpendBacklog {
  private readonly kept: SpooledSpend[] = [];
  /** Ids of kept records that are in the spool file. */
  private readonly inSpool = new Set<string>();
  /** Ids written since the spool was last cleared: their markers are deleted once no file holds them. */
  private written: string[] = [];
  /** Other workers' spool files taken by `adoptOrphans`, deleted once nothing of theirs is kept. */
  private taken: string[] = [];
  private flushing: Promise<number> | null = null;

  constructor(
    private readonly logger: Logger,
    private readonly spool: SpendSpool | null = null,
  ) {}

  /** Records kept, not yet written. */
  get size(): number {
    return this.kept.length;
  }

  /** Kept records that are in the spool file (they survive this process). */
  get spooled(): number {
    return this.inSpool.size;
  }

  /** Keeps `record` after its write failed with `err`: spooled, and logged by code with the counts kept. */
  keep(record: SpendRecord, err: unknown): void {
    const entry: SpooledSpend = { id: randomUUID(), at: Date.now(), spend: record };
    this.kept.push(entry);
    const spooled = this.spoolOne(entry);
    this.logger.warn(
      { set: record.questionSet, err: errCode(err), kept: this.kept.length, spooled },
      'spend record failed: kept until it can be written',
    );
  }

  /**
   * Takes the spool files in `dir` that a dead worker left with records (`takeOrphans`), keeps
   * their records (into this worker's own spool first, so the taken files can go), and returns how
   * many it took. `flush` writes them. Never throws.
   */
  adoptOrphans(dir: string): number {
    let found: ReturnType<typeof takeOrphans>;
    try {
      found = takeOrphans(dir);
    } catch (err) {
      this.logger.error({ err: errCode(err), dir }, 'spend spool not read: its records wait for the next start');
      return 0;
    }
    if (found.torn > 0) this.logger.warn({ torn: found.torn }, 'spend spool lines torn by a crash mid-write skipped');
    const known = new Set(this.kept.map((e) => e.id));
    let allSpooled = true;
    let adopted = 0;
    for (const e of found.entries) {
      if (known.has(e.id)) continue;
      known.add(e.id);
      this.kept.push(e);
      adopted++;
      if (!this.spoolOne(e)) allSpooled = false;
    }
    if (allSpooled) dropTaken(found.taken);
    else this.taken.push(...found.taken);
    if (found.taken.length > 0)
      this.logger.info({ files: found.taken.length, records: adopted }, 'spend spooled by a stopped worker taken');
    return adopted;
  }

  /**
   * Writes the kept records, oldest first, one `SpendStore.recordSpooledSpend` each, stopping at
   * the first failure (the rest stay kept). Once nothing is kept the spool is cleared, taken files
   * deleted and the written ids' markers forgotten. One flush at a time: a call during a flush
   * gets that flush. Never throws. @returns the records written by this call.
   */
  flush(store: Pick<SpendStore, 'recordSpooledSpend' | 'forgetSpooledSpend'>): Promise<number> {
    if (this.kept.length === 0) return Promise.resolve(0);
    this.flushing ??= (async () => {
      let written = 0;
      let again = 0;
      try {
        while (this.kept.length > 0) {
          const e = this.kept[0];
          if (!(await store.recordSpooledSpend(e.id, e.spend))) again++;
          this.kept.shift();
          this.inSpool.delete(e.id);
          this.written.push(e.id);
          written++;
        }
      } catch (err) {
        this.logger.warn({ err: errCode(err), kept: this.kept.length }, 'kept spend still not written');
      }
      if (this.kept.length === 0) await this.settle(store);
      this.flushing = null;
      if (written > 0)
        this.logger.info({ written, alreadyWritten: again, kept: this.kept.length }, 'kept spend written');
      return written;
    })();
    return this.flushing;
  }

  /** Closes the spool: deleted when it holds nothing, else left for the next worker to start. */
  close(): void {
    this.spool?.close();
  }

  /** Appends `e` to the spool. @returns false when there is none or the write failed (logged). */
  private spoolOne(e: SpooledSpend): boolean {
    if (!this.spool) return false;
    try {
      this.spool.append(e);
      this.inSpool.add(e.id);
      return true;
    } catch (err) {
      this.logger.error({ err: errCode(err) }, 'spend spool not written: the record is kept in memory only');
      return false;
    }
  }

  /** Nothing is kept: the spool is zeroed and the taken files deleted, and only then the markers go. */
  private async settle(store: Pick<SpendStore, 'forgetSpooledSpend'>): Promise<void> {
    try {
      this.spool?.clear();
    } catch (err) {
      // The lines stay, and so do their markers: a replay of them adds nothing.
      this.logger.warn({ err: errCode(err) }, 'spend spool not cleared');
      return;
    }
    dropTaken(this.taken);
    this.taken = [];
    const ids = this.written;
    this.written = [];
    try {
      await store.forgetSpooledSpend(ids);
    } catch (err) {
      // A marker left behind is a few bytes in verdict_meta; it can never match a new record's id.
      this.logger.warn({ err: errCode(err), markers: ids.length }, 'spooled spend markers not deleted');
    }
  }
}
