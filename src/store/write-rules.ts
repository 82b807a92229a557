import { isLosslessNumber, stringify as losslessStringify } from 'lossless-json';
import { canonicalJson, parseLossless, type LosslessValue } from '../decision/canonical-json.js';
import { SET_DEFAULTS, type QuestionSet, type Registry } from '../decision/registry.js';
import { fieldValueText, sameJsonValue, spliceMembers } from './fields-patch.js';
import { normaliseText, type NormaliseReport } from './input-rules.js';
import { InvalidWrite, type Claim } from './store.js';
import type { CollectionRow, CollectionSchema, CollectionSettings, ItemRow } from './tracker-reads.js';
import type { ItemPatch, NewItem, WriteResult } from './tracker-writes.js';

/**
 * The rules both stores share, as pure functions: what a write changes, which sets it owes, and
 * how a job row reads as a claim. The SQLite and Postgres write doors differ only in how they run
 * their statements (synchronous IMMEDIATE transactions against async ones with row locks), so
 * everything that decides *what* to write lives here once.
 */

/**
 * Normalises and validates fields for a new row: text is kept byte for byte (so number literals
 * survive) once it parses as a JSON object; an object is serialised losslessly (LosslessNumber
 * values keep their literal).
 * @throws InvalidWrite when the fields are not a JSON object.
 */
export function fieldsText(fields: Record<string, unknown> | string | undefined, report: NormaliseReport): string {
  if (fields === undefined) return '{}';
  let text: string;
  if (typeof fields === 'string') {
    text = normaliseText(fields, report);
  } else {
    if (fields === null || typeof fields !== 'object' || Array.isArray(fields))
      throw new InvalidWrite('fields must be a JSON object');
    checkDepth(fields, 'fields');
    text = normaliseText(valueText(fields, 'fields'), report);
  }
  const parsed = checkedFieldsObject(text);
  // Strings inside the JSON (escaped as \u0000, \ud800, \r\n or a decomposed \u0301 in the
  // text, so the pass above cannot see them) get the same normalisation; the text is rewritten
  // only when one changed, so number literals and bytes otherwise survive (lossless-json keeps the
  // literals either way).
  const seen = { changed: false };
  const normalised = normaliseJsonStrings(parsed, report, seen);
  return seen.changed ? losslessStringify(normalised)! : text;
}

/**
 * @throws InvalidWrite when `v` nests deeper than `MAX_FIELDS_DEPTH`, checked without recursion
 *   before anything walks it recursively (serialising a 5,000-deep object overflows the stack).
 */
function checkDepth(v: unknown, what: string): void {
  if (nestingDepth(v) > MAX_FIELDS_DEPTH) throw new InvalidWrite(`${what} nest deeper than ${MAX_FIELDS_DEPTH} levels`);
}

/**
 * Parses a fields text and checks it is a JSON object no deeper than `MAX_FIELDS_DEPTH`.
 * @throws InvalidWrite otherwise.
 */
function checkedFieldsObject(text: string): Record<string, LosslessValue> {
  let parsed: LosslessValue;
  try {
    parsed = parseLossless(text);
  } catch {
    throw new InvalidWrite('fields is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || isLosslessNumber(parsed)) {
    throw new InvalidWrite('fields must be a JSON object');
  }
  if (nestingDepth(parsed) > MAX_FIELDS_DEPTH)
    throw new InvalidWrite(`fields nest deeper than ${MAX_FIELDS_DEPTH} levels`);
  return parsed as Record<string, LosslessValue>;
}

function valueText(v: unknown, what: string): string {
  try {
    return fieldValueText(v);
  } catch (err) {
    // Our own TypeErrors say what is wrong; any other error's text (a RangeError) never reaches a client.
    throw new InvalidWrite(`${what}: ${err instanceof TypeError ? err.message : 'has no JSON form'}`);
  }
}

/**
 * The fields text a patch leads to, from the stored text (DESIGN §3.2: edits keep every byte
 * they do not touch):
 * - `fields` as text replaces the stored text with exactly that text;
 * - `fields` as an object sets every key to its value and removes the keys it lacks;
 * - `setFields` sets only the keys it names and leaves the others alone.
 * For both object forms a key whose value is the value already stored (`sameJsonValue`: the
 * same number however written, so a JS `3` leaves a stored `3.0` alone) is left untouched, the
 * changed members are spliced into the stored text, and every other byte survives. When nothing
 * differs the stored text comes back unchanged, so the write is a no-op.
 * @throws InvalidWrite when the result would not be a JSON object, a value has no JSON form, or
 *   both `fields` and `setFields` are given.
 */
function patchFieldsText(
  cur: string,
  patch: { fields?: Record<string, unknown> | string; setFields?: Record<string, unknown> },
  report: NormaliseReport,
): string {
  if (patch.fields !== undefined && patch.setFields !== undefined)
    throw new InvalidWrite('give fields or setFields, not both');
  if (typeof patch.fields === 'string') return fieldsText(patch.fields, report);
  const next = patch.fields ?? patch.setFields;
  if (next === undefined) return cur;
  if (next === null || typeof next !== 'object' || Array.isArray(next)) {
    throw new InvalidWrite(`${patch.fields !== undefined ? 'fields' : 'setFields'} must be a JSON object`);
  }
  checkDepth(next, patch.fields !== undefined ? 'fields' : 'setFields');
  let stored: Record<string, LosslessValue>;
  try {
    stored = checkedFieldsObject(cur);
  } catch {
    // A stored text that does not parse cannot be patched member by member; the caller's object
    // becomes the whole text (only reachable for a whole-object replace).
    if (patch.setFields !== undefined)
      throw new InvalidWrite('the stored fields are not a JSON object; replace them whole');
    return fieldsText(next, report);
  }
  const set = new Map<string, string>();
  const wanted = new Set<string>();
  for (const [rawKey, rawValue] of Object.entries(next)) {
    if (rawValue === undefined) continue;
    const key = normaliseText(rawKey, report);
    const value = normaliseJsonStrings(rawValue, report, { changed: false });
    wanted.add(key);
    const has = Object.prototype.hasOwnProperty.call(stored, key);
    if (has && sameJsonValue(stored[key], value)) continue;
    set.set(key, valueText(value, `field ${JSON.stringify(key)}`));
  }
  const remove = new Set(patch.fields !== undefined ? Object.keys(stored).filter((k) => !wanted.has(k)) : []);
  if (set.size === 0 && remove.size === 0) return cur;
  const text = spliceMembers(cur, { set, remove });
  checkedFieldsObject(text);
  return text;
}

/** `v` with every string and key in its stored form (`normaliseText`); `seen.changed` says whether any differed. */
function normaliseJsonStrings(v: unknown, report: NormaliseReport, seen: { changed: boolean }): unknown {
  const text = (s: string) => {
    const n = normaliseText(s, report);
    if (n !== s) seen.changed = true;
    return n;
  };
  if (typeof v === 'string') return text(v);
  if (v === null || typeof v !== 'object' || isLosslessNumber(v) || v instanceof Date) return v;
  if (Array.isArray(v)) return v.map((x) => normaliseJsonStrings(x, report, seen));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>))
    out[text(k)] = normaliseJsonStrings(x, report, seen);
  return out;
}

/**
 * Deepest nesting accepted in `fields` (our choice): tracker fields are flat or one level deep
 * (labels), and the state builder walks them recursively, so a pathological depth would fail every
 * evaluation instead of being refused here with a clear error.
 */
const MAX_FIELDS_DEPTH = 32;

function nestingDepth(v: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[v, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object' || 'isLosslessNumber' in (x as object)) continue;
    if (d > max) max = d;
    if (max > MAX_FIELDS_DEPTH) return max;
    for (const c of Array.isArray(x) ? x : Object.values(x as object)) stack.push([c, d + 1]);
  }
  return max;
}

/** A collection row as stored (schema and settings as JSON text). */
export interface StoredCollection {
  id: string;
  workspaceId: string;
  slug: string;
  isSystem: boolean;
  schema: string;
  settings: string;
  createdAt: number;
  deletedAt: number | null;
}

/** Parses a stored collection's JSON columns. */
export function toCollectionRow(r: StoredCollection): CollectionRow {
  return {
    ...r,
    schema: JSON.parse(r.schema) as CollectionSchema,
    settings: JSON.parse(r.settings) as CollectionSettings,
  };
}

/**
 * Refuses fields that break the collection's select options (DESIGN §16.3): a `select` field
 * with `options` holds one of them, or null (unset). Only the keys whose value this write changes
 * are checked (`prevText` null for a new item, or a move to another collection: every key), so a
 * row stored before the rule can still take other edits. The message names the field and lists
 * the options, never the value (it is tracker text).
 * @param schemaText the collection's stored schema JSON (a text that does not parse checks nothing).
 * @throws InvalidWrite with `param` `fields.<key>`.
 */
export function checkFieldOptions(schemaText: string, nextText: string, prevText: string | null): void {
  if (nextText === prevText) return;
  let schema: CollectionSchema;
  try {
    schema = JSON.parse(schemaText) as CollectionSchema;
  } catch {
    return;
  }
  const selects = (Array.isArray(schema?.fields) ? schema.fields : []).filter(
    (f) => f && f.type === 'select' && Array.isArray(f.options) && f.options.length > 0,
  );
  if (selects.length === 0) return;
  const next = JSON.parse(nextText) as Record<string, unknown>;
  const prev = prevText === null ? {} : (JSON.parse(prevText) as Record<string, unknown>);
  for (const f of selects) {
    if (!Object.prototype.hasOwnProperty.call(next, f.key)) continue;
    const value = next[f.key];
    if (
      prevText !== null &&
      Object.prototype.hasOwnProperty.call(prev, f.key) &&
      JSON.stringify(prev[f.key]) === JSON.stringify(value)
    )
      continue;
    if (value === null || (typeof value === 'string' && f.options!.includes(value))) continue;
    throw new InvalidWrite(
      `fields.${f.key}: not an option of this collection's ${f.key} field; options: ${f.options!.join(', ')}`,
      { param: `fields.${f.key}` },
    );
  }
}

/** A write door's result. */
export function writeResult<T>(row: T, changed: boolean, normalised: NormaliseReport, owed = 0): WriteResult<T> {
  return { row, changed, normalised, owed };
}

/** Sets whose state reads comments: trail readers and per-comment sets. */
export function readsComments(s: QuestionSet): boolean {
  return !s.noTrail || s.perComment;
}

/** Sets whose state reads links. */
export function readsLinks(s: QuestionSet): boolean {
  return s.withLinks;
}

/** What `updateItem` would store; `changed` false means a no-op (no seq bump, nothing owed). */
export function planItemPatch(
  cur: Pick<ItemRow, 'title' | 'content' | 'fields'>,
  patch: ItemPatch,
  report: NormaliseReport,
): { next: { title: string; content: string; fields: string }; changed: boolean; titleChanged: boolean } {
  const next = {
    title: patch.title === undefined ? cur.title : normaliseText(patch.title, report),
    content: patch.content === undefined ? cur.content : normaliseText(patch.content, report),
    fields: patchFieldsText(cur.fields, patch, report),
  };
  const changed = next.title !== cur.title || next.content !== cur.content || next.fields !== cur.fields;
  return { next, changed, titleChanged: next.title !== cur.title };
}

/**
 * What `upsertItem` would store over an existing row: every value, including the deleted state
 * and the collection. A deleted row stays deleted at its original time when the import still
 * says deleted. `linkers` says whether items showing this one's title must be owed too.
 * `sourceUrlChanged`: the source URL differs (stored even when nothing else changed, owing nothing).
 * @throws InvalidWrite when the item belongs to another workspace, or its fields are not an object.
 */
export function planItemUpsert(
  cur: ItemRow,
  item: NewItem & { id: string },
  report: NormaliseReport,
): {
  next: Pick<ItemRow, 'collectionId' | 'ref' | 'title' | 'content' | 'fields' | 'deletedAt' | 'sourceUrl'>;
  changed: boolean;
  linkers: boolean;
  sourceUrlChanged: boolean;
} {
  if (cur.workspaceId !== item.workspaceId) throw new InvalidWrite(`item ${item.id} belongs to another workspace`);
  const next = {
    collectionId: item.collectionId,
    ref: normaliseText(item.ref, report),
    title: normaliseText(item.title, report),
    content: normaliseText(item.content ?? '', report),
    fields:
      item.fields === undefined
        ? fieldsText(undefined, report)
        : patchFieldsText(cur.fields, { fields: item.fields }, report),
    deletedAt: item.deletedAt === undefined ? cur.deletedAt : item.deletedAt,
    sourceUrl: item.sourceUrl === undefined ? cur.sourceUrl : item.sourceUrl,
  };
  const sameDeleted = (next.deletedAt === null) === (cur.deletedAt === null);
  const changed = !(
    next.collectionId === cur.collectionId &&
    next.ref === cur.ref &&
    next.title === cur.title &&
    next.content === cur.content &&
    next.fields === cur.fields &&
    sameDeleted
  );
  if (sameDeleted) next.deletedAt = cur.deletedAt;
  // `changed` is about the state's parts only: the source URL is shown to people, never asked about.
  return {
    next,
    changed,
    linkers: next.title !== cur.title || !sameDeleted,
    sourceUrlChanged: next.sourceUrl !== cur.sourceUrl,
  };
}

/**
 * Whether a stored JSON text already holds `next`, compared in canonical form (key order and
 * spacing do not count). A settings or schema patch with the value already stored is a no-op:
 * re-serialising it would differ in bytes and owe the whole collection (DESIGN §3, §3.2).
 */
function sameJsonText(stored: string, next: unknown): boolean {
  try {
    return canonicalJson(parseLossless(stored)) === canonicalJson(JSON.parse(JSON.stringify(next)));
  } catch {
    return false;
  }
}

/** What `updateCollection` would store; `changed` false means a no-op (the stored bytes kept). */
export function planCollectionPatch(
  c: StoredCollection,
  patch: { slug?: string; settings?: CollectionSettings; schema?: CollectionSchema; deleted?: boolean },
  now: number,
): { next: Pick<StoredCollection, 'slug' | 'settings' | 'schema' | 'deletedAt'>; changed: boolean } {
  const next = {
    slug: patch.slug ?? c.slug,
    settings: patch.settings && !sameJsonText(c.settings, patch.settings) ? JSON.stringify(patch.settings) : c.settings,
    schema: patch.schema && !sameJsonText(c.schema, patch.schema) ? JSON.stringify(patch.schema) : c.schema,
    deletedAt: patch.deleted === undefined ? c.deletedAt : patch.deleted ? (c.deletedAt ?? now) : null,
  };
  const changed = !(
    next.slug === c.slug &&
    next.settings === c.settings &&
    next.schema === c.schema &&
    next.deletedAt === c.deletedAt
  );
  return { next, changed };
}

/** The sets a collection change owes: those of its old slug and of its new one. */
export function setsForSlugChange(registry: Registry, oldSlug: string, newSlug: string): QuestionSet[] {
  return [...new Set([...registry.setsFor(oldSlug), ...registry.setsFor(newSlug)])];
}

/** last_error is bounded to 1 KiB (DESIGN §2); it never holds provider text. */
const LAST_ERROR_MAX = 1024;

/** Cuts a diagnostic to `LAST_ERROR_MAX` characters. */
export function boundError(s: string): string {
  return s.length > LAST_ERROR_MAX ? s.slice(0, LAST_ERROR_MAX) : s;
}

/** The debounce settings of a job's set, or the defaults when the set is unknown in this process. */
export function setTiming(
  registry: Registry,
  name: string,
): { quietPeriodMs: number; reaskDebounceMs: number; maxDelayMs: number } {
  const set = registry.get(name);
  return {
    quietPeriodMs: set?.quietPeriodMs ?? SET_DEFAULTS.quietPeriodMs,
    reaskDebounceMs: set?.reaskDebounceMs ?? SET_DEFAULTS.reaskDebounceMs,
    maxDelayMs: set?.maxDelayMs ?? SET_DEFAULTS.maxDelayMs,
  };
}

/** An items row as raw SQL returns it (snake_case), on either dialect. */
export interface RawItem {
  id: string;
  workspace_id: string;
  collection_id: string;
  ref: string;
  title: string;
  content: string;
  fields: string;
  seq: number;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
  source_url: string | null;
}

/** A decision_jobs row as raw SQL returns it (snake_case), on either dialect. */
export interface RawJob {
  item_id: string;
  question_set: string;
  workspace_id: string;
  priority: number;
  generation: number;
  enqueued_at: number;
  not_before: number;
  claimed_by: string | null;
  claim_token: string | null;
  lease_expires_at: number | null;
  attempts: number;
  refusals: number;
  abandons: number;
  defers: number;
  state: 'owed' | 'parked' | 'batched';
  last_error: string | null;
  last_error_at: number | null;
  fair_tag: number;
  owed_at: number;
}

/** The claim a freshly claimed row stands for. */
export function toClaim(r: RawJob): Claim {
  return {
    itemId: r.item_id,
    questionSet: r.question_set,
    workspaceId: r.workspace_id,
    generation: r.generation,
    claimToken: r.claim_token!,
    claimedBy: r.claimed_by!,
    attempts: r.attempts,
    refusals: r.refusals,
    abandons: r.abandons,
    defers: r.defers,
    priority: r.priority,
    enqueuedAt: r.enqueued_at,
  };
}

/**
 * The abandon backoff's cap, ms (DESIGN §3, "Abandons"): a job whose claimant died is due again
 * only min(cap, lease × 2^(abandons − 1)) after the dead lease ended. The transient backoff's cap
 * (`src/runner/backoff.ts`, which the store cannot import).
 */
export const ABANDON_BACKOFF_CAP_MS = 3_600_000;

/** The reason a job parked at the abandon limit carries. */
export function abandonReason(abandons: number): string {
  return `abandon limit: ${abandons} claims ended without an outcome`;
}

/**
 * Consecutive defers a job may take (DESIGN §3.7): the defer that would be number
 * DEFER_LIMIT + 1 in a row is recorded as a transient fail instead (the attempt counts and the job
 * backs off), so no provider answer and no wait of ours can keep a job cycling without backoff.
 * Raising it lengthens how long a 429 storm can hold a job at short intervals.
 */
export const DEFER_LIMIT = 20;

/** The diagnostic of a defer recorded as a fail because the job reached the defer limit. */
export function deferLimitReason(defers: number, reason: string): string {
  return `${reason} (deferred ${defers} times in a row: counted as a failure)`;
}

/** The reason the refusal that reaches the limit parks with. */
export function refusalParkReason(refusals: number, error: string): string {
  return `refused ${refusals} times: ${error}`;
}
