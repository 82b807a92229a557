/**
 * Regenerates `sample/beads-issues.jsonl` from the full beads tracker export, so the filtering is
 * reproducible (see `sample/README.md`).
 *
 *   npx tsx scripts/make-sample.ts [SOURCE] [OUT]
 *
 * SOURCE is the full export (sha256 below; the default path is a copy outside the repository),
 * OUT defaults to `sample/beads-issues.jsonl`. The rule is the importer's own: a row is kept
 * when it passes `beadsRowSchema` and `classifyBeadsRow` calls it work (task, bug, feature, epic, chore; not
 * ephemeral). Tombstones of work items are work items, so they stay, and so do their comments.
 * A kept row's dependency on a row that was left out is removed, so every link of the sample
 * resolves; such a row is re-serialised with JSON.stringify (same values, and the same key order;
 * only string escapes may differ). Every other kept line is copied byte for byte.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { beadsRowSchema, classifyBeadsRow, isTombstone, type BeadsRow } from '../src/importers/beads-format.js';

/** sha256 of the full export this sample was cut from (commit 669ea40 of steveyegge/beads). */
const SOURCE_SHA256 = '5579504d8e048a9f30c32e306507a745c6b74cd620e13a517b50ca1b84f747b8';

const source = process.argv[2] ?? '../shared/data/beads-issues.jsonl';
const out = process.argv[3] ?? 'sample/beads-issues.jsonl';

const bytes = readFileSync(source);
const sourceSha = createHash('sha256').update(bytes).digest('hex');
if (sourceSha !== SOURCE_SHA256) {
  process.stderr.write(`warning: ${source} has sha256 ${sourceSha}, not the documented ${SOURCE_SHA256}\n`);
}

interface Kept {
  line: string;
  row: BeadsRow;
  obj: Record<string, unknown> & { id: string; dependencies?: Array<{ depends_on_id: string }>; comments?: unknown[] };
}
const lines = bytes
  .toString('utf8')
  .split('\n')
  .filter((l) => l.trim() !== '');
const kept: Kept[] = [];
const left: Record<string, number> = {};
const leftWithComments: string[] = [];
for (const line of lines) {
  const obj = JSON.parse(line) as Kept['obj'];
  const parsed = beadsRowSchema.safeParse(obj);
  const cls = parsed.success ? classifyBeadsRow(parsed.data) : null;
  if (parsed.success && cls?.kind === 'work') {
    kept.push({ line, row: parsed.data, obj });
    continue;
  }
  const why = !cls
    ? 'invalid'
    : cls.kind === 'skip'
      ? cls.reason === 'ephemeral'
        ? 'ephemeral'
        : `type ${cls.type}`
      : 'other';
  left[why] = (left[why] ?? 0) + 1;
  if (obj.comments?.length) leftWithComments.push(obj.id);
}

const ids = new Set(kept.map((k) => k.obj.id));
let depsRemoved = 0;
let rowsRewritten = 0;
let deps = 0;
const outLines = kept.map(({ line, obj }) => {
  const all = obj.dependencies ?? [];
  const inside = all.filter((d) => ids.has(d.depends_on_id));
  deps += inside.length;
  if (inside.length === all.length) return line;
  depsRemoved += all.length - inside.length;
  rowsRewritten++;
  const copy: Record<string, unknown> = { ...obj };
  if (inside.length) copy.dependencies = inside;
  else delete copy.dependencies;
  return JSON.stringify(copy);
});

const text = outLines.join('\n') + '\n';
writeFileSync(out, text);
const rows = kept.map((k) => k.row);
const summary = {
  source,
  sourceRows: lines.length,
  out,
  rows: rows.length,
  tombstones: rows.filter(isTombstone).length,
  comments: rows.reduce((n, r) => n + (r.comments?.length ?? 0), 0),
  rowsWithComments: rows.filter((r) => r.comments?.length).length,
  dependencies: deps,
  dependenciesRemoved: depsRemoved,
  rowsRewritten,
  leftOut: left,
  leftOutWithComments: leftWithComments,
  bytes: Buffer.byteLength(text),
  sha256: createHash('sha256').update(text).digest('hex'),
};
process.stdout.write(JSON.stringify(summary, null, 2) + '\n');
