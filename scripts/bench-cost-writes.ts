import { classifyBeadsRow, parseRfc3339, type BeadsComment, type BeadsRow } from '../src/importers/beads-format.js';
import { parseBeadsLine, readLines } from '../src/importers/beads.js';

/**
 * The write stream of `npm run bench:cost` (scripts/bench-cost.ts, issue 16): a beads export's
 * history replayed as the writes a tracker would have made, in time order. Pure: rows in, writes
 * out; the bench applies them through the store's write doors.
 *
 * What a beads row tells about its history, and so what becomes a write:
 * - `created_at`: the item's creation (`create`), with the row's final title, body and fields,
 *   except that a closed row is created `open` and without its `close_reason` (the export keeps
 *   only the last version of the text: edits between creation and export are not in it);
 * - each comment's `created_at`: a comment (`comment`);
 * - `closed_at` of a closed row: an item update that sets the final fields, status `closed`
 *   (`close`). It is the only status change with a time: `hooked` rows are created hooked;
 * - with `tombstones`, `deleted_at`: a soft delete (`delete`), and the `status: tombstone` rows
 *   themselves (created at `created_at`, deleted at `deleted_at`). Without it (the default, the
 *   issue's stream) tombstone rows are left out and `deleted_at` is not replayed.
 *
 * Dependencies (links) are not writes of this stream: with the production sets no set that reads
 * links asks anything in a workspace without conventions, so they owe nothing that costs a call.
 *
 * Times: epoch milliseconds (UTC), from `parseRfc3339`. A comment, close or delete whose source
 * time is before the item's creation (the sample has 38 `closed_at` before `created_at`, by up to
 * 14.6 days, and 2 comments by under a second) is moved to the creation time and counted in
 * `clamped` (`earlyWrites: 'clamp'`, the default: a tracker cannot close an item it has not
 * created, and the export says it was closed), or left out and counted in `dropped`
 * (`earlyWrites: 'drop'`).
 */

/**
 * A beads row as the replay reads it: the importer's row (`beadsRowSchema`, which drops
 * `closed_at`: the importer keeps no times but creation and deletion) plus the close time.
 */
export type ReplayRow = BeadsRow & {
  /** RFC 3339 with offset, as in the export; absent when the row has none or it is not such a time. */
  closed_at?: string;
};

/** What one write does. */
export type ReplayWriteKind = 'create' | 'comment' | 'close' | 'delete';

/** One write of the stream. `row` and `comment` carry tracker text: never log them. */
export interface ReplayWrite {
  kind: ReplayWriteKind;
  /** When the write happens, epoch ms: the source time, or the creation time when that is earlier. */
  at: number;
  /** The source time before that clamp, epoch ms. */
  sourceAt: number;
  /** The beads id of the item written (its ref). */
  ref: string;
  /** Order among the item's own writes (0 = its creation): the tie-break for writes at the same ms. */
  step: number;
  /** The item's row (every kind: `create` and `close` take fields and text from it). */
  row: ReplayRow;
  /** The comment of a `comment` write. */
  comment?: BeadsComment;
}

/** The stream and what went into it. */
export interface ReplayPlan {
  /** In time order; ties by ref, then by `step`. */
  writes: ReplayWrite[];
  /** Items created (one per row replayed). */
  items: number;
  byKind: Record<ReplayWriteKind, number>;
  /** Writes moved to their item's creation time (their source time was earlier), by kind. */
  clamped: Record<ReplayWriteKind, number>;
  /** Writes left out because their source time was before their item's creation (`earlyWrites: 'drop'`), by kind. */
  dropped: Record<ReplayWriteKind, number>;
  /** Rows not replayed, by reason. */
  skipped: { notWork: number; tombstone: number; noCreatedAt: number };
  /** Closings left out because the row was deleted before its `closed_at` (with `tombstones` only). */
  closedAfterDelete: number;
}

/** Options of `deriveReplayWrites`. */
export interface ReplayOptions {
  /** Replay tombstones and `deleted_at` as soft deletes (see the file comment). @defaultValue false */
  tombstones?: boolean;
  /** A write whose source time is before its item's creation: moved to the creation, or left out. @defaultValue 'clamp' */
  earlyWrites?: 'clamp' | 'drop';
}

function zero(): Record<ReplayWriteKind, number> {
  return { create: 0, comment: 0, close: 0, delete: 0 };
}

/**
 * The write stream of these rows (see the file comment for the rules): work rows only (task, bug,
 * feature, epic, chore; not ephemeral, as the importer's `classifyBeadsRow` decides), each
 * created at its `created_at`, its comments at theirs, its closing at `closed_at`.
 */
export function deriveReplayWrites(rows: Iterable<ReplayRow>, opts: ReplayOptions = {}): ReplayPlan {
  const plan: ReplayPlan = {
    writes: [],
    items: 0,
    byKind: zero(),
    clamped: zero(),
    dropped: zero(),
    skipped: { notWork: 0, tombstone: 0, noCreatedAt: 0 },
    closedAfterDelete: 0,
  };
  for (const row of rows) {
    if (classifyBeadsRow(row).kind !== 'work') {
      plan.skipped.notWork++;
      continue;
    }
    if (row.status === 'tombstone' && !opts.tombstones) {
      plan.skipped.tombstone++;
      continue;
    }
    const created = row.created_at ? parseRfc3339(row.created_at) : null;
    if (created === null) {
      plan.skipped.noCreatedAt++;
      continue;
    }
    plan.items++;
    let step = 0;
    const add = (kind: ReplayWriteKind, sourceAt: number, comment?: BeadsComment) => {
      const at = Math.max(sourceAt, created);
      if (at !== sourceAt && opts.earlyWrites === 'drop') {
        plan.dropped[kind]++;
        return;
      }
      if (at !== sourceAt) plan.clamped[kind]++;
      plan.byKind[kind]++;
      plan.writes.push({ kind, at, sourceAt, ref: row.id, step: step++, row, ...(comment ? { comment } : {}) });
    };
    add('create', created);
    for (const c of row.comments ?? []) add('comment', c.created_at ? parseRfc3339(c.created_at)! : created, c);
    const deleted = opts.tombstones && row.deleted_at ? parseRfc3339(row.deleted_at) : null;
    if (row.status === 'closed') {
      const closed = parseRfc3339(row.closed_at ?? row.updated_at ?? row.created_at!)!;
      // A row deleted before it was closed (the sample's one closed epic with `deleted_at`) is
      // not closed after its deletion: a tracker does not edit a deleted item.
      if (deleted !== null && closed >= deleted) plan.closedAfterDelete++;
      else add('close', closed);
    }
    if (deleted !== null) add('delete', deleted);
  }
  plan.writes.sort((a, b) => a.at - b.at || (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0) || a.step - b.step);
  return plan;
}

/**
 * The status an item is created with: a closed (or tombstone) row's item starts `open`, the
 * status every beads item is created with; an open, hooked or other row keeps its own, since the
 * export says nothing of when it changed.
 */
export function initialStatus(row: Pick<BeadsRow, 'status'>): string {
  return row.status === 'closed' || row.status === 'tombstone' ? 'open' : row.status;
}

/**
 * One line of beads JSONL as a replay row: the importer's validation (`parseBeadsLine`), plus
 * `closed_at` from the same JSON when it is an RFC 3339 time. Null for a line the importer rejects.
 */
export function parseReplayLine(text: string): ReplayRow | null {
  const parsed = parseBeadsLine(text);
  if (!parsed.ok) return null;
  const closedAt = (JSON.parse(text) as { closed_at?: unknown }).closed_at;
  return typeof closedAt === 'string' && parseRfc3339(closedAt) !== null
    ? { ...parsed.row, closed_at: closedAt }
    : parsed.row;
}

/**
 * The well-formed rows of a beads JSONL file, in file order (lines the importer would reject are
 * counted, never quoted).
 */
export async function readReplayRows(path: string): Promise<{ rows: ReplayRow[]; rejected: number }> {
  const rows: ReplayRow[] = [];
  let rejected = 0;
  for await (const { text: raw } of readLines(path)) {
    const text = raw.replace(/^\uFEFF/, '').trim();
    if (text === '') continue;
    const row = parseReplayLine(text);
    if (row) rows.push(row);
    else rejected++;
  }
  return { rows, rejected };
}
