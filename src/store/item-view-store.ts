import type { StateLink, TrailComment } from '../decision/state.js';
import type { CollectionRow, ItemRow } from '../tracker-rows.js';
import type { DecisionRow } from './decision-store.js';
import type { JobRow } from './queue-store.js';
import type { WorkspaceRow } from './tracker-reads.js';
import type { HumanVerdictRow, SurfacingChangeRow } from './verdicts.js';

/**
 * What an item view shows, read at once (`ItemViewReads.readItemView`): the item with its
 * workspace and collection, its stored answers (oldest first), its jobs (by set), people's verdicts
 * on it (oldest first), and, only when it has answers, what judging them needs: its surfacing
 * changes (oldest first) and its live comments and links as the state builder reads them.
 */
export interface ItemViewRows {
  workspace: WorkspaceRow;
  item: ItemRow;
  collection: CollectionRow;
  decisions: DecisionRow[];
  jobs: JobRow[];
  verdicts: HumanVerdictRow[];
  judging: { surfacingChanges: SurfacingChangeRow[]; comments: TrailComment[]; links: StateLink[] } | null;
}

/** The item view's read (DESIGN §16.2: an item view is one store read, every statement prepared once). */
export interface ItemViewReads {
  /**
   * One item view's rows in one read (see `ItemViewRows`): the reads behind `VerdictReader.item`.
   * @returns null when the workspace (by slug, deleted or not) or the item (by ref) does not exist.
   */
  readItemView(workspaceSlug: string, ref: string): Promise<ItemViewRows | null>;
}
