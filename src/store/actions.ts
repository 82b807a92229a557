/**
 * The store's part for actions in GitHub (DESIGN §17; statements in sql/actions.ts): the
 * `item_actions` rows, the `github` rows of the outbox they queue, and the reads the planner and
 * the gate need. Label lists are sorted arrays of label names. Times are epoch ms.
 */

/** Why a model's label change is held back as a proposal. */
export type ProposalReason = 'gate' | 'mode' | 'person';

/** One `item_actions` row. */
export interface ItemActionRow {
  workspaceId: string;
  itemId: string;
  questionSet: string;
  questionKey: string;
  /** The labels of the key's group Verdict writes now; null: it leaves the group alone. */
  want: string[] | null;
  source: 'model' | 'human' | null;
  decisionId: number | null;
  /** The labels the model's answer asks for that are held back; null when nothing is proposed. */
  proposal: string[] | null;
  proposalReason: ProposalReason | null;
  proposalDecisionId: number | null;
  /** The `want` last handed to the outbox; null when none is pending. */
  queued: string[] | null;
  /** The group's labels on the issue as last seen; null when unknown. */
  applied: string[] | null;
  commentedAt: number | null;
  updatedAt: number;
}

/** What the planner decided for one (item, set, key) (`saveItemAction`): the row without what deliveries record. */
export type PlannedAction = Pick<
  ItemActionRow,
  | 'workspaceId'
  | 'itemId'
  | 'questionSet'
  | 'questionKey'
  | 'want'
  | 'source'
  | 'decisionId'
  | 'proposal'
  | 'proposalReason'
  | 'proposalDecisionId'
>;

/** The outbox row to queue with a plan whose `want` is not yet handed over (see `saveItemAction`). */
export interface ActionOutboxRow {
  /** `github:<owner/name>`: the repository; a line of the outbox is (target, item). */
  targetUrl: string;
  eventId: string;
  /** The change, as src/actions/outbox.ts writes it. */
  payload: string;
}

/** A person's latest verdict on an acting key with the model answer they judged (the gate's labels). */
export interface LabelledAnswer {
  itemId: string;
  questionKey: string;
  verdict: string;
  /** The verdict's value JSON, or null (a disagree on a choice or score). */
  value: string | null;
  /** The answer JSON of the row the person saw, or null when it is gone (pruned) or none was current. */
  answer: string | null;
}

/** The tables the planning cursor reads: answers and people's verdicts. */
export type ActionRowTable = 'decisions' | 'verdicts';

/** A row the planning cursor read (`actionRows`). */
export interface ActionRowRef {
  id: number;
  itemId: string;
  /** The row's set is one that acts. */
  acts: boolean;
}

/** An undelivered `github` outbox row (for counts of failed and pending writes). */
export interface PendingActionWrite {
  id: number;
  itemId: string;
  payload: string;
  attempts: number;
  lastError: string | null;
}

/** The store's part for actions. */
export interface ActionStore {
  /** The `item_actions` rows of one item, by (set, key). */
  listItemActions(itemId: string): Promise<ItemActionRow[]>;
  /**
   * Rows of a workspace, by (item id, set, key), after `afterItemId` when given, at most `limit`;
   * only those with a proposal when `proposalsOnly`; of one set when given.
   */
  listWorkspaceActions(q: {
    workspaceId: string;
    questionSet?: string;
    proposalsOnly?: boolean;
    afterItemId?: string;
    limit?: number;
  }): Promise<ItemActionRow[]>;
  /**
   * Stores a plan for one (item, set, key) and, when its `want` is not null, differs from what the
   * row last queued and `queue` is given, queues `queue` in the outbox (kind `github`) and records
   * `want` as queued: one transaction, with the row locked, so two planners queue one write.
   * @returns whether a row was queued.
   */
  saveItemAction(p: PlannedAction, queue: ActionOutboxRow | null): Promise<boolean>;
  /**
   * What a delivery found and did for (item, set, key): `applied` the group's labels on the issue
   * now; `skipped` clears `queued` (the write was not made: the item is closed or gone), so a later
   * plan queues it again; `commented` records the comment's time.
   */
  recordActionDelivery(r: {
    itemId: string;
    questionSet: string;
    questionKey: string;
    applied: string[] | null;
    skipped: boolean;
    commented: boolean;
  }): Promise<void>;
  /** The group labels seen on an issue (a webhook's payload), per (set, key) of the item: sets `applied`, inserting rows as needed. */
  observeActionLabels(
    workspaceId: string,
    itemId: string,
    seen: ReadonlyArray<{ questionSet: string; questionKey: string; applied: string[] }>,
  ): Promise<void>;
  /**
   * Rows of `item_decisions` (`decisions`) or `human_verdicts` (`verdicts`) by id: those after
   * `after`, or those among `ids`; at most `limit`, every set's (`acts`: the row's set is one of
   * `sets`), so a missing id is a row not (yet) committed, not one of another set.
   * @returns the rows, and `mark`: on Postgres the database clock after the read (µs since the
   *   epoch) for `actionWritersEnded`; null on SQLite, whose single writer commits ids in order.
   */
  actionRows(q: {
    table: ActionRowTable;
    sets: readonly string[];
    after?: number;
    ids?: readonly number[];
    limit: number;
  }): Promise<{ rows: ActionRowRef[]; mark: number | null }>;
  /**
   * Whether every transaction open at `mark` (an `actionRows` mark) has ended, so an id missing
   * from that read is either visible now or never will be. Postgres: no client session of the
   * database is in a transaction begun at or before `mark` (pg_stat_activity; sessions of other
   * roles are not seen). Always true on SQLite.
   */
  actionWritersEnded(mark: number): Promise<boolean>;
  /** Item ids of a workspace with an answer of `set` (every item a key of the set may act on), by id. */
  actionItemsOfSet(q: {
    workspaceId: string;
    questionSet: string;
    afterItemId?: string;
    limit: number;
  }): Promise<string[]>;
  /** The latest verdict per (item, key) of one set in a workspace, with the answer the person judged. */
  labelledAnswers(workspaceId: string, questionSet: string): Promise<LabelledAnswer[]>;
  /** Undelivered `github` outbox rows of a workspace, by id. */
  pendingActionWrites(workspaceId: string): Promise<PendingActionWrite[]>;
  /** Delivered `github` outbox rows of a workspace (writes made or found unneeded). */
  countDeliveredActionWrites(workspaceId: string): Promise<number>;
}
