import { parsedFieldsOf } from './canonical-json.js';
import type { QuestionSet } from './registry.js';
import {
  buildCommentState,
  buildItemState,
  LIMITS,
  newestComments,
  type BuiltState,
  type StateLink,
  type TrailComment,
} from './state.js';

/** What the state builder reads of one loaded item (the store's `ItemForEvaluation` fits). */
export interface LoadedItemForState {
  readonly item: { readonly title: string; readonly fields: string; readonly content: string };
  readonly collection: { readonly slug: string };
  readonly comments: readonly TrailComment[];
  readonly links: readonly StateLink[];
}

/** One state a set asks about: the item's, or one comment's (per-comment sets, DESIGN §7b). */
export interface SetTarget {
  readonly state: BuiltState;
  /** Null for the item state; the comment's id for a per-comment state. */
  readonly commentId: string | null;
  /** Appended to each question key when stored: '' or `@<commentId>`. */
  readonly keySuffix: string;
}

/**
 * The item state as one set sees it (DESIGN §5): links only WithLinks, an empty trail when NoTrail.
 * With `built`, a state of the same shape already built from this loaded item is returned as it is.
 * @throws SyntaxError / TypeError when the stored fields are not a JSON object.
 */
export function itemStateFor(
  set: Pick<QuestionSet, 'withLinks' | 'noTrail'>,
  loaded: LoadedItemForState,
  built?: ItemStates,
): BuiltState {
  const shape = set.withLinks ? (set.noTrail ? 'links,notrail' : 'links') : set.noTrail ? 'notrail' : 'plain';
  const known = built?.get(shape);
  if (known) return known;
  const state = buildItemState(
    {
      title: loaded.item.title,
      collectionSlug: loaded.collection.slug,
      fieldsText: loaded.item.fields,
      fields: parsedFieldsOf(loaded.item),
      content: loaded.item.content,
      comments: loaded.comments,
      links: loaded.links,
    },
    { withLinks: set.withLinks, noTrail: set.noTrail },
  );
  built?.set(shape, state);
  return state;
}

/**
 * The item states already built from one loaded item, by shape (links, no trail): the sets of a
 * co-asked group that read the item alike get the same state, built and hashed once
 * (`itemStateFor`). Only for one loaded item: a new load starts a new map.
 */
export type ItemStates = Map<string, BuiltState>;

/**
 * The states a set asks about for one item: the item state, or for a per-comment set one state per
 * comment — the newest 10 live comments, oldest first (what the runner asks), or with
 * `allComments` every live comment (what a read compares, so an answer about an older comment
 * stays comparable).
 * @throws SyntaxError / TypeError when the stored fields are not a JSON object.
 */
export function setTargets(
  set: Pick<QuestionSet, 'perComment' | 'withLinks' | 'noTrail'>,
  loaded: LoadedItemForState,
  opts: { allComments?: boolean; built?: ItemStates } = {},
): SetTarget[] {
  if (!set.perComment) return [{ state: itemStateFor(set, loaded, opts.built), commentId: null, keySuffix: '' }];
  const comments = opts.allComments ? loaded.comments : newestComments(loaded.comments, LIMITS.trailComments);
  return comments.map((c) => ({
    state: buildCommentState({ title: loaded.item.title, collectionSlug: loaded.collection.slug, comment: c }),
    commentId: c.id,
    keySuffix: `@${c.id}`,
  }));
}
