import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { tokenAuthor } from '../access/tokens.js';
import type { KeyActionStatus, Proposal } from '../actions/actions.js';
import type { Verdict } from '../compose/verdict.js';
import { VerdictError } from '../errors.js';
import type { ApiTokenRole, ApiTokenRow } from '../store/access-store.js';
import { itemHref } from './flags-page.js';
import { html, type Html } from './html.js';
import { csrfField, pct, type NavId, type Viewer } from './layout.js';

/**
 * The proposals page (DESIGN §17), `/ui/proposals`: each acting key's gate and counts (applied,
 * proposed, pending, failed), then the label changes the model asks for that wait for a person,
 * each with Apply (an `agree` verdict; the label is written at the next delivery) and Dismiss (a
 * `disagree`). A write token decides; a read token sees.
 */

/** What the page takes of dashboard-routes.ts (its shell, session and CSRF helpers). */
export interface DashboardHelpers {
  send: (reply: FastifyReply, status: number, title: string, nav: NavId, viewer: Viewer | null, body: Html) => unknown;
  viewerOf: (req: FastifyRequest, reply: FastifyReply) => Viewer | null;
  needLogin: (reply: FastifyReply) => unknown;
  poster: (req: FastifyRequest, reply: FastifyReply, role: ApiTokenRole) => ApiTokenRow | null;
  csrf: { preHandler: preHandlerHookHandler };
}

/** Fixed texts after a decision, by code (no request text is echoed). */
const NOTICES: Record<string, { text: string; error?: boolean }> = {
  applied: { text: 'Applied: an agree verdict is recorded, and the label is written at the next delivery.' },
  dismissed: {
    text: 'Dismissed: a disagree verdict is recorded; the model is not proposed again until it answers anew.',
  },
  refused: {
    text: 'That decision was refused: the proposal is gone (decided already, or the item changed).',
    error: true,
  },
};

const REASONS: Record<Proposal['reason'], string> = {
  gate: 'under the gate',
  mode: 'actions on propose',
  person: 'a person holds this key',
};

/** The page's body. */
function proposalsBody(viewer: Viewer, keys: KeyActionStatus[], proposals: Proposal[], noticeCode: unknown): Html {
  const n = typeof noticeCode === 'string' && Object.hasOwn(NOTICES, noticeCode) ? NOTICES[noticeCode] : undefined;
  const canDecide = viewer.token.role !== 'read';
  return html`<h1>Proposals</h1>
${n ? html`<p class="notice${n.error ? ' error' : ''}" role="status">${n.text}</p>` : ''}
<h2>Keys that act in GitHub</h2>
${
  keys.length === 0
    ? html`<p class="muted">No key acts: add an <code>actions</code> section to the config file.</p>`
    : html`<table><thead><tr><th>Key</th><th>Mode</th><th>Gate</th><th>Precision</th><th>Labels</th><th>Applied</th><th>Proposed</th><th>Pending</th><th>Failed</th></tr></thead><tbody>
${keys.map(
  (k) =>
    html`<tr><td>${k.set}/${k.key}</td><td>${k.mode}</td><td>${k.gate.passes ? 'passes' : html`not met: ${k.gate.lacks ?? ''}`}</td><td>${pct(k.gate.precision)} (≥ ${pct(k.gate.minPrecision)})</td><td>${k.gate.labels} / ${k.gate.minLabels} (${k.gate.source})</td><td>${k.applied}</td><td>${k.proposed}</td><td>${k.pending}</td><td>${k.failed}</td></tr>`,
)}</tbody></table>`
}
<h2>Waiting for a person</h2>
${
  proposals.length === 0
    ? html`<p class="muted">No proposal is open.</p>`
    : html`<table><thead><tr><th>Item</th><th>Key</th><th>Model</th><th>Labels asked for</th><th>On the issue</th><th>Why held</th><th></th></tr></thead><tbody>
${proposals.map(
  (p) =>
    html`<tr><td><a href="${itemHref(p.ref)}">${p.ref}</a> ${p.title}</td><td>${p.set}/${p.key}</td><td>${p.decision}</td><td>${p.labels.length ? p.labels.join(', ') : 'none'}</td><td>${p.current === null ? 'unknown' : p.current.length ? p.current.join(', ') : 'none'}</td><td>${REASONS[p.reason]}</td><td>${
      canDecide
        ? html`<form method="post" action="/ui/proposals/decide" class="inline" aria-label="${`Proposal for ${p.ref} ${p.set}/${p.key}`}">${csrfField(viewer)}<input type="hidden" name="ref" value="${p.ref}"><input type="hidden" name="set" value="${p.set}"><input type="hidden" name="key" value="${p.key}"><button type="submit" name="decision" value="apply">Apply</button> <button type="submit" name="decision" value="dismiss" class="secondary">Dismiss</button></form>`
        : ''
    }</td></tr>`,
)}</tbody></table>`
}`;
}

/** Registers `/ui/proposals` and its form. */
export function registerProposalsPage(scope: FastifyInstance, v: Verdict, h: DashboardHelpers): void {
  scope.get('/proposals', async (req, reply) => {
    const viewer = h.viewerOf(req, reply);
    if (!viewer) return h.needLogin(reply);
    const workspace = viewer.token.workspaceSlug;
    const keys = (await v.actions.status({ workspace })) ?? [];
    const proposals = (await v.actions.proposals({ workspace, limit: 500 })) ?? [];
    return h.send(
      reply,
      200,
      'Proposals',
      'proposals',
      viewer,
      proposalsBody(viewer, keys, proposals, (req.query as Record<string, unknown>).notice),
    );
  });
  scope.post('/proposals/decide', h.csrf, async (req, reply) => {
    const t = h.poster(req, reply, 'write');
    if (!t) return reply;
    const body = (req.body ?? {}) as Record<string, unknown>;
    const str = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
    const decision = str('decision');
    if (decision !== 'apply' && decision !== 'dismiss')
      return reply.code(303).header('location', '/ui/proposals?notice=refused').send();
    try {
      await v.actions.decide({
        workspace: t.workspaceSlug,
        ref: str('ref'),
        set: str('set'),
        key: str('key'),
        decision,
        author: tokenAuthor(t),
      });
    } catch (err) {
      if (err instanceof VerdictError && (err.code === 'invalid_input' || err.code === 'not_found'))
        return reply.code(303).header('location', '/ui/proposals?notice=refused').send();
      throw err;
    }
    return reply
      .code(303)
      .header('location', `/ui/proposals?notice=${decision === 'apply' ? 'applied' : 'dismissed'}`)
      .send();
  });
}
