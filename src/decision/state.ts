import { hash } from 'node:crypto';
import { isLosslessNumber } from 'lossless-json';
import {
  canonicalJson,
  compareCodePoints,
  orderedJsonOfCanonical,
  parseLossless,
  type LosslessValue,
} from './canonical-json.js';

/**
 * The item state: what the provider reads and what is hashed (DESIGN §5). One serialisation
 * produces both the bytes sent and the bytes hashed (principle 2).
 *
 * The bounds below are part of every state hash: changing one re-asks every item whose state it
 * touches, so change them deliberately. Bump a version when a stored row can no longer answer
 * the comparison the code makes (a member added to the hashed set, or a value derived
 * differently); removing a member does not bump it. A row of another version reads
 * `not_compared` (DESIGN §5, §8).
 */

/**
 * Shape version of the item state. 2 since DESIGN §5.1 added `omitted_comments` (the count of
 * older live comments the trail leaves out); answers of version 1 read `not_compared` until
 * re-asked (a write, a backfill or `verdict reask`).
 */
export const STATE_VERSION = 2;

/**
 * Shape version of the per-comment state (DESIGN §5, §7b), kept apart from the item state's: the
 * §5.1 change did not touch a byte of it, so its answers stay comparable and are not paid for
 * again (principle 10). Bump it only when the per-comment state itself changes.
 */
export const COMMENT_STATE_VERSION = 1;

/** Clip limits in Unicode code points, and count limits (DESIGN §5). */
export const LIMITS = {
  titleCodePoints: 500,
  bodyCodePoints: 16_000,
  trailComments: 10,
  trailAuthorCodePoints: 100,
  trailBodyCodePoints: 2_000,
  fieldKeys: 100,
  fieldStringCodePoints: 1_000,
  /** Not in DESIGN: arrays inside fields (labels) are cut too, so no item is unboundedly large. */
  fieldArrayItems: 100,
  /**
   * Not in DESIGN: the serialised fields object is held to this many code points by dropping keys
   * from the end of the sorted order. Without it, 100 keys of nested arrays of 1,000-code-point
   * strings could reach ten million code points, and DESIGN §5 says no item may be permanently
   * over any budget.
   */
  fieldsTotalCodePoints: 16_000,
  linkEntries: 50,
  linkTitleCodePoints: 200,
  commentBodyCodePoints: 16_000,
} as const;

/** Result of a clip: the text and whether anything was cut. */
export interface Clipped {
  text: string;
  clipped: boolean;
}

/** Number of Unicode code points in `s`. */
export function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** Clips `s` to at most `max` Unicode code points, cutting on a code-point boundary. */
export function clipCodePoints(s: string, max: number): Clipped {
  if (s.length <= max) return { text: s, clipped: false }; // code points <= code units
  let cp = 0;
  let i = 0;
  while (i < s.length) {
    if (cp === max) return { text: s.slice(0, i), clipped: true };
    const c = s.charCodeAt(i);
    const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
    i += c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff ? 2 : 1;
    cp++;
  }
  return { text: s, clipped: false };
}

/** A live comment as the trail reads it. `createdAt` is epoch milliseconds. */
export interface TrailComment {
  readonly id: string;
  readonly author: string;
  readonly body: string;
  readonly createdAt: number;
}

/** A link as the state reads it: the other end's ref and title, from this item's point of view. */
export interface StateLink {
  readonly relation: 'parent' | 'blocks' | 'blocked_by';
  readonly ref: string;
  readonly title: string;
}

/** Everything the builder needs about one item. Deleted comments and links to deleted items must already be left out. */
export interface ItemStateSource {
  readonly title: string;
  readonly collectionSlug: string;
  /** The stored fields text (a JSON object). */
  readonly fieldsText: string;
  /** `fieldsText` already parsed (`parsedFieldsOf`), read and never changed; parsed here when absent. */
  readonly fields?: LosslessValue;
  readonly content: string;
  /** Live comments, any order; the builder takes the newest 10. */
  readonly comments: readonly TrailComment[];
  /** Links of this item to live items. */
  readonly links: readonly StateLink[];
}

/** How a set sees the state. */
export interface StateShape {
  /** Include `links` (always present then, possibly []). */
  readonly withLinks: boolean;
  /** `recent_trail` is [] (the set does not read comments). */
  readonly noTrail: boolean;
}

/**
 * What a built state left out or cut, so a reader can say how it was clipped (DESIGN §5.1).
 * Every count is 0 and every flag false for a state that holds its whole item.
 */
export interface StateClips {
  /** Older live comments left out of the trail (the state's `omitted_comments`). */
  readonly omittedComments: number;
  /** Trail comments (or the per-comment state's comment) whose body or author was cut. */
  readonly commentsCut: number;
  readonly titleCut: boolean;
  readonly bodyCut: boolean;
  /** Keys dropped, strings clipped or arrays cut in `fields`. */
  readonly fieldsCut: boolean;
  /** Links beyond the 50 kept. */
  readonly linksDropped: number;
  /** Kept links whose title was cut. */
  readonly linkTitlesCut: number;
}

/** A built state: `bytes` are sent, `hash` = lowercase hex sha256 of `bytes`. */
export interface BuiltState {
  readonly bytes: string;
  readonly hash: string;
  /**
   * Part name → hex sha256 of that member's canonical bytes; explains staleness. A dated state
   * (`withAsOf`) also holds `as_of` → the date itself.
   */
  readonly parts: Readonly<Record<string, string>>;
  /** Some clip or drop happened: true exactly when `clips` records one. */
  readonly truncated: boolean;
  readonly clips: StateClips;
  readonly version: number;
}

/** The clips of a state that holds its whole item. */
export const NO_CLIPS: StateClips = Object.freeze({
  omittedComments: 0,
  commentsCut: 0,
  titleCut: false,
  bodyCut: false,
  fieldsCut: false,
  linksDropped: 0,
  linkTitlesCut: 0,
});

/** Whether any clip or drop is recorded. */
export function isClipped(c: StateClips): boolean {
  return (
    c.omittedComments > 0 ||
    c.commentsCut > 0 ||
    c.titleCut ||
    c.bodyCut ||
    c.fieldsCut ||
    c.linksDropped > 0 ||
    c.linkTitlesCut > 0
  );
}

/**
 * How a state was clipped, in words for `show` (DESIGN §5.1), e.g.
 * `3 older comments omitted (the trail holds the newest 10); body cut to 16,000 code points`.
 * Empty when nothing was clipped.
 */
export function describeClips(c: StateClips): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const out: string[] = [];
  if (c.omittedComments > 0) {
    out.push(
      `${n(c.omittedComments)} older comment${c.omittedComments === 1 ? '' : 's'} omitted (the trail holds the newest ${LIMITS.trailComments})`,
    );
  }
  if (c.commentsCut > 0) out.push(`${n(c.commentsCut)} comment${c.commentsCut === 1 ? '' : 's'} cut`);
  if (c.titleCut) out.push(`title cut to ${n(LIMITS.titleCodePoints)} code points`);
  if (c.bodyCut) out.push(`body cut to ${n(LIMITS.bodyCodePoints)} code points`);
  if (c.fieldsCut) out.push('fields cut');
  if (c.linksDropped > 0)
    out.push(
      `${n(c.linksDropped)} link${c.linksDropped === 1 ? '' : 's'} dropped (the state holds ${LIMITS.linkEntries})`,
    );
  if (c.linkTitlesCut > 0) out.push(`${n(c.linkTitlesCut)} link title${c.linkTitlesCut === 1 ? '' : 's'} cut`);
  return out.join('; ');
}

/**
 * Lowercase hex sha256 of a UTF-8 string. The one-shot `crypto.hash` (Node ≥ 20.12), not
 * `createHash().update().digest()`: the same digest without a Hash object per call, about half the
 * CPU for a state-sized string (1.25 against 2.2 µs for 400 characters, measured); a state takes
 * six or seven of these (its hash and its part hashes).
 */
export function sha256(text: string): string {
  return hash('sha256', text, 'hex');
}

/** RFC 3339, UTC, whole seconds: `2026-01-14T21:42:05Z`. */
function rfc3339Seconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function boundFieldValue(v: LosslessValue, mark: () => void): LosslessValue {
  if (typeof v === 'string') {
    const c = clipCodePoints(v, LIMITS.fieldStringCodePoints);
    if (c.clipped) mark();
    return c.text;
  }
  if (Array.isArray(v)) {
    if (v.length > LIMITS.fieldArrayItems) mark();
    return v.slice(0, LIMITS.fieldArrayItems).map((x) => boundFieldValue(x, mark));
  }
  if (v !== null && typeof v === 'object' && !isLosslessNumber(v)) {
    const obj = v as Record<string, LosslessValue>;
    const keys = Object.keys(obj).sort(compareCodePoints);
    if (keys.length > LIMITS.fieldKeys) mark();
    const out: Record<string, LosslessValue> = {};
    for (const k of keys.slice(0, LIMITS.fieldKeys)) out[k] = boundFieldValue(obj[k], mark);
    return out;
  }
  return v;
}

/**
 * Bounds an item's stored fields, parsed losslessly (a copy: `parsed` is left as it is): keys
 * sorted by code point, at most 100 keys (the first 100 in that order), strings clipped to 1,000
 * code points, numbers kept literally, nested arrays cut to 100 entries, and the whole object held
 * to 16,000 code points by dropping keys from the end of the sorted order.
 * @throws TypeError when the value is not an object.
 */
function boundFields(parsed: LosslessValue): { fields: Record<string, LosslessValue>; truncated: boolean } {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || isLosslessNumber(parsed)) {
    throw new TypeError('fields must be a JSON object');
  }
  let truncated = false;
  const fields = boundFieldValue(parsed, () => (truncated = true)) as Record<string, LosslessValue>;
  const keys = Object.keys(fields).sort(compareCodePoints);
  let total = 2; // the braces
  for (const [i, k] of keys.entries()) {
    total += codePointLength(canonicalJson(k)) + 1 + codePointLength(canonicalJson(fields[k])) + (i > 0 ? 1 : 0);
    if (total > LIMITS.fieldsTotalCodePoints) {
      for (const drop of keys.slice(i)) delete fields[drop];
      truncated = true;
      break;
    }
  }
  return { fields, truncated };
}

function compareTrail(a: TrailComment, b: TrailComment): number {
  return a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** The newest `n` comments by (created_at, id), oldest first. */
export function newestComments<T extends TrailComment>(comments: readonly T[], n: number): T[] {
  return [...comments].sort(compareTrail).slice(-n);
}

function finish(members: Array<readonly [string, unknown]>, clips: StateClips, version: number): BuiltState {
  // Each member is serialised once: its bytes are both a piece of the state and its part's hash input.
  const canonical = members.map(([name, value]) => [name, canonicalJson(value)] as const);
  const bytes = orderedJsonOfCanonical(canonical);
  let parts: Record<string, string> | undefined;
  return {
    bytes,
    hash: sha256(bytes),
    // Hashed on first read: a job whose answers are all stored already (the skip path) never reads
    // them, and six SHA-256s are most of what building its state costs.
    get parts() {
      return (parts ??= partHashes(members, canonical));
    },
    truncated: isClipped(clips),
    clips,
    version,
  };
}

/** Each member's part hash (`BuiltState.parts`), from the members and their canonical bytes. */
function partHashes(
  members: ReadonlyArray<readonly [string, unknown]>,
  canonical: ReadonlyArray<readonly [string, string]>,
): Record<string, string> {
  const parts: Record<string, string> = {};
  const omitted = members.find(([name]) => name === 'omitted_comments');
  for (const [i, [name, value]] of members.entries()) {
    if (name === 'omitted_comments') continue;
    // The trail part covers the omission count too: both say which comments the state shows.
    if (name === 'recent_trail')
      parts.trail = sha256(
        omitted ? canonicalJson({ omitted_comments: omitted[1], recent_trail: value }) : canonical[i]![1],
      );
    else parts[name] = sha256(canonical[i]![1]);
  }
  return parts;
}

/**
 * Builds the item state as one set sees it (DESIGN §5, §5.1): members title, collection,
 * fields, body, recent_trail (the newest 10 live comments), then `omitted_comments` (the count of
 * older live comments left out) only when there are any, and links only for WithLinks sets.
 * Every clip or drop marks `truncated` and is recorded in `clips`.
 * @throws SyntaxError / TypeError when the stored fields are not a JSON object.
 */
export function buildItemState(src: ItemStateSource, shape: StateShape): BuiltState {
  const clip = (s: string, n: number, mark: () => void) => {
    const c = clipCodePoints(s, n);
    if (c.clipped) mark();
    return c.text;
  };
  const clips = { ...NO_CLIPS };
  const bounded = boundFields(src.fields ?? parseLossless(src.fieldsText));
  clips.fieldsCut = bounded.truncated;

  let trail: unknown[] = [];
  if (!shape.noTrail) {
    clips.omittedComments = Math.max(0, src.comments.length - LIMITS.trailComments);
    trail = newestComments(src.comments, LIMITS.trailComments).map((c) => {
      let cut = false;
      const entry = {
        author: clip(c.author, LIMITS.trailAuthorCodePoints, () => (cut = true)),
        body: clip(c.body, LIMITS.trailBodyCodePoints, () => (cut = true)),
        created_at: rfc3339Seconds(c.createdAt),
      };
      if (cut) clips.commentsCut++;
      return entry;
    });
  }

  const members: Array<readonly [string, unknown]> = [
    ['title', clip(src.title, LIMITS.titleCodePoints, () => (clips.titleCut = true))],
    ['collection', src.collectionSlug],
    ['fields', bounded.fields],
    ['body', clip(src.content, LIMITS.bodyCodePoints, () => (clips.bodyCut = true))],
    ['recent_trail', trail],
  ];
  if (clips.omittedComments > 0) members.push(['omitted_comments', clips.omittedComments]);
  if (shape.withLinks) {
    const links = src.links
      .map((l) => {
        const t = clipCodePoints(l.title, LIMITS.linkTitleCodePoints);
        return { entry: { relation: l.relation, ref: l.ref, title: t.text }, cut: t.clipped };
      })
      .sort(
        ({ entry: a }, { entry: b }) =>
          compareCodePoints(a.relation, b.relation) ||
          compareCodePoints(a.ref, b.ref) ||
          compareCodePoints(a.title, b.title),
      );
    clips.linksDropped = Math.max(0, links.length - LIMITS.linkEntries);
    const kept = links.slice(0, LIMITS.linkEntries);
    clips.linkTitlesCut = kept.filter((l) => l.cut).length;
    members.push(['links', kept.map((l) => l.entry)]);
  }
  return finish(members, clips, STATE_VERSION);
}

/** What the per-comment state reads about one comment. */
export interface CommentStateSource {
  readonly title: string;
  readonly collectionSlug: string;
  readonly comment: TrailComment;
}

/**
 * Per-comment state (DESIGN §5): `{title, collection, comment: {author, body, created_at}}`, the
 * body clipped to 16,000 code points. A title edit re-asks the newest 10 comments: deliberate.
 */
export function buildCommentState(src: CommentStateSource): BuiltState {
  const clips = { ...NO_CLIPS };
  let cut = false;
  const clip = (s: string, n: number, mark: () => void) => {
    const c = clipCodePoints(s, n);
    if (c.clipped) mark();
    return c.text;
  };
  const members: Array<readonly [string, unknown]> = [
    ['title', clip(src.title, LIMITS.titleCodePoints, () => (clips.titleCut = true))],
    ['collection', src.collectionSlug],
    [
      'comment',
      {
        author: clip(src.comment.author, LIMITS.trailAuthorCodePoints, () => (cut = true)),
        body: clip(src.comment.body, LIMITS.commentBodyCodePoints, () => (cut = true)),
        created_at: rfc3339Seconds(src.comment.createdAt),
      },
    ],
  ];
  if (cut) clips.commentsCut = 1;
  return finish(members, clips, COMMENT_STATE_VERSION);
}

/**
 * The state `base` dated `asOf` (DESIGN §5.2, decision/as-of.ts): the same members plus `as_of`
 * (a `YYYY-MM-DD` UTC date) as the last member, hashed anew. Its `parts` gain `as_of` holding the
 * date itself, not a hash: a reader rebuilds the state an answer was keyed to from it. Only sets
 * that declare `maxAgeMs` are dated, so every other state keeps its bytes (no version bump: an
 * answer of a set that gains `maxAge` is still compared, undated, until it expires).
 * @throws TypeError when `base` is already dated.
 */
export function withAsOf(base: BuiltState, asOf: string): BuiltState {
  if ('as_of' in base.parts) throw new TypeError('withAsOf: the state is already dated');
  // orderedJson writes `{m1,m2,…}` with no whitespace, and a state always has members, so this is
  // exactly orderedJson(members + [['as_of', asOf]]): the bytes sent are the bytes hashed.
  const bytes = `${base.bytes.slice(0, -1)},${canonicalJson('as_of')}:${canonicalJson(asOf)}}`;
  return { ...base, bytes, hash: sha256(bytes), parts: { ...base.parts, as_of: asOf } };
}

/** Names of the parts whose hashes differ between two `state_parts` maps (sorted). */
export function changedParts(
  before: Readonly<Record<string, string>>,
  after: Readonly<Record<string, string>>,
): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((n) => before[n] !== after[n]).sort();
}
