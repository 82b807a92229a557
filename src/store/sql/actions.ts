import { sql } from 'drizzle-orm';
import type {
  ActionOutboxRow,
  ActionRowRef,
  ActionRowTable,
  ItemActionRow,
  LabelledAnswer,
  PendingActionWrite,
  PlannedAction,
  ProposalReason,
} from '../actions.js';
import { ACTION_LABELS_SET } from '../events.js';
import { changes, inList, nowMs, one, read, rows, write, type SqlContext } from './steps.js';

/**
 * Actions in GitHub (DESIGN §17), on both dialects: the `item_actions` rows and the `github` rows
 * of the outbox (`decision_events`, kind `github`). Off the job path: the planner and the deliverer
 * run beside the slots, so none of this is prepared as a shape.
 */

interface ActionDbRow {
  workspace_id: string;
  item_id: string;
  question_set: string;
  question_key: string;
  want: string | null;
  source: string | null;
  decision_id: number | string | null;
  proposal: string | null;
  proposal_reason: string | null;
  proposal_decision_id: number | string | null;
  queued: string | null;
  applied: string | null;
  commented_at: number | string | null;
  updated_at: number | string;
}

const COLUMNS = sql`workspace_id, item_id, question_set, question_key, want, source, decision_id, proposal, proposal_reason, proposal_decision_id, queued, applied, commented_at, updated_at`;

const list = (text: string | null): string[] | null => (text === null ? null : (JSON.parse(text) as string[]));
const num = (v: number | string | null): number | null => (v === null ? null : Number(v));
/** A label list as stored: sorted, JSON. */
const stored = (labels: readonly string[] | null): string | null =>
  labels === null ? null : JSON.stringify([...labels].sort());

function toRow(r: ActionDbRow): ItemActionRow {
  return {
    workspaceId: r.workspace_id,
    itemId: r.item_id,
    questionSet: r.question_set,
    questionKey: r.question_key,
    want: list(r.want),
    source: r.source as ItemActionRow['source'],
    decisionId: num(r.decision_id),
    proposal: list(r.proposal),
    proposalReason: r.proposal_reason as ProposalReason | null,
    proposalDecisionId: num(r.proposal_decision_id),
    queued: list(r.queued),
    applied: list(r.applied),
    commentedAt: num(r.commented_at),
    updatedAt: Number(r.updated_at),
  };
}

export function listItemActions(c: SqlContext, itemId: string): Promise<ItemActionRow[]> {
  return read(c, function* () {
    const got = yield* rows<ActionDbRow>(
      sql`SELECT ${COLUMNS} FROM item_actions WHERE item_id = ${itemId} ORDER BY question_set, question_key`,
    );
    return got.map(toRow);
  });
}

export function listWorkspaceActions(
  c: SqlContext,
  q: { workspaceId: string; questionSet?: string; proposalsOnly?: boolean; afterItemId?: string; limit?: number },
): Promise<ItemActionRow[]> {
  return read(c, function* () {
    const got = yield* rows<ActionDbRow>(sql`
      SELECT ${COLUMNS} FROM item_actions WHERE workspace_id = ${q.workspaceId}
      ${q.questionSet === undefined ? sql`` : sql`AND question_set = ${q.questionSet}`}
      ${q.proposalsOnly ? sql`AND proposal IS NOT NULL` : sql``}
      ${q.afterItemId === undefined ? sql`` : sql`AND item_id > ${q.afterItemId}`}
      ORDER BY item_id, question_set, question_key
      ${q.limit === undefined ? sql`` : sql`LIMIT ${c.d.int4(Math.max(0, Math.trunc(q.limit)))}`}`);
    return got.map(toRow);
  });
}

/** Inserts the (item, set, key) row when missing, then locks it (Postgres; SQLite's write transaction is IMMEDIATE). */
function* lockRow(c: SqlContext, workspaceId: string, itemId: string, set: string, key: string, now: number) {
  yield* changes(sql`
    INSERT INTO item_actions (workspace_id, item_id, question_set, question_key, updated_at)
    VALUES (${workspaceId}, ${itemId}, ${set}, ${key}, ${c.d.int8(now)})
    ON CONFLICT (item_id, question_set, question_key) DO NOTHING`);
  return (yield* one<ActionDbRow>(sql`
    SELECT ${COLUMNS} FROM item_actions WHERE item_id = ${itemId} AND question_set = ${set} AND question_key = ${key}${c.d.forUpdate}`))!;
}

export function saveItemAction(c: SqlContext, p: PlannedAction, queue: ActionOutboxRow | null): Promise<boolean> {
  return write(c, function* () {
    const now = yield* nowMs();
    const row = yield* lockRow(c, p.workspaceId, p.itemId, p.questionSet, p.questionKey, now);
    const want = stored(p.want);
    const queues = queue !== null && want !== null && want !== row.queued;
    yield* changes(sql`
      UPDATE item_actions SET want = ${want}, source = ${p.source}, decision_id = ${p.decisionId === null ? null : c.d.int8(p.decisionId)},
        proposal = ${stored(p.proposal)}, proposal_reason = ${p.proposalReason},
        proposal_decision_id = ${p.proposalDecisionId === null ? null : c.d.int8(p.proposalDecisionId)},
        queued = ${queues ? want : row.queued}, updated_at = ${c.d.int8(now)}
      WHERE item_id = ${p.itemId} AND question_set = ${p.questionSet} AND question_key = ${p.questionKey}`);
    if (queues) {
      yield* changes(sql`
        INSERT INTO decision_events (kind, target_url, event_id, workspace_id, item_id, type, payload, created_at, attempts, next_attempt_at)
        VALUES ('github', ${queue.targetUrl}, ${queue.eventId}, ${p.workspaceId}, ${p.itemId}, ${ACTION_LABELS_SET}, ${queue.payload}, ${c.d.int8(now)}, 0, ${c.d.int8(now)})`);
    }
    return queues;
  });
}

export function recordActionDelivery(
  c: SqlContext,
  r: {
    itemId: string;
    questionSet: string;
    questionKey: string;
    applied: string[] | null;
    skipped: boolean;
    commented: boolean;
  },
): Promise<void> {
  return write(c, function* () {
    const now = yield* nowMs();
    yield* changes(sql`
      UPDATE item_actions SET
        applied = ${r.applied === null ? sql`applied` : stored(r.applied)},
        queued = ${r.skipped ? null : sql`queued`},
        commented_at = ${r.commented ? c.d.int8(now) : sql`commented_at`},
        updated_at = ${c.d.int8(now)}
      WHERE item_id = ${r.itemId} AND question_set = ${r.questionSet} AND question_key = ${r.questionKey}`);
  });
}

export function observeActionLabels(
  c: SqlContext,
  workspaceId: string,
  itemId: string,
  seen: ReadonlyArray<{ questionSet: string; questionKey: string; applied: string[] }>,
): Promise<void> {
  return write(c, function* () {
    const now = yield* nowMs();
    for (const s of seen) {
      yield* changes(sql`
        INSERT INTO item_actions (workspace_id, item_id, question_set, question_key, applied, updated_at)
        VALUES (${workspaceId}, ${itemId}, ${s.questionSet}, ${s.questionKey}, ${stored(s.applied)}, ${c.d.int8(now)})
        ON CONFLICT (item_id, question_set, question_key) DO UPDATE SET applied = excluded.applied, updated_at = excluded.updated_at`);
    }
  });
}

export function actionRows(
  c: SqlContext,
  q: { table: ActionRowTable; sets: readonly string[]; after?: number; ids?: readonly number[]; limit: number },
): Promise<{ rows: ActionRowRef[]; mark: number | null }> {
  return read(c, function* () {
    const table = q.table === 'decisions' ? sql`item_decisions` : sql`human_verdicts`;
    const which =
      q.ids !== undefined
        ? inList(
            sql`id`,
            q.ids.map((id) => c.d.int8(id)),
          )
        : sql`id > ${c.d.int8(q.after ?? 0)}`;
    // Every row, not only the acting sets' ones: the caller tells a gap in the ids (a row not yet
    // committed) from a row of another set.
    const got = yield* rows<{ id: number | string; item_id: string; acts: number | string }>(sql`
      SELECT id, item_id, CASE WHEN ${inList(sql`question_set`, q.sets)} THEN 1 ELSE 0 END AS acts
      FROM ${table} WHERE ${which} ORDER BY id LIMIT ${c.d.int4(Math.max(1, Math.trunc(q.limit)))}`);
    // Postgres hands out ids before commit, so a later id may commit first: the database clock after
    // the read tells which transactions could still hold a smaller one (actionWritersEnded).
    // SQLite's single writer commits ids in order: nothing can appear below a read id.
    const mark =
      c.d.name === 'postgres'
        ? Number(
            (yield* one<{ mark: number | string }>(
              sql`SELECT (extract(epoch from clock_timestamp()) * 1000000)::int8 AS mark`,
            ))!.mark,
          )
        : null;
    return { rows: got.map((r) => ({ id: Number(r.id), itemId: r.item_id, acts: Number(r.acts) === 1 })), mark };
  });
}

export function actionWritersEnded(c: SqlContext, mark: number): Promise<boolean> {
  if (c.d.name !== 'postgres') return Promise.resolve(true);
  return read(c, function* () {
    // Client sessions of this database in a transaction begun at or before `mark` (µs since the
    // epoch, the database clock): one of them may hold an id it took before a read at `mark`.
    const r = yield* one<{ ended: boolean }>(sql`
      SELECT NOT EXISTS (
        SELECT 1 FROM pg_stat_activity
        WHERE pid <> pg_backend_pid() AND datname = current_database() AND backend_type = 'client backend'
          AND xact_start IS NOT NULL AND (extract(epoch from xact_start) * 1000000)::int8 <= ${c.d.int8(mark)}
      ) AS ended`);
    return r?.ended === true;
  });
}

export function actionItemsOfSet(
  c: SqlContext,
  q: { workspaceId: string; questionSet: string; afterItemId?: string; limit: number },
): Promise<string[]> {
  return read(c, function* () {
    const got = yield* rows<{ item_id: string }>(sql`
      SELECT DISTINCT item_id FROM item_decisions WHERE workspace_id = ${q.workspaceId} AND question_set = ${q.questionSet}
      ${q.afterItemId === undefined ? sql`` : sql`AND item_id > ${q.afterItemId}`}
      ORDER BY item_id LIMIT ${c.d.int4(Math.max(1, Math.trunc(q.limit)))}`);
    return got.map((r) => r.item_id);
  });
}

export function labelledAnswers(c: SqlContext, workspaceId: string, questionSet: string): Promise<LabelledAnswer[]> {
  return read(c, function* () {
    const got = yield* rows<{
      item_id: string;
      question_key: string;
      verdict: string;
      value: string | null;
      answer: string | null;
    }>(sql`
      SELECT v.item_id, v.question_key, v.verdict, v.value, d.answer
      FROM human_verdicts v LEFT JOIN item_decisions d ON d.id = v.decision_id
      WHERE v.id IN (SELECT max(id) FROM human_verdicts WHERE workspace_id = ${workspaceId} AND question_set = ${questionSet} GROUP BY item_id, question_key)
      ORDER BY v.item_id, v.question_key`);
    return got.map((r) => ({
      itemId: r.item_id,
      questionKey: r.question_key,
      verdict: r.verdict,
      value: r.value,
      answer: r.answer,
    }));
  });
}

export function pendingActionWrites(c: SqlContext, workspaceId: string): Promise<PendingActionWrite[]> {
  return read(c, function* () {
    const got = yield* rows<{
      id: number | string;
      item_id: string;
      payload: string;
      attempts: number | string;
      last_error: string | null;
    }>(sql`
      SELECT id, item_id, payload, attempts, last_error FROM decision_events
      WHERE kind = 'github' AND workspace_id = ${workspaceId} AND delivered_at IS NULL ORDER BY id`);
    return got.map((r) => ({
      id: Number(r.id),
      itemId: r.item_id,
      payload: r.payload,
      attempts: Number(r.attempts),
      lastError: r.last_error,
    }));
  });
}

export function countDeliveredActionWrites(c: SqlContext, workspaceId: string): Promise<number> {
  return read(c, function* () {
    const r = yield* one<{ n: number | string }>(sql`
      SELECT ${c.d.int4(sql`count(*)`)} AS n FROM decision_events WHERE kind = 'github' AND workspace_id = ${workspaceId} AND delivered_at IS NOT NULL`);
    return Number(r?.n ?? 0);
  });
}
