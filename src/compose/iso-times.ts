import { z } from 'zod';

/**
 * The HTTP API (`/v1`) and the MCP results give times as ISO 8601 strings
 * (`2026-12-02T14:05:00.000Z`, UTC), not epoch milliseconds: a person or an agent reads them
 * without arithmetic (GitHub's REST API does the same). A time is a member that the door's response
 * schema declares as a number and whose name ends in `At` (`createdAt`, `evaluatedAt`, `dueAt`,
 * `lastErrorAt`, ...); durations end in `Ms` and stay numbers. Both doors convert by the schema, so
 * a tracker's own data (an item's `fields`, which may hold a `closedAt`) is never rewritten. The
 * library's reads stay in epoch milliseconds (its own clock's unit), so the conversion happens
 * here, on the way out, for the value and its output schema alike.
 */

const isTimeName = (name: string): boolean => name.endsWith('At');

/** ISO 8601 (UTC) of epoch milliseconds. */
function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * `value` with the numeric `…At` members that `schema` declares (at any depth, through arrays,
 * nullables and optionals) as ISO 8601. Guided by the schema, so a tracker's own data under a
 * record or an unknown (an item's `fields`, an answer) is never touched, whatever its keys.
 */
export function isoTimesBySchema<T>(schema: z.ZodType, value: T): T {
  return converterOf(schema)(value) as T;
}

type Convert = (value: unknown) => unknown;

/**
 * Each schema's converter, made once: every reply of a door runs it (bench part j: walking the
 * schema afresh per value, with its `instanceof` tests and `Object.entries`, was about 3 % of a
 * `GET /v1/items/{ref}`'s CPU). Members are made on first use, so a recursive schema is fine.
 */
const converters = new WeakMap<z.ZodType, Convert>();

const asIs: Convert = (value) => value;

function converterOf(s: z.ZodType): Convert {
  let c = converters.get(s);
  if (c === undefined) converters.set(s, (c = makeConverter(s)));
  return c;
}

function makeConverter(s: z.ZodType): Convert {
  if (s instanceof z.ZodNullable || s instanceof z.ZodOptional) {
    const inner = s.unwrap() as z.ZodType;
    return (value) => (value === null || value === undefined ? value : converterOf(inner)(value));
  }
  if (s instanceof z.ZodArray) {
    const element = s.element as z.ZodType;
    return (value) => (Array.isArray(value) ? value.map(converterOf(element)) : value);
  }
  if (s instanceof z.ZodObject) {
    const shape = s.shape as Record<string, z.ZodType>;
    const members = new Map<string, Convert>();
    const memberOf = (k: string): Convert => {
      let m = members.get(k);
      if (m === undefined) {
        // A key the schema does not declare is kept as it is, and not remembered: such keys may be
        // a tracker's own, unbounded in number.
        if (!Object.hasOwn(shape, k)) return asIs;
        const member = shape[k]!;
        m = isTimeName(k) ? timeOr(converterOf(member)) : converterOf(member);
        members.set(k, m);
      }
      return m;
    };
    return (value) => {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = v === null || v === undefined ? v : memberOf(k)(v);
      return out;
    };
  }
  return asIs;
}

/** A `…At` member: a number is a time; anything else goes through the member's own converter. */
function timeOr(member: Convert): Convert {
  return (value) => (typeof value === 'number' ? isoTime(value) : member(value));
}

const isoString = z.iso.datetime().describe('ISO 8601, UTC');

/**
 * The output schema matching `isoTimesBySchema`: every `…At` member declared as a number (nullable or
 * not) becomes an ISO 8601 string, in objects at any depth (through arrays and nullables).
 */
export function isoTimesSchema<S extends z.ZodType>(schema: S): S {
  return convert(schema) as S;
}

function convert(s: z.ZodType): z.ZodType {
  if (s instanceof z.ZodObject) {
    const overrides: Record<string, z.ZodType> = {};
    for (const [k, member] of Object.entries(s.shape as Record<string, z.ZodType>)) {
      if (isTimeName(k) && member instanceof z.ZodNumber) overrides[k] = isoString;
      else if (isTimeName(k) && member instanceof z.ZodNullable && member.unwrap() instanceof z.ZodNumber)
        overrides[k] = isoString.nullable();
      else {
        const c = convert(member);
        if (c !== member) overrides[k] = c;
      }
    }
    return Object.keys(overrides).length === 0 ? s : s.extend(overrides);
  }
  if (s instanceof z.ZodArray) {
    const c = convert(s.element as z.ZodType);
    return c === s.element ? s : described(z.array(c), s);
  }
  if (s instanceof z.ZodNullable) {
    const c = convert(s.unwrap() as z.ZodType);
    return c === s.unwrap() ? s : described(c.nullable(), s);
  }
  if (s instanceof z.ZodOptional) {
    const c = convert(s.unwrap() as z.ZodType);
    return c === s.unwrap() ? s : described(c.optional(), s);
  }
  return s;
}

/** `next` with the description of the schema it replaces (the tools' listed schemas keep their words). */
function described(next: z.ZodType, was: z.ZodType): z.ZodType {
  return was.description === undefined ? next : next.describe(was.description);
}
