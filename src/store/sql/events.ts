import { sql } from 'drizzle-orm';
import {
  type DecisionEventRow,
  type DecisionEventType,
  type EventClaimRequest,
  type EventDelivery,
  type EventDeliveryStats,
  type SurfacingContext,
} from '../events.js';
import type { NewDecision } from '../store.js';
import { overrideValue, surfacingNow } from '../verdicts.js';
import {
  hysteresisOf,
  lockItemRowShape,
  readMemory,
  recordMove,
  targetsAndNow,
  wasSurfaced,
  type KeyMemory,
  type SurfacingMove,
} from './surfacing.js';
import { boundError } from '../write-rules.js';
import {
  autocommit,
  bind,
  changes,
  inList,
  nowSql,
  one,
  read,
  rows,
  shape,
  write,
  type Expr,
  type SqlContext,
  type Steps,
} from './steps.js';

/**
 * The outbox of decision events (DESIGN §16.2): targets, the events an answer queues in the
 * transaction that stores it, and the delivery claim and its outcomes. The rules (when an answer
 * crosses the threshold, the payload's bytes) are in ../events.ts.
 *
 * Queueing. An event is written once per enabled target (`INSERT … SELECT FROM event_targets`), so
 * every row is its own small queue entry with its own attempts, backoff and lease, and a target
 * down for an hour holds back no other target. A target only receives events queued while it was
 * enabled.
 *
 * Order. A receiver sees each item's events in the order they were stored: the claim takes only
 * the head of each (target, item) line, the undelivered row with no earlier undelivered row of the
 * same target and item, and the queueing transaction holds the item's row lock (Postgres) from the
 * read of the previous answer to its commit, so two transactions answering one item queue their
 * events in commit order and ids (identity values taken after the lock) follow it.
 */

// ------------------------------------------------------------------ targets

/**
 * Enables exactly `urls`: inserts the new ones, re-enables disabled ones, and disables every other
 * enabled target (its queued rows stay, undelivered, until it is enabled again). One transaction.
 * @returns how many targets are enabled now and how many this call disabled.
 */
export function syncEventTargets(
  c: SqlContext,
  urls: readonly string[],
): Promise<{ enabled: number; disabled: number }> {
  const unique = [...new Set(urls)];
  return write(c, function* () {
    const now = yield* nowSql();
    for (const url of unique) {
      yield* changes(sql`
        INSERT INTO event_targets (url, created_at, disabled_at) VALUES (${url}, ${now}, NULL)
        ON CONFLICT (url) DO UPDATE SET disabled_at = NULL`);
    }
    const disabled = yield* changes(sql`
      UPDATE event_targets SET disabled_at = ${now}
      WHERE disabled_at IS NULL${unique.length ? sql` AND NOT (${inList(sql`url`, unique)})` : sql``}`);
    return { enabled: unique.length, disabled };
  });
}

// ------------------------------------------------------------------ queueing, in the answers' transaction

/** What `watchSurfacing` read before the answers' insert, for `queueSurfacingEvents` after it. */
export interface SurfacingWatch {
  readonly nowMs: number;
  readonly context: SurfacingContext;
  readonly workspaceId: string;
  readonly itemId: string;
  readonly questionSet: string;
  /** Enabled event targets. */
  readonly targets: number;
  /** Watched stored key → its memory before the insert (latest answer, latest change, verdict). */
  readonly memory: ReadonlyMap<string, KeyMemory>;
  /** Watched stored key → the row being inserted. */
  readonly next: ReadonlyMap<string, NewDecision>;
}

/**
 * The answers of one call that could move a key's surfacing: nouls of keys that may surface,
 * stored key → row. No I/O: a store tells from it alone whether a finish needs the surfacing
 * statements at all.
 * @throws TypeError when the rows span more than one (item, set): a context names one item.
 */
export function watchedAnswers(list: readonly NewDecision[], s: SurfacingContext): Map<string, NewDecision> {
  const first = list[0];
  if (!first) return new Map();
  if (list.some((r) => r.itemId !== first.itemId || r.questionSet !== first.questionSet)) {
    throw new TypeError('insertDecisions with a surfacing context: every row must be of one item and set');
  }
  const skip = new Set(s.unsurfaced ?? []);
  return new Map(list.filter((r) => r.kind === 'noul' && !skip.has(r.questionKey)).map((r) => [r.questionKey, r]));
}

/**
 * Before the answers of one call are inserted: which of them could move a key's surfacing (nouls
 * of keys that may surface), and each one's memory (sql/surfacing.ts). On Postgres the item's row
 * is locked first (SQLite's IMMEDIATE transaction already serialises writers), so a concurrent
 * answer or verdict of the same item is either seen here or waits for this commit (see the file
 * comment on order). Null when no row is watched.
 * @param now the operation's `nowSql()`.
 * @throws TypeError when the rows span more than one (item, set): a context names one item.
 */
export function* watchSurfacing(
  c: SqlContext,
  now: Expr,
  list: readonly NewDecision[],
  s: SurfacingContext,
): Steps<SurfacingWatch | null> {
  const next = watchedAnswers(list, s);
  if (next.size === 0) return null;
  const first = list[0];
  const { nowMs, targets } = yield* targetsAndNow(now);
  // Postgres: always, so a verdict and an answer of one item judge the memory in commit order
  // (insertVerdict takes the same lock); with a target, events are queued in that order too.
  if (targets > 0 || c.d.name === 'postgres') yield* one(bind(lockItemRowShape, { itemId: first.itemId }));
  const memory = yield* readMemory(first.itemId, first.questionSet, [...next.keys()]);
  return {
    nowMs,
    context: s,
    workspaceId: first.workspaceId,
    itemId: first.itemId,
    questionSet: first.questionSet,
    targets,
    memory,
    next,
  };
}

/**
 * After the insert: for each watched key whose row was inserted (a conflict on the idempotency key
 * inserted nothing: the same state answered again moves nothing) and whose surfacing moved
 * (../verdicts.ts `surfacingNow`: the hysteresis, a person's value in force), the move to record,
 * in key order. Pure: `queueSurfacingEvents` writes them here, the Postgres finish in one statement.
 * @param inserted the stored keys the insert returned.
 */
export function surfacingMoves(w: SurfacingWatch, inserted: ReadonlySet<string>): SurfacingMove[] {
  const moves: SurfacingMove[] = [];
  for (const [key, row] of [...w.next].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (!inserted.has(key)) continue;
    const m = w.memory.get(key)!;
    const was = wasSurfaced(m, w.context.threshold);
    const now = surfacingNow({
      wasSurfaced: was,
      override: overrideValue(m.verdict),
      modelAnswer: row.answer,
      threshold: w.context.threshold,
      hysteresis: hysteresisOf(w.context),
    });
    if (now.surfaced === was) continue;
    moves.push({
      workspaceId: w.workspaceId,
      itemId: w.itemId,
      ref: w.context.ref,
      questionSet: w.questionSet,
      questionKey: key,
      surfaced: now.surfaced,
      // A key's first answer sets its side; it does not flip it (DESIGN §8.2's count).
      flip: m.answer !== null || m.surfaced !== null,
      probability: now.probability,
      cause: now.cause,
      stateHash: row.stateHash,
    });
  }
  return moves;
}

/**
 * After the insert: each move of `surfacingMoves`, one change row and its event per enabled
 * target, in key order.
 * @param inserted the stored keys the insert returned.
 * @returns the event rows queued (events × targets).
 */
export function* queueSurfacingEvents(c: SqlContext, w: SurfacingWatch, inserted: ReadonlySet<string>): Steps<number> {
  let queued = 0;
  for (const m of surfacingMoves(w, inserted)) queued += yield* recordMove(c, w.nowMs, m, w.targets);
  return queued;
}

// ------------------------------------------------------------------ delivery

/**
 * The claim: up to `limit` rows of one kind that are undelivered, due, free of a live lease, of an
 * enabled target (webhook rows; a `github` row's target is its repository), and the head of their (target, item) line (no earlier undelivered row of the same target
 * and item, leased or not), oldest due first; each leased to `owner` in the same statement.
 * Postgres: `SKIP LOCKED`, so concurrent claimers pass over each other's candidates; a candidate
 * whose predecessor another claimer is leasing right now is still not a head (that predecessor is
 * undelivered, visible and committed), so no line ever has two rows in flight.
 */
const claimEventsShape = shape<'now' | 'owner' | 'leaseMs' | 'limit' | 'kind'>(
  'claim events',
  (d, p) => sql`
  UPDATE decision_events SET lease_owner = ${p.owner}, lease_expires_at = ${p.now} + ${d.int8(p.leaseMs)}
  WHERE id IN (
    SELECT j.id FROM decision_events j
    WHERE j.delivered_at IS NULL AND j.next_attempt_at <= ${p.now} AND j.kind = ${d.text(p.kind)}
      AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= ${p.now})
      AND (j.kind <> 'webhook' OR EXISTS (SELECT 1 FROM event_targets t WHERE t.url = j.target_url AND t.disabled_at IS NULL))
      AND NOT EXISTS (SELECT 1 FROM decision_events e
                      WHERE e.target_url = j.target_url AND e.item_id = j.item_id AND e.id < j.id AND e.delivered_at IS NULL)
    ORDER BY j.next_attempt_at, j.id
    LIMIT ${d.int4(p.limit)}${d.skipLocked})
  RETURNING id, target_url AS "targetUrl", event_id AS "eventId", item_id AS "itemId", type, payload, attempts, created_at AS "createdAt"`,
);

/** Claims due deliveries of one kind under a lease (see `claimEventsShape`), in (next attempt, id) order. */
export function claimEventDeliveries(c: SqlContext, r: EventClaimRequest): Promise<EventDelivery[]> {
  return autocommit(c, function* () {
    const now = yield* nowSql();
    const got = yield* rows<EventDelivery & { type: DecisionEventType }>(
      bind(claimEventsShape, {
        now,
        owner: r.owner,
        leaseMs: Math.ceil(r.leaseMs),
        limit: Math.max(0, Math.trunc(r.limit)),
        kind: r.kind ?? 'webhook',
      }),
    );
    return got
      .map((g) => ({ ...g, id: Number(g.id), attempts: Number(g.attempts), createdAt: Number(g.createdAt) }))
      .sort((a, b) => a.id - b.id);
  });
}

const completeEventShape = shape<'now' | 'id' | 'owner'>(
  'complete event',
  (d, p) => sql`
  UPDATE decision_events SET delivered_at = ${p.now}, lease_owner = NULL, lease_expires_at = NULL
  WHERE id = ${d.int8(p.id)} AND lease_owner = ${p.owner} AND delivered_at IS NULL`,
);

/**
 * The receiver answered 2xx: the row is delivered, and the next of its line becomes the head.
 * Fenced by the owner: a claimant whose lease was taken over records nothing (the new holder sends
 * it again; receivers de-duplicate on `X-Verdict-Event`).
 * @returns false when `owner` no longer holds the row.
 */
export function completeEventDelivery(c: SqlContext, id: number, owner: string): Promise<boolean> {
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return (yield* changes(bind(completeEventShape, { now, id, owner }))) === 1;
  });
}

const failEventShape = shape<'now' | 'id' | 'owner' | 'backoffMs' | 'error'>(
  'fail event',
  (d, p) => sql`
  UPDATE decision_events SET attempts = attempts + 1, next_attempt_at = ${p.now} + ${d.int8(p.backoffMs)},
    lease_owner = NULL, lease_expires_at = NULL, last_error = ${d.text(p.error)}
  WHERE id = ${d.int8(p.id)} AND lease_owner = ${p.owner} AND delivered_at IS NULL`,
);

/**
 * A failed delivery (non-2xx, network error, timeout): attempts + 1, due again at now + `backoffMs`,
 * lease released. Never given up on. Fenced by the owner, as `completeEventDelivery`.
 * @param o.error a class and status (`http 503`), bounded to 1 KiB; never the receiver's body.
 * @returns false when `owner` no longer holds the row.
 */
export function failEventDelivery(
  c: SqlContext,
  id: number,
  owner: string,
  o: { backoffMs: number; error: string },
): Promise<boolean> {
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return (
      (yield* changes(
        bind(failEventShape, {
          now,
          id,
          owner,
          backoffMs: Math.max(0, Math.ceil(o.backoffMs)),
          error: boundError(o.error),
        }),
      )) === 1
    );
  });
}

/**
 * A row not sent because its target is held as unreachable after another row's timeout or refused
 * connection: due again at now + `delayMs` (the hold's end), lease released, no attempt counted, so
 * the backoff of rows that were never tried does not grow. Fenced by the owner.
 * @returns false when `owner` no longer holds the row.
 */
export function deferEventDelivery(c: SqlContext, id: number, owner: string, delayMs: number): Promise<boolean> {
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return (
      (yield* changes(sql`
      UPDATE decision_events SET lease_owner = NULL, lease_expires_at = NULL, next_attempt_at = ${now} + ${c.d.int8(Math.max(0, Math.ceil(delayMs)))}
      WHERE id = ${id} AND lease_owner = ${owner} AND delivered_at IS NULL`)) === 1
    );
  });
}

/**
 * Gives back every undelivered row `owner` holds (a stop cut its deliveries short): no attempt
 * counted, claimable at once. @returns rows released.
 */
export function releaseEventDeliveries(c: SqlContext, owner: string): Promise<number> {
  return autocommit(c, () =>
    changes(sql`
    UPDATE decision_events SET lease_owner = NULL, lease_expires_at = NULL
    WHERE lease_owner = ${owner} AND delivered_at IS NULL`),
  );
}

/** Undelivered rows of enabled targets: how many, how many due now, and the earliest next attempt. */
export function eventDeliveryStats(c: SqlContext): Promise<EventDeliveryStats> {
  return read(c, function* () {
    const now = yield* nowSql();
    const r = (yield* one<{ pending: number | string; due: number | string; next: number | string | null }>(sql`
      SELECT ${c.d.int4(sql`count(*)`)} AS pending,
        ${c.d.int4(sql`count(*) FILTER (WHERE e.next_attempt_at <= ${now} AND (e.lease_expires_at IS NULL OR e.lease_expires_at <= ${now}))`)} AS due,
        min(e.next_attempt_at) AS next
      FROM decision_events e JOIN event_targets t ON t.url = e.target_url AND t.disabled_at IS NULL
      WHERE e.delivered_at IS NULL AND e.kind = 'webhook'`))!;
    return { pending: Number(r.pending), due: Number(r.due), nextAttemptAt: r.next === null ? null : Number(r.next) };
  });
}

/**
 * Deletes up to `limit` delivered rows delivered more than `olderThanMs` ago (retention's history
 * window), oldest first; undelivered rows are never deleted. One short statement.
 * @returns rows deleted.
 */
export function pruneDeliveredEvents(c: SqlContext, olderThanMs: number, limit: number): Promise<number> {
  const d = c.d;
  return autocommit(c, function* () {
    const now = yield* nowSql();
    return yield* changes(sql`
      DELETE FROM decision_events WHERE id IN (
        SELECT id FROM decision_events
        WHERE delivered_at IS NOT NULL AND delivered_at < ${now} - ${d.int8(Math.trunc(olderThanMs))}
        ORDER BY delivered_at, id LIMIT ${d.int4(Math.trunc(limit))})`);
  });
}

/** Outbox rows in id order, of one target and/or item when given (diagnostics and tests). */
export function listDecisionEvents(
  c: SqlContext,
  f: { targetUrl?: string; itemId?: string; kind?: string } = {},
): Promise<DecisionEventRow[]> {
  return read(c, function* () {
    const got = yield* rows<DecisionEventRow>(sql`
      SELECT id, kind, target_url AS "targetUrl", event_id AS "eventId", workspace_id AS "workspaceId", item_id AS "itemId", type, payload,
             created_at AS "createdAt", attempts, next_attempt_at AS "nextAttemptAt", lease_owner AS "leaseOwner",
             lease_expires_at AS "leaseExpiresAt", delivered_at AS "deliveredAt", last_error AS "lastError"
      FROM decision_events
      WHERE TRUE${f.kind !== undefined ? sql` AND kind = ${f.kind}` : sql``}${f.targetUrl !== undefined ? sql` AND target_url = ${f.targetUrl}` : sql``}${f.itemId !== undefined ? sql` AND item_id = ${f.itemId}` : sql``}
      ORDER BY id`);
    const num = (v: unknown) => (v === null ? null : Number(v));
    return got.map((g) => ({
      ...g,
      id: Number(g.id),
      createdAt: Number(g.createdAt),
      attempts: Number(g.attempts),
      nextAttemptAt: Number(g.nextAttemptAt),
      leaseExpiresAt: num(g.leaseExpiresAt),
      deliveredAt: num(g.deliveredAt),
    }));
  });
}
