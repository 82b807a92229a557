import { errCode } from '../errors.js';
import type { Logger } from '../log.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { HealthSource } from './metrics.js';

/**
 * Worker heartbeats in `verdict_meta` (key `worker:<workerId>`), so `verdict status`, a separate
 * process, can say which workers are alive and whether one is cooling off after a provider-wide
 * error (DESIGN §3: "/healthz and status report it"). Ids, codes and times only.
 */

export const HEARTBEAT_PREFIX = 'worker:';

/** A heartbeat row's value. Times are epoch ms from the worker's wall clock. */
export interface Heartbeat {
  workerId: string;
  provider: string;
  model: string;
  concurrency: number;
  /** Interval between beats, ms: a row older than three beats belongs to a worker that stopped or hangs. */
  beatEveryMs: number;
  startedAt: number;
  lastLoopAt: number;
  /** The provider-wide error code of the current cooling-off period, or null. */
  providerProblem: string | null;
  /** The daily token cap the worker runs under (DESIGN §10.3), or null for none; absent in beats of older workers. */
  dailyTokenCap?: number | null;
}

/** Heartbeats older than this are deleted when a worker starts (crashed workers leave theirs). @defaultValue one day */
const HEARTBEAT_PRUNE_AFTER_MS = 86_400_000;

/**
 * Writes the worker's heartbeat now and every `everyMs`, until the returned `stop()`, which
 * deletes it. A failed write is logged and retried at the next beat; it never stops the worker.
 */
export async function startHeartbeat(o: {
  store: MetaStore;
  source: HealthSource;
  info: Omit<Heartbeat, 'lastLoopAt' | 'providerProblem' | 'startedAt' | 'beatEveryMs'>;
  everyMs: number;
  logger: Logger;
}): Promise<{ stop(): Promise<void> }> {
  const key = `${HEARTBEAT_PREFIX}${o.info.workerId}`;
  const startedAt = Date.now();
  try {
    for (const row of await o.store.listMeta(HEARTBEAT_PREFIX)) {
      if (row.key !== key && Date.now() - row.updatedAt > HEARTBEAT_PRUNE_AFTER_MS) await o.store.deleteMeta(row.key);
    }
  } catch (err) {
    o.logger.warn({ err: errCode(err) }, 'heartbeat prune failed');
  }
  const beat = async () => {
    const hb: Heartbeat = {
      ...o.info,
      beatEveryMs: o.everyMs,
      startedAt,
      lastLoopAt: o.source.lastLoopAt,
      providerProblem: o.source.providerProblem,
    };
    try {
      await o.store.setMeta(key, JSON.stringify(hb));
    } catch (err) {
      o.logger.warn({ err: errCode(err) }, 'heartbeat write failed');
    }
  };
  await beat();
  const timer = setInterval(() => void beat(), o.everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      try {
        await o.store.deleteMeta(key);
      } catch (err) {
        o.logger.warn({ err: errCode(err) }, 'heartbeat delete failed');
      }
    },
  };
}

/** Parses heartbeat rows; rows that do not parse are skipped. */
export function parseHeartbeats(
  rows: Array<{ key: string; value: string; updatedAt: number }>,
): Array<Heartbeat & { updatedAt: number }> {
  const out: Array<Heartbeat & { updatedAt: number }> = [];
  for (const r of rows) {
    try {
      const hb = JSON.parse(r.value) as Heartbeat;
      if (typeof hb.workerId === 'string') out.push({ ...hb, updatedAt: r.updatedAt });
    } catch {
      /* not a heartbeat */
    }
  }
  return out;
}

/**
 * True when a heartbeat is fresh: written within three beats (`beatEveryMs`, default 5 000 ms)
 * of `now` (epoch ms). Older rows belong to a worker that stopped, crashed or hangs.
 */
export function heartbeatAlive(h: Pick<Heartbeat, 'beatEveryMs'> & { updatedAt: number }, now: number): boolean {
  return now - h.updatedAt <= 3 * (h.beatEveryMs || 5_000);
}

/** The workers whose heartbeat is fresh (see heartbeatAlive), read from `verdict_meta`. */
export async function liveWorkers(
  store: Pick<TrackerStore, 'now'> & Pick<MetaStore, 'listMeta'>,
): Promise<Array<Heartbeat & { updatedAt: number }>> {
  const now = await store.now();
  return parseHeartbeats(await store.listMeta(HEARTBEAT_PREFIX)).filter((h) => heartbeatAlive(h, now));
}
