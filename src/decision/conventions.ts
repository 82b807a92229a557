import { isLosslessNumber } from 'lossless-json';
import { silentLogger, type Logger } from '../log.js';
import type { CollectionRow, ItemRow } from '../tracker-rows.js';
import { parseLossless } from './canonical-json.js';
import { noul, type NoulQuestion } from './questions.js';
import type { QuestionMap, ResolveContext } from './registry.js';
import { clipCodePoints } from './state.js';

/**
 * A workspace's conventions as questions (DESIGN §6, sets `conventions` and
 * `conventions_comments`).
 *
 * A workspace's conventions are the live items of its collections whose settings have
 * `role: "conventions"`. A convention is asked when its fields say `status = active`,
 * `trigger = always` and `decision_check` is not `off`, and its body is at most 4,096 UTF-8 bytes.
 * Each becomes one noul with key `conv:<ref>`. The convention's title and body are part of the
 * question's instructions, so editing a convention changes its fingerprint: its old answers read
 * `question_changed` and the drift sweep re-asks them.
 */

/** The collection setting that marks a workspace's conventions collection. */
export const CONVENTIONS_ROLE = 'conventions';

/** Keys of convention questions are `conv:<ref>`. */
const CONVENTION_KEY_PREFIX = 'conv:';

/** Largest convention body asked, in UTF-8 bytes (DESIGN §6): a longer one is skipped, never clipped. */
const MAX_CONVENTION_BODY_BYTES = 4_096;

/** Convention titles are clipped to this many code points inside the question (the state's title bound, DESIGN §5). */
const CONVENTION_TITLE_CODE_POINTS = 500;

/**
 * The fixed sentence of every convention question (DESIGN §6). Part of every convention
 * question's fingerprint: changing it re-asks every item of every workspace with conventions.
 */
export const CONVENTION_STATEMENT = 'The content does what the convention forbids, or lacks what it requires.';

/** Why a convention item is not asked. */
export type ConventionSkipReason =
  /** `status` is not `active`. */
  | 'not_active'
  /** `trigger` is not `always`. */
  | 'not_always'
  /** `decision_check` is `off`. */
  | 'check_off'
  /** The body is over 4,096 UTF-8 bytes. */
  | 'body_too_long'
  /** The ref holds `@`, which per-comment keys reserve, or the fields are not a readable object. */
  | 'unusable';

/** Decides whether one convention item is asked; null when it is. Pure. */
function conventionSkipReason(item: Pick<ItemRow, 'ref' | 'fields' | 'content'>): ConventionSkipReason | null {
  let fields: Record<string, unknown>;
  try {
    const v = parseLossless(item.fields);
    if (v === null || typeof v !== 'object' || Array.isArray(v) || isLosslessNumber(v)) return 'unusable';
    fields = v as Record<string, unknown>;
  } catch {
    return 'unusable';
  }
  if (item.ref.includes('@')) return 'unusable';
  if (fields.status !== 'active') return 'not_active';
  if (fields.trigger !== 'always') return 'not_always';
  if (fields.decision_check === 'off') return 'check_off';
  if (Buffer.byteLength(item.content, 'utf8') > MAX_CONVENTION_BODY_BYTES) return 'body_too_long';
  return null;
}

/**
 * The question for one convention: the fixed statement, then the convention's ref, title and
 * body. Every byte of it is fingerprinted.
 */
export function conventionQuestion(item: Pick<ItemRow, 'ref' | 'title' | 'content'>): NoulQuestion {
  const title = clipCodePoints(item.title, CONVENTION_TITLE_CODE_POINTS).text;
  const body = item.content.trim() === '' ? '' : `\n\n${item.content}`;
  return noul(`${CONVENTION_STATEMENT}\n\nConvention ${item.ref}: ${title}${body}`);
}

/** Skips already logged by this process, as `<item id>:<reason>`: each is logged once per process. */
const loggedSkips = new Set<string>();

function logSkipOnce(logger: Logger, workspaceId: string, item: ItemRow, reason: ConventionSkipReason): void {
  const mark = `${item.id}:${reason}`;
  if (loggedSkips.has(mark)) return;
  loggedSkips.add(mark);
  logger.info({ workspaceId, conventionId: item.id, ref: item.ref, reason }, 'convention skipped');
}

/** The workspace's live conventions collections (settings `role: "conventions"`), by slug. */
function isConventionsCollection(c: CollectionRow): boolean {
  return c.deletedAt === null && c.settings.role === CONVENTIONS_ROLE;
}

/**
 * Resolves a workspace's active conventions into questions, key `conv:<ref>` (the `resolve` of
 * both conventions sets). A workspace without a conventions collection asks nothing.
 * @throws when the store read fails (the runner then fails the job as transient).
 */
export async function resolveConventions(ctx: ResolveContext): Promise<QuestionMap> {
  const logger = ctx.logger ?? silentLogger;
  const out: Record<string, NoulQuestion> = {};
  const collections = (await ctx.store.listCollections(ctx.workspaceId)).filter(isConventionsCollection);
  for (const c of collections) {
    for (const item of await ctx.store.listItems({ workspaceId: ctx.workspaceId, collectionId: c.id })) {
      const reason = conventionSkipReason(item);
      if (reason) {
        logSkipOnce(logger, ctx.workspaceId, item, reason);
        continue;
      }
      out[`${CONVENTION_KEY_PREFIX}${item.ref}`] = conventionQuestion(item);
    }
  }
  return out;
}

/** Test-only: forget which skips this process has logged. */
export function resetConventionSkipLog(): void {
  loggedSkips.clear();
}
