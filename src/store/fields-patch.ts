import { isLosslessNumber, stringify as losslessStringify } from 'lossless-json';
import type { LosslessValue } from '../decision/canonical-json.js';

/**
 * Field edits that keep every byte they do not touch (DESIGN §3.2). The stored fields text is
 * never re-serialised: the top-level members are located in the text and only the members that
 * change are spliced in, removed or appended. Untouched members keep their exact bytes (number
 * literals such as `3.0`, `1e2` and integers beyond 2^53, string escapes, key order, spacing).
 *
 * Why splice rather than parse-and-restringify: a lossless parser keeps number literals, but
 * re-stringifying still rewrites string escapes (`\u00e9` → `é`, `\/` → `/`) and spacing, which
 * are bytes the edit did not touch. Splicing keeps them all, and costs one linear scan.
 */

/** One top-level member of a JSON object text: offsets are UTF-16 indexes into that text. */
export interface MemberSpan {
  /** The decoded key. */
  readonly key: string;
  /** Index of the key's opening quote. */
  readonly start: number;
  /** Index of the value's first character. */
  readonly valueStart: number;
  /** Index just past the value's last character. */
  readonly valueEnd: number;
}

/** The layout of a JSON object text: where its members are, and where its closing brace is. */
export interface ObjectLayout {
  readonly members: readonly MemberSpan[];
  /** Index just past the opening brace. */
  readonly open: number;
  /** Index of the closing brace. */
  readonly close: number;
}

const WS = new Set([' ', '\t', '\n', '\r']);

/**
 * Locates the top-level members of a JSON object text. The text must already be valid JSON
 * (the write door parses it first); the scan only finds boundaries.
 * @throws SyntaxError when the text is not a JSON object.
 */
export function scanObject(text: string): ObjectLayout {
  let i = 0;
  const skipWs = () => {
    while (i < text.length && WS.has(text[i])) i++;
  };
  const expect = (ch: string) => {
    if (text[i] !== ch) throw new SyntaxError(`fields: expected ${ch} at position ${i}`);
    i++;
  };
  const scanString = () => {
    expect('"');
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    expect('"');
  };
  const scanValue = () => {
    const c = text[i];
    if (c === '"') return scanString();
    if (c === '{' || c === '[') {
      let depth = 0;
      while (i < text.length) {
        const d = text[i];
        if (d === '"') {
          scanString();
          continue;
        }
        if (d === '{' || d === '[') depth++;
        else if (d === '}' || d === ']') depth--;
        i++;
        if (depth === 0) return;
      }
      throw new SyntaxError('fields: unterminated value');
    }
    const from = i;
    while (i < text.length && !WS.has(text[i]) && text[i] !== ',' && text[i] !== '}' && text[i] !== ']') i++;
    if (i === from) throw new SyntaxError(`fields: expected a value at position ${i}`);
  };

  skipWs();
  expect('{');
  const open = i;
  const members: MemberSpan[] = [];
  skipWs();
  if (text[i] !== '}') {
    for (;;) {
      skipWs();
      const start = i;
      scanString();
      const key = JSON.parse(text.slice(start, i)) as string;
      skipWs();
      expect(':');
      skipWs();
      const valueStart = i;
      scanValue();
      members.push({ key, start, valueStart, valueEnd: i });
      skipWs();
      if (text[i] === ',') {
        i++;
        continue;
      }
      break;
    }
  }
  const close = i;
  expect('}');
  return { members, open, close };
}

/**
 * Whether two JSON number literals denote the same number, compared exactly in decimal (so
 * `3` = `3.0` = `0.3e1`, and `12345678901234567890` ≠ `12345678901234567000`).
 */
export function sameNumberLiteral(a: string, b: string): boolean {
  const na = normaliseDecimal(a);
  const nb = normaliseDecimal(b);
  return na !== null && na === nb;
}

function normaliseDecimal(lit: string): string | null {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(lit.trim());
  if (!m) return null;
  const frac = m[3] ?? '';
  let digits = (m[2] + frac).replace(/^0+/, '');
  if (digits === '') return '0'; // -0, 0.0, 0e5 are all zero
  let exp = BigInt(m[4] ?? '0') - BigInt(frac.length);
  const trimmed = digits.replace(/0+$/, '');
  exp += BigInt(digits.length - trimmed.length);
  digits = trimmed;
  return `${m[1]}${digits}e${exp}`;
}

/**
 * Whether a new value (from a caller: plain JS values, LosslessNumbers, bigints) is the value
 * already stored (parsed losslessly). Numbers compare by the number they denote: two literals
 * exactly; a JS number matches a stored literal that reads as that same double, since a JS caller
 * can say no more than the double (so `3` leaves a stored `3.0` alone). Strings compare after the
 * write door's normalisation, which the caller applies to `next` first.
 */
export function sameJsonValue(stored: LosslessValue | undefined, next: unknown): boolean {
  if (stored === undefined) return false;
  if (isLosslessNumber(next) || typeof next === 'bigint') {
    return isLosslessNumber(stored) && sameNumberLiteral(String(stored), String(next));
  }
  if (typeof next === 'number') return isLosslessNumber(stored) && Number(String(stored)) === next;
  if (next === null || typeof next !== 'object') return stored === next;
  if (stored === null || typeof stored !== 'object' || isLosslessNumber(stored)) return false;
  if (Array.isArray(next)) {
    return Array.isArray(stored) && stored.length === next.length && next.every((x, i) => sameJsonValue(stored[i], x));
  }
  if (Array.isArray(stored)) return false;
  const obj = next as Record<string, unknown>;
  const keys = Object.keys(obj).filter((k) => obj[k] !== undefined);
  const storedObj = stored as Record<string, LosslessValue>;
  return (
    keys.length === Object.keys(storedObj).length &&
    keys.every((k) => Object.prototype.hasOwnProperty.call(storedObj, k) && sameJsonValue(storedObj[k], obj[k]))
  );
}

/**
 * Serialises one new field value, keeping LosslessNumber literals.
 * @throws TypeError when the value has no JSON form (undefined, a function, a non-finite number).
 */
export function fieldValueText(value: unknown): string {
  const text = losslessStringify(value, (_k, v) => {
    if (typeof v === 'number' && !Number.isFinite(v)) throw new TypeError('a field value must be a finite number');
    return v;
  });
  if (text === undefined) throw new TypeError('a field value must be JSON (not undefined or a function)');
  return text;
}

/** Edits to apply to a fields text: keys to set (value texts, already serialised) and keys to remove. */
export interface MemberEdits {
  readonly set: ReadonlyMap<string, string>;
  readonly remove: ReadonlySet<string>;
}

/**
 * Applies member edits to a JSON object text, keeping every byte it does not touch: a member that
 * is set keeps its key bytes and position and only its value is replaced; a removed member goes
 * with one adjacent separator; a new member is appended before the closing brace. With nothing
 * to do the text is returned as is.
 * @throws SyntaxError when the text is not a JSON object.
 */
export function spliceMembers(text: string, edits: MemberEdits): string {
  if (edits.set.size === 0 && edits.remove.size === 0) return text;
  const layout = scanObject(text);
  const present = new Set(layout.members.map((m) => m.key));
  const additions = [...edits.set].filter(([k]) => !present.has(k) && !edits.remove.has(k));
  const removing = layout.members.some((m) => edits.remove.has(m.key));

  if (!removing && additions.length === 0) {
    // Values replaced in place, from the end so earlier offsets stay valid.
    let out = text;
    for (const m of [...layout.members].reverse()) {
      const v = edits.set.get(m.key);
      if (v !== undefined) out = out.slice(0, m.valueStart) + v + out.slice(m.valueEnd);
    }
    return out;
  }

  const ms = layout.members;
  const firstStart = ms.length ? ms[0].start : layout.close;
  const lastEnd = ms.length ? ms[ms.length - 1].valueEnd : layout.close;
  let out = text.slice(0, firstStart);
  let wrote = false;
  for (const [i, m] of ms.entries()) {
    if (edits.remove.has(m.key)) continue;
    // The separator that stood before this member (a comma and its spacing) keeps its bytes.
    if (wrote) out += text.slice(ms[i - 1].valueEnd, m.start);
    const v = edits.set.get(m.key);
    out += v === undefined ? text.slice(m.start, m.valueEnd) : text.slice(m.start, m.valueStart) + v;
    wrote = true;
  }
  for (const [k, v] of additions) {
    out += `${wrote ? ',' : ''}${JSON.stringify(k)}:${v}`;
    wrote = true;
  }
  return out + text.slice(lastEnd);
}
