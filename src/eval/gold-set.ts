import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { InputNotFound, InvalidInput, ownCode, VerdictError } from '../errors.js';
import { choiceOptionNames, type Question } from '../decision/questions.js';

/**
 * Gold sets for `verdict eval` (DESIGN §8.3): a JSONL file, one labelled (item, set, key) per
 * line, `{"ref": "...", "set": "...", "key": "...", "label": ...}`. The label's type follows the
 * question's kind, in the same representation answers use (decision/questions.ts):
 *
 * - noul: `true` / `false` (whether the statement holds);
 * - choice: the option name, a string;
 * - score: the level's integer index, lowest level 0 (the index a `ScoreAnswer`'s `probabilities`
 *   and `legend` are keyed by), never the level name nor a fractional score.
 *
 * Parsing checks the shape only; whether the set, key and label fit a registered question is for
 * the caller that knows the registry. JSONL has no comments: a blank (whitespace-only) line is
 * skipped, every other line must be a row. Unknown members are refused so a misspelt `lable`
 * is not silently a row without a label.
 */

/** One labelled row of a gold set. */
export interface GoldRow {
  /** The item's ref in the workspace (e.g. a beads id). */
  ref: string;
  /** Question set name. */
  set: string;
  /** Question key within the set. */
  key: string;
  /** noul: boolean; choice: option name; score: integer level index (0 = lowest). */
  label: boolean | string | number;
  /** 1-based line number in the source, for messages. */
  line: number;
}

/**
 * A gold-set line that cannot be used: not JSON, not a row, or a duplicate (ref, set, key).
 * The message names the source and the 1-based line and says what is wrong; it never quotes the
 * line (a gold set may be built from item text). Exit 1 in the CLI.
 */
export class InvalidGoldSet extends VerdictError {
  readonly code = 'invalid_gold_set';
  constructor(
    /** File path or other name of the input. */
    readonly source: string,
    /** 1-based line number, or null for a problem of the whole file (e.g. no rows). */
    readonly line: number | null,
    readonly detail: string,
  ) {
    super(line === null ? `${source}: ${detail}` : `${source}:${line}: ${detail}`);
  }
}

const nonBlank = z.string().refine((s) => s.trim().length > 0, 'must not be blank');

/** The members of a row, all required. */
const GOLD_MEMBERS = ['ref', 'set', 'key', 'label'] as const;

/** zod schema of one gold-set line. */
const goldLineSchema = z
  .object({
    ref: nonBlank,
    set: nonBlank,
    key: nonBlank,
    label: z.union([
      z.boolean(),
      nonBlank,
      z
        .number()
        .int('a score label is an integer level index')
        .nonnegative('a score label is a level index, 0 or more'),
    ]),
  })
  .strict();

function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.length ? issue.path.join('.') : 'row';
  if (issue.code === 'unrecognized_keys')
    return `unknown member ${issue.keys.map((k) => `"${k}"`).join(', ')}; a row has only ref, set, key, label`;
  if (issue.code === 'invalid_union' && issue.path[0] === 'label') {
    return 'label must be true/false (noul), an option name (choice) or an integer level index 0.. (score)';
  }
  if (issue.code === 'invalid_type') return `${where}: expected a ${issue.expected}`;
  return `${where}: ${issue.message}`;
}

/**
 * Parses a gold set's text. Rows come back in file order.
 * @param source the file's path or another name, used in messages only.
 * @throws InvalidGoldSet for the first bad line (not JSON, not an object, a missing/blank/unknown
 *   member, a label of the wrong type, a duplicate (ref, set, key)) or when there is no row at all.
 */
export function parseGoldSet(text: string, source: string): GoldRow[] {
  const rows: GoldRow[] = [];
  const seen = new Map<string, number>();
  // A byte-order mark (an editor's UTF-8 BOM) is not part of the first line.
  const lines = (text.startsWith('\uFEFF') ? text.slice(1) : text).split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = i + 1;
    const raw = lines[i];
    if (raw.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      throw new InvalidGoldSet(source, line, 'not JSON; each line is one {"ref","set","key","label"} object');
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new InvalidGoldSet(source, line, 'not a JSON object; each line is one {"ref","set","key","label"} object');
    }
    const missing = GOLD_MEMBERS.filter((m) => !Object.hasOwn(value as object, m));
    if (missing.length) throw new InvalidGoldSet(source, line, `missing ${missing.map((m) => `"${m}"`).join(', ')}`);
    const r = goldLineSchema.safeParse(value);
    if (!r.success) throw new InvalidGoldSet(source, line, describeIssue(r.error.issues[0]));
    const id = JSON.stringify([r.data.ref, r.data.set, r.data.key]);
    const first = seen.get(id);
    if (first !== undefined) {
      throw new InvalidGoldSet(source, line, `duplicate (ref, set, key): the same row as line ${first}`);
    }
    seen.set(id, line);
    rows.push({ ...r.data, line });
  }
  if (rows.length === 0)
    throw new InvalidGoldSet(source, null, 'no rows; a gold set has one {"ref","set","key","label"} object per line');
  return rows;
}

/**
 * Reads and parses a gold-set file (UTF-8).
 * @throws InputNotFound when there is no file at `path`.
 * @throws InvalidInput when it cannot be read.
 * @throws InvalidGoldSet for a bad line (see `parseGoldSet`).
 */
export async function readGoldSet(path: string): Promise<GoldRow[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = ownCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new InputNotFound(`no gold set at ${path}; check the path`);
    throw new InvalidInput(`cannot read ${path} (${code ?? 'error'}); check it is a readable file`);
  }
  return parseGoldSet(text, path);
}

/**
 * Checks a row's label against the question it labels: a noul needs true/false, a choice one of
 * its option names, a score an integer index below its number of levels.
 * @param source the gold set's name, for the message.
 * @throws InvalidGoldSet naming the row's line when the label does not fit.
 */
export function checkGoldLabel(row: GoldRow, question: Question, source: string): void {
  const fail = (detail: string): never => {
    throw new InvalidGoldSet(source, row.line, `${row.set}/${row.key} is a ${question.kind}: ${detail}`);
  };
  if (question.kind === 'noul') {
    if (typeof row.label !== 'boolean') fail('its label is true or false');
  } else if (question.kind === 'choice') {
    const names = choiceOptionNames(question);
    if (typeof row.label !== 'string' || !names.includes(row.label))
      fail(`its label is one of the option names ${names.join(', ')}`);
  } else if (typeof row.label !== 'number' || row.label >= question.levels.length) {
    fail(
      `its label is a level index 0..${question.levels.length - 1} (${question.levels.map((l, i) => `${i} = ${l}`).join(', ')})`,
    );
  }
}
