import { isLosslessNumber, parse as losslessParse, type LosslessNumber } from 'lossless-json';

/**
 * Canonical JSON (DESIGN §5 "Serialisation"): object keys sorted by Unicode code point, strings
 * escaped as JSON.stringify does plus U+2028 and U+2029, no whitespace, numbers parsed from
 * stored text keep their literal (`3.0` stays `3.0`). The same bytes are hashed and sent, so any
 * change here changes every state hash and re-asks every item.
 */

/** A JSON value as parsed losslessly: numbers stay LosslessNumber (their literal text). */
export type LosslessValue =
  null | boolean | string | LosslessNumber | LosslessValue[] | { [key: string]: LosslessValue };

/**
 * Parses JSON text keeping every number's literal.
 * @throws SyntaxError when the text is not JSON.
 */
export function parseLossless(text: string): LosslessValue {
  return losslessParse(text) as LosslessValue;
}

/**
 * A row's stored fields text parsed losslessly (`parseLossless`), once per row object: a job's
 * eligibility and its state both read the fields of the one loaded item (a co-asked group of two
 * sets parsed them three times). The value is shared, so callers only read it: eligibility
 * compares, the state builder copies what it keeps (state.ts `boundFieldValue`). Kept with the
 * text it was parsed from, so a row object whose `fields` changed is parsed anew; a failed parse
 * is not kept (it throws again).
 * @throws SyntaxError when the text is not JSON.
 */
export function parsedFieldsOf(row: { readonly fields: string }): LosslessValue {
  const known = parsedFields.get(row);
  if (known !== undefined && known.text === row.fields) return known.value;
  const value = parseLossless(row.fields);
  parsedFields.set(row, { text: row.fields, value });
  return value;
}
const parsedFields = new WeakMap<object, { text: string; value: LosslessValue }>();

/** Compares two strings by Unicode code point (JS `<` compares UTF-16 code units). */
export function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    const cx = x.value.codePointAt(0)!;
    const cy = y.value.codePointAt(0)!;
    if (cx !== cy) return cx < cy ? -1 : 1;
  }
}

/** JSON.stringify of a string, with U+2028 and U+2029 escaped too. */
function canonicalString(s: string): string {
  const json = JSON.stringify(s);
  // Most strings hold neither separator: two native scans are cheaper than two regex replaces.
  if (!json.includes('\u2028') && !json.includes('\u2029')) return json;
  return json.replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/**
 * Serialises a value canonically. Plain JS numbers must be finite; LosslessNumbers keep their text.
 * @throws TypeError on a non-finite number, a function, a symbol or undefined.
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'string') return canonicalString(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite number');
    return JSON.stringify(value);
  }
  if (isLosslessNumber(value)) return (value as LosslessNumber).toString();
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj)
      .filter((k) => obj[k] !== undefined)
      .sort(compareCodePoints);
    return `{${keys.map((k) => `${canonicalString(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
  }
  throw new TypeError(`canonicalJson: cannot serialise ${typeof value}`);
}

/**
 * `orderedJson` of members whose values are already serialised (each `canonicalJson` of its value):
 * a caller that needs each member's bytes too (the state's part hashes) serialises each value once.
 */
export function orderedJsonOfCanonical(members: ReadonlyArray<readonly [string, string]>): string {
  return `{${members.map(([k, v]) => `${canonicalString(k)}:${v}`).join(',')}}`;
}

/** Serialises an object with its members in the given order (for fixed-order documents like the state). */
export function orderedJson(members: ReadonlyArray<readonly [string, unknown]>): string {
  return `{${members.map(([k, v]) => `${canonicalString(k)}:${canonicalJson(v)}`).join(',')}}`;
}
