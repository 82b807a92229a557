import { roleAllows } from '../access/tokens.js';
import type { JobView } from '../compose/operations-reads.js';
import { itemHref } from './flags-page.js';
import { html, type Html } from './html.js';
import { csrfField, duration, notice, utc, type Viewer } from './layout.js';
import { jobKey, jobStanding, nextDue } from './queue-page.js';

/**
 * One job's page (`/ui/items/:ref/jobs/:set`): every column of its row in words, and the controls
 * that apply to it; and the page that asks before jobs are dropped. Ids, counts, times and error
 * codes only, as in the queue: a job holds no item text.
 */

const when = (ms: number | null, now: number): Html =>
  ms === null || ms === 0
    ? html`<span class="muted">—</span>`
    : html`${utc(ms)} <span class="muted">(${ms <= now ? `${duration(now - ms)} ago` : `in ${duration(ms - now)}`})</span>`;

/** The job detail body. `now` is epoch ms. */
export function jobDetailBody(v: Viewer, j: JobView & { ref: string }, now: number, noticeCode?: unknown): Html {
  const admin = roleAllows(v.token.role, 'admin');
  const hidden = html`${csrfField(v)}<input type="hidden" name="only" value="${jobKey(j.ref, j.questionSet)}"><input type="hidden" name="back" value="job">`;
  const rows: Array<[string, Html | string | number]> = [
    ['State', jobStanding(j, now)],
    ['Next due', nextDue(j, now)],
    ['Owed since', when(j.owedAt, now)],
    ['First enqueued', when(j.enqueuedAt, now)],
    ['Priority', j.priority],
    ['Generation', html`${j.generation} <span class="muted">(each write that owes it again adds one)</span>`],
    ['Attempts', j.attempts],
    ['Refusals', j.refusals],
    ['Abandons', j.abandons],
    ['Defers in a row', j.defers],
    [
      'Claimed by',
      j.inFlight && j.claimedBy
        ? html`<code>${j.claimedBy}</code>, lease ends ${when(j.leaseExpiresAt, now)}`
        : html`<span class="muted">nobody</span>`,
    ],
    ['Provider batch', j.batchId ? html`<code>${j.batchId}</code>` : html`<span class="muted">none</span>`],
    [
      'Last error',
      j.lastError
        ? html`<code>${j.lastError}</code>, ${when(j.lastErrorAt, now)}`
        : html`<span class="muted">none</span>`,
    ],
  ];
  return html`<p><a href="/ui/queue">← Queue</a></p><h1>Job: <a href="${itemHref(j.ref)}"><bdi>${j.ref}</bdi></a> · ${j.questionSet}</h1>${notice(noticeCode)}
<dl class="fields">${rows.map(([k, val]) => html`<dt>${k}</dt><dd>${val}</dd>`)}</dl>
${
  admin
    ? html`<div class="bulk">${j.state === 'parked' ? html`<form method="post" action="/ui/jobs/retry" class="inline">${hidden}<button type="submit">Retry</button></form>` : ''}${
        j.state === 'owed' && !j.inFlight && j.notBefore > now
          ? html`<form method="post" action="/ui/jobs/due" class="inline">${hidden}<button type="submit" class="secondary">Make due now</button></form>`
          : ''
      }${j.state !== 'batched' && !j.inFlight ? html`<form method="post" action="/ui/jobs/drop" class="inline">${hidden}<button type="submit" class="danger">Drop…</button></form>` : ''}</div>`
    : ''
}`;
}

/** The page that asks before dropping: the jobs listed, a confirming button, and a way back that drops nothing. */
export function dropConfirmBody(
  v: Viewer,
  jobs: ReadonlyArray<{ ref: string; set: string }>,
  back: string | undefined,
): Html {
  const n = jobs.length;
  return html`<h1>Drop ${n} job${n === 1 ? '' : 's'}?</h1>
<p>A dropped job is deleted: its item is not asked again until the next write to it owes the job again. Jobs in flight or in a provider batch are kept.</p>
<ul>${jobs.map((j) => html`<li><a href="${itemHref(j.ref)}"><bdi>${j.ref}</bdi></a> · ${j.set}</li>`)}</ul>
<form method="post" action="/ui/jobs/drop">${csrfField(v)}<input type="hidden" name="confirm" value="yes">${back === 'item' ? html`<input type="hidden" name="back" value="item">` : ''}${jobs.map((j) => html`<input type="hidden" name="job" value="${jobKey(j.ref, j.set)}">`)}
<button type="submit" class="danger">Drop ${n} job${n === 1 ? '' : 's'}</button> <a href="/ui/queue">Cancel, keep ${n === 1 ? 'it' : 'them'}</a></form>`;
}
