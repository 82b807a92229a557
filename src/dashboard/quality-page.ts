import type { EvalResult } from '../eval/eval-results.js';
import { reliabilityDiagramSvg } from '../eval/reliability-diagram.js';
import type { FlappingKey } from '../reads/reads.js';
import { html, trusted, type Html } from './html.js';
import { n, pct, utc } from './layout.js';
import { itemHref } from './flags-page.js';

const num = (x: number | null, digits = 3): string => (x === null ? '—' : x.toFixed(digits));

async function evalBlock(r: EvalResult): Promise<Html> {
  const series = r.columns
    .filter((c) => c.set.bins.some((b) => b.count > 0))
    .map((c) => ({ name: `${c.provider}:${c.model}`, bins: c.set.bins }));
  const distinct = series.filter((s, i) => series.findIndex((x) => x.name === s.name) === i).slice(0, 2);
  const diagram = distinct.length
    ? trusted(await reliabilityDiagramSvg(distinct, { width: 300, height: 300, title: `Reliability: ${r.set}` }))
    : null;
  return html`<p class="muted">Latest eval ${utc(r.at)} on ${r.goldSource} (${n(r.goldRows)} gold rows).</p>
<div class="table-wrap"><table><thead><tr><th>Model</th><th>Mode</th><th class="num">n</th><th class="num">Answered</th><th class="num">Accuracy</th><th class="num">Precision</th><th class="num">Recall</th><th class="num">F1</th><th class="num">Brier</th><th class="num">ECE</th></tr></thead><tbody>${r.columns.map(
    (c) =>
      html`<tr><td>${c.provider}:${c.model}${c.stoppedAtMaxCost ? html` <span class="badge stale">stopped at its cost limit</span>` : ''}</td><td>${c.mode}</td><td class="num">${n(c.set.n)}</td><td class="num">${n(c.set.answered)}</td><td class="num">${pct(c.set.accuracy)}</td><td class="num">${pct(c.set.precision)}</td><td class="num">${pct(c.set.recall)}</td><td class="num">${num(c.set.f1)}</td><td class="num">${num(c.set.brier)}</td><td class="num">${num(c.set.ece)}</td></tr>`,
  )}</tbody></table></div>
${
  r.columns[0]?.keys.length
    ? html`<details><summary>Per key</summary><div class="table-wrap"><table><thead><tr><th>Key</th><th>Model</th><th class="num">n</th><th class="num">Accuracy</th><th class="num">F1</th><th class="num">Brier</th></tr></thead><tbody>${r.columns.flatMap(
        (c) =>
          c.keys.map(
            (k) =>
              html`<tr><td><code>${k.key}</code></td><td>${c.model}</td><td class="num">${n(k.n)}</td><td class="num">${pct(k.accuracy)}</td><td class="num">${num(k.f1)}</td><td class="num">${num(k.brier)}</td></tr>`,
          ),
      )}</tbody></table></div></details>`
    : ''
}
${diagram ? html`<figure class="chart" aria-label="${`Reliability diagram of ${r.set}: mean predicted probability against observed fraction positive, per bin`}">${diagram}</figure>` : html`<p class="muted">No calibrated answers to draw.</p>`}`;
}

function flappingBlock(keys: readonly FlappingKey[]): Html {
  if (!keys.length) return html`<p class="muted">No key flipped surfacing 3 or more times in 30 days.</p>`;
  return html`<div class="table-wrap"><table><thead><tr><th>Item</th><th>Key</th><th class="num">Flips (30 days)</th><th>Last flip</th><th>Now</th></tr></thead><tbody>${keys.map(
    (k) =>
      html`<tr><td><a href="${itemHref(k.ref)}">${k.ref}</a></td><td><code>${k.questionKey}</code></td><td class="num">${k.flips}</td><td>${utc(k.lastFlipAt)}</td><td>${k.surfaced ? 'surfaced' : 'not surfaced'}</td></tr>`,
  )}</tbody></table></div>`;
}

/** The quality page body: per set, the latest eval and its reliability diagram, and the flapping keys. */
export async function qualityBody(
  sets: ReadonlyArray<{ set: string; eval: EvalResult | null; flapping: FlappingKey[] }>,
): Promise<Html> {
  const parts: Html[] = [];
  for (const s of sets) {
    parts.push(html`<h2>${s.set}</h2>${s.eval ? await evalBlock(s.eval) : html`<p class="muted">No eval recorded yet: run <code>verdict eval --stored --from-verdicts</code> or <code>verdict eval --gold FILE</code>.</p>`}
<h3>Flapping keys</h3>${flappingBlock(s.flapping)}`);
  }
  return html`<h1>Quality</h1>${parts}`;
}
