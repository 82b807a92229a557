import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type CallToolResult, type ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { roleAllows, tokenAuthor } from '../access/tokens.js';
import {
  decisionJson,
  decisionView,
  flagRowView,
  itemJson,
  itemSetStatus,
  itemView,
  statusView,
  verdictRowJson,
  verdictRowView,
} from '../compose/read-schemas.js';
import type { Verdict } from '../compose/verdict.js';
import { errCode, VerdictError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { VERSION } from '../version.js';
import { isoTimesBySchema, isoTimesSchema } from '../compose/iso-times.js';
import { registerProposalTools } from './proposal-tools.js';
import {
  flagsListSummary,
  itemGetSummary,
  itemSearchSummary,
  statusGetSummary,
  verdictRecordSummary,
} from './summaries.js';
import type { FieldScalar } from '../store/tracker-reads.js';
import type { ApiTokenRole, ApiTokenRow } from '../store/access-store.js';

/**
 * Verdict's Model Context Protocol server (DESIGN §16.5): the decisions a coding agent needs ("what
 * needs a human here, and is that judgement current?") as tools and a resource, over the public
 * API only. `verdict mcp` serves it over stdio (src/cli/mcp.ts) and `verdict serve` over
 * Streamable HTTP at `/mcp` (./mcp-http.ts), both under one workspace token.
 *
 * Tools (zod input schemas, strict: an unknown argument is refused). A result's data is its
 * `structuredContent` (times as ISO 8601, src/compose/iso-times.ts); its text content is a short summary
 * of it in words, not a second copy of the JSON (an agent's context is the budget):
 * - `item_get {ref}`: the item, every decision (current, or its stale reason), where each set
 *   stands, and people's verdicts (`v.reader.item`);
 * - `flags_list {set?, collection?, key?, currency?, limit?, offset?}`: surfaced keys per set,
 *   highest probability first, paged (`v.reader.surfaced`);
 * - `item_search {refPrefix?, collection?, fields?, limit?, after?}`: live items by ref prefix,
 *   collection and field equality, in id order, paged by cursor (`v.store.listItems`); a cursor
 *   that is no item of the workspace is refused, not read as the start;
 * - `status_get {}`: the workspace's queue, and for admin tokens the server's spend (spend is kept
 *   for the whole database, so a read or write token does not see it, as on the dashboard);
 * - `verdict_record {ref, key, set?, verdict, value?, note}`: write role and above; `agree`,
 *   `disagree` or a `value`, with a note (required: an agent says why), or `withdraw` of the
 *   verdict in force on the key when this client and token gave it (a person's verdict is the
 *   person's to end); the author is the MCP client's name and the token (`claude-code (MCP; token:<id>)`).
 * An unknown key (`flags_list`'s filter, `verdict_record`) is refused with the keys that are asked.
 * Resource: `verdict://items/{ref}` (the ref URL-encoded) reads as `item_get`.
 *
 * Access: every call and read first asks `principal()` for the token's row: null (revoked, or its
 * workspace deleted) refuses the call. The token's workspace is the only one any tool reads: no
 * tool takes a workspace. A soft-deleted item reads as not found: its owner deleted its text, and
 * an agent is a model's context window.
 *
 * Logs: one line per call with the tool, the token id, the outcome and the milliseconds; never
 * arguments, item text or answers.
 */

/** The tools, in the order they are listed. */
export const MCP_TOOL_NAMES = [
  'item_get',
  'flags_list',
  'item_search',
  'status_get',
  'verdict_record',
  'proposals_list',
  'proposal_decide',
] as const;

/** Most rows a `flags_list` or `item_search` page returns (an agent's context is the budget). */
const MCP_PAGE_MAX = 100;

/** Most field filters an `item_search` takes. */
const MCP_FIELD_FILTERS_MAX = 20;

/** Longest client name kept in a verdict's author, code points (the client chooses it). */
const CLIENT_NAME_MAX = 100;

/** What `createMcpServer` takes. */
export interface McpServerOptions {
  /**
   * The caller's token row, asked before every tool call and resource read; null when the token is
   * no longer valid (revoked, or its workspace deleted): the call is refused. `verdict mcp`
   * authenticates its token each time; the HTTP route hands over the row its auth hook just read.
   */
  principal: () => Promise<ApiTokenRow | null>;
  /** @defaultValue silent */
  logger?: Logger;
}

/** A tool's refusal: its message goes to the agent as the tool's error result. */
class ToolRefusal extends Error {}

/**
 * How a failed call reads: `known` for a refusal or Verdict's own input error (its message goes to
 * the agent: it names refs and keys, never provider text), else the store's (a fixed message; the
 * log has the code). `code` is for the log.
 */
function failureOf(err: unknown): { known: boolean; code: string; message: string } {
  if (err instanceof ToolRefusal) return { known: true, code: 'refused', message: err.message };
  if (err instanceof VerdictError && ['not_found', 'invalid_input', 'invalid_write', 'conflict'].includes(err.code))
    return { known: true, code: err.code, message: err.message };
  const code = err instanceof VerdictError ? err.code : errCode(err);
  return { known: false, code, message: 'the store failed; try again' };
}

/** The line closing every summary: where the data is. */
export const FULL_RESULT = 'the full result is the structured content';

const TOKEN_GONE = 'the token is not valid any more (revoked, or its workspace was deleted)';

/** The MCP specification's JSON-RPC error code for a resource that does not exist (server/resources, "Error Handling"). */
const RESOURCE_NOT_FOUND = -32002;

/** Longest ref, code points: the HTTP API's limit (server/schemas.ts `pathParams`). */
const REF_MAX = 500;

const ref = z.string().min(1).max(REF_MAX).describe('The item\u2019s ref, as the tracker shows it (`bd-7h7`, `#12`)');
const limit = z.number().int().min(1).max(MCP_PAGE_MAX).default(20).describe(`Rows per page, 1 to ${MCP_PAGE_MAX}`);

const itemGetInput = z.strictObject({ ref });
const itemGetOutput = z.object({
  item: itemView,
  decisions: z
    .array(decisionView)
    .describe('Every stored decision; `current` false comes with `staleReason` (and `changedParts`)'),
  sets: z
    .array(itemSetStatus)
    .describe('Every set registered for the item\u2019s collection: applies or why not, and its owed job'),
  verdicts: z
    .array(verdictRowView)
    .describe('People\u2019s (and agents\u2019) verdicts, oldest first: the latest of a key is in force'),
});

const flagsListInput = z.strictObject({
  set: z.string().min(1).max(200).optional().describe('One question set; every set when left out (one page each)'),
  collection: z.string().min(1).max(200).optional().describe('Only items of this collection (slug)'),
  key: z.string().min(1).max(600).optional().describe('Only this question key'),
  currency: z
    .enum(['current', 'stale', 'all'])
    .default('all')
    .describe('`current`: asked about the item as it is now; `stale`: still surfacing while a re-ask is owed'),
  limit,
  offset: z.number().int().min(0).default(0).describe('Rows skipped, per set'),
});
const flagsListOutput = z.object({
  sets: z.array(
    z.object({
      set: z.string(),
      total: z.number().describe('Rows matching the filters, over every page'),
      offset: z.number(),
      nextOffset: z.number().nullable().describe('The next page\u2019s offset, or null on the last page'),
      failing: z.boolean().describe('A job of the set is parked or failing: its flags may be missing items'),
      rows: z.array(flagRowView),
    }),
  ),
});

const fieldScalar = z.union([z.string().max(1_000), z.number(), z.boolean(), z.null()]);
/**
 * A field filter object. A `"__proto__"` member (JSON can carry one) is refused before zod's record
 * parse, which drops it silently: dropped, the filter would widen the search without saying so.
 */
const fieldFilters = z.preprocess(
  (raw, ctx) => {
    if (raw !== null && typeof raw === 'object' && Object.prototype.hasOwnProperty.call(raw, '__proto__')) {
      ctx.addIssue({ code: 'custom', message: '"__proto__" is not a field name Verdict stores' });
      return z.NEVER;
    }
    return raw;
  },
  z
    .record(z.string().min(1).max(200), fieldScalar)
    .refine((f) => Object.keys(f).length <= MCP_FIELD_FILTERS_MAX, {
      message: `at most ${MCP_FIELD_FILTERS_MAX} fields`,
    })
    .describe(
      'Top-level fields equal to these JSON scalars (`{"status":"open","priority":1}`); an array field never equals a scalar',
    ),
);
const itemSearchInput = z.strictObject({
  refPrefix: z.string().min(1).max(500).optional().describe('Refs starting with this (case matters)'),
  collection: z.string().min(1).max(200).optional().describe('Only items of this collection (slug)'),
  fields: fieldFilters.optional(),
  limit,
  after: z.string().min(1).max(200).optional().describe('The previous page\u2019s `next`'),
});
const itemSearchOutput = z.object({
  items: z.array(
    z.object({
      id: z.string(),
      ref: z.string(),
      title: z.string(),
      collection: z.string(),
      fields: z.record(z.string(), z.unknown()),
      updatedAt: z.number(),
    }),
  ),
  next: z.string().nullable().describe('Pass as `after` for the next page; null on the last page'),
});

const statusGetInput = z.strictObject({});
const statusGetOutput = statusView.extend({
  queue: z.object({
    oldestOwedAgeMs: z.number().nullable().describe('Age of the oldest owed job, ms'),
    parked: z
      .object({ count: z.number(), reasons: z.array(z.object({ reason: z.string(), count: z.number() })) })
      .describe('Jobs parked after their refusal limit: a person must look'),
    failingSets: z.array(z.object({ set: z.string(), jobs: z.number(), lastErrorAt: z.number().nullable() })),
    workersAlive: z.number().describe('Workers whose heartbeat is fresh'),
  }),
  spend: z
    .object({
      last24h: z.object({
        calls: z.number(),
        inputTokens: z.number(),
        outputTokens: z.number(),
        costUsd: z.number(),
        unpriced: z.array(z.string()),
      }),
      dailyCap: z.object({ capTokens: z.number().nullable(), usedTokens: z.number(), resetsInMs: z.number() }),
    })
    .nullable()
    .describe('The whole server\u2019s provider spend: admin tokens only (null otherwise)'),
});

const verdictRecordInput = z.strictObject({
  ref,
  key: z.string().min(1).max(600).describe('The question key (`<key>@<commentId>` for a per-comment set)'),
  set: z.string().min(1).max(200).optional().describe('Needed only when several sets of the item ask the key'),
  verdict: z
    .enum(['agree', 'disagree', 'value', 'withdraw'])
    .describe(
      '`agree`/`disagree` with the model\u2019s current answer, `value` to override it, or `withdraw` the verdict this client and token gave on the key (the model\u2019s answer is in force again)',
    ),
  value: z
    .union([z.boolean(), z.number(), z.string().max(200)])
    .optional()
    .describe('With `value` only: true/false or a probability (noul), an option (choice), a level (score)'),
  note: z
    .string()
    .min(1)
    .max(8_000)
    .describe('Why, in a sentence or two (at most 2,000 code points): people read it beside the verdict'),
});
const verdictRecordOutput = z.object({
  verdict: verdictRowView,
  inForce: z.boolean().describe('The value now overrides the model for reads and flags'),
});

/**
 * Builds the MCP server for one caller (not connected: `connect(transport)`). One server serves
 * one client: the stdio process, or one HTTP session.
 */
export function createMcpServer(v: Verdict, o: McpServerOptions): McpServer {
  const logger = o.logger ?? silentLogger;
  const server = new McpServer(
    { name: 'verdict', version: VERSION },
    {
      instructions:
        'Verdict keeps typed, LLM-evaluated decisions about this workspace\u2019s tracker items. flags_list answers "what needs a human here"; item_get says whether each judgement is current (or why it is stale) and what people said; verdict_record adds your agreement, disagreement or value, with a note.',
    },
  );

  /**
   * Runs a tool body as the caller, once its token is live and of `role`: logs the outcome with the
   * token id (refusals too), turns refusals and Verdict's input errors into tool errors, hides
   * anything else. The result's times become ISO 8601 where `output` (the tool's schema in epoch
   * milliseconds) declares them, so a tracker's own data (an item's `fields`) is left as it is.
   */
  const run = async <T extends Record<string, unknown>>(
    tool: string,
    role: ApiTokenRole,
    output: z.ZodType,
    body: (token: ApiTokenRow) => Promise<T>,
    summary: (out: NoInfer<T>) => string,
  ): Promise<CallToolResult> => {
    const t0 = performance.now();
    let token: string | null = null;
    try {
      const t = await o.principal();
      if (!t) throw new ToolRefusal(TOKEN_GONE);
      token = t.id;
      if (!roleAllows(t.role, role))
        throw new ToolRefusal(`this needs a token of role ${role} or above; this one is ${t.role}`);
      const out = await body(t);
      logger.info({ tool, token, outcome: 'ok', ms: Math.round(performance.now() - t0) }, 'mcp tool call');
      return {
        structuredContent: isoTimesBySchema(output, out),
        content: [{ type: 'text', text: `${summary(out)}\n(${FULL_RESULT})` }],
      };
    } catch (err) {
      const f = failureOf(err);
      (f.known ? logger.info : logger.error).call(
        logger,
        { tool, token, outcome: 'error', err: f.code, ms: Math.round(performance.now() - t0) },
        'mcp tool call',
      );
      return { isError: true, content: [{ type: 'text', text: f.message }] };
    }
  };

  /** `item_get`'s result, or a refusal for an unknown or deleted item. */
  const itemRead = async (token: ApiTokenRow, itemRef: string): Promise<z.infer<typeof itemGetOutput>> => {
    const out = await v.reader.item(itemRef, { workspace: token.workspaceSlug });
    if (!out || out.item.deletedAt !== null)
      throw new ToolRefusal(`no live item of ref ${JSON.stringify(itemRef)} in this workspace`);
    return {
      item: itemJson(out.item, out.collection),
      decisions: out.decisions.map(decisionJson),
      sets: out.sets,
      verdicts: out.verdicts.map(verdictRowJson),
    };
  };

  /** Refuses a `flags_list` key filter no set of `names` asks in the workspace, naming the keys they ask. */
  const knownKey = async (token: ApiTokenRow, names: string[], key: string): Promise<void> => {
    const asked = new Set<string>();
    for (const name of names)
      for (const k of (await v.reader.keys(name, { workspace: token.workspaceSlug })) ?? []) asked.add(k);
    const base = key.includes('@') ? key.slice(0, key.indexOf('@')) : key;
    if (!asked.has(base))
      throw new ToolRefusal(
        `no question set${names.length === 1 ? ` ${JSON.stringify(names[0])}` : ''} asks key ${JSON.stringify(key)}; the keys asked: ${[...asked].sort().join(', ') || 'none'}`,
      );
  };

  server.registerTool(
    'item_get',
    {
      title: 'One item\u2019s decisions',
      description:
        'An item by ref with every stored decision (current, or why it is stale), where each question set stands (applies or why not, its owed job), and people\u2019s verdicts.',
      inputSchema: itemGetInput,
      outputSchema: isoTimesSchema(itemGetOutput),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) => run('item_get', 'read', itemGetOutput, (token: ApiTokenRow) => itemRead(token, args.ref), itemGetSummary),
  );

  server.registerTool(
    'flags_list',
    {
      title: 'What needs a human',
      description:
        'Surfaced decisions (a noul at or above its threshold) per question set, highest probability first, with whether each is current; paged per set.',
      inputSchema: flagsListInput,
      outputSchema: isoTimesSchema(flagsListOutput),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      run(
        'flags_list',
        'read',
        flagsListOutput,
        async (token: ApiTokenRow) => {
          const names = args.set !== undefined ? [args.set] : v.registry.all().map((s) => s.name);
          const sets: z.infer<typeof flagsListOutput>['sets'] = [];
          if (args.key !== undefined) await knownKey(token, names, args.key);
          for (const set of names) {
            const page = await v.reader.surfaced(set, {
              workspace: token.workspaceSlug,
              collection: args.collection,
              key: args.key,
              currency: args.currency,
              limit: args.limit,
              offset: args.offset,
            });
            if (!page)
              throw new ToolRefusal(
                `no question set ${JSON.stringify(set)} here; sets: ${v.registry
                  .all()
                  .map((s) => s.name)
                  .join(', ')}`,
              );
            const nextOffset = args.offset + page.rows.length < page.total ? args.offset + page.rows.length : null;
            sets.push({
              set,
              total: page.total,
              offset: args.offset,
              nextOffset,
              failing: page.failing,
              rows: page.rows.map(({ itemId: _itemId, key: _key, ...row }) => row),
            });
          }
          return { sets };
        },
        flagsListSummary,
      ),
  );

  server.registerTool(
    'item_search',
    {
      title: 'Find items',
      description:
        'Live items of this workspace by ref prefix, collection and field equality, in id order, a page at a time (no item text beyond the title).',
      inputSchema: itemSearchInput,
      outputSchema: isoTimesSchema(itemSearchOutput),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      run(
        'item_search',
        'read',
        itemSearchOutput,
        async (token: ApiTokenRow) => {
          const collections = await v.store.listCollections(token.workspaceId);
          let collectionId: string | undefined;
          if (args.collection !== undefined) {
            const c = collections.find((x) => x.slug === args.collection && x.deletedAt === null);
            if (!c)
              throw new ToolRefusal(
                `no collection ${JSON.stringify(args.collection)} here; collections: ${collections
                  .filter((x) => x.deletedAt === null)
                  .map((x) => x.slug)
                  .join(', ')}`,
              );
            collectionId = c.id;
          }
          const slugs = new Map(collections.map((c) => [c.id, c.slug]));
          if (args.after !== undefined && (await v.store.getItem(args.after))?.workspaceId !== token.workspaceId) {
            throw new ToolRefusal(
              `after ${JSON.stringify(args.after)} is not a cursor of this search: pass the previous page\u2019s \`next\`, or leave it out for the first page`,
            );
          }
          // One row more than the page tells whether another page follows, so `next` is null on the last one.
          const found = await v.store.listItems({
            workspaceId: token.workspaceId,
            collectionId,
            refPrefix: args.refPrefix,
            fieldsEqual: args.fields as Record<string, FieldScalar> | undefined,
            afterId: args.after,
            limit: args.limit + 1,
          });
          const rows = found.slice(0, args.limit);
          const items = rows.map((i) => {
            const { id, ref: r, title, fields, updatedAt } = itemJson(i, '');
            return { id, ref: r, title, collection: slugs.get(i.collectionId) ?? '', fields, updatedAt };
          });
          return { items, next: found.length > args.limit ? rows[rows.length - 1].id : null };
        },
        itemSearchSummary,
      ),
  );

  server.registerTool(
    'status_get',
    {
      title: 'Queue and spend',
      description:
        'The workspace\u2019s items and owed jobs by set (due, waiting, in flight, parked, failing), parked reasons, failing sets and live workers; for an admin token also the server\u2019s provider spend over 24 hours and the daily token cap.',
      inputSchema: statusGetInput,
      outputSchema: isoTimesSchema(statusGetOutput),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    () =>
      run(
        'status_get',
        'read',
        statusGetOutput,
        async (token: ApiTokenRow) => {
          // The queue read holds the job counts by set already: no second read of them for `jobs`.
          const queue = await v.reader.queue({ workspace: token.workspaceSlug, parkedShown: 0 });
          if (!queue) throw new ToolRefusal('the token\u2019s workspace is gone');
          const jobs = queue.bySet.map(
            ({ questionSet, due, waiting, inFlight, parked, failing, oldestOwedAt, lastErrorAt }) => ({
              questionSet,
              due,
              waiting,
              inFlight,
              parked,
              failing,
              oldestOwedAt,
              lastErrorAt,
            }),
          );
          let spend: z.infer<typeof statusGetOutput>['spend'] = null;
          if (roleAllows(token.role, 'admin')) {
            const s = await v.reader.spend({ windowMs: 24 * 3_600_000 });
            const t = s.totals;
            spend = {
              last24h: {
                calls: t.calls,
                inputTokens: t.inputTokens,
                outputTokens: t.outputTokens,
                costUsd: t.costUsd,
                unpriced: t.unpriced,
              },
              dailyCap: {
                capTokens: s.dailyCap.capTokens,
                usedTokens: s.dailyCap.usedTokens,
                resetsInMs: s.dailyCap.resetsInMs,
              },
            };
          }
          return {
            workspace: token.workspaceSlug,
            items: await v.store.countItems(token.workspaceId),
            jobs,
            queue: {
              oldestOwedAgeMs: queue.oldestOwedAgeMs,
              parked: { count: queue.parked.count, reasons: queue.parked.reasons },
              failingSets: queue.failingSets.map((f) => ({ set: f.set, jobs: f.jobs, lastErrorAt: f.lastErrorAt })),
              workersAlive: queue.workers.filter((w) => w.alive).length,
            },
            spend,
          };
        },
        statusGetSummary,
      ),
  );

  server.registerTool(
    'verdict_record',
    {
      title: 'Record a verdict',
      description:
        'Agree or disagree with the model\u2019s current answer on one key of an item, or give a value that overrides it, with a note saying why. Needs a write token. The author is recorded as this MCP client and the token.',
      inputSchema: verdictRecordInput,
      outputSchema: isoTimesSchema(verdictRecordOutput),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    (args) =>
      run(
        'verdict_record',
        'write',
        verdictRecordOutput,
        async (token) => {
          const author = `${clientName(server.server.getClientVersion()?.name)} (MCP; ${tokenAuthor(token)})`;
          const verdict = args.verdict === 'withdraw' ? 'withdrawn' : args.verdict;
          // An agent withdraws only its own verdict (DESIGN §8.1).
          const out = await v.store.recordVerdict({
            workspace: token.workspaceSlug,
            ref: args.ref,
            key: args.key,
            set: args.set,
            verdict,
            value: args.value,
            note: args.note,
            author,
            withdraws: 'own',
          });
          return { verdict: verdictRowJson(out.row), inForce: out.inForce };
        },
        (out) => verdictRecordSummary(out, args.ref),
      ),
  );

  server.registerResource(
    'item',
    new ResourceTemplate('verdict://items/{ref}', {
      list: undefined,
      complete: {
        // Live refs that start with what the client typed (URL-encoded, as the URI holds them), so a
        // host can offer them; nothing on a bad token, a bad encoding or a failed read.
        ref: async (typed) => {
          try {
            const t = await o.principal();
            if (!t) return [];
            const rows = await v.store.listItems({
              workspaceId: t.workspaceId,
              refPrefix: decodeURIComponent(typed) || undefined,
              limit: 20,
            });
            return rows.map((i) => encodeURIComponent(i.ref));
          } catch (err) {
            logger.info(
              { resource: 'item', outcome: 'error', err: err instanceof VerdictError ? err.code : (err as Error).name },
              'mcp completion',
            );
            return [];
          }
        },
      },
    }),
    {
      title: 'An item\u2019s decisions',
      description: 'The same read as item_get, as JSON. The ref is URL-encoded (`%2312` for `#12`).',
      mimeType: 'application/json',
    },
    async (uri, vars): Promise<ReadResourceResult> => {
      const t0 = performance.now();
      let token: ApiTokenRow | null = null;
      try {
        token = await o.principal();
        if (!token) throw new ToolRefusal(TOKEN_GONE);
        let itemRef: string;
        try {
          itemRef = decodeURIComponent(String(vars.ref));
        } catch {
          throw new ToolRefusal('the ref in the URI is not valid percent-encoding');
        }
        if ([...itemRef].length > REF_MAX) throw new ToolRefusal(`a ref is at most ${REF_MAX} characters`);
        const out = await itemRead(token, itemRef);
        logger.info(
          { resource: 'item', token: token.id, outcome: 'ok', ms: Math.round(performance.now() - t0) },
          'mcp resource read',
        );
        return {
          contents: [
            { uri: uri.href, mimeType: 'application/json', text: JSON.stringify(isoTimesBySchema(itemGetOutput, out)) },
          ],
        };
      } catch (err) {
        const f = failureOf(err);
        (f.known ? logger.info : logger.error).call(
          logger,
          {
            resource: 'item',
            token: token?.id ?? null,
            outcome: 'error',
            err: f.code,
            ms: Math.round(performance.now() - t0),
          },
          'mcp resource read',
        );
        // MCP's code for a resource that is not there (-32002); anything else is the store's.
        throw new McpError(f.known ? RESOURCE_NOT_FOUND : ErrorCode.InternalError, f.message);
      }
    },
  );
  registerProposalTools(server, v, run); // DESIGN §17
  return server;
}

/**
 * The client's name as a verdict's author shows it: its `clientInfo.name` from the handshake with
 * runs of white space as one space, without control, format and separator characters (Unicode Cc, Cf, Zl, Zp: bidi controls,
 * zero-width characters, tags) and without parentheses, so a name cannot draw a token attribution
 * of its own (`alice (MCP; token:…)`); at most 100 code points; `mcp-client` when nothing is left.
 */
export function clientName(name: string | undefined): string {
  const clean = [
    ...(name ?? '')
      .replace(/\s+/gu, ' ')
      .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}()]/gu, '')
      .trim(),
  ]
    .slice(0, CLIENT_NAME_MAX)
    .join('')
    .trim();
  return clean === '' ? 'mcp-client' : clean;
}
