import { z } from 'zod';
import type { HumanVerdictRow } from '../store/verdicts.js';
import type { ItemRow } from '../store/tracker-reads.js';
import type { DecisionView } from '../reads/reads.js';

/**
 * The zod shapes of the public reads (`v.reader.item`, `v.reader.status`, `v.store.listVerdicts`)
 * as JSON, shared by the HTTP API (src/server/schemas.ts: routes validate and `/v1/openapi.json`
 * is generated from them) and the MCP server (src/mcp/: the tools' output schemas), so the two
 * cannot drift apart. Times are declared as epoch milliseconds, as the library reads them; both
 * doors send them as ISO 8601 (src/compose/iso-times.ts converts value and schema on the way out).
 */

export const itemView = z.object({
  id: z.string(),
  ref: z.string(),
  collectionId: z.string(),
  collection: z.string().describe('The collection\u2019s slug, as writes name it'),
  title: z.string(),
  content: z.string(),
  fields: z.record(z.string(), z.unknown()),
  seq: z.number(),
  createdAt: z.number(),
  updatedAt: z.number(),
  deletedAt: z.number().nullable(),
});

const verdictView = z.object({
  id: z.number(),
  verdict: z.enum(['agree', 'disagree', 'value', 'withdrawn']),
  value: z.unknown().nullable(),
  inForce: z.boolean(),
  author: z.string(),
  note: z.string().nullable(),
  createdAt: z.number(),
  stateHash: z.string(),
  staleReason: z
    .enum(['override_stale'])
    .nullable()
    .describe('`override_stale`: the item changed since the person judged it; the value stays in force'),
  changedParts: z.array(z.string()),
});

export const verdictRowView = z.object({
  id: z.number(),
  questionSet: z.string(),
  questionKey: z.string(),
  verdict: z.enum(['agree', 'disagree', 'value', 'withdrawn']),
  value: z.unknown().nullable(),
  stateHash: z.string(),
  author: z.string(),
  note: z.string().nullable(),
  createdAt: z.number(),
});

export const decisionView = z.object({
  questionSet: z.string(),
  questionKey: z.string().describe('The question key; `<key>@<commentId>` for a per-comment set'),
  commentId: z.string().nullable().describe('Per-comment sets: the comment the answer is about'),
  kind: z.enum(['noul', 'choice', 'score']),
  answer: z
    .unknown()
    .describe(
      '`{"type":"noul","noul":p}`, `{"type":"choice","choice":option,"probabilities":{...}}` or `{"type":"score","score":x,"probabilities":{...},"legend":{...}}`',
    ),
  confidence: z.number().nullable(),
  provider: z.string(),
  model: z.string(),
  evaluatedAt: z.number(),
  current: z.boolean(),
  staleReason: z.string().nullable(),
  changedParts: z.array(z.string()),
  surfacing: z
    .enum(['surfaced', 'below_threshold', 'stale', 'not_surfaced'])
    .describe('`not_surfaced`: a choice or score, or a key the set lists as unsurfaced'),
  threshold: z.number(),
  rationale: z.string().nullable(),
  rowId: z.number(),
  source: z
    .enum(['model', 'human'])
    .describe('`human` when a person\u2019s value is in force: `answer` is theirs, `modelAnswer` the model\u2019s'),
  modelAnswer: z
    .unknown()
    .nullable()
    .describe('With `source: human` only: the model\u2019s own answer; null when `answer` is the model\u2019s'),
  proposed: z
    .unknown()
    .nullable()
    .describe('The model\u2019s later, disagreeing answer under a person\u2019s value: shown, never applied'),
  verdict: verdictView.nullable(),
  flips: z.number().describe('Surfacing flips the model\u2019s answers made in the last 30 days'),
});

export const itemSetStatus = z.object({
  questionSet: z.string(),
  applies: z.boolean(),
  reason: z.string().nullable().describe('Why the set does not apply now, in words; null when it applies'),
  job: z
    .object({
      state: z.enum(['owed', 'parked', 'batched']),
      dueAt: z.number().describe('Not asked before this (quiet period, re-ask debounce, backoff)'),
      attempts: z.number(),
      refusals: z.number(),
      lastError: z.string().nullable(),
    })
    .nullable()
    .describe('The set\u2019s job on this item, or null when nothing is owed'),
});

export const statusView = z.object({
  workspace: z.string(),
  items: z.number(),
  jobs: z.array(
    z.object({
      questionSet: z.string(),
      due: z.number(),
      waiting: z.number(),
      inFlight: z.number(),
      parked: z.number(),
      failing: z.number(),
      oldestOwedAt: z.number().nullable(),
      lastErrorAt: z.number().nullable(),
    }),
  ),
});

/** An item as JSON: `fields` parsed to an object (numbers beyond 2^53 lose digits here; `verdict show --json` keeps them). */
export function itemJson(i: ItemRow, collection: string): z.infer<typeof itemView> {
  let fields: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(i.fields);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) fields = parsed as Record<string, unknown>;
  } catch {
    // stored fields are always an object (the doors refuse anything else); an old row that is not reads as {}
  }
  return {
    id: i.id,
    ref: i.ref,
    collectionId: i.collectionId,
    collection,
    title: i.title,
    content: i.content,
    fields,
    seq: i.seq,
    createdAt: i.createdAt,
    updatedAt: i.updatedAt,
    deletedAt: i.deletedAt,
  };
}

/** A verdict row as JSON: its value parsed. */
export function verdictRowJson(r: HumanVerdictRow): z.infer<typeof verdictRowView> {
  return {
    id: r.id,
    questionSet: r.questionSet,
    questionKey: r.questionKey,
    verdict: r.verdict,
    value: r.value === null ? null : (JSON.parse(r.value) as unknown),
    stateHash: r.stateHash,
    author: r.author,
    note: r.note,
    createdAt: r.createdAt,
  };
}

/**
 * A decision as the doors show it (`decisionView`): each thing once. `key` and `unsurfaced` of the
 * library's view are left out (`questionKey` and `commentId` say the first, `surfacing:
 * not_surfaced` the second), and `modelAnswer` is null unless a person's value is in force (it
 * would repeat `answer`).
 */
export function decisionJson(d: DecisionView): z.infer<typeof decisionView> {
  const { key: _key, unsurfaced: _unsurfaced, modelAnswer, ...rest } = d;
  return { ...rest, modelAnswer: d.source === 'human' ? modelAnswer : null };
}

/**
 * One surfaced flag of a set, as `GET /v1/flags/{set}` pages it and MCP's `flags_list` lists it
 * (MCP adds the item id and the bare key). Times in milliseconds here; each door renders them in ISO 8601.
 */
export const flagRowView = z.object({
  ref: z.string(),
  title: z.string().describe('Tracker text, for display'),
  collection: z.string(),
  questionKey: z.string().describe('`<key>@<commentId>` for a per-comment set'),
  p: z.number().describe('The probability in force (a person\u2019s value when `source` is `human`)'),
  threshold: z.number(),
  current: z.boolean(),
  staleReason: z.string().nullable(),
  changedParts: z.array(z.string()),
  source: z.enum(['model', 'human']),
  proposed: z
    .number()
    .nullable()
    .describe('A newer model answer disagreeing with the person\u2019s value in force, as a probability'),
  provider: z.string(),
  model: z.string(),
  evaluatedAt: z.number(),
});
