import { createHash } from 'node:crypto';
import { z } from 'zod';
import { refProblem } from '../store/input-rules.js';
import type { CollectionSchema, CollectionSettings } from '../store/tracker-reads.js';

/**
 * The beads JSONL format and the pure rules that map one row onto Verdict's tracker model
 * (DESIGN §15). No I/O here: `beads.ts` reads the lines and calls the store.
 *
 * A beads export (`.beads/issues.jsonl`) holds one issue per line; fields that are empty or
 * absent are left out. Times are RFC 3339 with an offset and 3 to 9 fractional digits.
 */

/** Issue types imported as work items; each becomes a collection of the same slug. */
export const BEADS_WORK_TYPES = ['task', 'bug', 'feature', 'epic', 'chore'] as const;

/** Gas Town orchestration types: skipped and counted, never imported (DESIGN §15). */
const BEADS_ORCHESTRATION_TYPES = [
  'event',
  'message',
  'agent',
  'molecule',
  'gate',
  'rig',
  'role',
  'merge-request',
] as const;

/**
 * Every status beads knows, as the `status` select's options. The store does not enforce options,
 * so a row with another status is still imported with its value.
 */
const BEADS_STATUSES = [
  'open',
  'in_progress',
  'blocked',
  'deferred',
  'hooked',
  'pinned',
  'closed',
  'tombstone',
] as const;

/**
 * Schema of every imported collection. `status` is terminal at `closed` (DESIGN §15), so the
 * production sets' `notTerminal` rule leaves closed items alone.
 */
export const BEADS_COLLECTION_SCHEMA: CollectionSchema = {
  fields: [
    { key: 'status', type: 'select', options: [...BEADS_STATUSES], terminal_options: ['closed'] },
    { key: 'priority', type: 'number' },
    { key: 'issue_type', type: 'text' },
    { key: 'labels', type: 'multi' },
    { key: 'assignee', type: 'user' },
    { key: 'close_reason', type: 'text' },
    { key: 'created_by', type: 'user' },
    { key: 'external_ref', type: 'text' },
  ],
};

/**
 * Settings of every imported collection, epics included: an epic is work someone has to move
 * (it can be blocked or wait on a decision like any task), and closed epics are already left out
 * by the terminal `status`.
 */
export const BEADS_COLLECTION_SETTINGS: CollectionSettings = { tracks_work: true };

// ------------------------------------------------------------------ times

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * Parses an RFC 3339 time with an offset (`2025-11-02T21:58:07.295058-08:00`, `…Z`) to epoch
 * milliseconds (UTC). Fractions beyond milliseconds are truncated, so the result does not
 * depend on the engine's date parser.
 * @returns null when the text is not such a time or names an impossible date.
 */
export function parseRfc3339(text: string): number | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return null;
  const ms = m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0;
  const local = Date.UTC(y, mo - 1, d, h, mi, Math.min(s, 59), ms);
  if (new Date(local).getUTCDate() !== d) return null; // 2025-02-30 rolls over
  const offsetMin = m[8] ? 0 : (m[9] === '-' ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11]));
  return local - offsetMin * 60_000;
}

// ------------------------------------------------------------------ the row

const timestamp = z.string().refine((s) => parseRfc3339(s) !== null, { message: 'not an RFC 3339 time with offset' });
const optText = z.string().nullish();

/** One entry of `dependencies`: `issue_id` depends on `depends_on_id`. */
export const beadsDependencySchema = z.object({
  issue_id: z.string().min(1),
  depends_on_id: z.string().min(1),
  type: z.string().min(1),
  created_at: timestamp.nullish(),
  created_by: optText,
});

/** One entry of `comments`. Beads numbers comments with integers. */
export const beadsCommentSchema = z.object({
  id: z.union([z.number().int(), z.string().min(1)]),
  issue_id: z.string().nullish(),
  author: optText,
  text: z.string(),
  created_at: timestamp.nullish(),
});

/**
 * One beads row as the importer reads it. Unknown keys are ignored (and dropped); a row fails
 * when `id`, `title`, `status` or `issue_type` is missing or empty, a known key has the wrong
 * type, a time is not RFC 3339, or a dependency or comment names another issue as its owner.
 */
export const beadsRowSchema = z
  .object({
    id: z.string().min(1),
    title: z.string().min(1),
    description: optText,
    design: optText,
    acceptance_criteria: optText,
    notes: optText,
    status: z.string().min(1),
    priority: z.number().int().min(0).max(4).nullish(),
    issue_type: z.string().min(1),
    labels: z.array(z.string()).nullish(),
    assignee: optText,
    close_reason: optText,
    created_by: optText,
    external_ref: optText,
    created_at: timestamp.nullish(),
    updated_at: timestamp.nullish(),
    deleted_at: timestamp.nullish(),
    original_type: optText,
    ephemeral: z.boolean().nullish(),
    dependencies: z.array(beadsDependencySchema).nullish(),
    comments: z.array(beadsCommentSchema).nullish(),
  })
  .superRefine((row, ctx) => {
    // The id is the item's ref: refused, never altered, by the rule of every door (DESIGN §3.1).
    const idProblem = refProblem(row.id);
    if (idProblem) ctx.addIssue({ code: 'custom', path: ['id'], message: idProblem });
    row.dependencies?.forEach((d, i) => {
      if (d.issue_id !== row.id)
        ctx.addIssue({ code: 'custom', path: ['dependencies', i, 'issue_id'], message: 'not the row id' });
    });
    const seen = new Set<string>();
    row.comments?.forEach((c, i) => {
      if (c.issue_id != null && c.issue_id !== row.id)
        ctx.addIssue({ code: 'custom', path: ['comments', i, 'issue_id'], message: 'not the row id' });
      if (seen.has(String(c.id)))
        ctx.addIssue({ code: 'custom', path: ['comments', i, 'id'], message: 'duplicate comment id' });
      seen.add(String(c.id));
    });
  });

export type BeadsRow = z.infer<typeof beadsRowSchema>;

/**
 * What each field of a beads row must hold, in words, for the reasons of rejected lines
 * (`priority: expected an integer 0–4`). Keyed by the field name (the last name in an issue's
 * path); fields not listed get a reason built from the schema's expected type.
 */
export const BEADS_FIELD_RULES: Readonly<Record<string, string>> = Object.freeze({
  id: 'expected a non-empty string',
  title: 'expected a non-empty string',
  status: 'expected a non-empty string',
  issue_type: 'expected a non-empty string',
  priority: 'expected an integer 0–4',
  labels: 'expected a list of strings',
  ephemeral: 'expected true or false',
  dependencies: 'expected a list of {issue_id, depends_on_id, type}',
  comments: 'expected a list of {id, text}',
  issue_id: 'expected a non-empty string',
  depends_on_id: 'expected a non-empty string',
  type: 'expected a non-empty string',
  text: 'expected a string',
  created_at: 'expected an RFC 3339 time with offset',
  updated_at: 'expected an RFC 3339 time with offset',
  deleted_at: 'expected an RFC 3339 time with offset',
});
export type BeadsDependency = z.infer<typeof beadsDependencySchema>;
export type BeadsComment = z.infer<typeof beadsCommentSchema>;

// ------------------------------------------------------------------ classification

/** Why a well-formed row is not imported. Ephemeral wins over the type. */
export type SkipReason = 'ephemeral' | 'orchestration' | 'unknown_type';

/** What to do with a well-formed row. */
export type BeadsRowClass =
  | { kind: 'work'; /** Collection slug. */ collection: string; tombstone: boolean }
  | { kind: 'skip'; reason: SkipReason; /** The type that decided it. */ type: string };

/** True for a soft-deleted row: status `tombstone` or `deleted_at` set (DESIGN §15). */
export function isTombstone(row: Pick<BeadsRow, 'status' | 'deleted_at'>): boolean {
  return row.status === 'tombstone' || row.deleted_at != null;
}

/**
 * Classifies a row: ephemeral rows ("wisps") are skipped first, then the type decides. A
 * tombstone's type is its `original_type` (falling back to `issue_type`).
 */
export function classifyBeadsRow(
  row: Pick<BeadsRow, 'status' | 'deleted_at' | 'issue_type' | 'original_type' | 'ephemeral'>,
): BeadsRowClass {
  const tombstone = isTombstone(row);
  const type = (tombstone ? row.original_type : null) || row.issue_type;
  if (row.ephemeral === true) return { kind: 'skip', reason: 'ephemeral', type };
  if ((BEADS_WORK_TYPES as readonly string[]).includes(type)) return { kind: 'work', collection: type, tombstone };
  if ((BEADS_ORCHESTRATION_TYPES as readonly string[]).includes(type))
    return { kind: 'skip', reason: 'orchestration', type };
  return { kind: 'skip', reason: 'unknown_type', type };
}

// ------------------------------------------------------------------ body, fields, links

/**
 * The item body: `description`, then `## Design`, `## Acceptance criteria` and `## Notes`
 * sections, each only when present and non-empty, parts separated by a blank line. The order is
 * fixed whatever the key order of the source line, because the body is hashed (DESIGN §15).
 */
export function beadsBody(row: Pick<BeadsRow, 'description' | 'design' | 'acceptance_criteria' | 'notes'>): string {
  const parts: string[] = [];
  if (row.description) parts.push(row.description);
  if (row.design) parts.push(`## Design\n\n${row.design}`);
  if (row.acceptance_criteria) parts.push(`## Acceptance criteria\n\n${row.acceptance_criteria}`);
  if (row.notes) parts.push(`## Notes\n\n${row.notes}`);
  return parts.join('\n\n');
}

/** Field keys in their fixed order: the fields text is hashed, so its key order must not drift. */
export const BEADS_FIELD_KEYS = [
  'status',
  'priority',
  'issue_type',
  'labels',
  'assignee',
  'close_reason',
  'created_by',
  'external_ref',
] as const;

/**
 * The item fields: the keys of `BEADS_FIELD_KEYS` in that order, each only when present (an
 * empty string or an empty `labels` counts as absent, as beads itself leaves those out).
 * `priority` stays a number (0 most urgent … 4 backlog); `labels` keep their source order.
 */
export function beadsFields(row: Pick<BeadsRow, (typeof BEADS_FIELD_KEYS)[number]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of BEADS_FIELD_KEYS) {
    const v = row[key];
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0)) continue;
    out[key] = v;
  }
  return out;
}

/** A dependency as a Verdict link between two beads ids. */
export interface BeadsLink {
  /** Beads id of the link's source. */
  source: string;
  /** Beads id of the link's target. */
  target: string;
  /** `parent`, `blocks`, or the dependency type kept as is. */
  linkType: string;
}

/**
 * Maps a dependency (`issue_id` depends on `depends_on_id`) to a link (DESIGN §15):
 * - `parent-child`: `parent` from the item to its parent;
 * - `blocks`: `blocks` from the blocker (`depends_on_id`) to the item;
 * - any other type: a link of that type from the item to the target (the state does not read it).
 */
export function beadsLink(dep: Pick<BeadsDependency, 'issue_id' | 'depends_on_id' | 'type'>): BeadsLink {
  if (dep.type === 'parent-child') return { source: dep.issue_id, target: dep.depends_on_id, linkType: 'parent' };
  if (dep.type === 'blocks') return { source: dep.depends_on_id, target: dep.issue_id, linkType: 'blocks' };
  return { source: dep.issue_id, target: dep.depends_on_id, linkType: dep.type };
}

// ------------------------------------------------------------------ ids

/**
 * Length of derived ids in hex characters (80 bits: a collision is about 1 in 10^12 at a million
 * rows). Changing it re-keys every imported row: a re-import would create duplicates.
 */
const DERIVED_ID_HEX = 20;

/**
 * A deterministic opaque id: the first `DERIVED_ID_HEX` lower-case hex characters of the
 * sha256 of the JSON array of `parts` (JSON keeps parts unambiguous whatever they contain).
 * @example deriveId(workspaceId, 'item', 'bd-7h7')
 */
export function deriveId(...parts: string[]): string {
  return createHash('sha256').update(JSON.stringify(parts), 'utf8').digest('hex').slice(0, DERIVED_ID_HEX);
}
