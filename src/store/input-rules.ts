import { z } from 'zod';
import { InvalidInput } from '../errors.js';

/**
 * The input rules of every write door (DESIGN §2, §3.1): the store's doors, and through them the
 * importers, the `/v1` API, the GitHub webhooks and a library host, apply these and only these.
 *
 * - Text (titles, bodies, comment authors and bodies, strings inside `fields`) is stored in
 *   Unicode NFC with LF line ends, so the same content written in another form (CRLF, NFD) is the
 *   same bytes and a re-write owes nothing. Lone UTF-16 surrogates become U+FFFD and NUL is
 *   removed; those two are repairs, counted in a `NormaliseReport` that every door returns.
 * - A ref, an id or a slug names something and is compared byte for byte, so it is never
 *   repaired: one that would have to change (`refProblem`) is refused with the reason.
 * - A door's argument has the shape its type says (`checkDoorInput`): a missing or mistyped
 *   member is an `InvalidInput` naming it, thrown before the database is touched.
 */
export interface NormaliseReport {
  /** Lone surrogates replaced by U+FFFD. */
  loneSurrogates: number;
  /** NUL characters removed. */
  nulsRemoved: number;
}

export function emptyReport(): NormaliseReport {
  return { loneSurrogates: 0, nulsRemoved: 0 };
}

/** The number of repairs a report counts. */
export function repairCount(r: NormaliseReport): number {
  return r.loneSurrogates + r.nulsRemoved;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * One string in its stored form: lone surrogates → U+FFFD and NUL removed (both counted in
 * `report`), then CRLF and lone CR → LF and Unicode NFC (the stored form, not counted: the content
 * is the same).
 */
export function normaliseText(s: string, report: NormaliseReport): string {
  let out = s;
  if (!out.isWellFormed()) {
    out = out.replace(LONE_SURROGATE, () => {
      report.loneSurrogates++;
      return '\uFFFD';
    });
  }
  // NUL goes after the surrogates are repaired, so removing it cannot join two lone halves into a
  // pair that was never written.
  if (out.includes('\u0000')) {
    const before = out.length;
    out = out.replaceAll('\u0000', '');
    report.nulsRemoved += before - out.length;
  }
  if (out.includes('\r')) out = out.replace(/\r\n?/g, '\n');
  // ASCII is NFC already; the check skips the normaliser's allocation on the common case.
  // eslint-disable-next-line no-control-regex
  if (/[^\x00-\x7f]/.test(out)) out = out.normalize('NFC');
  return out;
}

/**
 * Longest ref, id or slug accepted, in UTF-16 code units (our choice, the HTTP API's limit since
 * it was first published): GitHub refs are `#` and a number, beads ids a dozen characters.
 */
const MAX_REF_LENGTH = 500;

/**
 * Why a ref, id or slug cannot be stored as given, or null when it can. It is refused rather than
 * repaired, because a name that changed would no longer find what it names: empty, longer than
 * `MAX_REF_LENGTH`, a lone surrogate, a control character (C0, DEL, C1: NUL, line ends and tabs
 * included), or not in NFC.
 */
export function refProblem(s: string): string | null {
  if (s.length === 0) return 'is empty';
  if (s.length > MAX_REF_LENGTH) return `is longer than ${MAX_REF_LENGTH} characters`;
  if (!s.isWellFormed()) return 'holds a lone surrogate (not valid Unicode)';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(s)) return 'holds a control character';
  if (s.normalize('NFC') !== s) return 'is not in Unicode NFC';
  return null;
}

/** A zod string that follows `refProblem`, for the schemas of every door. */
export const refString = z.string().superRefine((s, ctx) => {
  const problem = refProblem(s);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const optionalRef = refString.optional();

/** Longest source URL kept, characters: the length browsers and servers commonly accept (our choice); a GitHub issue's is under 200. */
export const MAX_SOURCE_URL_LENGTH = 2_048;

/**
 * Whether `s` is an absolute http(s) URL that can be shown as a link: the only schemes a page may
 * link to from tracker data (a `javascript:` or `data:` URL would run or show in the page's origin).
 */
export function isHttpUrl(s: string): boolean {
  if (!URL.canParse(s)) return false;
  const { protocol } = new URL(s);
  return protocol === 'https:' || protocol === 'http:';
}

const sourceUrl = z
  .string()
  .max(MAX_SOURCE_URL_LENGTH)
  .refine(isHttpUrl, { message: 'is not an absolute http(s) URL' })
  .nullable()
  .optional();
const time = z.number().finite().optional();
const fieldsInput = z.union([z.string(), z.record(z.string(), z.unknown())]);
const oweOptions = z
  .object({
    priority: z.number().int().optional(),
    quietPeriod: z.boolean().optional(),
    reaskDebounce: z.boolean().optional(),
  })
  .optional();

/** The argument shapes of the tracker write doors (TrackerStore), by door. */
export const DOOR_INPUT = {
  createWorkspace: z.object({ id: optionalRef, slug: refString }),
  createCollection: z.object({
    id: optionalRef,
    workspaceId: refString,
    slug: refString,
    isSystem: z.boolean().optional(),
    schema: z
      .object({ fields: z.array(z.unknown()) })
      .loose()
      .optional(),
    settings: z.record(z.string(), z.unknown()).optional(),
  }),
  updateCollection: z.object({
    slug: refString.optional(),
    schema: z
      .object({ fields: z.array(z.unknown()) })
      .loose()
      .optional(),
    settings: z.record(z.string(), z.unknown()).optional(),
  }),
  newItem: z.object({
    id: optionalRef,
    workspaceId: refString,
    collectionId: refString,
    ref: refString,
    title: z.string(),
    content: z.string().optional(),
    fields: fieldsInput.optional(),
    createdAt: time,
    deletedAt: z.number().finite().nullable().optional(),
    sourceUrl,
  }),
  upsertItem: z.object({ id: refString }),
  itemPatch: z.object({
    title: z.string().optional(),
    content: z.string().optional(),
    fields: fieldsInput.optional(),
    setFields: z.record(z.string(), z.unknown()).optional(),
  }),
  newComment: z.object({
    id: optionalRef,
    itemId: refString,
    parentCommentId: refString.nullable().optional(),
    author: z.string(),
    body: z.string(),
    createdAt: time,
  }),
  upsertComment: z.object({ id: refString }),
  commentBody: z.string(),
  newLink: z.object({
    id: optionalRef,
    workspaceId: refString,
    sourceId: refString,
    targetId: refString,
    linkType: refString,
    createdAt: time,
  }),
  id: refString,
  oweOptions,
} as const;

/**
 * Checks one argument of a write door against its shape, before the database is touched.
 * @param door the door's name, for the message (`addComment`).
 * @param what the argument's name when its issues have no path of their own (`id`, `body`).
 * @throws InvalidInput naming the door and each bad member: `addComment: author: expected a string`.
 */
export function checkDoorInput(door: string, what: string, schema: z.ZodType, value: unknown): void {
  const r = schema.safeParse(value);
  if (r.success) return;
  const problems = r.error.issues.slice(0, 5).map((i) => `${i.path.length ? i.path.join('.') : what}: ${issueText(i)}`);
  throw new InvalidInput(`${door}: ${problems.join('; ')}`);
}

function issueText(i: z.core.$ZodIssue): string {
  if (i.code === 'invalid_type') return `expected ${i.expected}`;
  // Custom issues carry our own words (refProblem); zod's other messages name types and limits, never the value.
  return i.message;
}
