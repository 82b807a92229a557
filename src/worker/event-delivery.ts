import { errCode, ownCode } from '../errors.js';
import { systemClock, type WaitClock } from '../clock.js';
import { ConfigError, eventSettingsProblem } from '../config.js';
import { signEventBody } from '../integrations/events/signature.js';
import type { Logger } from '../log.js';
import { parseRetryAfter } from '../providers/retry.js';
import { BACKOFF_CAP_MS, backoffMs } from '../runner/backoff.js';
import type { EventDelivery, OutboxKind } from '../store/events.js';
import type { EventOutbox } from '../store/events.js';

/**
 * Delivery of outbound decision events (DESIGN §16.2): the worker POSTs the rows the answers'
 * transactions queued (src/store/sql/events.ts) to their targets, under a lease, each line of
 * (target, item) in order, and records every outcome in the store, so a receiver that is down for
 * an hour loses nothing: the rows wait, backed off with the job backoff (30 s doubling to 1 h,
 * ±10 %; src/runner/backoff.ts) for as long as it takes, and are never given up on.
 *
 * One request: `POST <target>` with the stored payload bytes as the body and the headers
 * `content-type: application/json`, `x-verdict-event: <event id>` (the same for every target and
 * every retry: receivers de-duplicate on it), `x-verdict-event-type`, and
 * `x-verdict-signature-256: sha256=<hex HMAC-SHA256(secret, body)>`. A 2xx is delivered; anything
 * else (3xx included: redirects are not followed), a network error or the timeout is a failure,
 * due again after `max(backoff(attempts), Retry-After)` (the receiver's Retry-After counted when
 * longer, up to the backoff's cap of 1 h).
 *
 * A target that times out or refuses connections is skipped by this process for a while (at most
 * UNREACHABLE_HOLD_MS): its other claimed rows are failed (attempt counted, backed off) without a
 * request, so a dead receiver costs one round of timeouts, not one per queued row.
 *
 * A receiver sees each event at least once; twice only when a lease ran out mid-request (the lease
 * is several request timeouts), a stop cut a request short after the receiver had it (the row is
 * released and sent again), or a worker died between the receiver's 2xx and the store's record.
 *
 * Logs and metrics carry row ids, event ids, status codes and counts only: never the body, never
 * the target URL (a webhook URL often holds a token).
 */

/**
 * The worker's event settings, checked (for library callers as the config loader checks the CLI's):
 * null when no URL is given (this worker then neither changes the targets nor delivers), else the
 * URLs without repeats and the secret.
 * @throws ConfigError naming `eventUrls` for a URL that is not http(s), or `eventSecret` when it is
 *   missing or holds a control character while URLs are given.
 */
export function eventDeliverySettings(
  urls: readonly string[] | undefined,
  secret: string | undefined,
): { urls: string[]; secret: string } | null {
  const unique = [...new Set(urls ?? [])];
  if (unique.length === 0) return null;
  for (const [i, u] of unique.entries()) {
    const ok = URL.canParse(u) && ['http:', 'https:'].includes(new URL(u).protocol);
    if (!ok)
      throw new ConfigError(
        `eventUrls: entry ${i + 1} is not an http(s) URL; expected URLs such as https://example.com/hooks/verdict`,
      );
  }
  const problem = eventSettingsProblem(unique, secret);
  if (problem) throw new ConfigError(`eventSecret ${problem}`);
  return { urls: unique, secret: secret! };
}

/** Per-request timeout, ms (our choice: a receiver should answer at once and process later). */
const EVENT_TIMEOUT_MS = 10_000;
/** Rows claimed, and POSTed at once, per round. */
const EVENT_BATCH = 16;
/** Longest a target that timed out or refused connections is skipped by this process, ms (see `EventDeliverer.unreachable`). */
const UNREACHABLE_HOLD_MS = 60_000;

/** What an `EventDeliverer` needs. Durations in milliseconds. */
export interface EventDeliveryOptions {
  store: EventOutbox;
  logger: Logger;
  /** The lease owner, unique per process (`<workerId>/events`). */
  owner: string;
  /** The HMAC-SHA256 key (`VERDICT_EVENT_SECRET`); non-empty for webhook rows (the default `send` signs with it). */
  secret: string;
  /** Which outbox rows this deliverer claims. @defaultValue 'webhook' */
  kind?: OutboxKind;
  /**
   * Sends one claimed row; the deliverer records its outcome. @defaultValue the webhook POST (signed
   * with `secret`); the actions pass their GitHub sender (src/actions/github-delivery.ts).
   */
  send?: (row: EventDelivery, signal: AbortSignal) => Promise<DeliveryAttempt>;
  /** Wait between rounds when nothing was due (the worker's tick). */
  pollMs: number;
  /** Per-request timeout. @defaultValue EVENT_TIMEOUT_MS (10 000) */
  timeoutMs?: number;
  /** Rows per round. @defaultValue EVENT_BATCH (16) */
  batchSize?: number;
  /** Lease of a claimed row; must outlast a request, or a second worker sends it again. @defaultValue max(60 000, 3 × timeoutMs) */
  leaseMs?: number;
  /** Jitter source of the backoff, in [0, 1). @defaultValue Math.random */
  random?: () => number;
  /** Called once per recorded delivery outcome (metrics). */
  onDelivery?: (ok: boolean) => void;
  /** Time for the unreachable-target holds and the wait between rounds. @defaultValue systemClock */
  clock?: WaitClock;
}

/** What one `flush` (or the rounds of `run`) did. */
export interface DeliveryCounts {
  delivered: number;
  failed: number;
}

/**
 * One attempt's result: delivered, failed (with why and how long the receiver asked us to wait;
 * the attempt counts and backs off), deferred (a rate limit: due again after `delayMs`, no attempt
 * counted, so the backoff does not grow while a limit is waited out), or cut short by a stop.
 */
export type DeliveryAttempt =
  | { ok: true; status: number }
  | { ok: false; error: string; retryAfterMs?: number }
  | { ok: 'defer'; error: string; delayMs: number }
  | { ok: 'stopped' };
type Attempt = DeliveryAttempt;

/**
 * Delivers the store's due events (see the file comment): `run` loops until its signal aborts;
 * `flush` (the until-idle drain) delivers until nothing is due and returns.
 */
export class EventDeliverer {
  private readonly timeoutMs: number;
  private readonly batchSize: number;
  private readonly leaseMs: number;
  private readonly clock: WaitClock;
  /**
   * Targets that just timed out or could not be reached: target URL → epoch ms (the deliverer's
   * clock) until which their other claimed rows are failed without a request. A receiver that accepts connections and never
   * answers would otherwise cost a full timeout per row (5,000 queued rows, 16 at a time, 10 s
   * each: 52 minutes for one until-idle drain). In memory, per process, at most a minute.
   */
  private readonly unreachable = new Map<string, number>();
  private nudge = new AbortController();

  /** @throws TypeError when the secret is empty (config.ts `eventSettingsProblem` refuses it at start). */
  constructor(private readonly o: EventDeliveryOptions) {
    if (!o.send && !o.secret) throw new TypeError('event delivery needs a non-empty secret');
    this.timeoutMs = o.timeoutMs ?? EVENT_TIMEOUT_MS;
    this.batchSize = o.batchSize ?? EVENT_BATCH;
    this.leaseMs = o.leaseMs ?? Math.max(60_000, 3 * this.timeoutMs);
    this.clock = o.clock ?? systemClock;
  }

  /** Ends the current wait between rounds now (an answer that may have queued events was stored). */
  wake(): void {
    const n = this.nudge;
    this.nudge = new AbortController();
    n.abort();
  }

  /**
   * Rounds until `signal` aborts: claim up to a batch, POST them at once, record each outcome; wait
   * `pollMs` (or until `wake`) when nothing was claimed or the store failed. On abort, in-flight
   * requests are cut short and their rows released without an attempt.
   */
  async run(signal: AbortSignal): Promise<void> {
    const total: DeliveryCounts = { delivered: 0, failed: 0 };
    try {
      while (!signal.aborted) {
        let claimed = 0;
        try {
          claimed = await this.round(signal, total);
        } catch (err) {
          this.o.logger.error({ err: errCode(err) }, 'event delivery round failed; retrying next tick');
        }
        if (claimed === 0) await this.wait(signal);
      }
    } finally {
      await this.releaseOnStop(signal);
    }
  }

  /**
   * The until-idle drain of events: rounds until a claim finds nothing due. Every row due now is
   * tried; one that fails is backed off (30 s at least), so it is not tried again in this flush, and
   * the rows behind it in its line wait; a delivered row lets the next of its line go in the next
   * round. Once a target timed out or refused a connection, its later rows are failed without a
   * request for a while (see `unreachable`), so a dead receiver costs one round, not one timeout per
   * row. Bounded: each round either records outcomes or finds nothing.
   * @returns the deliveries and failures recorded.
   */
  async flush(signal: AbortSignal): Promise<DeliveryCounts> {
    const total: DeliveryCounts = { delivered: 0, failed: 0 };
    try {
      while (!signal.aborted) {
        let claimed: number;
        try {
          claimed = await this.round(signal, total);
        } catch (err) {
          this.o.logger.error({ err: errCode(err) }, 'event delivery round failed');
          break;
        }
        if (claimed === 0) break;
      }
    } finally {
      await this.releaseOnStop(signal);
    }
    return total;
  }

  /** One claim and its deliveries. @returns rows claimed. */
  private async round(signal: AbortSignal, total: DeliveryCounts): Promise<number> {
    const rows = await this.o.store.claimEventDeliveries({
      owner: this.o.owner,
      leaseMs: this.leaseMs,
      limit: this.batchSize,
      kind: this.o.kind ?? 'webhook',
    });
    if (rows.length === 0) return 0;
    const results = await Promise.all(rows.map((r) => this.deliver(r, signal)));
    let delivered = 0;
    let failed = 0;
    let firstError: string | null = null;
    for (const r of results) {
      if (r === 'delivered') delivered++;
      else if (r !== null && r !== 'stopped') {
        failed++;
        firstError ??= r;
      }
    }
    total.delivered += delivered;
    total.failed += failed;
    if (failed > 0)
      this.o.logger.warn({ delivered, failed, error: firstError }, 'event deliveries failed; retrying with backoff');
    else this.o.logger.debug({ delivered }, 'events delivered');
    return rows.length;
  }

  /** POSTs one row and records the outcome. @returns `delivered`, the failure's class, `stopped`, or null when recording failed. */
  private async deliver(row: EventDelivery, signal: AbortSignal): Promise<'delivered' | 'stopped' | string | null> {
    const heldUntil = this.unreachable.get(row.targetUrl) ?? 0;
    if (heldUntil > this.clock.now()) {
      // Not tried: wait out the hold without counting an attempt (its backoff must not grow).
      try {
        await this.o.store.deferEventDelivery(row.id, this.o.owner, heldUntil - this.clock.now());
      } catch (err) {
        this.o.logger.error({ eventRow: row.id, err: errCode(err) }, 'event delivery outcome not recorded');
        return null;
      }
      return 'unreachable (not sent)';
    }
    const a: Attempt = this.o.send ? await this.o.send(row, signal) : await this.post(row, signal);
    if (a.ok === 'defer') {
      try {
        await this.o.store.deferEventDelivery(row.id, this.o.owner, a.delayMs);
      } catch (err) {
        this.o.logger.error({ eventRow: row.id, err: errCode(err) }, 'event delivery outcome not recorded');
        return null;
      }
      return a.error;
    }
    if (a.ok === false && !a.error.startsWith('http ')) {
      this.unreachable.set(
        row.targetUrl,
        this.clock.now() + Math.min(backoffMs(row.attempts + 1, this.o.random), UNREACHABLE_HOLD_MS),
      );
    } else if (a.ok === true) this.unreachable.delete(row.targetUrl);
    if (a.ok === 'stopped') return 'stopped';
    try {
      if (a.ok) {
        const held = await this.o.store.completeEventDelivery(row.id, this.o.owner);
        this.o.onDelivery?.(true);
        this.o.logger.debug(
          { eventRow: row.id, eventId: row.eventId, status: a.status, recorded: held },
          'event delivered',
        );
        return 'delivered';
      }
      const backoff = Math.max(
        backoffMs(row.attempts + 1, this.o.random),
        Math.min(a.retryAfterMs ?? 0, BACKOFF_CAP_MS),
      );
      const held = await this.o.store.failEventDelivery(row.id, this.o.owner, { backoffMs: backoff, error: a.error });
      this.o.onDelivery?.(false);
      this.o.logger.debug(
        {
          eventRow: row.id,
          eventId: row.eventId,
          error: a.error,
          attempts: row.attempts + 1,
          backoffMs: backoff,
          recorded: held,
        },
        'event delivery failed',
      );
      return a.error;
    } catch (err) {
      // The lease bounds the row: it is claimable again when the lease ends.
      this.o.logger.error({ eventRow: row.id, err: errCode(err) }, 'event delivery outcome not recorded');
      return null;
    }
  }

  private async post(row: EventDelivery, stop: AbortSignal): Promise<Attempt> {
    if (stop.aborted) return { ok: 'stopped' };
    let res: Response;
    try {
      res = await fetch(row.targetUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'verdict-events',
          'x-verdict-event': row.eventId,
          'x-verdict-event-type': row.type,
          'x-verdict-signature-256': signEventBody(this.o.secret, row.payload),
        },
        body: row.payload,
        redirect: 'manual',
        signal: AbortSignal.any([stop, AbortSignal.timeout(this.timeoutMs)]),
      });
    } catch (err) {
      if (stop.aborted) return { ok: 'stopped' };
      return { ok: false, error: networkError(err) };
    }
    // The body is never read (nor logged); cancelling it frees the connection.
    await res.body?.cancel().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status };
    return { ok: false, error: `http ${res.status}`, retryAfterMs: parseRetryAfter(res.headers) };
  }

  private async releaseOnStop(signal: AbortSignal): Promise<void> {
    if (!signal.aborted) return;
    try {
      await this.o.store.releaseEventDeliveries(this.o.owner);
    } catch (err) {
      this.o.logger.warn({ err: errCode(err) }, 'event leases not released at stop (they expire)');
    }
  }

  private wait(signal: AbortSignal): Promise<void> {
    return this.clock.wait(this.o.pollMs, AbortSignal.any([signal, this.nudge.signal])).then(() => undefined);
  }
}

/** A network failure's class: `timeout`, or `network <code>` (ECONNREFUSED, ENOTFOUND, …) from fetch's cause. */
function networkError(err: unknown): string {
  const e = err as { name?: string; cause?: { name?: unknown } };
  if (e?.name === 'TimeoutError') return 'timeout';
  const code = ownCode(e?.cause) ?? (typeof e?.cause?.name === 'string' ? e.cause.name : (e?.name ?? 'error'));
  return `network ${code}`;
}

/** Delivered event rows deleted per statement by the retention pass (one short write each). */
const EVENT_PRUNE_BATCH = 500;

/**
 * Retention of the outbox (DESIGN §2's history window, applied to events): deletes delivered rows
 * delivered more than `historyMs` ago, a batch per statement, at most `maxBatches` a pass.
 * Undelivered rows are never deleted, whatever their age. @returns rows deleted.
 * @throws when the store fails (rows deleted before stay deleted).
 */
export async function pruneDeliveredEvents(
  store: Pick<EventOutbox, 'pruneDeliveredEvents'>,
  historyMs: number,
  logger?: Logger,
  maxBatches = 50,
): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < maxBatches; i++) {
    const n = await store.pruneDeliveredEvents(historyMs, EVENT_PRUNE_BATCH);
    deleted += n;
    if (n < EVENT_PRUNE_BATCH) break;
  }
  if (deleted > 0) logger?.info({ deleted }, 'delivered events pruned');
  return deleted;
}
