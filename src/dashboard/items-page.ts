import type { ItemSearchPage } from '../compose/item-search.js';
import { itemHref } from './flags-page.js';
import { html, type Html } from './html.js';
import { chips, utc } from './layout.js';

/** Rows per page of the items list. */
export const ITEMS_PAGE_SIZE = 50;

/** The items page's query, as parsed from the URL (strings from the search form). */
export interface ItemsQuery {
  text: string;
  collection: string;
  deleted: 'live' | 'deleted' | 'all';
  page: number;
}

function itemsHref(q: ItemsQuery, page: number): string {
  const p = new URLSearchParams();
  if (q.text) p.set('q', q.text);
  if (q.collection) p.set('collection', q.collection);
  if (q.deleted !== 'live') p.set('deleted', q.deleted);
  if (page > 1) p.set('page', String(page));
  const s = p.toString();
  return s ? `/ui/items?${s}` : '/ui/items';
}

const select = (
  name: string,
  label: string,
  value: string,
  options: ReadonlyArray<{ value: string; label: string }>,
): Html =>
  html`<label>${label}<select name="${name}">${options.map((o) => html`<option value="${o.value}"${o.value === value ? html` selected` : ''}>${o.label}</option>`)}</select></label>`;

/** A field's value as a short cell: a string as is, a list of strings as chips, nothing else. */
function cell(v: unknown): Html | string {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return chips(v);
  return '';
}

/** The items page body: search by ref or title, filters by collection and deleted state, paging. */
export function itemsBody(o: { q: ItemsQuery; collections: readonly string[]; data: ItemSearchPage }): Html {
  const { q, data } = o;
  const pages = Math.max(1, Math.ceil(data.total / ITEMS_PAGE_SIZE));
  const first = (q.page - 1) * ITEMS_PAGE_SIZE;
  return html`<h1>Items</h1>
<form class="filters" method="get" action="/ui/items" role="search" aria-label="Search items">
<label>Ref or title contains<input type="search" name="q" value="${q.text}" maxlength="200" autocomplete="off" spellcheck="false"></label>
${select('collection', 'Collection', q.collection, [{ value: '', label: 'all' }, ...o.collections.map((c) => ({ value: c, label: c }))])}
${select('deleted', 'Items', q.deleted, [
  { value: 'live', label: 'live' },
  { value: 'deleted', label: 'deleted' },
  { value: 'all', label: 'live and deleted' },
])}
<button type="submit">Search</button></form>
<p class="muted">${data.total === 0 ? 'No item matches.' : `${data.total} item${data.total === 1 ? '' : 's'}, most recently changed first; ${first + 1}–${first + data.rows.length} shown.`}</p>
${
  data.rows.length
    ? html`<div class="table-wrap"><table><thead><tr><th>Item</th><th>Title</th><th>Status</th><th class="wide">Labels</th><th class="wide">Collection</th><th class="wide">Changed</th></tr></thead><tbody>
${data.rows.map(
  (r) =>
    html`<tr><td><a href="${itemHref(r.ref)}"><bdi>${r.ref}</bdi></a></td><td class="title"><bdi>${r.title}</bdi>${r.deletedAt !== null ? html` <span class="badge bad">deleted</span>` : ''}</td><td>${cell(r.fieldsObject.status)}</td><td class="wide">${cell(r.fieldsObject.labels)}</td><td class="wide">${r.collection}</td><td class="muted wide">${utc(r.updatedAt)}</td></tr>`,
)}
</tbody></table></div>`
    : ''
}
<nav class="pager" aria-label="Pages of items">${q.page > 1 ? html`<a href="${itemsHref(q, q.page - 1)}" rel="prev">← Previous</a>` : ''}<span class="muted">page ${q.page} of ${pages}</span>${
    q.page < pages ? html`<a href="${itemsHref(q, q.page + 1)}" rel="next">Next →</a>` : ''
  }</nav>`;
}
