/**
 * How much of the open discussion the trail leaves out (DESIGN §5.1), on a real beads export:
 * imports FILE into a throwaway SQLite database with the real importer, then builds the state
 * the `attention` set reads for every open item (live, and the set applies: not terminal) and
 * counts the items whose state carries `omitted_comments`, and the share of their live comment
 * text (code points of comment bodies) that does not reach the model.
 *
 *   npx tsx scripts/trail-coverage.ts [FILE]      (default: sample/beads-issues.jsonl)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attentionSet, productionSets } from '../src/decision/production-sets.js';
import { Registry } from '../src/decision/registry.js';
import { itemStateFor } from '../src/decision/set-states.js';
import { codePointLength, LIMITS, newestComments } from '../src/decision/state.js';
import { importBeads } from '../src/importers/beads.js';
import { appliesNow } from '../src/decision/eligibility.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

const file = process.argv[2] ?? 'sample/beads-issues.jsonl';
const dir = mkdtempSync(join(tmpdir(), 'verdict-trail-'));
const store = new SqliteStore({ url: join(dir, 'verdict.db'), registry: new Registry(productionSets()) });
try {
  const report = await importBeads(store, file);
  let open = 0;
  let clipped = 0;
  let omitted = 0;
  let allText = 0;
  let omittedText = 0;
  const histogram = new Map<number, number>();
  for (let after: string | undefined; ;) {
    const page = await store.listItems({ workspaceId: report.workspaceId, afterId: after, limit: 500 });
    if (page.length === 0) break;
    after = page[page.length - 1].id;
    for (const row of page) {
      const loaded = await store.loadItemForEvaluation(row.id);
      if (!loaded || loaded.item.deletedAt !== null || !appliesNow(attentionSet, loaded.item, loaded.collection))
        continue;
      open++;
      const n = loaded.comments.length;
      histogram.set(n, (histogram.get(n) ?? 0) + 1);
      const state = itemStateFor(attentionSet, loaded);
      const text = loaded.comments.map((c) => codePointLength(c.body));
      allText += text.reduce((a, b) => a + b, 0);
      if (state.clips.omittedComments > 0) {
        clipped++;
        omitted += state.clips.omittedComments;
        const kept = new Set(newestComments(loaded.comments, LIMITS.trailComments).map((c) => c.id));
        for (const c of loaded.comments) if (!kept.has(c.id)) omittedText += codePointLength(c.body);
      }
    }
  }
  const pct = (a: number, b: number) => (b === 0 ? '0.0' : ((100 * a) / b).toFixed(1));
  console.log(`file: ${file}`);
  console.log(`open items (attention applies): ${open}`);
  console.log(`open items with more than ${LIMITS.trailComments} live comments: ${clipped} (${pct(clipped, open)} %)`);
  console.log(
    `comments omitted from the trail: ${omitted}; comment text omitted: ${omittedText} of ${allText} code points (${pct(omittedText, allText)} %)`,
  );
  console.log(
    `live comments per open item: ${[...histogram]
      .sort((a, b) => a[0] - b[0])
      .map(([k, v]) => `${k}:${v}`)
      .join(' ')}`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
