import { pickedLevel, type Answer, type Question } from '../decision/questions.js';
import { InvalidInput } from '../errors.js';
import type { DecisionReader } from '../reads/reads.js';
import { splitCommentKey } from '../reads/reads.js';
import { NotFound } from '../store/store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import { VERDICT_KINDS, type HumanVerdictRow, type VerdictKind } from '../store/verdicts.js';

/**
 * Recording a person's verdict (DESIGN §8.1): `store.recordVerdict` of the public API, and the
 * CLI's `verdict review` and the HTTP API's `POST …/verdicts` through it.
 *
 * What each verdict stores as its value (the value is what overrides the model, and the label
 * evaluation scores against, §8.3):
 * - `value`: the given value, checked against the question's kind: a noul takes true/false (1/0)
 *   or a probability in [0, 1]; a choice one of its options; a score one of its levels (by name or
 *   index);
 * - `agree`: the model's current answer as the person read it: for a noul the side the read
 *   showed (1 or 0; a noul held by the hysteresis band reads surfaced), for a choice its option,
 *   for a score its picked level (the argmax, as `show` prints it);
 * - `disagree`: for a noul the other side (0 or 1); for a choice or a score no value (the person
 *   said "wrong" without saying what is right: a label, not an override);
 * - `withdrawn`: no value; the model's answer is in force again.
 * `agree` and `disagree` need the model's answer to be current (a person judges what is in front
 * of them); every verdict needs the key to have been answered at least once, and its set to apply,
 * except `withdrawn` on a key a person gave a verdict on, which is always taken. Who may withdraw
 * is the caller's `withdraws`: a person any verdict in force (the team's), an agent only the one
 * its own author gave (a person's verdict is the person's to end); MCP's `verdict_record` passes
 * `own`, and so may any door that records for an agent.
 */

/** What `recordVerdict` takes. */
export interface RecordVerdictInput {
  /** The workspace slug. */
  workspace: string;
  /** The item's ref (`TASK-12`). */
  ref: string;
  /** The set's question key, or the stored key `<key>@<commentId>` of a per-comment set. */
  key: string;
  /** The set; needed only when several sets of the item ask `key`. */
  set?: string;
  verdict: VerdictKind;
  /** With `verdict: 'value'` only: true/false or a probability (noul), an option (choice), a level name or index (score). */
  value?: boolean | number | string;
  /** Who: a user name, or `token:<id>` for the HTTP API. */
  author: string;
  /** Why, in the person's words; stored, never logged. At most 2,000 code points. */
  note?: string;
  /**
   * Which verdict a `withdrawn` may end: `any` verdict in force on the key (a person's door), or
   * only one whose author is this `author` (`own`: an agent's door, such as MCP).
   * @defaultValue 'any'
   */
  withdraws?: 'any' | 'own';
}

/** What `recordVerdict` returns. */
export interface RecordedVerdict {
  row: HumanVerdictRow;
  /** The value the verdict stands for, or null (withdrawn; disagree on a choice or score). */
  value: Answer | null;
  /** The value now overrides the model for reads and `flags`. */
  inForce: boolean;
}

/** Longest note, code points. Our choice: a sentence or two of why, not a document. */
const VERDICT_NOTE_MAX = 2_000;

/**
 * Records a verdict (see the file comment for what it stores).
 * @throws NotFound for an unknown workspace or item; InvalidInput for an unknown or ambiguous key,
 * a set that does not apply to the item, a key never answered, an agree/disagree on an answer
 * that is not current, a value that does not fit the question, a withdrawal with no verdict to
 * withdraw or (with `withdraws: 'own'`) of another author's verdict, a blank author, a long note, a NUL in the author or note, or decisions off (provider `none`).
 */
export async function recordVerdict(
  store: Pick<TrackerReads, 'getItemByRef' | 'getWorkspaceBySlug'> & HumanVerdictStore,
  reader: DecisionReader,
  input: RecordVerdictInput,
): Promise<RecordedVerdict> {
  if (!reader.enabled)
    throw new InvalidInput(
      'decisions are off (provider none): there is no answer to give a verdict on; configure a provider',
    );
  if (!VERDICT_KINDS.includes(input.verdict))
    throw new InvalidInput(`verdict must be one of ${VERDICT_KINDS.join(', ')}`);
  if (input.withdraws !== undefined && input.withdraws !== 'any' && input.withdraws !== 'own')
    throw new InvalidInput('withdraws must be any or own', { param: 'withdraws' });
  if ((input.verdict === 'value') !== (input.value !== undefined)) {
    throw new InvalidInput(
      input.verdict === 'value'
        ? 'a value verdict needs a value'
        : `${input.verdict === 'agree' ? 'an' : 'a'} ${input.verdict} verdict takes no value`,
    );
  }
  const author = input.author?.trim() ?? '';
  if (author === '') throw new InvalidInput('a verdict needs an author (who said it)');
  const note = input.note === undefined || input.note === '' ? null : input.note;
  if (note !== null && [...note].length > VERDICT_NOTE_MAX)
    throw new InvalidInput(`a note is at most ${VERDICT_NOTE_MAX} code points`);
  // PostgreSQL text cannot hold NUL; refused on every store so a verdict reads the same everywhere.
  if (author.includes('\u0000') || note?.includes('\u0000'))
    throw new InvalidInput('an author or note must not contain a NUL character');

  const ws = await store.getWorkspaceBySlug(input.workspace);
  if (!ws || ws.deletedAt !== null) throw new NotFound('workspace', input.workspace);
  const item = await store.getItemByRef(ws.id, input.ref);
  if (!item) throw new NotFound('item', input.ref);

  const base = input.key.includes('@') ? splitCommentKey(input.key)?.key : input.key;
  if (!base)
    throw new InvalidInput(`key ${JSON.stringify(input.key)} is malformed: a per-comment key is <key>@<commentId>`);
  const withdrawing = input.verdict === 'withdrawn';
  // A withdrawal is always taken for a key a person gave a verdict on, even when the item, its
  // comment, the question or the set's applicability is gone since (nothing else could end it).
  const given = withdrawing
    ? (await store.listVerdicts({ workspaceId: ws.id, itemId: item.id })).filter(
        (v) => v.questionKey === input.key && (input.set === undefined || v.questionSet === input.set),
      )
    : [];
  let setName = input.set;
  if (setName === undefined) {
    let asking =
      withdrawing && given.length > 0
        ? [...new Set(given.map((v) => v.questionSet))].sort()
        : await reader.setsAsking(item.id, base);
    // A `<key>@<commentId>` key names a per-comment set, a plain key an item-level one.
    asking = asking.filter((name) => reader.isPerComment(name) === input.key.includes('@'));
    if (asking.length === 0) {
      const keys = await reader.keysAsked(item.id);
      throw new InvalidInput(
        `no question set of ${input.ref} asks "${base}"${keys.length > 0 ? `; the keys asked of it: ${keys.join(', ')}` : ''}`,
      );
    }
    if (asking.length > 1)
      throw new InvalidInput(`several sets of ${input.ref} ask "${base}" (${asking.join(', ')}): name one`);
    setName = asking[0];
  }
  const at = await reader.keyNow(item.id, setName, input.key);
  if (withdrawing) {
    const last = given.filter((v) => v.questionSet === setName).at(-1);
    if (!last || last.verdict === 'withdrawn')
      throw new InvalidInput(`${input.ref} ${setName}/${input.key} has no verdict to withdraw`);
    if (input.withdraws === 'own' && last.author !== author) {
      throw new InvalidInput(
        `the verdict in force on ${input.ref} ${setName}/${input.key} was given by someone else (${last.author}); an agent withdraws only its own`,
      );
    }
    const state =
      at?.applies && at.target
        ? at.target
        : {
            hash: last.stateHash,
            version: last.stateVersion,
            parts: JSON.parse(last.stateParts) as Record<string, string>,
          };
    // Surfacing moves only while the set applies; for a gone key reads surface nothing anyway.
    const surfaceable = at?.applies && at.question?.kind === 'noul' && !at.set.unsurfaced.includes(base);
    const row = await store.insertVerdict(
      {
        workspaceId: ws.id,
        itemId: item.id,
        questionSet: setName,
        questionKey: input.key,
        verdict: 'withdrawn',
        value: null,
        stateHash: state.hash,
        stateVersion: state.version,
        stateParts: JSON.stringify(state.parts),
        decisionId: at?.view?.rowId ?? null,
        author,
        note,
      },
      surfaceable ? { ref: item.ref, threshold: at!.set.threshold, hysteresis: at!.set.hysteresis } : null,
    );
    return { row, value: null, inForce: false };
  }
  if (!at) throw new InvalidInput(`question set "${setName}" is not registered here`);
  if (at.set.perComment !== input.key.includes('@')) {
    throw new InvalidInput(
      at.set.perComment
        ? `set "${setName}" asks per comment: give the key as ${base}@<commentId>`
        : `set "${setName}" does not ask per comment: give the key without "@"`,
    );
  }
  if (!at.question) throw new InvalidInput(`set "${setName}" does not ask "${base}" of ${input.ref}`);
  if (!at.applies)
    throw new InvalidInput(`set "${setName}" does not apply to ${input.ref} now: there is nothing to override`);
  if (!at.target) {
    throw new InvalidInput(
      at.set.perComment
        ? `${input.ref} has no live comment ${splitCommentKey(input.key)?.commentId ?? ''} for set "${setName}"`
        : `the state of ${input.ref} cannot be read for set "${setName}"`,
    );
  }
  if (!at.view)
    throw new InvalidInput(
      `${input.ref} ${setName}/${input.key} has no answer yet: a verdict is given on an answered key`,
    );
  if ((input.verdict === 'agree' || input.verdict === 'disagree') && !at.view.current) {
    throw new InvalidInput(
      `${input.ref} ${setName}/${input.key}: the model's answer is not current (${at.view.staleReason}); give a value instead, or wait for the re-ask`,
    );
  }

  // agree/disagree resolve against what the person saw: the read's side, hysteresis included
  // (a noul held in the band reads surfaced); under another person's value, the model's own side.
  const v = at.view;
  const seenSurfaced =
    v.source === 'model' && (v.surfacing === 'surfaced' || v.surfacing === 'below_threshold')
      ? v.surfacing === 'surfaced'
      : undefined;
  const value = verdictValue(input, at.question, v.modelAnswer, at.set.threshold, seenSurfaced);
  const surfaceable = at.question.kind === 'noul' && !at.set.unsurfaced.includes(base);
  const row = await store.insertVerdict(
    {
      workspaceId: ws.id,
      itemId: item.id,
      questionSet: setName,
      questionKey: input.key,
      verdict: input.verdict,
      value: value === null ? null : JSON.stringify(value),
      stateHash: at.target.hash,
      stateVersion: at.target.version,
      stateParts: JSON.stringify(at.target.parts),
      decisionId: at.view.rowId,
      author,
      note,
    },
    surfaceable ? { ref: item.ref, threshold: at.set.threshold, hysteresis: at.set.hysteresis } : null,
  );
  return { row, value, inForce: value !== null };
}

/**
 * The value a verdict stands for (see the file comment).
 * @param seenSurfaced for a noul, the side the read showed (hysteresis included); the plain
 * threshold when undefined. A score's level is the picked one (argmax), as `show` prints it.
 * @throws InvalidInput for a value that does not fit the question.
 */
function verdictValue(
  input: Pick<RecordVerdictInput, 'verdict' | 'value'>,
  q: Question,
  model: Answer,
  threshold: number,
  seenSurfaced?: boolean,
): Answer | null {
  const side = model.type === 'noul' ? (seenSurfaced ?? model.noul >= threshold) : false;
  switch (input.verdict) {
    case 'withdrawn':
      return null;
    case 'value':
      return parseValue(input.value!, q);
    case 'agree':
      if (model.type === 'noul') return { type: 'noul', noul: side ? 1 : 0 };
      if (model.type === 'choice') return parseValue(model.choice, q);
      return parseValue(pickedLevel(model), q);
    case 'disagree':
      if (model.type === 'noul') return { type: 'noul', noul: side ? 0 : 1 };
      return null;
  }
}

/** A plain decimal number (`0.35`, `1`, `.5`, `2e-1`): not hex, binary or octal literals, which `Number` also reads. */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** The value as an answer of the question's kind. Messages never quote the value (the HTTP API's rule for request bodies). */
function parseValue(v: boolean | number | string, q: Question): Answer {
  if (q.kind === 'noul') {
    const text = typeof v === 'string' ? v.trim().toLowerCase() : v;
    const p =
      text === true || text === 'true' || text === 'yes'
        ? 1
        : text === false || text === 'false' || text === 'no'
          ? 0
          : typeof text === 'number'
            ? text
            : DECIMAL.test(text)
              ? Number(text)
              : NaN;
    if (!(p >= 0 && p <= 1)) throw new InvalidInput(`a noul takes true, false or a probability in [0, 1]`);
    return { type: 'noul', noul: p };
  }
  if (q.kind === 'choice') {
    const options = Object.keys(q.options).sort();
    if (typeof v !== 'string' || !options.includes(v))
      throw new InvalidInput(`a choice takes one of its options (${options.join(', ')})`);
    return { type: 'choice', choice: v, probabilities: Object.fromEntries(options.map((o) => [o, o === v ? 1 : 0])) };
  }
  const levels = q.levels;
  const byName = typeof v === 'string' ? levels.indexOf(v) : -1;
  const index =
    byName >= 0
      ? byName
      : typeof v === 'number'
        ? v
        : typeof v === 'string' && /^\d+$/.test(v.trim())
          ? Number(v)
          : NaN;
  if (!Number.isInteger(index) || index < 0 || index >= levels.length) {
    throw new InvalidInput(
      `a score takes one of its levels by name or index 0..${levels.length - 1} (${levels.join(', ')})`,
    );
  }
  return {
    type: 'score',
    score: index,
    probabilities: Object.fromEntries(levels.map((_, i) => [String(i), i === index ? 1 : 0])),
    legend: Object.fromEntries(levels.map((l, i) => [String(i), l])),
  };
}
