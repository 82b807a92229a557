import { hostname } from 'node:os';
import { Actions, type KeyActionStatus, type PlanEntry, type Proposal } from '../actions/actions.js';
import { ActionsWorker, type ActionsDrainReport } from '../actions/actions-worker.js';
import type { ActionMode, ActionsConfig } from '../actions/config.js';
import type { GateStatus } from '../actions/gate.js';
import { applyLabelFeedback } from '../actions/label-feedback.js';
import type { Registry } from '../decision/registry.js';
import { InvalidInput } from '../errors.js';
import type { ApplyWebhookOptions } from '../integrations/github/webhooks.js';
import type { Logger } from '../log.js';
import type { Provider } from '../providers/provider.js';
import { NotFound, toStoreError } from '../store/store.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { ActionStore } from '../store/actions.js';
import type { QueueStore } from '../store/queue-store.js';
import type { EventOutbox } from '../store/events.js';
import type { DecisionStore } from '../store/decision-store.js';
import type { MetaStore } from '../store/meta-store.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { Store } from '../store/whole-store.js';
import { openReader } from './reader.js';
import { recordVerdict, type RecordedVerdict } from './record-verdict.js';

/**
 * Actions in GitHub (DESIGN §17) on the public API: `verdict.actions`. The CLI (`verdict actions
 * plan|apply`, `worker --actions`), the HTTP API (`/v1/proposals`), the MCP server and the
 * dashboard's proposals page are thin users of it.
 */

/** `verdict.actions`. Every method that names a workspace returns null when it does not exist. */
export interface VerdictActions {
  /** The config file's actions section (no acting key without one). */
  readonly config: ActionsConfig;
  /**
   * The dry run: per item and key, the labels that would be added and removed now and the
   * proposals, with each key's gate. Nothing is stored or written.
   * @param opts.mode caps the sets' modes, as a worker's `--actions`. @defaultValue 'apply' (what `apply` would write)
   */
  plan(opts: { workspace: string; mode?: ActionMode }): Promise<PlanEntry[] | null>;
  /** The open proposals, by ref. */
  proposals(opts: { workspace: string; limit?: number }): Promise<Proposal[] | null>;
  /**
   * A person applies (`agree` on the answer the proposal stands for) or dismisses (`disagree`) a
   * proposal; the item is planned again at once, so an applied label is queued for the next
   * delivery. @throws NotFound (workspace, item); InvalidInput (no such proposal, or the verdict's
   * own rules: see recordVerdict).
   */
  decide(input: {
    workspace: string;
    ref: string;
    set: string;
    key: string;
    decision: 'apply' | 'dismiss';
    author: string;
    note?: string;
  }): Promise<{ verdict: RecordedVerdict; queued: number }>;
  /** Per acting key: its mode, its gate, and the counts applied, proposed, pending and failed. */
  status(opts: { workspace: string; mode?: ActionMode }): Promise<KeyActionStatus[] | null>;
  /** Per acting key: where it stands against the calibration gate. */
  gates(opts: { workspace: string }): Promise<GateStatus[] | null>;
  /**
   * Plans what changed since the last pass (every workspace) and delivers every label write due
   * now, as a worker's drain does: what `verdict actions apply --yes` runs.
   * @param opts.token a token or App installation token with Issues write; without it nothing is written.
   * @param opts.mode @defaultValue 'apply'
   */
  apply(opts: {
    token?: string;
    baseUrl?: string;
    mode?: ActionMode;
    signal?: AbortSignal;
  }): Promise<ActionsDrainReport>;
}

/** What the actions API is built from (compose/verdict.ts). */
export interface ActionsApiDeps {
  store: TrackerStore &
    ActionStore &
    QueueStore &
    EventOutbox &
    DecisionStore &
    MetaStore &
    HumanVerdictStore &
    Pick<Store, 'loadItemForEvaluation'>;
  registry: Registry;
  config: ActionsConfig;
  /** The provider reads judge currency against (see compose/reader.ts). */
  readsAgainst: Provider | 'none' | undefined;
  logger: Logger;
  /** The cap on set modes of this process's planning (a decided proposal). @defaultValue 'propose' */
  cap?: ActionMode;
}

/** Builds `verdict.actions`. */
export function actionsApi(d: ActionsApiDeps): VerdictActions {
  const actions = new Actions({
    store: d.store,
    registry: d.registry,
    config: d.config,
    reader: () => openReader(d.store, d.registry, d.readsAgainst, d.logger),
    logger: d.logger,
  });
  const ws = async (slug: string) => d.store.getWorkspaceBySlug(slug);
  const mapped =
    <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
    (...a: A) =>
      fn(...a).catch((err) => Promise.reject(toStoreError(err)));
  return {
    config: d.config,
    plan: mapped(async (o) => {
      const w = await ws(o.workspace);
      return w ? actions.dryRun(w.id, o.mode ?? 'apply') : null;
    }),
    proposals: mapped(async (o) => {
      const w = await ws(o.workspace);
      return w ? actions.proposals(w.id, { limit: o.limit }) : null;
    }),
    decide: mapped(async (i) => {
      const w = await ws(i.workspace);
      if (!w || w.deletedAt !== null) throw new NotFound('workspace', i.workspace);
      const item = await d.store.getItemByRef(w.id, i.ref);
      if (!item) throw new NotFound('item', i.ref);
      const row = (await d.store.listItemActions(item.id)).find(
        (r) => r.questionSet === i.set && r.questionKey === i.key,
      );
      if (!row?.proposal) throw new InvalidInput(`${i.ref} has no open proposal for ${i.set}/${i.key}`);
      const reader = await openReader(d.store, d.registry, d.readsAgainst, d.logger);
      const verdict = await recordVerdict(d.store, reader, {
        workspace: i.workspace,
        ref: i.ref,
        set: i.set,
        key: i.key,
        verdict: i.decision === 'apply' ? 'agree' : 'disagree',
        author: i.author,
        note: i.note,
      });
      const r = await actions.planItem(item.id, d.cap ?? 'propose', { save: true });
      return { verdict, queued: r.queued };
    }),
    status: mapped(async (o) => {
      const w = await ws(o.workspace);
      return w ? actions.status(w.id, o.mode ?? d.cap ?? 'propose') : null;
    }),
    gates: mapped(async (o) => {
      const w = await ws(o.workspace);
      return w ? [...(await actions.gates(w.id)).values()] : null;
    }),
    apply: mapped(async (o) => {
      const worker = await ActionsWorker.create({
        store: d.store,
        actions,
        config: d.config,
        cap: o.mode ?? 'apply',
        logger: d.logger,
        workerId: `${hostname()}:${process.pid}`,
        tickMs: 1_000,
        token: o.token,
        baseUrl: o.baseUrl,
      });
      if (!worker) return { planned: 0, queued: 0, delivered: 0, failed: 0, github: null };
      return worker.drain(o.signal ?? new AbortController().signal);
    }),
  };
}

/**
 * The webhook options of a Verdict with actions (DESIGN §17): its label rule, and people's label
 * changes recorded as verdicts in the delivery's transaction.
 */
export function webhookActionOptions(d: ActionsApiDeps): ApplyWebhookOptions {
  if (d.config.keys.length === 0) return { labelRule: d.config.labels };
  return {
    labelRule: d.config.labels,
    afterIssue: async (tx, target, e, itemId) => {
      await applyLabelFeedback(
        {
          config: d.config,
          registry: d.registry,
          logger: d.logger,
          reader: (s) => openReader(s, d.registry, d.readsAgainst, d.logger),
          record: (s, reader, input) => recordVerdict(s, reader, input),
        },
        tx,
        target,
        e,
        itemId,
      );
    },
  };
}
