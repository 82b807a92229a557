import { stringify as losslessStringify } from 'lossless-json';
import type { ItemHistory } from '../compose/operations-reads.js';
import type { ItemSetStatus } from '../compose/verdict.js';
import { pickedLevel, type Answer } from '../decision/questions.js';
import type { DecisionView } from '../reads/reads.js';
import type { CommentRow } from '../store/tracker-reads.js';
import type { HumanVerdictRow } from '../store/verdicts.js';
import { roleAllows } from '../access/tokens.js';
import { probabilityBarsSpec, renderSvg } from './charts.js';
import { Html, html, trusted } from './html.js';
import { authorName, chips, csrfField, duration, notice, pbar, utc, type Viewer } from './layout.js';
import { itemHref } from './flags-page.js';
import { isHttpUrl } from '../store/input-rules.js';

/**
 * The link to the item's page in its tracker, or nothing (beads items have none). Only an http(s)
 * URL becomes a link (the store refuses others; checked again here, as the page is where a
 * `javascript:` URL would run); it opens without telling the tracker where it came from.
 */
function sourceLink(url: string | null): Html {
  if (url === null || !isHttpUrl(url)) return html``;
  return html`<p class="source"><a href="${url}" rel="noopener noreferrer" target="_blank">Open in ${new URL(url).host} ↗</a></p>`;
}

/** A link of the item as the page shows it: its type, the direction, and the other end's ref and title (null: not readable). */
export interface ItemPageLink {
  linkType: string;
  /** `out`: this item is the link's source ("this item's parent is …"); `in`: its target. */
  direction: 'out' | 'in';
  ref: string | null;
  title: string | null;
}

/** What the item page shows, read through the public API. */
export interface ItemPageData {
  /** `sourceUrl`: the item's page in its tracker (ItemRow.sourceUrl), or null. */
  item: {
    ref: string;
    title: string;
    content: string;
    fieldsObject: Record<string, unknown>;
    deletedAt: number | null;
    sourceUrl: string | null;
  };
  collection: string;
  /** The item's comments, tombstones included, oldest first (TrackerStore.listComments). */
  comments: CommentRow[];
  links: ItemPageLink[];
  decisions: DecisionView[];
  sets: ItemSetStatus[];
  history: ItemHistory;
  verdicts: HumanVerdictRow[];
  now: number;
}

function answerText(a: Answer | null): string {
  if (!a) return '—';
  if (a.type === 'noul') return `${(a.noul * 100).toFixed(1)}%`;
  if (a.type === 'choice') return a.choice;
  return `${pickedLevel(a)} (score ${a.score.toFixed(2)})`;
}

/** The kind-specific rendering: a noul's bar with its threshold, a choice's or score's option bars (Vega). */
async function answerGraphic(a: Answer, threshold: number): Promise<Html> {
  if (a.type === 'noul') return pbar(a.noul, threshold);
  const bars =
    a.type === 'choice'
      ? Object.entries(a.probabilities)
          .sort((x, y) => (x[0] < y[0] ? -1 : 1))
          .map(([label, p]) => ({ label, p, picked: label === a.choice }))
      : Object.entries(a.probabilities)
          .sort((x, y) => Number(x[0]) - Number(y[0]))
          .map(([i, p]) => ({ label: `${i} ${a.legend[i] ?? ''}`.trim(), p, picked: a.legend[i] === pickedLevel(a) }));
  const alt = bars.map((b) => `${b.label} ${(b.p * 100).toFixed(0)}%`).join(', ');
  return html`<figure class="chart" role="img" aria-label="${alt}">${trusted(await renderSvg(probabilityBarsSpec({ bars })))}</figure>`;
}

function valueControl(d: DecisionView): Html {
  const a = d.modelAnswer;
  if (a.type === 'noul')
    return html`<label>Value<select name="value"><option value="true">true</option><option value="false">false</option></select></label>`;
  if (a.type === 'choice')
    return html`<label>Value<select name="value">${Object.keys(a.probabilities)
      .sort()
      .map((o) => html`<option value="${o}">${o}</option>`)}</select></label>`;
  return html`<label>Value<select name="value">${Object.keys(a.legend)
    .sort((x, y) => Number(x) - Number(y))
    .map((i) => html`<option value="${a.legend[i]}">${a.legend[i]}</option>`)}</select></label>`;
}

function verdictForm(v: Viewer, ref: string, d: DecisionView): Html {
  return html`<form class="verdict-form" method="post" action="${itemHref(ref)}/verdicts" aria-label="${`Verdict on ${d.questionKey}`}">${csrfField(v)}
<input type="hidden" name="set" value="${d.questionSet}"><input type="hidden" name="key" value="${d.questionKey}">
<button type="submit" name="verdict" value="agree">Agree</button><button type="submit" name="verdict" value="disagree" class="secondary">Disagree</button>
${valueControl(d)}<button type="submit" name="verdict" value="value" class="secondary">Set value</button>
<label>Note (optional)<input type="text" name="note" maxlength="2000" autocomplete="off"></label>
${d.verdict?.inForce ? html`<button type="submit" name="verdict" value="withdrawn" class="danger">Withdraw override</button>` : ''}</form>`;
}

async function decisionCard(v: Viewer, ref: string, d: DecisionView, deleted: boolean): Promise<Html> {
  // A deleted item's keys apply to nothing: a verdict on them would only be refused.
  const canWrite = roleAllows(v.token.role, 'write') && !deleted;
  const vv = d.verdict;
  return html`<section class="card" aria-label="${`${d.questionSet} ${d.questionKey}`}"><h3><code>${d.questionKey}</code> <span class="muted">${d.kind}</span></h3>
${await answerGraphic(d.answer, d.threshold)}
<p>${d.current ? html`<span class="badge ok">current</span>` : html`<span class="badge stale">stale: ${d.staleReason ?? ''}</span>${d.changedParts.length ? html` <span class="muted">changed: ${d.changedParts.join(', ')}</span>` : ''}`}
${d.source === 'human' ? html`<span class="badge human">a person\u2019s value (model said ${answerText(d.modelAnswer)})</span>` : ''}
${d.proposed ? html`<span class="badge">model proposes ${answerText(d.proposed)}</span>` : ''}
${d.flips >= 3 ? html`<span class="badge bad">flapping: ${d.flips} flips in 30 days</span>` : ''}</p>
<p class="muted">${d.provider}:${d.model} · ${utc(d.evaluatedAt)}${d.surfacing === 'surfaced' ? ' · surfaced' : ''}</p>
${d.rationale ? html`<details><summary>Rationale</summary><p>${d.rationale}</p></details>` : ''}
${vv ? html`<p>Latest verdict: <b>${vv.verdict}</b>${vv.value ? ` (${answerText(vv.value)})` : ''} by ${authorName(vv.author)}, ${utc(vv.createdAt)}${vv.inForce ? ' · in force' : ''}${vv.staleReason ? html` <span class="badge stale">override stale${vv.changedParts.length ? `: ${vv.changedParts.join(', ')}` : ''}</span>` : ''}</p>` : ''}
${canWrite ? verdictForm(v, ref, d) : ''}</section>`;
}

function setStatusRow(v: Viewer, ref: string, s: ItemSetStatus, now: number): Html {
  const j = s.job;
  const job = !j
    ? html`<span class="muted">none owed</span>`
    : j.state === 'parked'
      ? html`<span class="badge bad">parked</span> ${j.lastError ?? ''}${
          roleAllows(v.token.role, 'admin')
            ? html` <form method="post" action="/ui/jobs/retry" class="inline">${csrfField(v)}<input type="hidden" name="ref" value="${ref}"><input type="hidden" name="set" value="${s.questionSet}"><input type="hidden" name="back" value="item"><button type="submit">Retry</button></form>`
            : ''
        }`
      : j.state === 'batched'
        ? html`<span class="badge">in a provider batch</span>`
        : html`owed, ${j.dueAt <= now ? 'due now' : `due in ${duration(j.dueAt - now)}`}${j.attempts || j.refusals ? ` · ${j.attempts} attempts, ${j.refusals} refusals` : ''}${j.lastError ? ` · last error ${j.lastError}` : ''}`;
  return html`<tr><td>${s.questionSet}</td><td>${s.applies ? 'applies' : html`<span class="muted">does not apply: ${s.reason ?? ''}</span>`}</td><td>${job}</td></tr>`;
}

function timeline(h: ItemHistory): Html {
  if (!h.entries.length) return html`<p class="muted">No answers stored yet.</p>`;
  return html`<ol class="timeline">${h.entries.map(
    (
      e,
    ) => html`<li><b>${utc(e.evaluatedAt)}</b> · ${e.questionSet}${e.commentId ? html` · comment <code>${e.commentId}</code>` : ''} · ${e.provider}:${e.model}<br>
<span class="muted">state <code>${e.stateHash.slice(0, 12)}</code>${e.stateTruncated ? ' (clipped)' : ''} · ${
      e.changedParts === null
        ? 'first answer'
        : e.changedParts.length
          ? `changed: ${e.changedParts.join(', ')}`
          : 'same state (model or question moved, or asked again)'
    }</span><br>${e.answers.map((a) => html`<code>${a.questionKey}</code> ${answerText(a.answer)}; `)}</li>`,
  )}</ol>`;
}

function fieldText(v: unknown): Html {
  // A list of strings (labels, assignees) reads as chips; anything else as its JSON text.
  if (Array.isArray(v) && v.every((x) => typeof x === 'string'))
    return v.length ? chips(v) : html`<span class="muted">none</span>`;
  if (typeof v === 'string') return html`<bdi>${v}</bdi>`;
  try {
    return html`<bdi>${losslessStringify(v) ?? ''}</bdi>`;
  } catch {
    return html`<bdi>${String(v)}</bdi>`;
  }
}

/** The link's relation read from this item's side, in DESIGN §2's words. */
function linkPhrase(l: ItemPageLink): string {
  if (l.linkType === 'parent') return l.direction === 'out' ? 'parent' : 'child';
  if (l.linkType === 'blocks') return l.direction === 'out' ? 'blocks' : 'blocked by';
  return l.direction === 'out' ? l.linkType : `${l.linkType} (from)`;
}

/**
 * What the questions are about: the item's text, its comments and its links, each in its own
 * direction-isolated block (`dir="auto"`), so right-to-left text in a title or comment cannot
 * reorder the page around it. Every value is escaped by `html`.
 */
function itemText(d: ItemPageData): Html {
  const live = d.comments.filter((c) => c.deletedAt === null);
  const gone = d.comments.length - live.length;
  return html`<section class="item-text" aria-label="Item text"><h2>Description</h2>${
    d.item.content.trim()
      ? html`<div class="text" dir="auto">${d.item.content}</div>`
      : html`<p class="muted">No description.</p>`
  }
<h2>Comments (${live.length})</h2>${
    live.length
      ? html`<ol class="comments">${live.map(
          (c) =>
            html`<li id="${`comment-${c.id}`}"><p class="meta"><b><bdi>${authorName(c.author)}</bdi></b> · ${utc(c.createdAt)}${c.updatedAt !== c.createdAt ? html` · edited ${utc(c.updatedAt)}` : ''}${c.parentCommentId ? html` · reply` : ''}</p><div class="text" dir="auto">${c.body}</div></li>`,
        )}</ol>`
      : html`<p class="muted">No comments.</p>`
  }${gone ? html`<p class="muted">${gone} deleted comment${gone === 1 ? '' : 's'} kept as ${gone === 1 ? 'a tombstone' : 'tombstones'} (replies hang on ${gone === 1 ? 'it' : 'them'}).</p>` : ''}
<h2>Links (${d.links.length})</h2>${
    d.links.length
      ? html`<ul class="links">${d.links.map(
          (l) =>
            html`<li><span class="badge">${linkPhrase(l)}</span> ${l.ref !== null ? html`<a href="${itemHref(l.ref)}"><bdi>${l.ref}</bdi></a> <bdi>${l.title ?? ''}</bdi>` : html`<span class="muted">an item of another collection or deleted</span>`}</li>`,
        )}</ul>`
      : html`<p class="muted">No links.</p>`
  }</section>`;
}

/** The item page body. `shown`: a `?notice=` code, or an `Html` notice (a refusal in its own words). */
export async function itemBody(v: Viewer, d: ItemPageData, shown?: unknown): Promise<Html> {
  const bySet = new Map<string, DecisionView[]>();
  for (const x of d.decisions) bySet.set(x.questionSet, [...(bySet.get(x.questionSet) ?? []), x]);
  const sections: Html[] = [];
  for (const [set, list] of bySet) {
    const cards: Html[] = [];
    for (const x of list) cards.push(await decisionCard(v, d.item.ref, x, d.item.deletedAt !== null));
    sections.push(html`<h2>${set}</h2><div class="cards">${cards}</div>`);
  }
  const fields = Object.entries(d.item.fieldsObject);
  return html`<p><a href="/ui/items">← Items</a> · <a href="/ui/flags">Flags</a></p><h1><bdi>${d.item.ref}</bdi>: <bdi>${d.item.title}</bdi></h1>${sourceLink(d.item.sourceUrl)}${shown instanceof Html ? shown : notice(shown)}
${d.item.deletedAt !== null ? html`<p class="notice error">This item is deleted: nothing of it is sent to a provider.</p>` : ''}
<div class="item-layout">${itemText(d)}<div class="item-decisions" id="item-decisions" data-live>
<dl class="fields"><dt>collection</dt><dd>${d.collection}</dd>${fields.map(([k, val]) => html`<dt>${k}</dt><dd>${fieldText(val)}</dd>`)}</dl>
<h2>Question sets</h2><div class="table-wrap"><table><thead><tr><th>Set</th><th>Applies</th><th>Job</th></tr></thead><tbody>${d.sets.map((s) => setStatusRow(v, d.item.ref, s, d.now))}</tbody></table></div>
${sections.length ? sections : html`<h2>Decisions</h2><p class="muted">No decisions stored for this item.</p>`}</div></div>
<h2>History</h2><div id="item-history" data-live>${timeline(d.history)}</div>
<h2>People\u2019s verdicts</h2>${
    d.verdicts.length
      ? html`<div class="table-wrap"><table><thead><tr><th>When</th><th>Key</th><th>Verdict</th><th>Value</th><th>Who</th><th>Note</th></tr></thead><tbody>${[
          ...d.verdicts,
        ]
          .reverse()
          .map(
            (r) =>
              html`<tr><td>${utc(r.createdAt)}</td><td><code>${r.questionKey}</code></td><td>${r.verdict}</td><td>${r.value === null ? '—' : answerText(JSON.parse(r.value) as Answer)}</td><td>${authorName(r.author)}</td><td><bdi>${r.note ?? ''}</bdi></td></tr>`,
          )}</tbody></table></div>`
      : html`<p class="muted">No verdicts yet.</p>`
  }`;
}
