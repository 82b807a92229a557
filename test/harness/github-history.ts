import { readFileSync } from 'node:fs';
import {
  beadsBody,
  beadsRowSchema,
  classifyBeadsRow,
  isTombstone,
  parseRfc3339,
  type BeadsRow,
} from '../../src/importers/beads-format.js';

/**
 * The bundled sample (`sample/beads-issues.jsonl`, real tracker rows nobody on the team wrote) as
 * GitHub history: the REST issue objects and the webhook deliveries GitHub would have sent, in time
 * order. Issues are rendered as scripts/github-fixture.ts renders them for test/fixtures/github/
 * (numbers 1..N in creation order, ties by beads id; body = the beads body; labels; author =
 * `created_by`; GitHub's time format), so the replay and the fixture read alike:
 * - `issues.opened` at `created_at` (open, no state reason);
 * - `issue_comment.created` at each comment's time (the issue as it stood then);
 * - `issues.closed` at `closed_at` (else `updated_at`) for closed rows (state reason `completed`);
 * - `issues.deleted` at `deleted_at` (else `updated_at`) for tombstones, which GitHub lists no more.
 * Ties break on the event's kind in that order, then the issue number. Senders are the rows' own
 * authors (people and agents of that tracker), never Verdict.
 */

export interface HistoryDelivery {
  at: number;
  event: 'issues' | 'issue_comment';
  payload: Record<string, unknown>;
}

export interface GitHubHistory {
  /** Every issue as GitHub serves it at the end (closed ones closed; deleted ones left out). */
  issues: Array<Record<string, unknown>>;
  /** Numbers of the deleted issues (GitHub answers 410 for them). */
  deleted: number[];
  deliveries: HistoryDelivery[];
}

const gh = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const ORDER = { opened: 0, comment: 1, closed: 2, deleted: 3 } as const;

/** Builds the history of `file` (the sample by default) for repository `repo`. */
export function githubHistory(repo: string, file = 'sample/beads-issues.jsonl'): GitHubHistory {
  const rows: BeadsRow[] = [];
  /** `closed_at` by beads id (the row schema does not keep it). */
  const closedAt = new Map<string, number>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    const json = JSON.parse(line) as { closed_at?: unknown };
    const p = beadsRowSchema.safeParse(json);
    if (!p.success || classifyBeadsRow(p.data).kind !== 'work') continue;
    rows.push(p.data);
    const c = typeof json.closed_at === 'string' ? parseRfc3339(json.closed_at) : null;
    if (c !== null) closedAt.set(p.data.id, c);
  }
  const created = (r: BeadsRow) => parseRfc3339(r.created_at ?? '1970-01-01T00:00:00Z')!;
  rows.sort((a, b) => created(a) - created(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const repository = { full_name: repo };
  const events: Array<HistoryDelivery & { order: number; number: number }> = [];
  const issues: Array<Record<string, unknown>> = [];
  const deleted: number[] = [];
  rows.forEach((r, i) => {
    const number = i + 1;
    const body = beadsBody(r);
    const base = {
      id: number,
      number,
      title: r.title,
      user: r.created_by ? { login: r.created_by, type: 'User' } : null,
      labels: (r.labels ?? []).map((name) => ({ name })),
      milestone: null,
      body: body === '' ? null : body,
      created_at: gh(created(r)),
    };
    const sender = { login: r.created_by ?? 'ghost', type: 'User' };
    const at0 = created(r);
    const open = { ...base, state: 'open', state_reason: null, updated_at: gh(at0), closed_at: null };
    events.push({
      at: at0,
      order: ORDER.opened,
      number,
      event: 'issues',
      payload: { action: 'opened', issue: open, repository, sender },
    });
    const sorted = [...(r.comments ?? [])].sort((a, b) => parseRfc3339(a.created_at!)! - parseRfc3339(b.created_at!)!);
    for (const [j, c] of sorted.entries()) {
      const at = parseRfc3339(c.created_at!)!;
      const comment = {
        id: number * 1000 + j + 1,
        body: c.text,
        user: c.author ? { login: c.author, type: 'User' } : null,
        created_at: gh(at),
        updated_at: gh(at),
        issue_url: `https://api.github.com/repos/${repo}/issues/${number}`,
      };
      events.push({
        at,
        order: ORDER.comment,
        number,
        event: 'issue_comment',
        payload: {
          action: 'created',
          issue: { ...open, updated_at: gh(at) },
          comment,
          repository,
          sender: { login: c.author ?? 'ghost', type: 'User' },
        },
      });
    }
    const end = parseRfc3339(r.updated_at ?? r.created_at!)!;
    if (isTombstone(r)) {
      const at = Math.max(at0, parseRfc3339(r.deleted_at ?? '') ?? end);
      events.push({
        at,
        order: ORDER.deleted,
        number,
        event: 'issues',
        payload: { action: 'deleted', issue: { ...open, updated_at: gh(at) }, repository, sender },
      });
      deleted.push(number);
    } else if (r.status === 'closed') {
      const at = Math.max(at0, closedAt.get(r.id) ?? end);
      const closed = { ...base, state: 'closed', state_reason: 'completed', updated_at: gh(at), closed_at: gh(at) };
      events.push({
        at,
        order: ORDER.closed,
        number,
        event: 'issues',
        payload: { action: 'closed', issue: closed, repository, sender },
      });
      issues.push(closed);
    } else issues.push({ ...open, updated_at: gh(Math.max(at0, end)) });
  });
  events.sort((a, b) => a.at - b.at || a.order - b.order || a.number - b.number);
  return { issues, deleted, deliveries: events.map(({ at, event, payload }) => ({ at, event, payload })) };
}
