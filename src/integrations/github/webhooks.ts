import { verify } from '@octokit/webhooks-methods';
import type { OweOptions } from '../../store/queue-store.js';
import type { Store } from '../../store/whole-store.js';
import {
  applyGitHubComment,
  applyGitHubIssue,
  applyGitHubIssueLinks,
  assertGitHubTargetLive,
  deleteGitHubComment,
  deleteGitHubIssue,
  findGitHubTarget,
  githubIssueLinks,
  resolveGitHubTarget,
  type GitHubTarget,
} from './mapping.js';
import type { LabelRule } from './managed-labels.js';
import {
  GITHUB_ISSUE_COMMENT_ACTIONS,
  GITHUB_ISSUES_ACTIONS,
  githubIssueCommentEventSchema,
  githubIssuesEventSchema,
  isPullRequest,
  type GitHubIssueCommentEvent,
  type GitHubIssuesEvent,
} from './rest-shapes.js';

/**
 * GitHub webhooks as write doors (DESIGN §16.2): `issues` (opened, edited, closed, reopened,
 * deleted, transferred, labeled, unlabeled) and `issue_comment` (created, edited, deleted). The
 * mapping is the importer's (mapping.ts), so an issue reads the same whether it came by import or
 * by webhook. Writes owe at live priority with the quiet period, as a tracker's own edits do.
 *
 * Each delivery is applied in ONE transaction with its `X-GitHub-Delivery` id
 * (`webhook_deliveries`): a redelivery finds the id and writes nothing; a crash leaves neither.
 * An event for an issue never imported creates its item (and, for a repository never imported,
 * the workspace and collection, as `import github` would).
 *
 * Left alone: deliveries are applied in arrival order. GitHub does not promise order, so an
 * older `edited` redelivered after a newer one writes the older text until the next event or
 * import; the payload's `updated_at` is not kept to compare against.
 */

/** The `source` of GitHub rows in `webhook_deliveries`. */
const GITHUB_DELIVERY_SOURCE = 'github';

/** Live writes (DESIGN §3): priority 0 with each set's quiet period. */
const LIVE: Readonly<OweOptions> = Object.freeze({});

/**
 * True when `signatureHeader` (`X-Hub-Signature-256`, `sha256=<hex>`) is the HMAC-SHA256 of
 * exactly `rawBody` under `secret`, compared in constant time (@octokit/webhooks-methods'
 * `verify`: `crypto.timingSafeEqual`). Anything missing or malformed is false, never a throw.
 * Bytes that are not UTF-8 fail (the body is verified as the UTF-8 text GitHub sends).
 */
export async function verifyGitHubSignature(
  secret: string,
  rawBody: Buffer | string,
  signatureHeader: string | undefined,
): Promise<boolean> {
  if (!secret || !signatureHeader || rawBody.length === 0) return false;
  const text = typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8');
  if (typeof rawBody !== 'string' && !Buffer.from(text, 'utf8').equals(rawBody)) return false;
  try {
    return await verify(secret, text, signatureHeader);
  } catch {
    return false;
  }
}

/** One delivery, already verified. */
export interface GitHubDelivery {
  /** `X-GitHub-Event`. */
  event: string;
  /** `X-GitHub-Delivery`. */
  deliveryId: string;
  /** The parsed JSON body. */
  payload: unknown;
  /** Workspace for a repository never imported. @defaultValue 'github' (the importer's default) */
  workspace?: string;
}

/**
 * What a delivery did: `applied` (written; `owed` job rows), `duplicate` (a redelivery: nothing
 * written), `ignored` (an event, action or pull request Verdict does not map, or a deletion of
 * something never imported: nothing written, `reason` says which), `invalid` (the payload does not
 * have the documented shape; `issues` names the members).
 */
export type GitHubDeliveryResult =
  | { status: 'applied'; event: string; action: string; ref: string; owed: number }
  | { status: 'duplicate'; owed: 0 }
  | { status: 'ignored'; reason: 'event' | 'action' | 'pull_request' | 'not_imported'; owed: 0 }
  | { status: 'invalid'; issues: string[]; owed: 0 };

/**
 * What a caller adds to a delivery (DESIGN §17): the Verdict-managed labels left out of the item's
 * fields, and a step run in the delivery's transaction once the issue's item is written (the
 * actions read people's label changes there, so a redelivery records nothing twice).
 */
export interface ApplyWebhookOptions {
  /** @defaultValue the `verdict:` prefix */
  labelRule?: LabelRule;
  /** Runs after the item of an `issues` (not deleted or transferred) or `issue_comment` (not deleted) event is written, on the transaction's store. */
  afterIssue?: (
    tx: Store,
    target: GitHubTarget,
    e: GitHubIssuesEvent | GitHubIssueCommentEvent,
    itemId: string,
  ) => Promise<void>;
}

/**
 * Applies one verified delivery (see the file comment).
 * @throws InvalidWrite when the repository's workspace or collection is soft-deleted (restore it,
 * then redeliver); InvalidInput when a repository never imported would land in a workspace that
 * already holds another (resolveGitHubTarget); store errors. Nothing is written then, the
 * delivery id included, so GitHub's redelivery can apply it later.
 */
export async function applyGitHubWebhook(
  store: Pick<Store, 'transaction'>,
  d: GitHubDelivery,
  o: ApplyWebhookOptions = {},
): Promise<GitHubDeliveryResult> {
  if (d.event === 'issues') {
    const a = accept(d, GITHUB_ISSUES_ACTIONS, githubIssuesEventSchema);
    if ('status' in a) return a;
    const e = a;
    const leaves = e.action === 'deleted' || e.action === 'transferred';
    return once(store, d, e.repository.full_name, !leaves, async (tx, target) => {
      const ref = `#${e.issue.number}`;
      if (leaves) {
        const w = await deleteGitHubIssue(tx, target, e.issue.number, LIVE);
        if (!w) return NOT_IMPORTED;
        return { status: 'applied', event: d.event, action: e.action, ref, owed: w.owed };
      }
      const r = await applyGitHubIssue(tx, target, e.issue, LIVE, o.labelRule);
      let owed = r.outcome === 'ref_taken' ? 0 : r.write.owed;
      const before = (e.changes?.body as { from?: unknown } | undefined)?.from;
      const previous = typeof before === 'string' ? githubIssueLinks({ ...e.issue, body: before }) : [];
      owed += (await applyGitHubIssueLinks(tx, target, githubIssueLinks(e.issue), LIVE, previous)).owed;
      if (r.outcome !== 'ref_taken') await o.afterIssue?.(tx, target, e, r.itemId);
      return { status: 'applied', event: d.event, action: e.action, ref, owed };
    });
  }
  if (d.event === 'issue_comment') {
    const a = accept(d, GITHUB_ISSUE_COMMENT_ACTIONS, githubIssueCommentEventSchema);
    if ('status' in a) return a;
    const e = a;
    return once(store, d, e.repository.full_name, e.action !== 'deleted', async (tx, target) => {
      const ref = `#${e.issue.number}`;
      if (e.action === 'deleted') {
        const w = await deleteGitHubComment(tx, target, e.comment.id, LIVE);
        if (!w) return NOT_IMPORTED;
        return { status: 'applied', event: d.event, action: e.action, ref, owed: w.owed };
      }
      // The payload carries the whole issue: an issue never imported is created first.
      const item = await applyGitHubIssue(tx, target, e.issue, LIVE, o.labelRule);
      const c = await applyGitHubComment(tx, target, e.issue.number, e.comment, LIVE);
      if (item.outcome !== 'ref_taken') await o.afterIssue?.(tx, target, e, item.itemId);
      const owed = (item.outcome === 'ref_taken' ? 0 : item.write.owed) + (c.outcome === 'no_issue' ? 0 : c.write.owed);
      return { status: 'applied', event: d.event, action: e.action, ref, owed };
    });
  }
  return { status: 'ignored', reason: 'event', owed: 0 };
}

const NOT_IMPORTED: GitHubDeliveryResult = { status: 'ignored', reason: 'not_imported', owed: 0 };

/**
 * The payload of an event Verdict maps, parsed; or the answer for one it does not apply (an action
 * it does not map, a payload of the wrong shape, a pull request).
 */
function accept<E extends { issue: { pull_request?: unknown } }>(
  d: GitHubDelivery,
  actions: readonly string[],
  schema: {
    safeParse(
      v: unknown,
    ): { success: true; data: E } | { success: false; error: { issues: ReadonlyArray<{ path: PropertyKey[] }> } };
  },
): E | GitHubDeliveryResult {
  const action = (d.payload as { action?: unknown } | null)?.action;
  if (typeof action === 'string' && !actions.includes(action)) return { status: 'ignored', reason: 'action', owed: 0 };
  const p = schema.safeParse(d.payload);
  if (!p.success) return invalid(p.error.issues);
  if (isPullRequest(p.data.issue)) return { status: 'ignored', reason: 'pull_request', owed: 0 };
  return p.data;
}

/**
 * Runs `apply` in one transaction with the delivery id's row and the repository's target, so a
 * redelivery applies nothing and a refused delivery leaves nothing (not even a new mapping):
 * - a repository already mapped goes to its workspace, refused (InvalidWrite) while the workspace
 *   or the collection is soft-deleted, as `import github` refuses;
 * - one never mapped is created in `d.workspace` when `creates` (an event that writes an issue),
 *   and is `not_imported` otherwise (a deletion of something never imported).
 */
async function once(
  store: Pick<Store, 'transaction'>,
  d: GitHubDelivery,
  repo: string,
  creates: boolean,
  apply: (tx: Store, target: GitHubTarget) => Promise<GitHubDeliveryResult>,
): Promise<GitHubDeliveryResult> {
  return store.transaction(async (handle) => {
    const tx = handle as Store; // the handle is the store bound to the transaction (both dialects)
    if (!(await tx.recordWebhookDelivery({ source: GITHUB_DELIVERY_SOURCE, deliveryId: d.deliveryId, event: d.event })))
      return { status: 'duplicate', owed: 0 };
    const known = await findGitHubTarget(tx, repo);
    if (known) return apply(tx, await assertGitHubTargetLive(tx, known));
    if (!creates) return NOT_IMPORTED;
    return apply(tx, await resolveGitHubTarget(tx, { repo, workspaceSlug: d.workspace ?? 'github' }));
  });
}

function invalid(issues: ReadonlyArray<{ path: PropertyKey[] }>): GitHubDeliveryResult {
  return {
    status: 'invalid',
    issues: [...new Set(issues.map((i) => i.path.map(String).join('.') || '(root)'))].slice(0, 20),
    owed: 0,
  };
}
