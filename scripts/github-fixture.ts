/**
 * Builds `test/fixtures/github/issues.json` and `comments.json`: real beads tracker items
 * rendered in GitHub's REST shapes, as `gh api --paginate` saves them (see
 * `test/fixtures/github/README.md` for what is kept and how each member is rendered).
 *
 *   npx tsx scripts/github-fixture.ts [SOURCE] [OUTDIR]
 *
 * SOURCE defaults to `../shared/data/beads-issues.jsonl` (the full export the bundled
 * `sample/beads-issues.jsonl` was cut from: the same work rows, plus the merge-request rows
 * the sample leaves out, three of which become the fixture's pull requests), OUTDIR to
 * `test/fixtures/github`. The output is a pure function of SOURCE: re-running it rewrites the
 * same bytes.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  beadsBody,
  beadsRowSchema,
  classifyBeadsRow,
  isTombstone,
  parseRfc3339,
  type BeadsRow,
} from '../src/importers/beads-format.js';

/** The repository the fixture pretends to be (not a real one: these numbers are not GitHub's). */
const REPO = 'verdict-fixture/beads';
const API = `https://api.github.com/repos/${REPO}`;
const HTML = `https://github.com/${REPO}`;
/** Work items in the fixture (seeds included), and pull requests among them. */
const TARGET_ITEMS = 300;
const PULL_REQUESTS = 3;
/** Rows per page of issues.json: `gh api --paginate` with GitHub's per_page=100. */
const PAGE = 100;

const source = process.argv[2] ?? '../shared/data/beads-issues.jsonl';
const outDir = process.argv[3] ?? 'test/fixtures/github';

const rows: BeadsRow[] = [];
const mergeRequests: BeadsRow[] = [];
/** `closed_at` by beads id (the row schema does not keep it). */
const closedAt = new Map<string, string>();
for (const line of readFileSync(source, 'utf8').split('\n')) {
  if (line.trim() === '') continue;
  const json = JSON.parse(line) as { closed_at?: unknown };
  const parsed = beadsRowSchema.safeParse(json);
  if (!parsed.success) continue;
  const row = parsed.data;
  if (typeof json.closed_at === 'string' && parseRfc3339(json.closed_at) !== null) closedAt.set(row.id, json.closed_at);
  if (row.ephemeral) continue;
  if (row.issue_type === 'merge-request' && !isTombstone(row)) mergeRequests.push(row);
  const cls = classifyBeadsRow(row);
  // GitHub lists no deleted issues: tombstones stay out.
  if (cls.kind === 'work' && !cls.tombstone) rows.push(row);
}
const byId = new Map(rows.map((r) => [r.id, r]));
const created = (r: BeadsRow) => parseRfc3339(r.created_at ?? '1970-01-01T00:00:00Z')!;
const byCreated = (a: BeadsRow, b: BeadsRow) => created(a) - created(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** `Duplicate of bd-x…` at the start of a close reason: the duplicate's target. */
const DUPLICATE_REASON = /^Duplicate of (bd-[a-z0-9.]+)/;

// Seeds: every live item with comments, every open one (open or hooked: the ones the production
// sets ask about), and both ends of every "Duplicate of bd-x" close reason.
const chosen = new Set<string>();
for (const r of rows) if (r.comments?.length || r.status !== 'closed') chosen.add(r.id);
for (const r of rows) {
  const m = DUPLICATE_REASON.exec(r.close_reason ?? '');
  if (m && byId.has(m[1])) chosen.add(r.id).add(m[1]);
}
// Then the earliest-created items with their parent-child and blocks neighbours, until the target.
const neighbours = new Map<string, string[]>();
for (const r of rows) {
  for (const d of r.dependencies ?? []) {
    if ((d.type !== 'parent-child' && d.type !== 'blocks') || !byId.has(d.depends_on_id)) continue;
    neighbours.set(r.id, [...(neighbours.get(r.id) ?? []), d.depends_on_id]);
    neighbours.set(d.depends_on_id, [...(neighbours.get(d.depends_on_id) ?? []), r.id]);
  }
}
for (const r of [...rows].sort(byCreated)) {
  if (chosen.size >= TARGET_ITEMS - PULL_REQUESTS) break;
  chosen.add(r.id);
  for (const n of neighbours.get(r.id) ?? []) if (chosen.size < TARGET_ITEMS - PULL_REQUESTS) chosen.add(n);
}
const prs = [...mergeRequests].sort(byCreated).slice(0, PULL_REQUESTS);
const all = [...rows.filter((r) => chosen.has(r.id)), ...prs].sort(byCreated);
const number = new Map(all.map((r, i) => [r.id, i + 1]));

/** GitHub's time format: UTC, whole seconds. */
const gh = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

// Comments, numbered 1..M in time order.
const comments = all
  .flatMap((r) => (r.comments ?? []).map((c) => ({ r, c })))
  .sort(
    (a, b) =>
      parseRfc3339(a.c.created_at!)! - parseRfc3339(b.c.created_at!)! || String(a.c.id).localeCompare(String(b.c.id)),
  );
const commentRows = comments.map(({ r, c }, i) => {
  const n = number.get(r.id)!;
  const at = gh(parseRfc3339(c.created_at!)!);
  return {
    id: i + 1,
    url: `${API}/issues/comments/${i + 1}`,
    html_url: `${HTML}/issues/${n}#issuecomment-${i + 1}`,
    issue_url: `${API}/issues/${n}`,
    user: c.author ? { login: c.author, type: 'User' } : null,
    created_at: at,
    updated_at: at,
    body: c.text,
  };
});

// Task lists: a parent lists its children; a blocked item lists its blockers.
const tasks = new Map<string, string[]>();
let taskLines = 0;
for (const r of all) {
  for (const d of r.dependencies ?? []) {
    if (!number.has(d.depends_on_id) || !number.has(d.issue_id)) continue;
    const [owner, listed] =
      d.type === 'parent-child'
        ? [d.depends_on_id, d.issue_id]
        : d.type === 'blocks'
          ? [d.issue_id, d.depends_on_id]
          : [null, null];
    if (!owner || !listed) continue;
    const done = byId.get(listed)?.status === 'closed' ? 'x' : ' ';
    const line = `- [${done}] #${number.get(listed)}`;
    const list = tasks.get(owner) ?? [];
    if (!list.includes(line)) {
      list.push(line);
      taskLines++;
    }
    tasks.set(owner, list);
  }
}

let duplicates = 0;
const issueRows = all.map((r) => {
  const n = number.get(r.id)!;
  const isPr = r.issue_type === 'merge-request';
  const closed = r.status === 'closed';
  const dup = DUPLICATE_REASON.exec(r.close_reason ?? '');
  const dupOf = dup && number.has(dup[1]) ? number.get(dup[1])! : null;
  if (dupOf !== null) duplicates++;
  const parts = [
    beadsBody(r),
    ...(tasks.has(r.id) ? [tasks.get(r.id)!.join('\n')] : []),
    ...(dupOf !== null ? [`Duplicate of #${dupOf}`] : []),
  ].filter((p) => p !== '');
  const updated = Math.max(
    parseRfc3339(r.updated_at ?? r.created_at!)!,
    ...(r.comments ?? []).map((c) => parseRfc3339(c.created_at!)!),
  );
  const closedTime = closed ? gh(parseRfc3339(closedAt.get(r.id) ?? r.updated_at ?? r.created_at!)!) : null;
  return {
    id: n,
    number: n,
    url: `${API}/issues/${n}`,
    repository_url: API,
    html_url: `${HTML}/${isPr ? 'pull' : 'issues'}/${n}`,
    comments_url: `${API}/issues/${n}/comments`,
    title: r.title,
    user: r.created_by ? { login: r.created_by, type: 'User' } : null,
    labels: (r.labels ?? []).map((name) => ({ name, url: `${API}/labels/${encodeURIComponent(name)}` })),
    state: closed ? 'closed' : 'open',
    state_reason: closed ? (dupOf !== null ? 'duplicate' : 'completed') : null,
    milestone: null,
    comments: r.comments?.length ?? 0,
    created_at: gh(created(r)),
    updated_at: gh(updated),
    closed_at: closedTime,
    body: parts.length ? parts.join('\n\n') : null,
    ...(isPr
      ? {
          pull_request: {
            url: `${API}/pulls/${n}`,
            html_url: `${HTML}/pull/${n}`,
            diff_url: `${HTML}/pull/${n}.diff`,
            patch_url: `${HTML}/pull/${n}.patch`,
            merged_at: closed && /^Merged/.test(r.close_reason ?? '') ? closedTime : null,
          },
        }
      : {}),
  };
});

// issues.json as `gh api --paginate` writes the default listing (newest first): pages back to back.
const desc = [...issueRows].reverse();
const pages: string[] = [];
for (let i = 0; i < desc.length; i += PAGE) pages.push(JSON.stringify(desc.slice(i, i + PAGE)));
mkdirSync(outDir, { recursive: true });
const issuesText = `${pages.join('\n')}\n`;
const commentsText = `${JSON.stringify(commentRows)}\n`;
writeFileSync(join(outDir, 'issues.json'), issuesText);
writeFileSync(join(outDir, 'comments.json'), commentsText);

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
process.stdout.write(
  [
    `source ${source} (sha256 ${sha(readFileSync(source, 'utf8'))})`,
    `issues.json: ${issueRows.length} rows (${issueRows.length - prs.length} issues, ${prs.length} pull requests) in ${pages.length} pages, ${issuesText.length} B, sha256 ${sha(issuesText)}`,
    `comments.json: ${commentRows.length} comments on ${new Set(commentRows.map((c) => c.issue_url)).size} issues, ${commentsText.length} B, sha256 ${sha(commentsText)}`,
    `task-list lines: ${taskLines}; duplicate-of lines: ${duplicates}; open: ${issueRows.filter((r) => r.state === 'open' && !('pull_request' in r)).length}`,
  ].join('\n') + '\n',
);
