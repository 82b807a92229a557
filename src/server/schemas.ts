import { z } from 'zod';
import { refString } from '../store/input-rules.js';
import {
  decisionView,
  flagRowView,
  itemSetStatus,
  itemView,
  statusView,
  verdictRowView,
} from '../compose/read-schemas.js';

// The reads' shapes are shared with the MCP server (src/mcp/); they live beside the reads.
export { itemView, statusView, verdictRowView };

/**
 * The HTTP API's request and response shapes (DESIGN §16.2), in zod: the routes validate with
 * them and `/v1/openapi.json` is generated from the same objects, so the document cannot drift
 * from what the server accepts. Bodies are strict: an unknown member is a 400 naming it (a typo
 * such as `tilte` must not be dropped silently). Times are declared here as epoch milliseconds,
 * as the library gives them, and sent as ISO 8601 strings: api-server.ts converts each `/v1`
 * answer and its documented schema (src/compose/iso-times.ts).
 */

const slug = z.string().min(1).max(200);
/**
 * Most keys an item's `fields` may have through the API. A 1 MiB body holds about 110,000 keys,
 * and one such write held the event loop for 1.3 s (measured); 1,000 is far above any tracker's
 * field count.
 */
const MAX_FIELD_KEYS = 1_000;

/** A field value map: the item's `fields` JSON object. Numbers beyond 2^53 lose digits in the JSON parse. */
const fields = z
  .record(z.string(), z.unknown())
  .refine((o) => Object.keys(o).length <= MAX_FIELD_KEYS, { message: `at most ${MAX_FIELD_KEYS} keys` });

export const errorBody = z.object({
  error: z
    .string()
    .describe(
      'A stable code: unauthorized, forbidden, not_found, method_not_allowed, invalid_request, invalid_input, invalid_write, invalid_json, payload_too_large, unsupported_media_type, conflict, rate_limited, internal',
    ),
  message: z.string(),
  param: z
    .string()
    .optional()
    .describe('The request member at fault, when one is: `cursor`, `limit`, `ref`, `fields.status`'),
  issues: z
    .array(z.object({ path: z.string(), message: z.string() }))
    .optional()
    .describe('invalid_request only: each bad member, by path'),
});

/**
 * The path parameters of each route, for one of the two prefixes: with `workspace` (the routes
 * under `/v1/workspaces/{workspace}`) or without it (under `/v1`, the token's workspace). Two
 * schemas rather than one optional member, so the OpenAPI document declares exactly the
 * parameters each path has.
 */
export function pathParams(withWorkspace: boolean) {
  const base = withWorkspace
    ? z.object({ workspace: slug.describe('Must be the token\u2019s workspace (403 otherwise)') })
    : z.object({});
  const item = base.extend({ ref: z.string().min(1).max(500).describe('URL-encoded: `#12` is `%2312`') });
  return {
    workspace: base,
    item,
    comment: item.extend({ commentId: z.string().min(1).max(200) }),
    link: item.extend({ linkId: z.string().min(1).max(200) }),
    collection: base.extend({ collection: slug }),
    set: base.extend({ set: z.string().min(1).max(200) }),
  };
}

const fieldDef = z.object({
  key: z.string(),
  type: z.string(),
  options: z.array(z.string()).optional(),
  terminal_options: z.array(z.string()).optional(),
});
const collectionSchema = z.object({ fields: z.array(fieldDef) }).loose();
const collectionSettings = z.record(z.string(), z.unknown());

export const newCollectionBody = z.strictObject({
  slug,
  schema: collectionSchema.optional().describe('`{fields: [{key, type, options?, terminal_options?}]}`'),
  settings: collectionSettings.optional().describe('`{tracks_work?: boolean, role?: "conventions"}`'),
});
export const collectionPatchBody = z.strictObject({
  slug: slug.optional(),
  schema: collectionSchema.optional(),
  settings: collectionSettings.optional(),
});

export const newItemBody = z.strictObject({
  collection: slug.describe('The collection\u2019s slug'),
  ref: refString.describe(
    'At most 500 characters, in NFC, without control characters; refused (never altered) otherwise',
  ),
  title: z.string().max(100_000),
  content: z.string().optional(),
  fields: fields.optional(),
});
export const itemPatchBody = z
  .strictObject({
    title: z.string().max(100_000).optional(),
    content: z.string().optional(),
    fields: fields
      .optional()
      .describe(
        'A JSON Merge Patch (RFC 7396) of the fields object: a key set to null is removed, an object value merges into the stored object, anything else replaces; keys not named are kept byte for byte',
      ),
    setFields: fields.optional().describe('Only these keys; every other member is kept byte for byte'),
  })
  .refine((p) => !(p.fields && p.setFields), { message: 'give fields or setFields, not both', path: ['setFields'] });
export const moveBody = z.strictObject({ collection: slug });

export const newCommentBody = z.strictObject({
  author: z
    .string()
    .min(1)
    .max(500)
    .optional()
    .describe('The person, as the tracker names them; the token (`token:<id>`) when left out'),
  content: z.string().describe('The comment\u2019s text (markdown), as an item\u2019s `content`'),
  parentCommentId: z.string().optional(),
});
export const commentPatchBody = z.strictObject({ content: z.string() });
export const newLinkBody = z.strictObject({
  target: refString.describe('The target item\u2019s ref'),
  type: z.string().min(1).max(100),
});

export const flagsQuery = z.strictObject({
  collection: slug.optional().describe('Only items of this collection (slug)'),
  key: z.string().min(1).max(600).optional().describe('Only this question key'),
  currency: z
    .enum(['current', 'stale', 'all'])
    .default('all')
    .describe('`current`: asked about the item as it is now; `stale`: still surfacing while its re-ask is owed'),
  threshold: z.coerce.number().min(0).max(1).optional().describe('Overrides the set\u2019s threshold'),
  cursor: z.string().max(2000).optional().describe('The `next_cursor` of the previous page, unchanged (opaque)'),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});
export const listItemsQuery = z.strictObject({
  collection: slug.optional().describe('Only items of this collection (slug)'),
  status: z.string().max(200).optional().describe('Only items whose `status` field is this value'),
  updated_since: z.iso
    .datetime({ offset: true })
    .optional()
    .describe('Only items updated at or after this time (ISO 8601)'),
  q: z.string().min(1).max(200).optional().describe('Only items whose title holds this text, ignoring case'),
  surfaced: z.string().min(1).max(200).optional().describe('Only items with a key surfaced in this question set'),
  sort: z
    .enum(['updated', 'created', 'ref'])
    .default('updated')
    .describe('Newest first for times, ascending for ref, unless `order`'),
  order: z.enum(['asc', 'desc']).optional(),
  cursor: z.string().max(2000).optional().describe('The `next_cursor` of the previous page, unchanged (opaque)'),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  include: z.enum(['content']).optional().describe('`content`: each item with its full text (left out by default)'),
});
const itemListEntry = z.object({
  id: z.string(),
  ref: z.string(),
  collection: z.string(),
  title: z.string(),
  fields: z.record(z.string(), z.unknown()),
  createdAt: z.number(),
  updatedAt: z.number(),
  content: z.string().optional().describe('Only with `include=content`'),
});
export const itemListPage = z.object({
  items: z.array(itemListEntry),
  has_more: z.boolean(),
  next_cursor: z.string().nullable(),
});

export const collectionView = z.object({
  id: z.string(),
  slug: z.string(),
  isSystem: z.boolean(),
  schema: z.unknown(),
  settings: z.unknown(),
  createdAt: z.number(),
  deletedAt: z.number().nullable(),
});
export const commentView = z.object({
  id: z.string(),
  itemId: z.string(),
  parentCommentId: z.string().nullable(),
  author: z.string(),
  content: z.string().describe('Blank on a tombstone'),
  createdAt: z.number(),
  updatedAt: z.number(),
  deletedAt: z.number().nullable(),
});
export const linkView = z.object({
  id: z.string(),
  source: z.string().describe('The ref of the item the link is from'),
  target: z.string().describe('The ref of the item the link is to'),
  type: z.string().describe('The tracker\u2019s link type'),
  createdAt: z.number(),
});
export const newVerdictBody = z
  .object({
    key: z
      .string()
      .min(1)
      .max(600)
      .describe('The set\u2019s question key, or `<key>@<commentId>` for a per-comment set'),
    set: z.string().min(1).max(200).optional().describe('Needed only when several sets of the item ask the key'),
    verdict: z
      .enum(['agree', 'disagree', 'value', 'withdraw'])
      .describe(
        '`withdraw` ends the verdict in force on the key (stored as a `withdrawn` verdict), as `verdict review REF KEY withdraw` and MCP\u2019s `verdict_record` do',
      ),
    value: z
      .union([z.boolean(), z.number(), z.string()])
      .optional()
      .describe(
        'With `value` only: true/false or a probability (noul), an option (choice), a level name or index (score)',
      ),
    note: z.string().max(8_000).optional().describe('Why, at most 2,000 code points'),
    author: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('The person, when one token serves many: stored as `<author> (token:<id>)`'),
  })
  .strict();
/** What a write repaired in its text (DESIGN §3.1): never zero silently, always reported. */
const normalisedView = z.object({
  loneSurrogates: z.number().describe('Lone UTF-16 surrogates replaced by U+FFFD'),
  nulsRemoved: z.number().describe('NUL characters removed'),
});
/** What a write did: whether anything changed, what its text repairs were, and the jobs it owed (DESIGN §3). */
export const writeInfo = z.object({
  changed: z.boolean().describe('False when nothing stored changed (nothing owed)'),
  normalised: normalisedView,
  owed: z.number().describe('Jobs the write owed'),
});
/** Every write's answer (DESIGN §16.3): the resource under its kind's name, as a GET of it answers, and `write`. */
export const written = <K extends string, T extends z.ZodType>(kind: K, row: T) =>
  z.object({ [kind]: row, write: writeInfo } as { [k in K]: T } & { write: typeof writeInfo });

export const itemWithDecisions = z.object({
  item: itemView,
  decisions: z.array(decisionView),
  sets: z
    .array(itemSetStatus)
    .describe('Every set registered for the item\u2019s collection: tells "not asked" from "pending"'),
  verdicts: z.array(verdictRowView).describe('People\u2019s verdicts, oldest first: the latest of a key is in force'),
});

export const flagsPage = z.object({
  flags: z.array(flagRowView),
  has_more: z.boolean(),
  next_cursor: z.string().nullable(),
  total: z.number().describe('Rows matching the filters, over every page'),
  failing: z.boolean().describe('A job of the set is parked or failing: flags may be missing'),
});

export const setView = z.object({
  name: z.string(),
  collections: z.array(z.string()).nullable().describe('The collections it reads; null: every collection'),
  keys: z.array(z.string()).nullable().describe('The question keys; null when resolved per workspace (conventions)'),
  unsurfaced: z.array(z.string()).describe('Keys asked and stored, never surfaced'),
  perComment: z.boolean(),
  threshold: z.number(),
  hysteresis: z.number(),
  quietPeriodMs: z.number(),
  maxAgeMs: z.number().nullable(),
});

const jobState = z.enum(['owed', 'parked', 'batched']);
export const jobsQuery = z.strictObject({
  set: z.string().min(1).max(200).optional(),
  state: jobState.optional(),
  ref: refString.optional().describe('One item\u2019s jobs'),
  limit: z.coerce.number().int().min(1).max(10_000).default(50),
});
export const throughputQuery = z.strictObject({
  minutes: z.coerce.number().int().min(1).max(1440).default(60).describe('Minutes shown, the current one last'),
});
export const throughputView = z.object({
  minutes: z
    .array(
      z.object({
        startAt: z.number().describe('Start of the minute (UTC)'),
        counts: z
          .record(z.string(), z.number())
          .describe('Jobs per outcome recorded in the minute; absent outcomes had none'),
      }),
    )
    .describe('Every minute of the window, oldest first'),
  outcomes: z.array(z.string()).describe('The outcomes counted in the window, in stacking order'),
  totals: z.record(z.string(), z.number()).describe('Jobs per outcome over the window'),
});
export const jobView = z.object({
  ref: z.string(),
  questionSet: z.string(),
  state: jobState,
  inFlight: z.boolean().describe('Under a live lease'),
  priority: z.number(),
  attempts: z.number(),
  refusals: z.number(),
  abandons: z.number(),
  owedAt: z.number().describe('The latest write that owed it'),
  dueAt: z.number().describe('Not claimed before this (quiet period, debounce, backoff)'),
  lastError: z.string().nullable(),
  lastErrorAt: z.number().nullable(),
});
const jobsFilter = {
  set: z.string().min(1).max(200).optional(),
  ref: refString.optional().describe('One item\u2019s jobs'),
};
/** The body every job action takes; each route's schema narrows it. */
export interface JobsActionBody {
  set?: string;
  ref?: string;
  state?: 'owed' | 'parked' | 'batched';
  reason?: string;
}
export const jobsRetryBody = z.strictObject({
  ...jobsFilter,
  state: jobState.optional().describe('Which jobs: parked (default), owed (waiting ones), batched'),
});
export const jobsDueNowBody = z.strictObject(jobsFilter);
export const jobsDropBody = z
  .strictObject({
    ...jobsFilter,
    state: jobState.optional(),
    reason: z.string().min(1).max(200).describe('Why: kept in the server\u2019s log line'),
  })
  .refine((b) => b.set !== undefined || b.state !== undefined || b.ref !== undefined, {
    message: 'name set, state or ref: a whole workspace\u2019s jobs are dropped only by naming a state',
    path: ['state'],
  });
export const jobsChanged = z.object({ count: z.number().int().describe('Jobs changed') });

export const explainQuery = z.strictObject({
  set: z.string().min(1).max(200).optional().describe('Only this question set'),
});
export const explainView = z.object({
  itemId: z.string(),
  ref: z.string(),
  sets: z.array(
    z.object({
      questionSet: z.string(),
      applies: z.boolean(),
      reason: z.string().nullable(),
      rationale: z.boolean().describe('The set asks the model for a one-sentence reason per answer'),
      maxPerCall: z.number(),
      targets: z.array(
        z.object({
          commentId: z.string().nullable(),
          stateHash: z.string(),
          system: z.string().describe('The system prompt, exactly as sent'),
          user: z.string().describe('The user message: the state bytes, exactly as hashed and sent'),
          questionKeys: z.array(z.string()),
          stored: z.array(
            z.object({
              questionKey: z.string(),
              answer: z.unknown(),
              confidence: z.number().nullable(),
              rationale: z.string().nullable(),
              stateHash: z.string(),
              matchesState: z.boolean(),
              current: z.boolean(),
              staleReason: z.string().nullable(),
              provider: z.string(),
              model: z.string(),
              evaluatedAt: z.number(),
            }),
          ),
        }),
      ),
    }),
  ),
});
