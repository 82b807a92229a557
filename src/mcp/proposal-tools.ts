import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { tokenAuthor } from '../access/tokens.js';
import { verdictRowJson, verdictRowView } from '../compose/read-schemas.js';
import type { Verdict } from '../compose/verdict.js';
import { isoTimesSchema } from '../compose/iso-times.js';
import type { ApiTokenRole, ApiTokenRow } from '../store/access-store.js';

/**
 * The MCP tools of actions in GitHub (DESIGN §17): `proposals_list` (the label changes waiting for
 * a person) and `proposal_decide` (apply = an `agree` verdict, dismiss = a `disagree`). Registered
 * by mcp-server.ts with its `run` (the token check, the log line and the error mapping).
 */

/** mcp-server.ts's tool runner. */
export type ToolRunner = <T extends Record<string, unknown>>(
  tool: string,
  role: ApiTokenRole,
  output: z.ZodType,
  body: (token: ApiTokenRow) => Promise<T>,
  summary: (out: NoInfer<T>) => string,
) => Promise<CallToolResult>;

const proposal = z.object({
  ref: z.string(),
  title: z.string(),
  set: z.string(),
  key: z.string(),
  labels: z.array(z.string()).describe('The labels the model asks for on the issue (the key\u2019s other labels go)'),
  current: z.array(z.string()).nullable().describe('The key\u2019s labels last seen on the issue; null when unknown'),
  reason: z
    .enum(['gate', 'mode', 'person'])
    .describe('gate: not calibrated yet; mode: actions on propose; person: a person holds the key'),
  decision: z.string(),
});

const proposalsListOutput = z.object({ proposals: z.array(proposal) });
const proposalDecideOutput = z.object({ verdict: verdictRowView, queued: z.number().int() });

export function registerProposalTools(server: McpServer, v: Verdict, run: ToolRunner): void {
  server.registerTool(
    'proposals_list',
    {
      title: 'Label changes waiting for a person',
      description:
        'GitHub label changes the model asks for that Verdict will not make on its own (the key is under its calibration gate, actions are on propose, or a person holds the key).',
      inputSchema: z.strictObject({ limit: z.number().int().min(1).max(500).default(100) }),
      outputSchema: proposalsListOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      run(
        'proposals_list',
        'read',
        proposalsListOutput,
        async (token) => ({
          proposals: (await v.actions.proposals({ workspace: token.workspaceSlug, limit: args.limit })) ?? [],
        }),
        (o) =>
          `${o.proposals.length} proposal${o.proposals.length === 1 ? '' : 's'}${o.proposals.length > 0 ? ': ' : ''}${o.proposals
            .slice(0, 5)
            .map((p) => `${p.ref} ${p.set}/${p.key} \u2192 [${p.labels.join(', ')}] (${p.reason})`)
            .join('; ')}${o.proposals.length > 5 ? `; and ${o.proposals.length - 5} more` : ''}`,
      ),
  );
  server.registerTool(
    'proposal_decide',
    {
      title: 'Apply or dismiss a proposal',
      description:
        'Apply (an agree verdict: the label is written at the next delivery) or dismiss (a disagree verdict) one proposal. Needs a write token.',
      inputSchema: z.strictObject({
        ref: z.string().min(1).max(500),
        set: z.string().min(1).max(200),
        key: z.string().min(1).max(200),
        decision: z.enum(['apply', 'dismiss']),
        note: z.string().max(2_000).optional().describe('Why, in your words'),
      }),
      outputSchema: isoTimesSchema(proposalDecideOutput),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    (args) =>
      run(
        'proposal_decide',
        'write',
        proposalDecideOutput,
        async (token) => {
          const out = await v.actions.decide({
            workspace: token.workspaceSlug,
            ...args,
            author: `MCP (${tokenAuthor(token)})`,
          });
          return { verdict: verdictRowJson(out.verdict.row), queued: out.queued };
        },
        (o) =>
          `${args.decision === 'apply' ? 'applied' : 'dismissed'}: verdict ${o.verdict.id} (${o.verdict.verdict}) on ${args.ref} ${args.set}/${args.key}; ${o.queued} label change${o.queued === 1 ? '' : 's'} queued`,
      ),
  );
}
