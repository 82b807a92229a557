import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { tokenAuthor } from '../access/tokens.js';
import { verdictRowJson } from '../compose/read-schemas.js';
import type { Verdict } from '../compose/verdict.js';
import { NotFound } from '../store/store.js';
import * as S from './schemas.js';

/**
 * Actions in GitHub over HTTP (DESIGN §17): the open proposals of the token's workspace, a person
 * applying (`agree`) or dismissing (`disagree`) one, and each acting key's counts and gate.
 * Registered by v1-routes.ts under both of its prefixes; each route calls one `verdict.actions` method.
 */

const labels = z.array(z.string());

const gateView = z.object({
  set: z.string(),
  key: z.string(),
  source: z.enum(['verdicts', 'gold', 'none']),
  labels: z.number().int(),
  precision: z.number().nullable(),
  minPrecision: z.number(),
  minLabels: z.number().int(),
  passes: z.boolean(),
  lacks: z.string().nullable(),
});

const proposalView = z.object({
  ref: z.string(),
  title: z.string(),
  set: z.string(),
  key: z.string(),
  labels: labels.describe('The labels the model asks for; the key\u2019s other labels are removed'),
  current: labels.nullable().describe('The key\u2019s labels last seen on the issue; null when unknown'),
  reason: z
    .enum(['gate', 'mode', 'person'])
    .describe(
      'gate: the key is not calibrated yet; mode: actions on propose; person: a person\u2019s verdict holds the key',
    ),
  decision: z.string().describe('The model\u2019s decision in short: `yes (p=0.91)`'),
});

const keyStatusView = z.object({
  set: z.string(),
  key: z.string(),
  mode: z.enum(['off', 'propose', 'apply']),
  gate: gateView,
  applied: z.number().int(),
  proposed: z.number().int(),
  pending: z.number().int(),
  failed: z.number().int(),
});

const decideBody = z
  .object({
    ref: z.string().min(1).max(500),
    set: z.string().min(1).max(200),
    key: z.string().min(1).max(200),
    note: z.string().max(8_000).optional(),
  })
  .strict();

export function registerProposalRoutes(scope: FastifyInstance, v: Verdict, withWorkspace: boolean): void {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const P = S.pathParams(withWorkspace);
  const err = { 400: S.errorBody, 401: S.errorBody, 403: S.errorBody, 404: S.errorBody, 429: S.errorBody };
  app.get(
    '/proposals',
    {
      config: { role: 'read' },
      schema: {
        tags: ['actions'],
        summary: 'Label changes waiting for a person',
        description:
          'DESIGN §17: the labels the model asks for that are not applied, and why: the key is not calibrated yet (`gate`), actions are on propose (`mode`), or a person\u2019s verdict holds the key (`person`).',
        params: P.workspace,
        response: { 200: z.object({ proposals: z.array(proposalView) }), ...err },
      },
    },
    async (req) => {
      const proposals = await v.actions.proposals({ workspace: req.apiToken!.workspaceSlug });
      if (!proposals) throw new NotFound('workspace', req.apiToken!.workspaceSlug);
      return { proposals };
    },
  );
  for (const decision of ['apply', 'dismiss'] as const) {
    app.post(
      `/proposals/${decision}`,
      {
        config: { role: 'write' },
        schema: {
          tags: ['actions'],
          summary: decision === 'apply' ? 'Apply a proposal' : 'Dismiss a proposal',
          description:
            decision === 'apply'
              ? 'Records an agree verdict by the token; the label is written at the next delivery.'
              : 'Records a disagree verdict by the token; the label is not written.',
          params: P.workspace,
          body: decideBody,
          response: { 200: z.object({ verdict: S.verdictRowView, queued: z.number().int() }), ...err },
        },
      },
      async (req) => {
        const out = await v.actions.decide({
          workspace: req.apiToken!.workspaceSlug,
          ...req.body,
          decision,
          author: tokenAuthor(req.apiToken!),
        });
        return { verdict: verdictRowJson(out.verdict.row), queued: out.queued };
      },
    );
  }
  app.get(
    '/actions',
    {
      config: { role: 'read' },
      schema: {
        tags: ['actions'],
        summary: 'Each acting key\u2019s mode and gate',
        description:
          'Per acting key: its mode (off, propose, apply), its calibration gate, and the labels applied, proposed, pending and failed.',
        params: P.workspace,
        response: { 200: z.object({ keys: z.array(keyStatusView) }), ...err },
      },
    },
    async (req) => {
      const keys = await v.actions.status({ workspace: req.apiToken!.workspaceSlug });
      if (!keys) throw new NotFound('workspace', req.apiToken!.workspaceSlug);
      return { keys };
    },
  );
}
