import { errCode } from '../errors.js';
import type { Logger } from '../log.js';
import type { MetaRow } from '../store/meta-store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { MetaStore } from '../store/meta-store.js';

/**
 * Set-scoped cooling-off (DESIGN §3.8). A 400 that rejects the answer schema is the fault of the
 * question set the schema was built from, so only that set stops being claimed, for 30 s doubling
 * to 10 min per consecutive rejection; other sets keep running. The periods live in this process,
 * like the provider-wide cooling-off (DESIGN §3); each one is also written to a `verdict_meta` row
 * so `status` (another process) lists the set under failing sets with the reason. The row is
 * deleted when a call of the set next succeeds.
 */

/** First set cooling-off period (ms); the same schedule as the provider-wide one (DESIGN §3). */
export const SET_COOLOFF_BASE_MS = 30_000;
/** Longest set cooling-off period (ms). */
const SET_COOLOFF_CAP_MS = 600_000;
/** `verdict_meta` key prefix of the rows `status` reads; the set name follows it. */
export const SET_COOLOFF_META_PREFIX = 'set-cooloff:';

/** What a `set-cooloff:<set>` meta row holds. Times are epoch ms (the store's clock), durations ms. */
export interface SetCooloffRecord {
  set: string;
  /** Error code and HTTP status only (never provider text), e.g. `schema_rejected 400`. */
  reason: string;
  /** When the current period started. */
  since: number;
  /** When the current period ends; the set is claimed again from then. */
  until: number;
  periodMs: number;
}

/** Parses the `set-cooloff:` meta rows; rows that do not parse are skipped. */
export function parseSetCooloffs(rows: readonly MetaRow[]): SetCooloffRecord[] {
  const out: SetCooloffRecord[] = [];
  for (const r of rows) {
    if (!r.key.startsWith(SET_COOLOFF_META_PREFIX)) continue;
    try {
      const v = JSON.parse(r.value) as Partial<SetCooloffRecord>;
      if (
        typeof v.reason !== 'string' ||
        typeof v.until !== 'number' ||
        typeof v.since !== 'number' ||
        typeof v.periodMs !== 'number'
      )
        continue;
      out.push({
        set: r.key.slice(SET_COOLOFF_META_PREFIX.length),
        reason: v.reason,
        since: v.since,
        until: v.until,
        periodMs: v.periodMs,
      });
    } catch {
      /* not ours */
    }
  }
  return out;
}

/** The cooling-off periods of one process's sets. Safe to share between the slots of a worker. */
export class SetCooloffs {
  readonly #periods = new Map<string, { until: number; periodMs: number; reason: string }>();
  /** Sets with a meta row written earlier (by this or another process), to delete on success. */
  readonly #persisted = new Set<string>();

  constructor(
    private readonly store: Pick<TrackerStore, 'now'> & MetaStore,
    private readonly logger: Logger,
  ) {}

  /** Learns which sets have a meta row already, so a success deletes it. Holds are not adopted: a restart gets its own chance. */
  async load(): Promise<void> {
    for (const r of parseSetCooloffs(await this.store.listMeta(SET_COOLOFF_META_PREFIX))) this.#persisted.add(r.set);
  }

  /** True when some set has had a period in this process (the claim then asks which are active). */
  get any(): boolean {
    return this.#periods.size > 0;
  }

  /** Sets cooling off at `now` (epoch ms, the store's clock): the claim passes over their jobs. */
  active(now: number): string[] {
    return [...this.#periods].filter(([, p]) => p.until > now).map(([set]) => set);
  }

  /**
   * Starts the set's next cooling-off period, unless one is running (several slots can report the
   * same rejection: one period, logged once). Writes the meta row; a failed write is logged, never
   * thrown (the job must still be released).
   * @returns the period's remaining length in ms, to hold the rejected job for.
   */
  async enter(set: string, reason: string): Promise<number> {
    const now = await this.store.now();
    const cur = this.#periods.get(set);
    if (cur && cur.until > now) return cur.until - now;
    const periodMs = cur ? Math.min(cur.periodMs * 2, SET_COOLOFF_CAP_MS) : SET_COOLOFF_BASE_MS;
    const p = { until: now + periodMs, periodMs, reason };
    this.#periods.set(set, p);
    this.logger.error(
      { set, reason, cooloffMs: periodMs },
      'answer schema rejected: not claiming this set during the cooling-off period',
    );
    const record: Omit<SetCooloffRecord, 'set'> = { reason, since: now, until: p.until, periodMs };
    try {
      await this.store.setMeta(SET_COOLOFF_META_PREFIX + set, JSON.stringify(record));
      this.#persisted.add(set);
    } catch (err) {
      this.logger.warn({ set, err: errCode(err) }, 'set cooling-off not recorded for status');
    }
    return periodMs;
  }

  /** A call of the set succeeded: its periods end and its meta row goes. No I/O for a set never cooled off. */
  async clear(set: string): Promise<void> {
    const had = this.#periods.delete(set);
    if (!had && !this.#persisted.has(set)) return;
    this.#persisted.delete(set);
    try {
      await this.store.deleteMeta(SET_COOLOFF_META_PREFIX + set);
    } catch (err) {
      this.logger.warn({ set, err: errCode(err) }, 'set cooling-off row not deleted');
    }
  }

  /** A reload installed a new config: every set gets a fresh chance (rows stay until a success). */
  reset(): void {
    this.#periods.clear();
  }
}
