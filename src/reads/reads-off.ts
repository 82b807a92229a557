import { Registry } from '../decision/registry.js';
import { DecisionReader, type DecisionView } from './reads.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { Store } from '../store/whole-store.js';

/**
 * The reader of provider `none` (DESIGN §9: decisions off, reads return empty lists). Every read
 * returns an empty result without touching the store, so answers stored before decisions were
 * turned off are not shown as if they were still kept current.
 */
export class DecisionsOffReader extends DecisionReader {
  constructor(
    store: Pick<TrackerStore, 'getItem' | 'listCollections' | 'listItems' | 'now'> &
      Pick<QueueStore, 'getJob' | 'listJobs'> &
      Pick<MetaStore, 'getMeta'> &
      Pick<DecisionStore, 'listDecisions' | 'listWorkspaceDecisions'> &
      HumanVerdictStore &
      Pick<Store, 'loadItemForEvaluation'>,
  ) {
    // A null context: `enabled` is false, so nothing (retention, for one) mistakes these empty
    // reads for "no answer is current".
    super(store, new Registry([]), null);
  }

  /** Always `[]`. */
  override async decisions(_itemId: string): Promise<DecisionView[]> {
    return [];
  }

  /** Always `[]`. */
  override async itemReadDecisions(_itemId: string): Promise<DecisionView[]> {
    return [];
  }

  /** Always no rows and zero counts. */
  override async surfacedDecisions(
    _itemId: string,
  ): Promise<{ surfaced: DecisionView[]; belowThreshold: number; stale: number }> {
    return { surfaced: [], belowThreshold: 0, stale: 0 };
  }

  /** Always no flags, not failing. */
  override async workspaceFlags(
    _workspaceId: string,
    _setName: string,
    _threshold?: number,
  ): Promise<{ flags: Record<string, { ref: string; keys: Record<string, number> }>; failing: boolean }> {
    return { flags: {}, failing: false };
  }
}
