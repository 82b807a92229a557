import { roleAllows } from '../access/tokens.js';
import type { JobView } from '../compose/operations-reads.js';
import type { QueueView } from '../compose/queue-view.js';
import type { ThroughputSeries } from '../compose/throughput-view.js';
import { JOB_OUTCOME_ORDER } from '../store/throughput.js';
import { chartLegend, renderStackedBars, stackedBarsSpec } from './charts.js';
import { html, trusted, type Html } from './html.js';
import { csrfField, duration, n, notice, utc, type Viewer } from './layout.js';
import { itemHref } from './flags-page.js';

const age = (ms: number | null): string => (ms === null ? '—' : duration(ms));

/** How many jobs the queue page lists at once (the counts above it cover them all). */
export const QUEUE_JOBS_SHOWN = 200;

/** The queue page's job filter, as parsed from the URL. */
export interface QueueJobsQuery {
  state: 'all' | 'owed' | 'parked' | 'batched';
  set: string;
}

/**
 * A job as a form names it: its item's ref and its set, as JSON (a ref may hold any character, so
 * no separator would be safe). The server parses it back with `parseJobKey`.
 */
export function jobKey(ref: string, set: string): string {
  return JSON.stringify([ref, set]);
}

/** A job key from a form, or null when it is not one. */
export function parseJobKey(s: string): { ref: string; set: string } | null {
  try {
    const v: unknown = JSON.parse(s);
    return Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string' && v[0] && v[1]
      ? { ref: v[0], set: v[1] }
      : null;
  } catch {
    return null;
  }
}

/** Where a job stands, in a person's words: in flight, due now, waiting until…, parked or batched. */
export function jobStanding(j: JobView, now: number): Html {
  if (j.state === 'parked') return html`<span class="badge bad">parked</span>`;
  if (j.state === 'batched') return html`<span class="badge">in a provider batch</span>`;
  if (j.inFlight) return html`<span class="badge ok">in flight</span>`;
  return j.notBefore <= now ? html`<span class="badge">due now</span>` : html`<span class="badge stale">waiting</span>`;
}

/** When the worker may next take the job: now, a time and how far off, or never on its own (parked, batched). */
export function nextDue(j: JobView, now: number): Html {
  if (j.state !== 'owed')
    return html`<span class="muted">${j.state === 'parked' ? 'not until retried' : 'when the batch ends'}</span>`;
  if (j.notBefore <= now) return html`now`;
  return html`${utc(j.notBefore)}<br><span class="muted">in ${duration(j.notBefore - now)}</span>`;
}

/** The per-job buttons of the jobs form (admin): Retry for a parked job, Make due now for a waiting one, Drop for any not in flight or batched. */
function rowButtons(j: JobView & { ref: string }, now: number): Html {
  const key = jobKey(j.ref, j.questionSet);
  return html`${j.state === 'parked' ? html`<button type="submit" name="only" value="${key}" formaction="/ui/jobs/retry">Retry</button>` : ''}${
    j.state === 'owed' && !j.inFlight && j.notBefore > now
      ? html`<button type="submit" name="only" value="${key}" formaction="/ui/jobs/due" class="secondary">Make due now</button>`
      : ''
  }${j.state !== 'batched' && !j.inFlight ? html`<button type="submit" name="only" value="${key}" formaction="/ui/jobs/drop" class="danger">Drop</button>` : ''}`;
}

/**
 * The job list: one form around the table, so the checked rows go with a bulk button and a row's
 * own button (`name="only"`) acts on that row alone; no script needed, and no form nests in another.
 */
function jobsList(v: Viewer, q: QueueJobsQuery, sets: readonly string[], jobs: readonly JobView[], now: number): Html {
  const admin = roleAllows(v.token.role, 'admin');
  const listed = jobs.filter((j): j is JobView & { ref: string } => j.ref !== null);
  const states = [
    { value: 'all', label: 'all' },
    { value: 'owed', label: 'owed (due, waiting, in flight)' },
    { value: 'parked', label: 'parked' },
    { value: 'batched', label: 'batched' },
  ];
  return html`<h2 id="jobs">Jobs</h2>
<form class="filters" method="get" action="/ui/queue#jobs" aria-label="Job filters">
<label>State<select name="state">${states.map((o) => html`<option value="${o.value}"${o.value === q.state ? html` selected` : ''}>${o.label}</option>`)}</select></label>
<label>Question set<select name="set"><option value="">all</option>${sets.map((s) => html`<option value="${s}"${s === q.set ? html` selected` : ''}>${s}</option>`)}</select></label>
<button type="submit">Filter</button></form>
<div id="queue-jobs" data-live>${
    listed.length
      ? html`<form method="post" action="/ui/jobs/retry" id="jobs-form" aria-label="Jobs">${csrfField(v)}
${admin ? html`<div class="bulk" role="group" aria-label="Selected jobs"><span class="muted">Selected:</span><button type="submit" formaction="/ui/jobs/retry">Retry selected</button><button type="submit" formaction="/ui/jobs/due" class="secondary">Make selected due now</button><button type="submit" formaction="/ui/jobs/drop" class="danger">Drop selected…</button></div>` : ''}
<div class="table-wrap"><table class="jobs"><thead><tr>${admin ? html`<th><span class="sr">Select</span></th>` : ''}<th>Item</th><th>Set</th><th>State</th><th>Next due</th><th class="num">Tries</th><th>Last error</th>${admin ? html`<th>Action</th>` : ''}</tr></thead><tbody>${listed.map(
          (j) =>
            html`<tr>${admin ? html`<td><input type="checkbox" name="job" value="${jobKey(j.ref, j.questionSet)}" aria-label="${`Select ${j.ref} ${j.questionSet}`}"></td>` : ''}<td><a href="${itemHref(j.ref)}"><bdi>${j.ref}</bdi></a><br><a class="muted" href="${jobHref(j.ref, j.questionSet)}">job</a></td><td>${j.questionSet}</td><td>${jobStanding(j, now)}</td><td>${nextDue(j, now)}</td><td class="num" title="attempts / refusals">${j.attempts} / ${j.refusals}</td><td>${
              j.lastError
                ? html`<code>${j.lastError}</code>${j.lastErrorAt !== null ? html`<br><span class="muted">${utc(j.lastErrorAt)}</span>` : ''}`
                : html`<span class="muted">none</span>`
            }</td>${admin ? html`<td class="actions">${rowButtons(j, now)}</td>` : ''}</tr>`,
        )}</tbody></table></div></form>${jobs.length >= QUEUE_JOBS_SHOWN ? html`<p class="muted">The first ${QUEUE_JOBS_SHOWN} are listed, lowest priority and oldest first; narrow by state or set for the rest.</p>` : ''}`
      : html`<p class="muted">No job matches.</p>`
  }</div>`;
}

/** The job detail page's address: under its item, by set. */
export function jobHref(ref: string, set: string): string {
  return `${itemHref(ref)}/jobs/${encodeURIComponent(set)}`;
}

/** The queue page body: jobs by set, parked jobs with retry/drop (admin), failing sets, workers, batches. */
/** Width the throughput chart is drawn at, px: the page's column at desktop width; the SVG scales to narrower ones. */
const THROUGHPUT_CHART_WIDTH = 1040;

/**
 * The throughput chart (DESIGN §16.4): jobs per minute by outcome over the series' window, stacked
 * in the outcomes' fixed order so an outcome keeps its colour whichever others the window holds,
 * with one legend of the outcomes drawn. Static SVG: it reads without JavaScript.
 */
export async function throughputFigure(t: ThroughputSeries): Promise<Html> {
  const total = Object.values(t.totals).reduce((a, x) => a + x, 0);
  const m = t.minutes.length;
  const window = m === 60 ? 'hour' : m % 60 === 0 ? `${m / 60} hours` : `${m} minute${m === 1 ? '' : 's'}`;
  if (total === 0)
    return html`<h2>Throughput</h2>
      <p class="muted">No job outcome recorded in the last ${window} (the whole server).</p>`;
  const series = [
    ...JOB_OUTCOME_ORDER,
    ...t.outcomes.filter((o) => !(JOB_OUTCOME_ORDER as readonly string[]).includes(o)),
  ];
  const label = (ms: number) => new Date(ms).toISOString().slice(11, 16);
  const data = t.minutes.flatMap((m) =>
    Object.entries(m.counts).map(([outcome, jobs]) => ({ x: label(m.startAt), series: outcome, value: jobs })),
  );
  const spec = stackedBarsSpec({
    title: `Jobs per minute by outcome, last ${window} (UTC)`,
    yTitle: 'jobs',
    buckets: t.minutes.map((m) => label(m.startAt)),
    data,
    series,
    width: THROUGHPUT_CHART_WIDTH,
    height: 160,
  });
  return html`<h2>Throughput</h2>
    <p class="muted">
      ${n(total)} job outcome${total === 1 ? '' : 's'} recorded in the last ${window}, by every worker of the server:
      ${t.outcomes.map((o, i) => html`${i ? ', ' : ''}${n(t.totals[o])} ${o}`)}.
    </p>
    ${chartLegend('outcome', series, t.outcomes)}
    <figure class="chart wide" id="throughput-chart">${trusted(await renderStackedBars(spec))}</figure>`;
}

/**
 * Draws the throughput chart once with one made-up minute, so that its parsed view is kept (charts.ts
 * `renderStackedBars`) before the first queue page: the same `throughputFigure` as the page.
 */
export async function warmThroughputChart(): Promise<void> {
  await throughputFigure({ minutes: [{ startAt: 0, counts: { ok: 1 } }], outcomes: ['ok'], totals: { ok: 1 } });
}

export function queueBody(
  v: Viewer,
  q: QueueView,
  list: { q: QueueJobsQuery; sets: readonly string[]; jobs: readonly JobView[] },
  throughput: Html,
  noticeCode?: unknown,
): Html {
  const t = q.bySet.reduce(
    (a, s) => ({
      due: a.due + s.due,
      waiting: a.waiting + s.waiting,
      inFlight: a.inFlight + s.inFlight,
      parked: a.parked + s.parked,
      batched: a.batched + s.batched,
    }),
    { due: 0, waiting: 0, inFlight: 0, parked: 0, batched: 0 },
  );
  return html`<h1>Queue</h1>${notice(noticeCode)}
<div id="queue-summary" data-live><div class="stats"><div><span class="muted">due</span><b>${n(t.due)}</b></div><div><span class="muted">waiting</span><b>${n(t.waiting)}</b></div><div><span class="muted">in flight</span><b>${n(t.inFlight)}</b></div><div><span class="muted">parked</span><b>${n(t.parked)}</b></div><div><span class="muted">batched</span><b>${n(t.batched)}</b></div><div><span class="muted">oldest owed</span><b>${age(q.oldestOwedAgeMs)}</b></div></div>
${throughput}
<h2>Jobs by set</h2>${
    q.bySet.length
      ? html`<div class="table-wrap"><table><thead><tr><th>Set</th><th class="num">Due</th><th class="num">Waiting</th><th class="num">In flight</th><th class="num">Parked</th><th class="num">Batched</th><th class="num">Failing</th><th>Oldest owed</th></tr></thead><tbody>${q.bySet.map(
          (s) =>
            html`<tr><td>${s.questionSet}</td><td class="num">${n(s.due)}</td><td class="num">${n(s.waiting)}</td><td class="num">${n(s.inFlight)}</td><td class="num">${n(s.parked)}</td><td class="num">${n(s.batched)}</td><td class="num">${n(s.failing)}</td><td>${age(s.oldestOwedAgeMs)}</td></tr>`,
        )}</tbody></table></div>`
      : html`<p class="muted">No jobs: every decision is answered.</p>`
  }
<h2>Failing sets</h2>${
    q.failingSets.length
      ? html`<ul>${q.failingSets.map(
          (f) =>
            html`<li><b>${f.set}</b>: ${f.jobs} job${f.jobs === 1 ? '' : 's'} with errors${f.lastErrorAt !== null ? `, last ${duration(Math.max(0, q.now - f.lastErrorAt))} ago` : ''}${
              f.schemaRejected
                ? html`; answer schema rejected (${f.schemaRejected.reason})${f.schemaRejected.coolingOffUntil !== null ? `, not claimed for ${duration(f.schemaRejected.coolingOffUntil - q.now)}` : ''}`
                : ''
            }</li>`,
        )}</ul>`
      : html`<p class="muted">None.</p>`
  }
<h2>Parked jobs (${n(q.parked.count)})</h2>${
    q.parked.count
      ? html`<p>${q.parked.reasons.map((r) => html`<span class="badge bad">${r.count} × ${r.reason}</span>`)} <a href="/ui/queue?state=parked#jobs">list them</a></p>`
      : html`<p class="muted">None.</p>`
  }
</div>
${jobsList(v, list.q, list.sets, list.jobs, q.now)}
<div id="queue-workers" data-live><h2>Workers</h2>${
    q.workers.length
      ? html`<div class="table-wrap"><table><thead><tr><th>Worker</th><th>State</th><th>Last heartbeat</th><th>Provider</th><th>Daily token cap</th></tr></thead><tbody>${q.workers.map(
          (w) =>
            html`<tr><td><code>${w.workerId}</code></td><td>${w.alive ? html`<span class="badge ok">alive</span>` : html`<span class="badge bad">not seen</span>`}${w.providerProblem ? html` <span class="badge bad">provider: ${w.providerProblem}</span>` : ''}</td><td>${duration(Math.max(0, w.lastSeenAgoMs))} ago</td><td>${w.provider}:${w.model}</td><td>${w.dailyTokenCap === null ? 'none' : n(w.dailyTokenCap)}</td></tr>`,
        )}</tbody></table></div>`
      : html`<p class="muted">No worker has written a heartbeat: start one with <code>verdict worker</code>.</p>`
  }
<h2>Provider batches</h2>${
    q.batches.inFlight
      ? html`<p>${n(q.batches.inFlight)} in flight: ${n(q.batches.requests)} requests, ${n(q.batches.jobs)} jobs batched; oldest created ${age(q.batches.oldestAgeMs)} ago${q.batches.unconfirmed ? `; ${n(q.batches.unconfirmed)} submit not confirmed` : ''}. Results come within 24 h.</p>`
      : html`<p class="muted">None in flight.</p>`
  }</div>`;
}
