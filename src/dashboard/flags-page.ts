import type { SurfacedPage } from '../compose/operations-reads.js';
import { html, type Html } from './html.js';
import { notice, pbar, utc } from './layout.js';

/** Rows per page of the flags list. */
export const FLAGS_PAGE_SIZE = 50;

/** The flags page's query, as parsed from the URL (strings from the filter form). */
export interface FlagsQuery {
  set: string;
  collection: string;
  key: string;
  currency: 'all' | 'current' | 'stale';
  page: number;
}

/** Links to an item page: the ref URL-encoded, never any item text. */
export function itemHref(ref: string): string {
  // `.` and `..` would be resolved away as path segments by the browser: their dots are escaped too.
  const seg = ref === '.' || ref === '..' ? ref.replace(/\./g, '%2E') : encodeURIComponent(ref);
  return `/ui/items/${seg}`;
}

function flagsHref(q: FlagsQuery, page: number): string {
  const p = new URLSearchParams({ set: q.set });
  if (q.collection) p.set('collection', q.collection);
  if (q.key) p.set('key', q.key);
  if (q.currency !== 'all') p.set('currency', q.currency);
  if (page > 1) p.set('page', String(page));
  return `/ui/flags?${p.toString()}`;
}

const select = (
  name: string,
  label: string,
  value: string,
  options: ReadonlyArray<{ value: string; label: string }>,
): Html =>
  html`<label>${label}<select name="${name}">${options.map((o) => html`<option value="${o.value}"${o.value === value ? html` selected` : ''}>${o.label}</option>`)}</select></label>`;

/** The flags page body: filters, the surfaced keys highest first, paging. */
export function flagsBody(o: { sets: readonly string[]; q: FlagsQuery; data: SurfacedPage; notice?: unknown }): Html {
  const { q, data } = o;
  const pages = Math.max(1, Math.ceil(data.total / FLAGS_PAGE_SIZE));
  const first = (q.page - 1) * FLAGS_PAGE_SIZE;
  return html`<h1>Flags</h1>${notice(o.notice)}
<form class="filters" method="get" action="/ui/flags" aria-label="Filters">
${select(
  'set',
  'Question set',
  q.set,
  o.sets.map((s) => ({ value: s, label: s })),
)}
${select('collection', 'Collection', q.collection, [{ value: '', label: 'all' }, ...data.collections.map((c) => ({ value: c, label: c }))])}
${select('key', 'Question key', q.key, [{ value: '', label: 'all' }, ...data.keys.map((k) => ({ value: k, label: k }))])}
${select('currency', 'Currency', q.currency, [
  { value: 'all', label: 'current and stale' },
  { value: 'current', label: 'current only' },
  { value: 'stale', label: 'stale only' },
])}
<button type="submit">Filter</button></form>
<div id="flags-live" data-live>${data.failing ? html`<p class="notice error">Some jobs of this set are parked or failing: see <a href="/ui/queue">the queue</a>.</p>` : ''}
<p class="muted">${data.total === 0 ? 'Nothing surfaces with these filters.' : `${data.total} surfaced key${data.total === 1 ? '' : 's'}, highest probability first; ${first + 1}–${first + data.rows.length} shown.`}</p>
${
  data.rows.length
    ? html`<div class="table-wrap"><table><thead><tr><th class="num">#</th><th>Item</th><th>Title</th><th class="wide">Collection</th><th>Key</th><th>Probability</th><th>Marks</th><th class="wide">Asked</th></tr></thead><tbody>
${data.rows.map(
  (r, i) =>
    html`<tr><td class="num">${first + i + 1}</td><td><a href="${itemHref(r.ref)}"><bdi>${r.ref}</bdi></a></td><td class="title"><bdi>${r.title}</bdi></td><td class="wide">${r.collection}</td><td><code>${r.questionKey}</code></td><td>${pbar(r.p, r.threshold)}</td><td>${
      r.current
        ? ''
        : html`<span class="badge stale" title="${r.changedParts.length ? `changed: ${r.changedParts.join(', ')}` : ''}">stale: ${r.staleReason ?? ''}</span>`
    }${r.source === 'human' ? html`<span class="badge human">overridden by a person</span>` : ''}${r.proposed !== null ? html`<span class="badge">model proposes ${(r.proposed * 100).toFixed(0)}%</span>` : ''}</td><td class="muted wide">${r.model}<br>${utc(r.evaluatedAt)}</td></tr>`,
)}
</tbody></table></div>`
    : ''
}
<nav class="pager" aria-label="Pages of flags">${q.page > 1 ? html`<a href="${flagsHref(q, q.page - 1)}" rel="prev">← Previous</a>` : ''}<span class="muted">page ${q.page} of ${pages}</span>${
    q.page < pages ? html`<a href="${flagsHref(q, q.page + 1)}" rel="next">Next →</a>` : ''
  }</nav></div>`;
}
