import { isLosslessNumber } from 'lossless-json';
import { parsedFieldsOf } from './canonical-json.js';
import type { EligibilityRule, QuestionSet } from './registry.js';
import type { CollectionRow, ItemRow } from '../tracker-rows.js';

/**
 * Whether the item is terminal: a select field with `terminal_options` holds one of them
 * (for example `status: closed`).
 */
export function isTerminal(
  item: Pick<ItemRow, 'fields'>,
  collection: Pick<CollectionRow, 'schema'>,
  fields?: Record<string, unknown>,
): boolean {
  const values = fields ?? parseFields(item);
  const defs = Array.isArray(collection.schema?.fields) ? collection.schema.fields : [];
  for (const def of defs) {
    if (!def || typeof def !== 'object') continue;
    if (!def.terminal_options?.length) continue;
    const v = values[def.key];
    if (typeof v === 'string' && def.terminal_options.includes(v)) return true;
  }
  return false;
}

function parseFields(item: Pick<ItemRow, 'fields'>): Record<string, unknown> {
  const v = parsedFieldsOf(item);
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function plain(v: unknown): unknown {
  return isLosslessNumber(v) ? Number((v as { toString(): string }).toString()) : v;
}

function ruleHolds(
  rule: EligibilityRule,
  item: ItemRow,
  collection: CollectionRow,
  fields: Record<string, unknown>,
): boolean {
  if (rule === 'notSystem') return !collection.isSystem;
  if (rule === 'tracksWork') return collection.settings.tracks_work !== false;
  if (rule === 'notTerminal') return !isTerminal(item, collection, fields);
  const v = plain(fields[rule.field] ?? null);
  if ('equals' in rule) return v === rule.equals;
  return rule.in.includes(v as string | number | boolean | null);
}

/**
 * `appliesNow` (DESIGN §7 step 3): the item's current collection is covered by the set and every
 * eligibility rule accepts it. Checked at evaluation, never at enqueue, and before any
 * idempotency read.
 */
export function appliesNow(set: QuestionSet, item: ItemRow, collection: CollectionRow): boolean {
  return whyNotApplies(set, item, collection) === null;
}

/**
 * Why a set does not apply to the item now, in words for a person (`verdict show`), or null when
 * it applies (`appliesNow` is this, null or not). The first failing condition is named, in the
 * order of DESIGN §7 step 3: the collection, then each eligibility rule,
 * e.g. `item is terminal (status: closed)`. Never quotes item text beyond field names and values.
 */
export function whyNotApplies(set: QuestionSet, item: ItemRow, collection: CollectionRow): string | null {
  if (set.collections.length > 0 && !set.collections.includes(collection.slug)) {
    return `collection "${collection.slug}" is not one the set reads (${set.collections.join(', ')})`;
  }
  const fields = parseFields(item);
  for (const rule of set.eligible) {
    if (ruleHolds(rule, item, collection, fields)) continue;
    if (rule === 'notSystem') return `collection "${collection.slug}" is a system collection`;
    if (rule === 'tracksWork') return `collection "${collection.slug}" does not track work (tracks_work: false)`;
    if (rule === 'notTerminal') {
      const defs = Array.isArray(collection.schema?.fields) ? collection.schema.fields : [];
      const def = defs.find((d) => d?.terminal_options?.includes(fields[d.key] as string));
      return def ? `item is terminal (${def.key}: ${String(fields[def.key])})` : 'item is terminal';
    }
    const have = JSON.stringify(plain(fields[rule.field] ?? null));
    const want =
      'equals' in rule ? JSON.stringify(rule.equals) : `one of ${rule.in.map((v) => JSON.stringify(v)).join(', ')}`;
    return `field ${rule.field} is ${have}; the set asks only when it is ${want}`;
  }
  return null;
}
