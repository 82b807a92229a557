import { randomUUID } from 'node:crypto';
import { isTerminal } from '../decision/eligibility.js';
import { pickedLevel } from '../decision/questions.js';
import type { Registry } from '../decision/registry.js';
import { latestEvalResults } from '../eval/eval-results.js';
import { githubWorkspaceMetaKey } from '../integrations/github/mapping.js';
import type { Logger } from '../log.js';
import type { DecisionReader, DecisionView } from '../reads/reads.js';
import type { ItemActionRow, PlannedAction } from '../store/actions.js';
import type { MetaStore } from '../store/meta-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { ActionStore } from '../store/actions.js';
import type { HumanVerdictStore } from '../store/verdicts.js';
import type { Store } from '../store/whole-store.js';
import { stricterMode, type ActionMode, type ActionsConfig, type KeyAction } from './config.js';
import { judgeGate, type GateStatus } from './gate.js';
import { planKey, sameLabels } from './plan.js';

/**
 * Actions in GitHub (DESIGN §17), the library's side: planning each (item, key) that acts
 * (plan.ts's rule over the reads), the gate per key (gate.ts), the proposals a person applies or
 * dismisses, and the `github` outbox rows the deliverer (github-delivery.ts) turns into label
 * writes. Planning runs beside the worker's slots (`planPass`, after answers and verdicts are
 * stored), from `verdict actions plan|apply`, and after a proposal is decided; it never runs on a
 * job's path.
 */

/** What the actions need. */
export interface ActionsDeps {
  store: Pick<TrackerReads, 'getItem'> &
    ActionStore &
    MetaStore &
    Pick<HumanVerdictStore, 'listVerdicts'> &
    Pick<Store, 'loadItemForEvaluation'>;
  registry: Registry;
  config: ActionsConfig;
  /** A reader judged against the provider in force (compose/reader.ts `openReader`). */
  reader: () => Promise<DecisionReader>;
  logger: Logger;
}

/** The change a `github` outbox row carries (its payload, JSON): ids, labels and the comment only, never item text. */
export interface LabelChange {
  /** `owner/name`. */
  repo: string;
  /** The issue number. */
  number: number;
  set: string;
  key: string;
  /** Every label of the key's group. */
  group: string[];
  /** The group's labels the issue should carry. */
  want: string[];
  /** The one-line comment to post when a label is added and none was posted for (item, key); null for none. */
  comment: string | null;
}

/** `verdict_meta`: where the planning pass has read `item_decisions` and `human_verdicts` to (PlanCursor, in this file). */
export const ACTIONS_CURSOR_META_KEY = 'actions:cursor';
/** `verdict_meta`: per workspace, each acting key's mode, gate and labels at the last pass (a change re-plans the key's items). */
const actionsGateMetaKey = (workspaceId: string) => `actions:gate:${workspaceId}`;
/** `verdict_meta`: Verdict's own GitHub login, learnt from the token when the config names none. */
export const ACTIONS_IDENTITY_META_KEY = 'actions:github:identity';

/** Items planned per read of the cursor (each is a handful of reads; the pass yields between batches). */
const PLAN_BATCH = 200;

/** The outbox target of a repository: one line of the outbox per (repository, item). */
const githubTargetUrl = (repo: string) => `github:${repo.toLowerCase()}`;

/** The issue number of a GitHub item's ref (`#12`), or null for another tracker's ref. */
function issueNumberOf(ref: string): number | null {
  const m = /^#(\d+)$/.exec(ref);
  return m ? Number(m[1]) : null;
}

/** One entry of a dry run (`verdict actions plan`): what would be written, or proposed, for one (item, key). */
export interface PlanEntry {
  ref: string;
  set: string;
  key: string;
  /** Labels to add and remove now (against the labels last seen on the issue); null when nothing would be written. */
  write: { add: string[]; remove: string[]; source: 'model' | 'human' } | null;
  /** The model's labels held back, and why; null when none. */
  proposal: { labels: string[]; reason: string } | null;
  gate: GateStatus;
}

/** A proposal, as the dashboard, the API and MCP list it. */
export interface Proposal {
  ref: string;
  title: string;
  set: string;
  key: string;
  /** The labels the model's answer asks for (the group's others are removed). */
  labels: string[];
  /** The group's labels last seen on the issue, or null when unknown. */
  current: string[] | null;
  reason: 'gate' | 'mode' | 'person';
  /** The model's decision in short: `yes (p=0.91)`, `bug (p=0.62)`, `large (p=0.40)`. */
  decision: string;
}

/** Counts and the gate of one key in a workspace (`status`, the dashboard). */
export interface KeyActionStatus {
  set: string;
  key: string;
  mode: ActionMode;
  gate: GateStatus;
  /** Items whose issue carries a label of the key's group (as last seen). */
  applied: number;
  proposed: number;
  /** Label writes queued and not yet delivered. */
  pending: number;
  /** Of them, writes that failed at least once (retried with backoff). */
  failed: number;
}

/** The decision of a view in short (no text): `yes (p=0.91)`, `bug (p=0.62)`, `large (p=0.40)`. */
function shortDecision(view: DecisionView | undefined): string {
  if (!view) return 'no answer';
  const a = view.modelAnswer;
  if (a.type === 'noul') return `${a.noul >= view.threshold ? 'yes' : 'no'} (p=${a.noul.toFixed(2)})`;
  if (a.type === 'choice') return `${a.choice} (p=${(a.probabilities[a.choice] ?? 0).toFixed(2)})`;
  return `${pickedLevel(a)} (p=${(view.confidence ?? 0).toFixed(2)})`;
}

/** The comment text (DESIGN §17): the template with ids and the decision; `{link}` from the config's link. */
export function renderComment(
  cfg: ActionsConfig,
  o: { set: string; key: string; ref: string; workspace: string; decision: string },
): string {
  // Every occurrence, and replaced by a function: a value's `$&` or `$1` is text, not a pattern.
  const fill = (text: string, values: Record<string, string>) =>
    text.replace(/\{(\w+)\}/g, (m, name: string) => (Object.hasOwn(values, name) ? values[name] : m));
  const link = cfg.link
    ? fill(cfg.link, { ref: encodeURIComponent(o.ref), workspace: encodeURIComponent(o.workspace) })
    : '';
  return fill(cfg.commentTemplate, { set: o.set, key: o.key, ref: o.ref, decision: o.decision, link })
    .replace(/\s+/g, ' ')
    .trim();
}

/** The repository a workspace holds (`import github` and the webhook record it), or null: not a GitHub workspace. */
async function repoOfWorkspace(store: Pick<MetaStore, 'getMeta'>, workspaceId: string): Promise<string | null> {
  return store.getMeta(githubWorkspaceMetaKey(workspaceId));
}

/** Planning, proposals, gate and status (see the file comment). */
export class Actions {
  constructor(private d: ActionsDeps) {}

  /** Puts a reloaded actions config in force (a worker's SIGHUP): the next planning pass plans by it. */
  setConfig(config: ActionsConfig): void {
    this.d = { ...this.d, config };
  }

  /** The sets that act. */
  get sets(): string[] {
    return [...new Set(this.d.config.keys.map((k) => k.set))].sort();
  }

  /** The mode of a set: the config's, capped by `cap` (a worker's `--actions`). */
  modeOf(set: string, cap: ActionMode): ActionMode {
    return stricterMode(this.d.config.modes[set] ?? 'off', cap);
  }

  /** The gate of every key that acts, in one workspace. */
  async gates(workspaceId: string): Promise<Map<string, GateStatus>> {
    const out = new Map<string, GateStatus>();
    if (this.d.config.keys.length === 0) return out;
    const gold = new Map((await latestEvalResults(this.d.store, workspaceId)).map((r) => [r.set, r]));
    for (const set of this.sets) {
      const rows = await this.d.store.labelledAnswers(workspaceId, set);
      const threshold = this.d.registry.get(set)?.threshold ?? 1;
      for (const k of this.d.config.keys.filter((x) => x.set === set))
        out.set(`${set}/${k.key}`, judgeGate(k, threshold, rows, gold.get(set)));
    }
    return out;
  }

  /**
   * Plans every acting key of one item (plan.ts) and, with `save`, stores the plans and queues a
   * `github` outbox row for each `want` not yet handed over. An item outside a GitHub workspace has
   * nothing to plan. @returns the plans (with the rows as they were before), and how many writes were queued.
   */
  async planItem(
    itemId: string,
    cap: ActionMode,
    o: { save: boolean; gates?: Map<string, GateStatus> },
  ): Promise<{
    plans: Array<{ plan: PlannedAction; before: ItemActionRow | undefined; action: KeyAction }>;
    queued: number;
    ref: string | null;
  }> {
    const s = this.d.store;
    const loaded = await s.loadItemForEvaluation(itemId);
    const item = loaded?.item ?? (await s.getItem(itemId));
    if (!item || this.d.config.keys.length === 0) return { plans: [], queued: 0, ref: item?.ref ?? null };
    const repo = await repoOfWorkspace(s, item.workspaceId);
    const number = issueNumberOf(item.ref);
    if (!repo || number === null) return { plans: [], queued: 0, ref: item.ref };
    const slug = loaded?.collection.slug ?? null;
    const closedOrGone =
      !loaded ||
      loaded.item.deletedAt !== null ||
      loaded.collection.deletedAt !== null ||
      loaded.workspace.deletedAt !== null ||
      isTerminal(loaded.item, loaded.collection);
    const covering = new Set(slug === null ? [] : this.d.registry.setsFor(slug).map((x) => x.name));
    const gates = o.gates ?? (await this.gates(item.workspaceId));
    const views = await (await this.d.reader()).decisions(itemId);
    const judged = new Set(
      (await s.listVerdicts({ workspaceId: item.workspaceId, itemId }))
        .map((v) => v.decisionId)
        .filter((x): x is number => x !== null),
    );
    const rows = new Map((await s.listItemActions(itemId)).map((r) => [`${r.questionSet}/${r.questionKey}`, r]));
    const plans: Array<{ plan: PlannedAction; before: ItemActionRow | undefined; action: KeyAction }> = [];
    let queued = 0;
    for (const action of this.d.config.keys) {
      const before = rows.get(`${action.set}/${action.key}`);
      if (!covering.has(action.set) && !before) continue;
      const set = this.d.registry.get(action.set)!;
      const view = views.find((v) => v.questionSet === action.set && v.questionKey === action.key);
      const plan = planKey({
        action,
        workspaceId: item.workspaceId,
        itemId,
        view,
        threshold: set.threshold,
        mode: this.modeOf(action.set, cap),
        gatePasses: gates.get(`${action.set}/${action.key}`)?.passes ?? false,
        judgedRows: judged,
        applied: before?.applied ?? null,
        closedOrGone,
      });
      plans.push({ plan, before, action });
      if (!o.save || unchanged(plan, before)) continue;
      const ws = loaded?.workspace.slug ?? '';
      const wantsComment = action.comment && plan.want !== null && plan.want.length > 0 && !before?.commentedAt;
      const change: LabelChange | null =
        plan.want === null
          ? null
          : {
              repo,
              number,
              set: action.set,
              key: action.key,
              group: [...action.group],
              want: plan.want,
              comment: wantsComment
                ? renderComment(this.d.config, {
                    set: action.set,
                    key: action.key,
                    ref: item.ref,
                    workspace: ws,
                    decision: shortDecision(view),
                  })
                : null,
            };
      const q = await s.saveItemAction(
        plan,
        change && { targetUrl: githubTargetUrl(repo), eventId: randomUUID(), payload: JSON.stringify(change) },
      );
      if (q) queued++;
    }
    return { plans, queued, ref: item.ref };
  }

  /**
   * The planning pass of a worker: plans the items with answers or verdicts stored since the last
   * pass (PlanCursor: safe where ids commit out of order), and every item of a key whose gate
   * changed since. Cheap when nothing changed: two indexed reads and one per GitHub workspace.
   * @returns items planned and writes queued.
   */
  async planPass(cap: ActionMode, signal?: AbortSignal): Promise<{ items: number; queued: number }> {
    const s = this.d.store;
    let items = 0;
    let queued = 0;
    if (this.d.config.keys.length === 0 || cap === 'off') return { items, queued };
    const gatesByWs = new Map<string, Map<string, GateStatus>>();
    const gatesOf = async (ws: string) => {
      let g = gatesByWs.get(ws);
      if (!g) gatesByWs.set(ws, (g = await this.gates(ws)));
      return g;
    };
    // Items planned in this pass (each once).
    const planned = new Set<string>();
    // Keys whose gate, mode or labels moved (a gate met or lost, a reloaded config): every item of
    // the key's set in that workspace is planned again.
    for (const row of await s.listMeta('github:workspace:')) {
      const ws = row.key.slice('github:workspace:'.length);
      const gates = await gatesOf(ws);
      const now = this.d.config.keys
        .map(
          (k) =>
            `${k.set}/${k.key} ${this.modeOf(k.set, cap)} ${gates.get(`${k.set}/${k.key}`)?.passes ? 'passes' : 'held'} ${k.group.join(',')}`,
        )
        .sort();
      const was = parseKeys(await s.getMeta(actionsGateMetaKey(ws)));
      const movedKeys = [...now.filter((k) => !was.includes(k)), ...was.filter((k) => !now.includes(k))];
      if (movedKeys.length === 0) continue;
      const moved = new Set(movedKeys.map((k) => k.slice(0, k.indexOf('/'))).filter((set) => this.sets.includes(set)));
      for (const set of moved) {
        for (let after: string | undefined; ;) {
          const ids = await s.actionItemsOfSet({
            workspaceId: ws,
            questionSet: set,
            afterItemId: after,
            limit: PLAN_BATCH,
          });
          for (const id of ids) {
            if (planned.has(id)) continue;
            planned.add(id);
            queued += (await this.planItem(id, cap, { save: true, gates })).queued;
            items++;
          }
          if (ids.length < PLAN_BATCH || signal?.aborted) break;
          after = ids[ids.length - 1];
        }
      }
      await s.setMeta(actionsGateMetaKey(ws), JSON.stringify(now));
    }
    // Answers and verdicts stored since the last pass, by the cursor (see PlanCursor).
    const cursor = parseCursor(await s.getMeta(ACTIONS_CURSOR_META_KEY));
    const settled = cursor.mark === null || (await s.actionWritersEnded(cursor.mark));
    const planAll = async (ids: Iterable<string>) => {
      for (const id of ids) {
        if (planned.has(id)) continue;
        planned.add(id);
        const item = await s.getItem(id);
        queued += (
          await this.planItem(id, cap, { save: true, gates: item ? await gatesOf(item.workspaceId) : undefined })
        ).queued;
        items++;
      }
    };
    const save = () => s.setMeta(ACTIONS_CURSOR_META_KEY, JSON.stringify(cursor));
    for (const table of ['decisions', 'verdicts'] as const) {
      const side = cursor[table];
      if (side.gaps.length > 0) {
        const got = await s.actionRows({ table, sets: this.sets, ids: side.gaps, limit: side.gaps.length });
        await planAll(got.rows.filter((r) => r.acts).map((r) => r.itemId));
        const found = new Set(got.rows.map((r) => r.id));
        // Once every writer open at the mark has ended, a gap still missing never commits (rolled back, or an insert that met a conflict).
        side.gaps = settled ? [] : side.gaps.filter((g) => !found.has(g));
        cursor.mark = got.mark ?? cursor.mark;
        await save();
      }
      for (;;) {
        if (signal?.aborted) break;
        const got = await s.actionRows({ table, sets: this.sets, after: side.to, limit: PLAN_BATCH });
        if (got.rows.length === 0) break;
        await planAll(got.rows.filter((r) => r.acts).map((r) => r.itemId));
        if (got.mark !== null) {
          let next = side.to + 1;
          for (const r of got.rows) {
            for (; next < r.id && side.gaps.length < MAX_CURSOR_GAPS; next++) side.gaps.push(next);
            next = r.id + 1;
          }
          cursor.mark = got.mark;
        }
        side.to = got.rows[got.rows.length - 1].id;
        await save();
      }
    }
    if (cursor.decisions.gaps.length === 0 && cursor.verdicts.gaps.length === 0 && cursor.mark !== null) {
      cursor.mark = null;
      await save();
    }
    if (items > 0) this.d.logger.info({ items, queued }, 'actions planned');
    return { items, queued };
  }

  /**
   * The dry run of one workspace (`verdict actions plan`): for every item with an acting key, what
   * would be written now and what is proposed, with the key's gate; nothing is stored or queued.
   */
  async dryRun(workspaceId: string, cap: ActionMode): Promise<PlanEntry[]> {
    const gates = await this.gates(workspaceId);
    const out: PlanEntry[] = [];
    for (const set of this.sets) {
      for (let after: string | undefined; ;) {
        const ids = await this.d.store.actionItemsOfSet({
          workspaceId,
          questionSet: set,
          afterItemId: after,
          limit: PLAN_BATCH,
        });
        for (const id of ids) {
          const r = await this.planItem(id, cap, { save: false, gates });
          for (const { plan, before, action } of r.plans) {
            if (plan.questionSet !== set) continue;
            const seen = before?.applied ?? [];
            const add = plan.want?.filter((l) => !seen.some((x) => x.toLowerCase() === l.toLowerCase())) ?? [];
            const remove =
              plan.want === null
                ? []
                : seen.filter(
                    (l) =>
                      action.group.some((g) => g.toLowerCase() === l.toLowerCase()) &&
                      !plan.want!.some((w) => w.toLowerCase() === l.toLowerCase()),
                  );
            const write =
              plan.want !== null && (add.length || remove.length) ? { add, remove, source: plan.source! } : null;
            const proposal = plan.proposal ? { labels: plan.proposal, reason: plan.proposalReason! } : null;
            if (write || proposal)
              out.push({
                ref: r.ref!,
                set: action.set,
                key: action.key,
                write,
                proposal,
                gate: gates.get(`${action.set}/${action.key}`)!,
              });
          }
        }
        if (ids.length < PLAN_BATCH) break;
        after = ids[ids.length - 1];
      }
    }
    return out.sort(
      (a, b) =>
        cmpRef(a.ref, b.ref) ||
        (a.set < b.set ? -1 : a.set > b.set ? 1 : 0) ||
        (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
    );
  }

  /** The open proposals of a workspace, by ref. */
  async proposals(workspaceId: string, o: { limit?: number } = {}): Promise<Proposal[]> {
    const rows = await this.d.store.listWorkspaceActions({ workspaceId, proposalsOnly: true, limit: o.limit });
    const reader = await this.d.reader();
    const out: Proposal[] = [];
    for (const r of rows) {
      const item = await this.d.store.getItem(r.itemId);
      if (!item) continue;
      const view = (await reader.decisions(r.itemId)).find(
        (v) => v.questionSet === r.questionSet && v.questionKey === r.questionKey,
      );
      out.push({
        ref: item.ref,
        title: item.title,
        set: r.questionSet,
        key: r.questionKey,
        labels: r.proposal!,
        current: r.applied,
        reason: r.proposalReason!,
        decision: shortDecision(view),
      });
    }
    return out.sort((a, b) => cmpRef(a.ref, b.ref) || (a.set < b.set ? -1 : 1) || (a.key < b.key ? -1 : 1));
  }

  /** Counts and the gate per acting key of a workspace. */
  async status(workspaceId: string, cap: ActionMode): Promise<KeyActionStatus[]> {
    const gates = await this.gates(workspaceId);
    const rows = await this.d.store.listWorkspaceActions({ workspaceId });
    const pending = (await this.d.store.pendingActionWrites(workspaceId)).map((p) => ({
      ...p,
      change: parseChange(p.payload),
    }));
    return this.d.config.keys.map((k) => {
      const mine = rows.filter((r) => r.questionSet === k.set && r.questionKey === k.key);
      const writes = pending.filter((p) => p.change?.set === k.set && p.change.key === k.key);
      return {
        set: k.set,
        key: k.key,
        mode: this.modeOf(k.set, cap),
        gate: gates.get(`${k.set}/${k.key}`)!,
        applied: mine.filter((r) => (r.applied?.length ?? 0) > 0).length,
        proposed: mine.filter((r) => r.proposal !== null).length,
        pending: writes.length,
        failed: writes.filter((p) => p.attempts > 0).length,
      };
    });
  }

  /** The action of (set, key), or undefined. */
  actionOf(set: string, key: string): KeyAction | undefined {
    return this.d.config.keys.find((k) => k.set === set && k.key === key);
  }
}

/** A plan that changes nothing stored: the same plan as the row holds, and no write to hand over. */
function unchanged(p: PlannedAction, before: ItemActionRow | undefined): boolean {
  if (!before) return p.want === null && p.proposal === null;
  const eq = (a: readonly string[] | null, b: readonly string[] | null) =>
    a === null || b === null ? a === b : sameLabels(a, b);
  return (
    eq(p.want, before.want) &&
    p.source === before.source &&
    p.decisionId === before.decisionId &&
    eq(p.proposal, before.proposal) &&
    p.proposalReason === before.proposalReason &&
    p.proposalDecisionId === before.proposalDecisionId &&
    (p.want === null || eq(p.want, before.queued))
  );
}

function parseKeys(text: string | null): string[] {
  try {
    const v = text === null ? [] : (JSON.parse(text) as unknown);
    return Array.isArray(v) ? v.filter((k): k is string => typeof k === 'string') : [];
  } catch {
    return [];
  }
}

/**
 * The planning pass's place in `item_decisions` and `human_verdicts` (`verdict_meta`
 * ACTIONS_CURSOR_META_KEY, JSON). Per table, `to` is the largest id read, and `gaps` the ids
 * below it the read did not see. On Postgres an id is taken at insert and seen at commit, so a
 * smaller id may commit after a larger one was read: each pass reads its gaps again (a row found
 * is planned), and drops them once every transaction open at `mark` (the database clock after the
 * last read, µs) has ended (Store `actionWritersEnded`): a gap still missing then never commits.
 * On SQLite ids commit in order: no gaps, `mark` null.
 */
interface PlanCursor {
  decisions: { to: number; gaps: number[] };
  verdicts: { to: number; gaps: number[] };
  mark: number | null;
}

/**
 * Gaps kept per table: ids missing in a burst (inserts that met a conflict take ids too) beyond it
 * are not re-read; the burst's rows that commit late are planned at the item's next answer or verdict.
 */
const MAX_CURSOR_GAPS = 10_000;

function parseCursor(text: string | null): PlanCursor {
  const side = (v: unknown): { to: number; gaps: number[] } => {
    // A bare number: a cursor stored before gaps were kept.
    if (typeof v === 'number' || typeof v === 'string') return { to: Number(v) || 0, gaps: [] };
    const o = (v ?? {}) as { to?: unknown; gaps?: unknown };
    return {
      to: Number(o.to) || 0,
      gaps: Array.isArray(o.gaps) ? o.gaps.map(Number).filter(Number.isSafeInteger) : [],
    };
  };
  try {
    const v = text === null ? null : (JSON.parse(text) as { decisions?: unknown; verdicts?: unknown; mark?: unknown });
    return {
      decisions: side(v?.decisions),
      verdicts: side(v?.verdicts),
      mark: typeof v?.mark === 'number' ? v.mark : null,
    };
  } catch {
    return { decisions: side(0), verdicts: side(0), mark: null };
  }
}

/** A `github` outbox payload, or null when it is not one. */
export function parseChange(payload: string): LabelChange | null {
  try {
    const c = JSON.parse(payload) as LabelChange;
    return typeof c.repo === 'string' && Number.isInteger(c.number) && Array.isArray(c.want) && Array.isArray(c.group)
      ? c
      : null;
  } catch {
    return null;
  }
}

/** `#2` before `#10`; other refs in code-unit order after. */
function cmpRef(a: string, b: string): number {
  const x = issueNumberOf(a);
  const y = issueNumberOf(b);
  if (x !== null && y !== null) return x - y;
  return a < b ? -1 : a > b ? 1 : 0;
}
