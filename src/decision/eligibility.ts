import { isLosslessNumber } from 'lossless-json';
import { parseLossless } from './canonical-json.js';
import type { EligibilityRule, QuestionSet } from './registry.js';
import type { CollectionRow, ItemRow } from './rows.js';

/**
 * Whether the item is terminal: a select field with `terminal_options` holds one of them
 * (for example `status: closed`).
 */
export function isTerminal(item: Pick<ItemRow, 'fields'>, collection: Pick<CollectionRow, 'schema'>, fields?: Record<string, unknown>): boolean {
  const values = fields ?? parseFields(item.fields);
  const defs = Array.isArray(collection.schema?.fields) ? collection.schema.fields : [];
  for (const def of defs) {
    if (!def || typeof def !== 'object') continue;
    if (!def.terminal_options?.length) continue;
    const v = values[def.key];
    if (typeof v === 'string' && def.terminal_options.includes(v)) return true;
  }
  return false;
}

function parseFields(text: string): Record<string, unknown> {
  const v = parseLossless(text);
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function plain(v: unknown): unknown {
  return isLosslessNumber(v) ? Number((v as { toString(): string }).toString()) : v;
}

function ruleHolds(rule: EligibilityRule, item: ItemRow, collection: CollectionRow, fields: Record<string, unknown>): boolean {
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
  if (set.collections.length > 0 && !set.collections.includes(collection.slug)) return false;
  const fields = parseFields(item.fields);
  return set.eligible.every((r) => ruleHolds(r, item, collection, fields));
}
