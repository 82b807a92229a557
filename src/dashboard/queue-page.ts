import { roleAllows } from '../access/tokens.js';
import type { QueueView } from '../compose/queue-view.js';
import { html, type Html } from './html.js';
import { csrfField, duration, n, notice, utc, type Viewer } from './layout.js';
import { itemHref } from './flags-page.js';

const age = (ms: number | null): string => (ms === null ? '—' : duration(ms));

function jobButtons(v: Viewer, ref: string, set: string): Html {
  if (!roleAllows(v.token.role, 'admin')) return html``;
  const hidden = html`${csrfField(v)}<input type="hidden" name="ref" value="${ref}"><input type="hidden" name="set" value="${set}"><input type="hidden" name="back" value="queue">`;
  return html`<form method="post" action="/ui/jobs/retry" class="inline">${hidden}<button type="submit">Retry</button></form>
<form method="post" action="/ui/jobs/drop" class="inline">${hidden}<button type="submit" class="danger">Drop</button></form>`;
}

/** The queue page body: jobs by set, parked jobs with retry/drop (admin), failing sets, workers, batches. */
export function queueBody(v: Viewer, q: QueueView, noticeCode?: unknown): Html {
  const t = q.bySet.reduce((a, s) => ({ due: a.due + s.due, waiting: a.waiting + s.waiting, inFlight: a.inFlight + s.inFlight, parked: a.parked + s.parked, batched: a.batched + s.batched }), { due: 0, waiting: 0, inFlight: 0, parked: 0, batched: 0 });
  return html`<h1>Queue</h1>${notice(noticeCode)}
<div class="stats"><div><span class="muted">due</span><b>${n(t.due)}</b></div><div><span class="muted">waiting</span><b>${n(t.waiting)}</b></div><div><span class="muted">in flight</span><b>${n(t.inFlight)}</b></div><div><span class="muted">parked</span><b>${n(t.parked)}</b></div><div><span class="muted">batched</span><b>${n(t.batched)}</b></div><div><span class="muted">oldest owed</span><b>${age(q.oldestOwedAgeMs)}</b></div></div>
<h2>Jobs by set</h2>${
    q.bySet.length
      ? html`<div class="table-wrap"><table><thead><tr><th>Set</th><th class="num">Due</th><th class="num">Waiting</th><th class="num">In flight</th><th class="num">Parked</th><th class="num">Batched</th><th class="num">Failing</th><th>Oldest owed</th></tr></thead><tbody>${q.bySet.map(
          (s) => html`<tr><td>${s.questionSet}</td><td class="num">${n(s.due)}</td><td class="num">${n(s.waiting)}</td><td class="num">${n(s.inFlight)}</td><td class="num">${n(s.parked)}</td><td class="num">${n(s.batched)}</td><td class="num">${n(s.failing)}</td><td>${age(s.oldestOwedAgeMs)}</td></tr>`,
        )}</tbody></table></div>`
      : html`<p class="muted">No jobs: every decision is answered.</p>`
  }
<h2>Failing sets</h2>${
    q.failingSets.length
      ? html`<ul>${q.failingSets.map(
          (f) => html`<li><b>${f.set}</b>: ${f.jobs} job${f.jobs === 1 ? '' : 's'} with errors${f.lastErrorAt !== null ? `, last ${duration(Math.max(0, q.now - f.lastErrorAt))} ago` : ''}${
            f.schemaRejected ? html`; answer schema rejected (${f.schemaRejected.reason})${f.schemaRejected.coolingOffUntil !== null ? `, not claimed for ${duration(f.schemaRejected.coolingOffUntil - q.now)}` : ''}` : ''
          }</li>`,
        )}</ul>`
      : html`<p class="muted">None.</p>`
  }
<h2>Parked jobs (${n(q.parked.count)})</h2>${
    q.parked.count
      ? html`<p>${q.parked.reasons.map((r) => html`<span class="badge bad">${r.count} × ${r.reason}</span>`)}</p>
<div class="table-wrap"><table><thead><tr><th>Item</th><th>Set</th><th>Reason</th><th>When</th><th class="num">Attempts</th><th class="num">Refusals</th>${roleAllows(v.token.role, 'admin') ? html`<th>Action</th>` : ''}</tr></thead><tbody>${q.parked.jobs.map(
          (j) => html`<tr><td>${j.ref ? html`<a href="${itemHref(j.ref)}">${j.ref}</a>` : j.itemId}</td><td>${j.set}</td><td>${j.reason ?? 'no reason recorded'}</td><td>${j.at !== null ? utc(j.at) : '—'}</td><td class="num">${j.attempts}</td><td class="num">${j.refusals}</td>${
            roleAllows(v.token.role, 'admin') ? html`<td>${j.ref ? jobButtons(v, j.ref, j.set) : ''}</td>` : ''
          }</tr>`,
        )}</tbody></table></div>${q.parked.count > q.parked.jobs.length ? html`<p class="muted">… and ${n(q.parked.count - q.parked.jobs.length)} more (<code>verdict jobs list --state parked</code>).</p>` : ''}`
      : html`<p class="muted">None.</p>`
  }
<h2>Workers</h2>${
    q.workers.length
      ? html`<div class="table-wrap"><table><thead><tr><th>Worker</th><th>State</th><th>Last heartbeat</th><th>Provider</th><th>Daily token cap</th></tr></thead><tbody>${q.workers.map(
          (w) => html`<tr><td><code>${w.workerId}</code></td><td>${w.alive ? html`<span class="badge ok">alive</span>` : html`<span class="badge bad">not seen</span>`}${w.providerProblem ? html` <span class="badge bad">provider: ${w.providerProblem}</span>` : ''}</td><td>${duration(Math.max(0, w.lastSeenAgoMs))} ago</td><td>${w.provider}:${w.model}</td><td>${w.dailyTokenCap === null ? 'none' : n(w.dailyTokenCap)}</td></tr>`,
        )}</tbody></table></div>`
      : html`<p class="muted">No worker has written a heartbeat: start one with <code>verdict worker</code>.</p>`
  }
<h2>Provider batches</h2>${
    q.batches.inFlight
      ? html`<p>${n(q.batches.inFlight)} in flight: ${n(q.batches.requests)} requests, ${n(q.batches.jobs)} jobs batched; oldest created ${age(q.batches.oldestAgeMs)} ago${q.batches.unconfirmed ? `; ${n(q.batches.unconfirmed)} submit not confirmed` : ''}. Results come within 24 h.</p>`
      : html`<p class="muted">None in flight.</p>`
  }`;
}
