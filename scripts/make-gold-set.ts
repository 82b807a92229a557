/**
 * Derives the `attention` gold set of the bundled sample from facts recorded in the sample itself
 * (structured dependencies and explicit markers in the items' own text), so `verdict eval` has
 * labels that no model and no person on the Verdict team chose. How each label is derived, and
 * what is wrong with it, is in `sample/gold/README.md`; keep the two in step.
 *
 *   npx tsx scripts/make-gold-set.ts [SAMPLE] [OUT] [--check-db DB]
 *
 * SAMPLE defaults to `sample/beads-issues.jsonl`, OUT to `sample/gold/attention.jsonl`. With
 * `--check-db`, every ref written is checked to be a live item of that database (e.g. the demo's,
 * `data/demo.db` after `npm run demo`). Prints counts and the refs of the positives (never item
 * text) to stdout. Deterministic: rows sorted by (ref, key), one JSON object per line.
 *
 * Rows: the items the demo evaluates with `attention` (DESIGN §6: notSystem, tracksWork,
 * notTerminal): the rows the importer imports as work items (`classifyBeadsRow`), not
 * tombstones, whose `status` is not a terminal option of the imported collections (`closed`).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  BEADS_COLLECTION_SCHEMA,
  beadsBody,
  classifyBeadsRow,
  isTombstone,
  type BeadsRow,
} from '../src/importers/beads-format.js';

const SET = 'attention';

/** Statuses at which `notTerminal` leaves an imported item out (the schema's `terminal_options`). */
const TERMINAL = new Set(BEADS_COLLECTION_SCHEMA.fields.flatMap((f) => f.terminal_options ?? []));

/** Statuses of a blocker that no longer holds anything up. */
const DONE = new Set(['closed', 'tombstone']);

/** needs_human_decision: the text asks for a decision outright. */
const DECISION_ASKED = /\bdecision needed\b|\bdecid(?:e|ing) (?:if|whether)\b/i;
/**
 * needs_human_decision: the text lists alternatives as "Options": a line that is an "Options"
 * heading (`Options:`, `## Options`), or an inline `Options: (1) …` / `Options: 1. …` list.
 */
const OPTIONS_LISTED = /^\s*(?:#+\s*)?options\s*:?\s*$|\boptions:\s*\(?1[.)]/im;
/** needs_human_decision: the text records that the choice was made, which cancels the two above. */
const DECISION_RECORDED = /\bdecided\b|\bdecision:|\bwe chose\b|\bgoing with option\b/i;

/** waiting_on_external: a pull request's review asked its author for changes (the author's move). */
const CHANGES_REQUESTED = /\brequested changes\b|\bchanges requested\b/i;

/** blocked: a title that calls the item blocked, which the structured facts may contradict. */
const TITLE_SAYS_BLOCKED = /\bblocked\b/i;

type Row = BeadsRow & { comments?: { text: string }[] | null };

interface Gold {
  ref: string;
  set: string;
  key: string;
  label: boolean;
}

function textOf(row: Row): string {
  return [row.title, beadsBody(row), ...(row.comments ?? []).map((c) => c.text)].filter(Boolean).join('\n\n');
}

/**
 * `blocked`: true when the item has a `blocks` dependency (its target blocks this item) on an
 * item that is not closed or a tombstone; false otherwise. Null (no row) when the facts disagree:
 * the title calls the item blocked but no open blocker is recorded.
 */
function blockedLabel(row: Row, byId: Map<string, Row>): boolean | null {
  const open = (row.dependencies ?? []).some((d) => {
    if (d.type !== 'blocks') return false;
    const target = byId.get(d.depends_on_id);
    return target !== undefined && !DONE.has(target.status) && !isTombstone(target);
  });
  if (!open && TITLE_SAYS_BLOCKED.test(row.title)) return null;
  return open;
}

/** `needs_human_decision`: an open decision asked for or options listed, and no choice recorded. */
function needsDecisionLabel(row: Row): boolean {
  const text = textOf(row);
  return (DECISION_ASKED.test(text) || OPTIONS_LISTED.test(text)) && !DECISION_RECORDED.test(text);
}

/** `waiting_on_external`: the item records changes requested of a pull request's author. */
function waitingLabel(row: Row): boolean {
  return CHANGES_REQUESTED.test(textOf(row));
}

async function main(argv: string[]): Promise<void> {
  const args = [...argv];
  const dbAt = args.indexOf('--check-db');
  const checkDb = dbAt >= 0 ? args.splice(dbAt, 2)[1] : undefined;
  const sample = args[0] ?? 'sample/beads-issues.jsonl';
  const out = args[1] ?? 'sample/gold/attention.jsonl';

  const bytes = readFileSync(sample);
  const rows = bytes
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Row);
  const byId = new Map(rows.map((r) => [r.id, r]));
  const eligible = rows
    .filter((r) => {
      const c = classifyBeadsRow(r);
      return c.kind === 'work' && !c.tombstone && !TERMINAL.has(r.status);
    })
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  const gold: Gold[] = [];
  const left: string[] = [];
  for (const r of eligible) {
    const blocked = blockedLabel(r, byId);
    if (blocked === null) left.push(r.id);
    else gold.push({ ref: r.id, set: SET, key: 'blocked', label: blocked });
    gold.push({ ref: r.id, set: SET, key: 'needs_human_decision', label: needsDecisionLabel(r) });
    gold.push({ ref: r.id, set: SET, key: 'waiting_on_external', label: waitingLabel(r) });
  }

  if (checkDb) await checkRefs(checkDb, [...new Set(gold.map((g) => g.ref))]);

  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, gold.map((g) => JSON.stringify(g)).join('\n') + '\n');

  const sha = createHash('sha256').update(bytes).digest('hex');
  process.stdout.write(`${sample} (sha256 ${sha}): ${eligible.length} items the ${SET} set evaluates\n`);
  if (left.length) process.stdout.write(`blocked: left out (title says blocked, no open blocker): ${left.join(' ')}\n`);
  for (const key of ['blocked', 'needs_human_decision', 'waiting_on_external']) {
    const of = gold.filter((g) => g.key === key);
    const pos = of.filter((g) => g.label).map((g) => g.ref);
    process.stdout.write(`${key}: ${of.length} rows, ${pos.length} true (${pos.join(' ')})\n`);
  }
  process.stdout.write(`wrote ${gold.length} rows to ${out}\n`);
}

/** Fails unless every ref is a live item of the database, and says how many have `attention` answers. */
async function checkRefs(path: string, refs: string[]): Promise<void> {
  // Loaded only when asked, so making the file needs no database.
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const live = db.prepare('SELECT 1 FROM items WHERE ref = ? AND deleted_at IS NULL');
    const answered = db.prepare(
      'SELECT 1 FROM item_decisions d JOIN items i ON i.id = d.item_id WHERE i.ref = ? AND d.question_set = ? LIMIT 1',
    );
    const missing = refs.filter((r) => live.get(r) === undefined);
    if (missing.length) throw new Error(`${missing.length} refs are not live items of ${path}: ${missing.join(' ')}`);
    const withAnswers = refs.filter((r) => answered.get(r, SET) !== undefined).length;
    process.stdout.write(`${path}: all ${refs.length} refs are live items; ${withAnswers} have ${SET} answers\n`);
  } finally {
    db.close();
  }
}

await main(process.argv.slice(2));
