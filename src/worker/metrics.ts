import { errCode } from '../errors.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from '../log.js';
import type { RunReport } from '../runner/job-life.js';
import type { SpendRecord } from '../store/store.js';
import type { Store } from '../store/whole-store.js';

/**
 * Prometheus metrics and the health endpoint of a worker (DESIGN §10 "Observability"), served by
 * `serveMetrics` on `--metrics-port`: `/metrics` in prom-client's text exposition format and
 * `/healthz`. Labels are set names, outcomes and token types only, never item ids, refs or text
 * (DESIGN §1 principle 9), so the series count stays bounded by the registry's size.
 */

/** Histogram buckets of one evaluation, seconds: from a cached no-op (ms) to a slow provider's worst case (minutes). */
const EVALUATION_BUCKETS_S = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** What the health check reads from a worker (src/worker/worker.ts has both). */
export interface HealthSource {
  /** Epoch ms of the last loop turn of any slot. */
  readonly lastLoopAt: number;
  /** The provider-wide error code of the current cooling-off period, or null. */
  readonly providerProblem: string | null;
}

/**
 * The health verdict: `unhealthy` when the loop stalled or the provider is misconfigured;
 * `degraded` when the database cannot take writes now (locked by another process, disk full;
 * DESIGN §10.1), which clears on the next successful write; `ok` otherwise. Both non-ok states are
 * HTTP 503 on /healthz.
 */
export interface Health {
  healthy: boolean;
  status: 'ok' | 'degraded' | 'unhealthy';
  /** Codes and durations only (never provider text). */
  reasons: string[];
  lastLoopAgeMs: number;
}

/**
 * Judges health. A loop turn happens at least every tick, and after every job; a slot inside one
 * provider call does not turn until the call ends, so the stall threshold must cover one call's
 * worst case (`stallAfterMs`; see `defaultStallAfterMs`). `storageProblem` is the store's
 * (`Store.storageProblem()`): while it is set, slots wait on the database's retries, so a stall
 * is that problem and is not reported as a second one.
 */
export function judgeHealth(
  src: HealthSource,
  stallAfterMs: number,
  now = Date.now(),
  storageProblem: string | null = null,
): Health {
  const lastLoopAgeMs = Math.max(0, now - src.lastLoopAt);
  const reasons: string[] = [];
  if (storageProblem) reasons.push(storageProblem);
  else if (lastLoopAgeMs > stallAfterMs)
    reasons.push(`loop stalled: no turn for ${lastLoopAgeMs} ms (limit ${stallAfterMs} ms)`);
  if (src.providerProblem) reasons.push(`provider misconfigured: ${src.providerProblem}`);
  const status =
    src.providerProblem || (!storageProblem && lastLoopAgeMs > stallAfterMs)
      ? 'unhealthy'
      : storageProblem
        ? 'degraded'
        : 'ok';
  return { healthy: status === 'ok', status, reasons, lastLoopAgeMs };
}

/**
 * Stall threshold, ms: one provider call's worst case (a slot does not turn during it) plus three
 * ticks (an idle slot turns every tick; three misses are not jitter).
 */
export function defaultStallAfterMs(tickMs: number, worstCaseCallMs: number): number {
  return worstCaseCallMs + 3 * tickMs;
}

/** The worker's metrics on their own prom-client registry (never the global one, so tests and embedders can have several). */
export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly claimed: Counter<'set'>;
  private readonly outcomes: Counter<'set' | 'outcome'>;
  private readonly calls: Counter<'set' | 'outcome'>;
  private readonly tokens: Counter<'set' | 'outcome' | 'type'>;
  private readonly latency: Histogram<'set' | 'outcome'>;
  private readonly eventsDelivered: Counter;
  private readonly eventFailures: Counter;

  private health: (() => Health) | null = null;

  /** @param o.store read at every scrape for the queue depth and the oldest owed age. */
  constructor(
    private readonly o: { store: Pick<Store, 'eventDeliveryStats' | 'queueStats' | 'walBytes'>; logger?: Logger },
  ) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'verdict_' });
    this.claimed = new Counter({
      name: 'verdict_jobs_claimed_total',
      help: 'Jobs claimed, by question set.',
      labelNames: ['set'],
      registers,
    });
    this.outcomes = new Counter({
      name: 'verdict_job_outcomes_total',
      help: 'Job outcomes recorded, by question set and outcome (complete, drop, refuse, park, fail, defer, release, misconfigured, schema_rejected).',
      labelNames: ['set', 'outcome'],
      registers,
    });
    this.calls = new Counter({
      name: 'verdict_provider_calls_total',
      help: 'Provider calls, by question set and outcome (ok, defect, aborted, or the job outcome: refuse, fail, defer, misconfigured, ...), as recorded in decision_spend.',
      labelNames: ['set', 'outcome'],
      registers,
    });
    this.tokens = new Counter({
      name: 'verdict_provider_tokens_total',
      help: 'Provider tokens, by question set, call outcome and type (input, output, cache_read, cache_write).',
      labelNames: ['set', 'outcome', 'type'],
      registers,
    });
    this.latency = new Histogram({
      name: 'verdict_evaluation_duration_seconds',
      help: 'Wall time of one job, from claim to recorded outcome, seconds.',
      labelNames: ['set', 'outcome'],
      buckets: EVALUATION_BUCKETS_S,
      registers,
    });
    const queue = new Gauge({
      name: 'verdict_queue_jobs',
      help: 'Jobs in the queue by state (due, waiting, in_flight, parked), read at scrape time.',
      labelNames: ['state'],
      registers,
      // An arrow, so `this` is the collector (prom-client calls collect with the metric as `this`).
      collect: async () => {
        const q = await this.readQueue();
        if (!q) return;
        queue.set({ state: 'due' }, q.owedDue);
        queue.set({ state: 'waiting' }, q.owedWaiting);
        queue.set({ state: 'in_flight' }, q.inFlight);
        queue.set({ state: 'parked' }, q.parked);
      },
    });
    const oldest = new Gauge({
      name: 'verdict_oldest_owed_age_seconds',
      help: 'Age of the oldest owed job (now − enqueued_at), seconds; 0 when none is owed.',
      registers,
      // An arrow, so `this` is the collector (prom-client calls collect with the metric as `this`).
      collect: async () => {
        const q = await this.readQueue();
        if (q) oldest.set((q.oldestOwedAgeMs ?? 0) / 1000);
      },
    });
    const wal = new Gauge({
      name: 'verdict_sqlite_wal_bytes',
      help: 'Size of the SQLite write-ahead log file, bytes, read at scrape time (DESIGN §10.2; absent on Postgres).',
      registers,
      collect: async () => {
        try {
          const bytes = await this.o.store.walBytes();
          if (bytes !== null) wal.set(bytes);
        } catch {
          /* the gauge keeps its last value */
        }
      },
    });
    // Outbound decision events (DESIGN §16.2): no labels (a target URL can hold a token).
    this.eventsDelivered = new Counter({
      name: 'verdict_events_delivered_total',
      help: 'Decision events delivered (the receiver answered 2xx).',
      registers,
    });
    this.eventFailures = new Counter({
      name: 'verdict_event_delivery_failures_total',
      help: 'Failed decision event deliveries (non-2xx, network error or timeout); each is retried with backoff.',
      registers,
    });
    const eventsPending = new Gauge({
      name: 'verdict_events_pending',
      help: 'Undelivered decision events of enabled targets, read at scrape time.',
      registers,
      collect: async () => {
        try {
          eventsPending.set((await this.o.store.eventDeliveryStats()).pending);
        } catch {
          /* the gauge keeps its last value */
        }
      },
    });
    const loopAge = new Gauge({
      name: 'verdict_worker_loop_age_seconds',
      help: 'Time since a worker slot last turned its loop, seconds.',
      registers,
      collect: () => {
        if (this.health) loopAge.set(this.health().lastLoopAgeMs / 1000);
      },
    });
    const healthy = new Gauge({
      name: 'verdict_worker_healthy',
      help: '1 when /healthz reports healthy, else 0 (loop stalled or provider misconfigured).',
      registers,
      collect: () => {
        if (this.health) healthy.set(this.health().healthy ? 1 : 0);
      },
    });
  }

  /** The health the gauges report (the same function /healthz serves). */
  setHealth(health: () => Health): void {
    this.health = health;
  }

  private queueRead: ReturnType<Store['queueStats']> | null = null;

  /**
   * One queue read per scrape, shared by the gauges that collect in the same turn of the event
   * loop (the read is forgotten on the next turn, so a later scrape never sees an old one); null
   * (the gauges keep their last values) when the read fails.
   */
  private async readQueue() {
    let read = this.queueRead;
    if (!read) {
      read = this.o.store.queueStats();
      this.queueRead = read;
      void read.finally(() => setImmediate(() => (this.queueRead = null))).catch(() => undefined);
    }
    try {
      return await read;
    } catch (err) {
      this.o.logger?.warn({ err: errCode(err) }, 'metrics: queue read failed');
      return null;
    }
  }

  /** Counts one recorded job (wire to the worker's `onOutcome`). */
  observe(r: RunReport): void {
    const set = r.claim.questionSet;
    const outcome = r.outcome.kind;
    this.claimed.inc({ set });
    this.outcomes.inc({ set, outcome });
    this.latency.observe({ set, outcome }, r.durationMs / 1000);
  }

  /** Counts one recorded event delivery: delivered, or failed (and retried later). */
  countEventDelivery(ok: boolean): void {
    (ok ? this.eventsDelivered : this.eventFailures).inc();
  }

  /** Counts one provider call's spend record (wire to the worker's `onSpend`): the counters are the decision_spend rows the runner writes. */
  countSpend(r: SpendRecord): void {
    const l = { set: r.questionSet, outcome: r.outcome };
    this.calls.inc(l, r.calls);
    this.tokens.inc({ ...l, type: 'input' }, r.usage.inputTokens);
    this.tokens.inc({ ...l, type: 'output' }, r.usage.outputTokens);
    this.tokens.inc({ ...l, type: 'cache_read' }, r.usage.cacheReadTokens);
    this.tokens.inc({ ...l, type: 'cache_write' }, r.usage.cacheWriteTokens);
  }
}

/** A running metrics server. */
export interface MetricsServer {
  /** The bound port (useful with port 0). */
  port: number;
  host: string;
  close(): Promise<void>;
}

/**
 * Serves `/metrics` and `/healthz` (200 `{"status":"ok"}`, or 503 `{"status":"degraded"|"unhealthy",
 * "reasons":[...]}`) on `host:port`; anything else is 404. /healthz reads only in-memory state, so
 * it answers on the next turn of the event loop (DESIGN §10.1: within 1 s at all times).
 * @throws when the port cannot be bound (EADDRINUSE, EACCES).
 */
export async function serveMetrics(o: {
  metrics: WorkerMetrics;
  health: () => Health;
  port: number;
  host: string;
  logger?: Logger;
}): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      o.metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': o.metrics.registry.contentType }).end(text),
        (err: unknown) => {
          o.logger?.warn({ err: (err as Error).name }, 'metrics: scrape failed');
          res.writeHead(500, { 'content-type': 'text/plain' }).end('scrape failed\n');
        },
      );
      return;
    }
    if (path === '/healthz') {
      const h = o.health();
      res
        .writeHead(h.healthy ? 200 : 503, { 'content-type': 'application/json' })
        .end(`${JSON.stringify({ status: h.status, reasons: h.reasons, lastLoopAgeMs: h.lastLoopAgeMs })}\n`);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics or /healthz\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  return {
    port: addr.port,
    host: o.host,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
