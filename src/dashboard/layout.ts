import { formatElapsed } from '../duration.js';
import type { ApiTokenRow } from '../store/access-store.js';
import { html, type Html } from './html.js';
import { LIVE_REFRESH_MS } from './live-script.js';

/**
 * The page shell and small shared pieces of the dashboard's pages: the header with its nav and
 * logout form, the probability bar, and formatting of numbers, times and durations.
 */

/** Who is looking, and the CSRF token their forms carry. */
export interface Viewer {
  token: ApiTokenRow;
  csrf: string;
}

/** The pages of the nav, in order. */
export const NAV = [
  { id: 'flags', href: '/ui/flags', label: 'Flags' },
  { id: 'items', href: '/ui/items', label: 'Items' },
  { id: 'queue', href: '/ui/queue', label: 'Queue' },
  { id: 'spend', href: '/ui/spend', label: 'Spend' },
  { id: 'quality', href: '/ui/quality', label: 'Quality' },
  { id: 'proposals', href: '/ui/proposals', label: 'Proposals' },
] as const;

export type NavId = (typeof NAV)[number]['id'] | 'item' | 'login';

/**
 * A whole HTML document. `viewer` null: the login page (no nav). `live`: the page changes while
 * open, so it loads the refresh script (live-script.ts), which swaps its `data-live` regions in place.
 */
export function page(o: { title: string; nav: NavId; viewer: Viewer | null; body: Html; live?: boolean }): string {
  const v = o.viewer;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${o.title} · Verdict</title><link rel="stylesheet" href="/ui/assets/dashboard.css"><link rel="icon" href="data:,">${o.live && v ? html`<script src="/ui/assets/live.js" defer></script>` : ''}</head>
<body><a class="skip" href="#main">Skip to content</a>
<header><span class="brand">Verdict</span>${
    v
      ? html`<nav aria-label="Pages">${NAV.map((n) => html`<a href="${n.href}"${n.id === o.nav ? html` aria-current="page"` : ''}>${n.label}</a>`)}</nav>
<div class="who"><span>${v.token.workspaceSlug} · ${v.token.role}${v.token.name ? html` · ${v.token.name}` : ''}</span><form method="post" action="/ui/logout" class="inline"><input type="hidden" name="_csrf" value="${v.csrf}"><button type="submit">Log out</button></form></div>`
      : ''
  }</header>
<main id="main"${o.live && v ? html` data-live-ms="${LIVE_REFRESH_MS}"` : ''}>${o.body}</main></body></html>`.text;
}

/** Strings (labels, assignees) as chips, each direction-isolated. */
export function chips(values: readonly string[]): Html {
  return html`<span class="chips">${values.map((x) => html`<span class="chip"><bdi>${x}</bdi></span>`)}</span>`;
}

/**
 * An author as a person reads it: a token's author string (`token:<id> (<name>)`, access/tokens.ts
 * `tokenAuthor`) shows its name, or "a token without a name"; any other author shows as stored.
 */
export function authorName(author: string): string {
  const m = /^token:\S+(?: \((.*)\))?$/s.exec(author);
  if (!m) return author;
  return m[1] ?? 'a token without a name';
}

/** A hidden CSRF field for a form. */
export function csrfField(v: Viewer): Html {
  return html`<input type="hidden" name="_csrf" value="${v.csrf}">`;
}

/** A probability bar with the threshold marked; the number is printed beside it for readers of text. */
export function pbar(p: number, threshold: number | null): Html {
  const pct = Math.round(p * 1000) / 10;
  return html`<span class="pbar" role="img" aria-label="${`probability ${pct}%${threshold !== null ? `, threshold ${Math.round(threshold * 100)}%` : ''}`}"><span style="width:${pct}%"></span>${
    threshold !== null ? html`<i style="left:${Math.round(threshold * 1000) / 10}%"></i>` : ''
  }</span> <span class="num">${pct.toFixed(1)}%</span>`;
}

/** 1,234 */
export const n = (x: number): string => INTEGER.format(x);

// One formatter each: `toLocaleString` with a locale builds a new Intl.NumberFormat on every call
// (the spend page formats a few hundred numbers; its profile showed them as 5 ms a request).
const INTEGER = new Intl.NumberFormat('en-US');
const DOLLARS = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

/** US dollars, 4 decimals under a dollar; '—' for null (no price). */
export function usd(x: number | null): string {
  if (x === null) return '—';
  return x < 1 ? `$${x.toFixed(4)}` : `$${DOLLARS.format(x)}`;
}

/** A UTC time, minutes precision. */
export function utc(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** A duration: 850ms, 42s, 3m 05s, 2h 10m (duration.ts `formatElapsed`). */
export const duration = formatElapsed;

/** A ratio as a percentage with one decimal, or '—'. */
export function pct(x: number | null): string {
  return x === null ? '—' : `${(x * 100).toFixed(1)}%`;
}

/** A notice after a form's redirect: fixed texts by code, so no request text is ever echoed. */
const NOTICES: Record<string, { text: string; error?: boolean }> = {
  'verdict-recorded': { text: 'Verdict recorded.' },
  'jobs-retried': { text: 'Parked jobs re-owed: the worker takes them at its next claim.' },
  'jobs-due': { text: 'Waiting jobs made due now: the worker takes them at its next claim.' },
  'jobs-dropped': { text: 'Jobs dropped: the next write to each item owes them again.' },
};

/** The notice of a `?notice=` code, or nothing. */
export function notice(code: unknown): Html {
  const m = typeof code === 'string' && Object.hasOwn(NOTICES, code) ? NOTICES[code] : undefined;
  return m ? html`<p class="notice${m.error ? ' error' : ''}" role="status">${m.text}</p>` : html``;
}
