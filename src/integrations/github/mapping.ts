import { deriveId, parseRfc3339 } from '../../importers/beads-format.js';
import { InvalidInput } from '../../errors.js';
import { InvalidWrite, NotFound } from '../../store/store.js';
import type { OweOptions } from '../../store/queue-store.js';
import type { CollectionSchema, CollectionSettings, CommentRow, ItemRow, LinkRow } from '../../store/tracker-reads.js';
import type { WriteResult } from '../../store/tracker-writes.js';
import type { TrackerStore } from '../../store/tracker-store.js';
import type { MetaStore } from '../../store/meta-store.js';
import type { Store } from '../../store/whole-store.js';
import { isHttpUrl, MAX_SOURCE_URL_LENGTH } from '../../store/input-rules.js';
import { DEFAULT_LABEL_RULE, isManagedLabel, type LabelRule } from './managed-labels.js';
import { type GitHubComment, type GitHubIssue } from './rest-shapes.js';

/**
 * GitHub issues onto Verdict's tracker model: one repository is one workspace's `github`
 * collection; an issue is an item, an issue comment a comment, task-list references and
 * "Duplicate of #N" links. Shared by the importer (`import.ts`, REST pages or saved files) and the
 * webhook route, so a webhook and a re-import write the same rows: every id is derived from
 * (workspace, repository, GitHub number or id), and a re-apply of unchanged values is a no-op of
 * the write doors (nothing owed).
 *
 * Every function here takes a `TrackerStore`, so it runs on a `Store` or on the handle of
 * `store.transaction(async (tx) => …)` alike; only `resolveGitHubTarget` and `findGitHubTarget`
 * also read and write `verdict_meta`, which the transaction handle does not expose, so they take
 * the Store itself (`GitHubMetaStore`).
 *
 * The item (see `githubIssueFields` for the fields):
 * - ref `#<number>`, title, content = body (`''` when null), createdAt = `created_at`, sourceUrl =
 *   `html_url` (the issue's page; not part of the state);
 * - soft-deleted only by `deleteGitHubIssue` (webhook `deleted` and `transferred`); a later apply
 *   of the same issue restores it (the issue came back, e.g. transferred back).
 *
 * Links (DESIGN §2 vocabulary; the state reads `parent` and `blocks`):
 * - `parent`: a task-list line `- [ ] #12` or `- [x] #12` in issue A's body is GitHub's
 *   "tracked by" relation: #12's parent is A (source #12, target A). A task list does not say
 *   whether the tracked issue is a sub-task or a blocker, so both read as `parent`.
 * - `duplicates`: an issue closed with `state_reason: "duplicate"` whose body or comments say
 *   `Duplicate of #N` (the text GitHub's "mark as duplicate" convention writes; the REST issue
 *   object itself does not name the duplicate target): a `duplicates` link from the issue to #N.
 *   The newest comment saying it wins, then the body. Kept, not read by the state.
 * - Only same-repository references (`#N`) count; `owner/repo#N` and URLs are left alone.
 * - A link whose other end is not an item of the workspace (not imported yet, a pull request, a
 *   number that does not exist) is dropped and counted, never an error.
 */

/** Where one repository's issues live in Verdict. */
export interface GitHubTarget {
  /** `owner/name` as first resolved (GitHub names are case-insensitive; keys use lower case). */
  repo: string;
  workspaceId: string;
  collectionId: string;
}

/** A store with the `verdict_meta` reads and writes the repository mapping needs (the Store, not a transaction handle). */
export type GitHubMetaStore = TrackerStore & Pick<Store, 'getMeta' | 'setMeta'>;

/** Slug of the collection that holds a repository's issues. */
const GITHUB_COLLECTION_SLUG = 'github';

/** `state_reason` values GitHub documents (REST API 2022-11-28). The store does not enforce options. */
const GITHUB_STATE_REASONS = ['completed', 'not_planned', 'duplicate', 'reopened'] as const;

/**
 * Schema of the `github` collection. `status` is a select terminal at `closed`, the same rule as
 * beads' collections (BEADS_COLLECTION_SCHEMA), so the production sets' `notTerminal` rule asks
 * about open issues only.
 */
const GITHUB_COLLECTION_SCHEMA: CollectionSchema = {
  fields: [
    { key: 'status', type: 'select', options: ['open', 'closed'], terminal_options: ['closed'] },
    { key: 'state_reason', type: 'select', options: [...GITHUB_STATE_REASONS] },
    { key: 'labels', type: 'multi' },
    { key: 'author', type: 'user' },
    { key: 'milestone', type: 'text' },
  ],
};

/** Issues are work: the production sets' `tracksWork` rule accepts them. */
const GITHUB_COLLECTION_SETTINGS: CollectionSettings = { tracks_work: true };

/** `verdict_meta` key of a repository's mapping: `github:repo:<owner/name in lower case>` → JSON GitHubTarget. */
export function githubRepoMetaKey(repo: string): string {
  return `github:repo:${repo.toLowerCase()}`;
}

/** `verdict_meta` key naming the repository a workspace holds: `github:workspace:<workspaceId>` → `owner/name`. */
export function githubWorkspaceMetaKey(workspaceId: string): string {
  return `github:workspace:${workspaceId}`;
}

/**
 * The mapping of `repo`, or null when it was never resolved.
 * @throws InvalidInput when the stored mapping is not a GitHubTarget (hand-edited meta).
 */
export async function findGitHubTarget(store: Pick<MetaStore, 'getMeta'>, repo: string): Promise<GitHubTarget | null> {
  const text = await store.getMeta(githubRepoMetaKey(repo));
  if (text === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    v = null;
  }
  const t = v as Partial<GitHubTarget> | null;
  if (!t || typeof t.repo !== 'string' || typeof t.workspaceId !== 'string' || typeof t.collectionId !== 'string') {
    throw new InvalidInput(
      `verdict_meta ${githubRepoMetaKey(repo)} is not a GitHub mapping; delete it to map the repository again`,
    );
  }
  return { repo: t.repo, workspaceId: t.workspaceId, collectionId: t.collectionId };
}

/**
 * The workspace and collection of `repo`, created when missing: the workspace of `workspaceSlug`
 * (id derived from the slug, as the beads importer derives it), its `github` collection
 * (GITHUB_COLLECTION_SCHEMA), and the mapping in `verdict_meta` (`githubRepoMetaKey`,
 * `githubWorkspaceMetaKey`). One repository per workspace, since refs (`#12`) are unique per
 * workspace. A repository already mapped keeps its workspace.
 * @throws InvalidInput when the repository is mapped to another workspace than `workspaceSlug`,
 *   or the workspace already holds another repository.
 * @throws InvalidWrite when the workspace or the collection is soft-deleted (restore it first).
 */
export async function resolveGitHubTarget(
  store: GitHubMetaStore,
  o: { repo: string; workspaceSlug: string },
): Promise<GitHubTarget> {
  const known = await findGitHubTarget(store, o.repo);
  const ws = await store.getWorkspaceBySlug(o.workspaceSlug);
  if (known) {
    if (ws?.id !== known.workspaceId) {
      const holder = await store.getWorkspace(known.workspaceId);
      throw new InvalidInput(
        `${o.repo} is already imported into workspace "${holder?.slug ?? known.workspaceId}"; pass --workspace ${holder?.slug ?? '<slug>'}`,
      );
    }
    return assertGitHubTargetLive(store, known);
  }
  if (ws && ws.deletedAt !== null)
    throw new InvalidWrite(`workspace "${ws.slug}" is deleted; restore it before importing into it`);
  const workspace =
    ws ?? (await store.createWorkspace({ id: deriveId('workspace', o.workspaceSlug), slug: o.workspaceSlug }));
  const holds = await store.getMeta(githubWorkspaceMetaKey(workspace.id));
  if (holds !== null && holds.toLowerCase() !== o.repo.toLowerCase()) {
    throw new InvalidInput(
      `workspace "${workspace.slug}" already holds ${holds}; import ${o.repo} into another workspace (--workspace SLUG)`,
    );
  }
  const existing = (await store.listCollections(workspace.id)).find((c) => c.slug === GITHUB_COLLECTION_SLUG);
  if (existing && existing.deletedAt !== null)
    throw new InvalidWrite(
      `collection "${existing.slug}" of workspace "${workspace.slug}" is deleted; restore it before importing into it`,
    );
  const collection =
    existing ??
    (await store.createCollection({
      id: deriveId(workspace.id, 'collection', GITHUB_COLLECTION_SLUG),
      workspaceId: workspace.id,
      slug: GITHUB_COLLECTION_SLUG,
      schema: GITHUB_COLLECTION_SCHEMA,
      settings: GITHUB_COLLECTION_SETTINGS,
    }));
  const target: GitHubTarget = { repo: o.repo, workspaceId: workspace.id, collectionId: collection.id };
  await store.setMeta(githubWorkspaceMetaKey(workspace.id), o.repo);
  await store.setMeta(githubRepoMetaKey(o.repo), JSON.stringify(target));
  return target;
}

/**
 * `target` when its workspace and collection are live: the check every write into a mapped
 * repository passes (an import, a webhook).
 * @throws InvalidWrite when the workspace or the collection is soft-deleted (restore it first).
 * @throws InvalidInput when either is gone (the mapping in `verdict_meta` names rows that no longer exist).
 */
export async function assertGitHubTargetLive(store: TrackerStore, target: GitHubTarget): Promise<GitHubTarget> {
  const ws = await store.getWorkspace(target.workspaceId);
  if (!ws)
    throw new InvalidInput(
      `the workspace ${target.repo} was imported into is gone; delete verdict_meta ${githubRepoMetaKey(target.repo)} to map it again`,
    );
  if (ws.deletedAt !== null)
    throw new InvalidWrite(`workspace "${ws.slug}" is deleted; restore it before importing into it`);
  const col = (await store.listCollections(ws.id)).find((c) => c.id === target.collectionId);
  if (!col)
    throw new InvalidInput(
      `the github collection of workspace "${ws.slug}" is gone; delete verdict_meta ${githubRepoMetaKey(target.repo)} to map it again`,
    );
  if (col.deletedAt !== null)
    throw new InvalidWrite(
      `collection "${col.slug}" of workspace "${ws.slug}" is deleted; restore it before importing into it`,
    );
  return target;
}

// ------------------------------------------------------------------ ids

/** Derived id of the item of issue `number` (stable across imports and webhooks). */
export function githubItemId(target: GitHubTarget, number: number): string {
  return deriveId(target.workspaceId, 'github', target.repo.toLowerCase(), 'issue', String(number));
}

/** Derived id of the comment of GitHub comment id `commentId`. */
function githubCommentId(target: GitHubTarget, commentId: number): string {
  return deriveId(target.workspaceId, 'github', target.repo.toLowerCase(), 'comment', String(commentId));
}

/** Derived id of a link between issue numbers. */
function githubLinkId(target: GitHubTarget, link: GitHubLink): string {
  return deriveId(
    target.workspaceId,
    'github',
    target.repo.toLowerCase(),
    'link',
    String(link.source),
    String(link.target),
    link.linkType,
  );
}

// ------------------------------------------------------------------ fields

/**
 * The item fields of an issue, keys in the order listed here (the fields text is hashed, so the
 * order must not drift), each only when it has a value:
 * - `status`: `open` or `closed` (always);
 * - `state_reason`: `completed`, `not_planned`, `duplicate`, `reopened` (absent when null);
 * - `labels`: label names, sorted (code-unit order) and de-duplicated, so a reorder on GitHub
 *   changes nothing (absent when none); Verdict-managed labels (`rule`, DESIGN §17) are left out,
 *   so Verdict's own label writes change no stored value and no state;
 * - `author`: `user.login` (absent for a deleted account);
 * - `milestone`: the milestone's title (absent when none).
 */
export function githubIssueFields(
  issue: Pick<GitHubIssue, 'state' | 'state_reason' | 'labels' | 'user' | 'milestone'>,
  rule: LabelRule = DEFAULT_LABEL_RULE,
): Record<string, unknown> {
  const out: Record<string, unknown> = { status: issue.state };
  if (issue.state_reason) out.state_reason = issue.state_reason;
  const labels = [...new Set(githubLabelNames(issue).filter((l) => !isManagedLabel(rule, l)))].sort();
  if (labels.length) out.labels = labels;
  if (issue.user?.login) out.author = issue.user.login;
  if (issue.milestone?.title) out.milestone = issue.milestone.title;
  return out;
}

/** The label names of an issue, in GitHub's order (REST lists give objects, some payloads plain names). */
export function githubLabelNames(issue: Pick<GitHubIssue, 'labels'>): string[] {
  return (issue.labels ?? []).map((l) => (typeof l === 'string' ? l : l.name));
}

// ------------------------------------------------------------------ issues

/** What `applyGitHubIssue` did. `ref_taken`: another item (not this issue's) holds `#<number>`; nothing was written. */
export type ApplyIssueResult =
  | { outcome: 'created' | 'updated' | 'unchanged'; itemId: string; write: WriteResult<ItemRow> }
  | { outcome: 'ref_taken'; itemId: string };

/**
 * Upserts the item of `issue` (see the file comment and `githubIssueFields`; `rule` names the
 * Verdict-managed labels left out of its fields), live. Links are
 * not written here: call `applyGitHubIssueLinks` once the issues they point at are in. Pull
 * requests must be left out by the caller (`isPullRequest`).
 * @throws InvalidWrite (pull request given, or a write the store refuses), store errors.
 */
export async function applyGitHubIssue(
  store: TrackerStore,
  target: GitHubTarget,
  issue: GitHubIssue,
  owe: OweOptions,
  rule: LabelRule = DEFAULT_LABEL_RULE,
): Promise<ApplyIssueResult> {
  if (issue.pull_request !== undefined && issue.pull_request !== null)
    throw new InvalidWrite(`#${issue.number} is a pull request; only issues are imported`);
  const itemId = githubItemId(target, issue.number);
  const ref = `#${issue.number}`;
  const holder = await store.getItemByRef(target.workspaceId, ref);
  if (holder && holder.id !== itemId) return { outcome: 'ref_taken', itemId };
  const write = await store.upsertItem(
    {
      id: itemId,
      workspaceId: target.workspaceId,
      collectionId: target.collectionId,
      ref,
      title: issue.title,
      content: issue.body ?? '',
      fields: githubIssueFields(issue, rule),
      createdAt: parseRfc3339(issue.created_at)!,
      deletedAt: null,
      // A page people can open; anything but an http(s) URL of a sane length is left out, not refused.
      sourceUrl:
        issue.html_url && issue.html_url.length <= MAX_SOURCE_URL_LENGTH && isHttpUrl(issue.html_url)
          ? issue.html_url
          : null,
    },
    owe,
  );
  return { outcome: !write.changed ? 'unchanged' : holder ? 'updated' : 'created', itemId, write };
}

/**
 * Soft-deletes the item of issue `number` (webhook `deleted`, and `transferred`: the issue left
 * the repository). @returns the write, or null when no item of that number exists.
 */
export async function deleteGitHubIssue(
  store: TrackerStore,
  target: GitHubTarget,
  number: number,
  owe: OweOptions,
): Promise<WriteResult<ItemRow> | null> {
  const id = githubItemId(target, number);
  const item = await store.getItem(id);
  if (!item) return null;
  return store.softDeleteItem(id, owe);
}

// ------------------------------------------------------------------ comments

/** What `applyGitHubComment` did. `no_issue`: no item of that issue number (a pull request's comment, or an issue not imported). */
export type ApplyCommentResult =
  { outcome: 'written' | 'unchanged'; write: WriteResult<CommentRow> } | { outcome: 'no_issue' };

/**
 * Upserts comment `comment` of issue `issueNumber` (derived id, author = `user.login` or `''`,
 * body `''` when null, createdAt = `created_at`). The issue number is the caller's: a webhook
 * payload names it in `issue.number`, a REST list in `issue_url` (`commentIssueNumber`).
 */
export async function applyGitHubComment(
  store: TrackerStore,
  target: GitHubTarget,
  issueNumber: number,
  comment: GitHubComment,
  owe: OweOptions,
): Promise<ApplyCommentResult> {
  const itemId = githubItemId(target, issueNumber);
  if (!(await store.getItem(itemId))) return { outcome: 'no_issue' };
  const write = await store.upsertComment(
    {
      id: githubCommentId(target, comment.id),
      itemId,
      author: comment.user?.login ?? '',
      body: comment.body ?? '',
      createdAt: parseRfc3339(comment.created_at)!,
    },
    owe,
  );
  return write.changed ? { outcome: 'written', write } : { outcome: 'unchanged', write };
}

/** Deletes the comment of GitHub comment id `commentId` (webhook `issue_comment` `deleted`). @returns the write, or null when there is no such comment. */
export async function deleteGitHubComment(
  store: TrackerStore,
  target: GitHubTarget,
  commentId: number,
  owe: OweOptions,
): Promise<WriteResult<CommentRow | null> | null> {
  try {
    return await store.deleteComment(githubCommentId(target, commentId), owe);
  } catch (err) {
    if (err instanceof NotFound) return null;
    throw err;
  }
}

// ------------------------------------------------------------------ links

/** A link between two issue numbers of one repository, before it is resolved to items. */
export interface GitHubLink {
  source: number;
  target: number;
  linkType: 'parent' | 'duplicates';
}

/** A GitHub task-list item whose text starts with a same-repository issue reference: `- [ ] #12`, `* [x] #12 title`. */
const TASK_LIST_REF = /^[ \t]*(?:[-*+]|\d+[.)])[ \t]+\[[ xX]\][ \t]+#(\d+)\b/gm;

/** `Duplicate of #12`, GitHub's duplicate-marking text, at the start of a line. */
const DUPLICATE_OF = /^[ \t]*Duplicate of #(\d+)\b/im;

/**
 * The links an issue's text makes (see the file comment), de-duplicated, in text order.
 * `comments` are the issue's comment bodies, oldest first (for "Duplicate of #N"); pass [] when
 * they are not at hand. Self-references are left out.
 */
export function githubIssueLinks(
  issue: Pick<GitHubIssue, 'number' | 'body' | 'state_reason'>,
  comments: readonly string[] = [],
): GitHubLink[] {
  const out: GitHubLink[] = [];
  const seen = new Set<string>();
  const push = (l: GitHubLink) => {
    const k = `${l.source}|${l.target}|${l.linkType}`;
    if (l.source === l.target || seen.has(k)) return;
    seen.add(k);
    out.push(l);
  };
  for (const m of (issue.body ?? '').matchAll(TASK_LIST_REF))
    push({ source: Number(m[1]), target: issue.number, linkType: 'parent' });
  if (issue.state_reason === 'duplicate') {
    const texts = [...comments].reverse().concat(issue.body ?? '');
    for (const t of texts) {
      const m = DUPLICATE_OF.exec(t);
      if (m) {
        push({ source: issue.number, target: Number(m[1]), linkType: 'duplicates' });
        break;
      }
    }
  }
  return out;
}

/** Why a link was not written. */
export type GitHubLinkDropReason =
  /** No live item of the workspace has the other end's number (not imported, a pull request, no such issue, deleted). */
  'target_not_found';

/** What `applyGitHubIssueLinks` did. */
export interface ApplyLinksResult {
  created: number;
  unchanged: number;
  removed: number;
  dropped: Record<GitHubLinkDropReason, number>;
  /** Job-row upserts of these writes. */
  owed: number;
}

/**
 * Writes the links `links` (from `githubIssueLinks`) between items of the target. With
 * `previous` (the links the issue's text made before an edit, e.g. from a webhook's
 * `changes.body.from`), links it made that `links` no longer holds are removed. A link whose
 * ends are not both live items is dropped and counted, never thrown.
 */
export async function applyGitHubIssueLinks(
  store: TrackerStore,
  target: GitHubTarget,
  links: readonly GitHubLink[],
  owe: OweOptions,
  previous: readonly GitHubLink[] = [],
): Promise<ApplyLinksResult> {
  const r: ApplyLinksResult = { created: 0, unchanged: 0, removed: 0, dropped: { target_not_found: 0 }, owed: 0 };
  const live = new Map<number, boolean>();
  const isLive = async (n: number) => {
    let v = live.get(n);
    if (v === undefined) {
      const item = await store.getItem(githubItemId(target, n));
      v = item !== null && item.deletedAt === null;
      live.set(n, v);
    }
    return v;
  };
  for (const l of links) {
    if (!(await isLive(l.source)) || !(await isLive(l.target))) {
      r.dropped.target_not_found++;
      continue;
    }
    const w: WriteResult<LinkRow> = await store.addLink(
      {
        id: githubLinkId(target, l),
        workspaceId: target.workspaceId,
        sourceId: githubItemId(target, l.source),
        targetId: githubItemId(target, l.target),
        linkType: l.linkType,
      },
      owe,
    );
    r.owed += w.owed;
    if (w.changed) r.created++;
    else r.unchanged++;
  }
  const keep = new Set(links.map((l) => githubLinkId(target, l)));
  for (const l of previous) {
    const id = githubLinkId(target, l);
    if (keep.has(id)) continue;
    const w = await store.removeLink(id, owe);
    r.owed += w.owed;
    if (w.changed) r.removed++;
  }
  return r;
}

/** The issue number of a REST comment (re-exported for callers of this module). */
