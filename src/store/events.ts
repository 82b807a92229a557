/**
 * Outbound decision events (DESIGN §16.2): the types the Store's event methods
 * take and return, and the exact bytes of an event's body (`eventPayload`), written once for both
 * dialects.
 *
 * The outbox: when an answer row (or a person's verdict) moves a key's surfacing, the transaction
 * that stores it appends the `surfacing_changes` row and queues one `decision_events` row per
 * enabled target (`event_targets`, from `VERDICT_EVENT_URLS`); the worker delivers the rows
 * (src/worker/event-delivery.ts). When a key surfaces is decided once, in ./verdicts.ts.
 */

export const EVENT_SURFACED = 'decision.surfaced';
export const EVENT_CLEARED = 'decision.cleared';

/**
 * `decision.surfaced`: a key started surfacing (a noul reached the set's threshold, or a person's
 * value put it there); `decision.cleared`: it stopped (below `threshold − hysteresis`, DESIGN
 * §8.2, or a person's value). The same moves as `surfacing_changes` rows (sql/surfacing.ts).
 */
export type DecisionEventType = typeof EVENT_SURFACED | typeof EVENT_CLEARED;

/**
 * What the store needs, beside the answer rows of one call, to tell which of them start or stop
 * surfacing (passed by the runner with `insertDecisions` and `JobFinish.answers`). Every row of the
 * call must then be of one (item, set).
 */
export interface SurfacingContext {
  /** The item's ref (`TASK-12`), sent in the event so a receiver need not look the id up. */
  ref: string;
  /** The set's threshold (DESIGN §6): a noul at or above it surfaces. In [0, 1]. */
  threshold: number;
  /**
   * The set's hysteresis (DESIGN §8.2): a key that surfaced at its previous state keeps
   * surfacing down to `threshold − hysteresis`. In [0, threshold].
   * @defaultValue 0.05, or the threshold when it is lower
   */
  hysteresis?: number;
  /**
   * Stored question keys that never surface (the set's `unsurfaced` keys, with their per-comment
   * suffix where the set is per comment): no event is queued for them.
   * @defaultValue none
   */
  unsurfaced?: readonly string[];
}

/**
 * An event's body, as stored and sent (exact bytes: `JSON.stringify` of this object, members in
 * this order). Ids, ref, set, key, probability and state hash only: never item, question or
 * rationale text (DESIGN §1 principle 9).
 */
export interface DecisionEventPayload {
  /** The event id, the same for every target; also sent as `X-Verdict-Event`, for receivers to de-duplicate. */
  id: string;
  type: DecisionEventType;
  /** When the answer was stored, ISO-8601 UTC with milliseconds (the store's clock). */
  created_at: string;
  workspace_id: string;
  item: { id: string; ref: string };
  /** The question set's name. */
  set: string;
  /** The stored question key (`<key>@<commentId>` for per-comment sets). */
  key: string;
  /** The noul's probability in the answer that crossed the threshold. */
  probability: number;
  /** The state hash that answer is keyed to (for a person's verdict: the state they judged). */
  state_hash: string;
  /** `model` (an answer moved the surfacing) or `human` (a person's verdict did, DESIGN §8.1). */
  source: 'model' | 'human';
}

/** The body of one event, exactly as stored in `decision_events.payload` and sent (see DecisionEventPayload). */
export function eventPayload(p: DecisionEventPayload): string {
  const ordered: DecisionEventPayload = {
    id: p.id,
    type: p.type,
    created_at: p.created_at,
    workspace_id: p.workspace_id,
    item: { id: p.item.id, ref: p.item.ref },
    set: p.set,
    key: p.key,
    probability: p.probability,
    state_hash: p.state_hash,
    source: p.source,
  };
  return JSON.stringify(ordered);
}

/**
 * The probability of a stored noul answer (`{"type":"noul","noul":p}`), or null for any other kind
 * or an answer that cannot be read (which never surfaces).
 */
export function noulProbability(answerJson: string): number | null {
  try {
    const a = JSON.parse(answerJson) as { type?: unknown; noul?: unknown };
    return a.type === 'noul' && typeof a.noul === 'number' && Number.isFinite(a.noul) ? a.noul : null;
  } catch {
    return null;
  }
}

/**
 * The kinds of outbox rows (DESIGN §16.2, §17): `webhook`, a decision event POSTed to a receiver;
 * `github`, a label change on an issue (src/actions/). Each kind has its own deliverer.
 */
export type OutboxKind = 'webhook' | 'github';

/** The `type` of a `github` outbox row: set the labels of one key's group on an issue. */
export const ACTION_LABELS_SET = 'labels.set';

/** One outbox row (`decision_events`), as `listDecisionEvents` returns it. Times are epoch ms. */
export interface DecisionEventRow {
  id: number;
  kind: OutboxKind;
  targetUrl: string;
  eventId: string;
  workspaceId: string;
  itemId: string;
  type: DecisionEventType | typeof ACTION_LABELS_SET;
  /** The exact body to send (see DecisionEventPayload), or a `github` row's change (src/actions/outbox.ts). */
  payload: string;
  createdAt: number;
  /** Failed deliveries so far. */
  attempts: number;
  nextAttemptAt: number;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  deliveredAt: number | null;
  /** The last failure's class and status (`http 503`, `network ECONNREFUSED`, `timeout`), never the receiver's body. */
  lastError: string | null;
}

/** What `claimEventDeliveries` asks for. */
export interface EventClaimRequest {
  /** The claimant (`<workerId>/events`); only it may complete or fail what it claimed. */
  owner: string;
  /** How long the claim holds, ms; must outlast one delivery's timeout, or a second worker sends it again. */
  leaseMs: number;
  /** Most rows to claim. */
  limit: number;
  /** Which rows. @defaultValue 'webhook' */
  kind?: OutboxKind;
}

/** A claimed delivery: one event for one target, under `owner`'s lease. */
export type EventDelivery = Pick<
  DecisionEventRow,
  'id' | 'targetUrl' | 'eventId' | 'itemId' | 'type' | 'payload' | 'attempts' | 'createdAt'
>;

/** Undelivered webhook events of enabled targets (`eventDeliveryStats`). */
export interface EventDeliveryStats {
  /** Undelivered rows of enabled targets. */
  pending: number;
  /** Of them, due now and not under a live lease (heads of line or not). */
  due: number;
  /** Epoch ms of the earliest next attempt among pending rows, or null when none is pending. */
  nextAttemptAt: number | null;
}

/**
 * The outbox of decision events (DESIGN §16.2; statements in sql/events.ts): the event targets,
 * and claiming, settling and pruning deliveries. Events are queued by the writes that move
 * surfacing (`insertDecisions`, `insertVerdict`), in their transactions.
 */
export interface EventOutbox {
  /**
   * Makes `urls` exactly the enabled event targets: new ones are inserted, disabled ones re-enabled,
   * every other enabled target disabled (its queued events wait, undelivered, until it is enabled
   * again). Events are queued only for targets enabled when their answer is stored. One transaction.
   * @returns targets enabled now, and how many this call disabled.
   */
  syncEventTargets(urls: readonly string[]): Promise<{ enabled: number; disabled: number }>;
  /**
   * Claims up to `limit` due deliveries under a lease of `leaseMs` for `owner`, in one statement:
   * undelivered, `next_attempt_at <= now`, no live lease, target enabled, and the head of its
   * (target, item) line (no earlier undelivered row of the same target and item), so each item's
   * events reach a receiver in order. Postgres: SKIP LOCKED. @returns the rows, by id.
   */
  claimEventDeliveries(r: EventClaimRequest): Promise<EventDelivery[]>;
  /** The receiver took it (2xx): delivered. @returns false when `owner` no longer holds the row (nothing changed). */
  completeEventDelivery(id: number, owner: string): Promise<boolean>;
  /**
   * A failed delivery: attempts + 1, due again at now + `backoffMs`, lease released; never given up.
   * `error` is a class and status, never the receiver's body (bounded to 1 KiB).
   * @returns false when `owner` no longer holds the row (nothing changed).
   */
  failEventDelivery(id: number, owner: string, o: { backoffMs: number; error: string }): Promise<boolean>;
  /** A row not sent (its target is held as unreachable): due again in `delayMs`, lease released, no attempt counted. @returns false when `owner` no longer holds it. */
  deferEventDelivery(id: number, owner: string, delayMs: number): Promise<boolean>;
  /** Releases every undelivered row `owner` holds (a stop), without an attempt. @returns rows released. */
  releaseEventDeliveries(owner: string): Promise<number>;
  /** Undelivered events of enabled targets: pending, due now, earliest next attempt (epoch ms). */
  eventDeliveryStats(): Promise<EventDeliveryStats>;
  /** Deletes up to `limit` rows delivered more than `olderThanMs` ago (retention); undelivered rows never. @returns rows deleted. */
  pruneDeliveredEvents(olderThanMs: number, limit: number): Promise<number>;
  /** Outbox rows in id order, of one target and/or item when given (diagnostics, tests). */
  listDecisionEvents(f?: { targetUrl?: string; itemId?: string; kind?: OutboxKind }): Promise<DecisionEventRow[]>;
}
