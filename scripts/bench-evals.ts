import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRegistry } from '../src/compose/open.js';
import { attentionSet, effortSet } from '../src/decision/production-sets.js';
import { Registry, type QuestionSet } from '../src/decision/registry.js';
import { FakeProvider } from '../src/providers/fake.js';
import type { RunReport } from '../src/runner/job-life.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { PRIORITY_BACKFILL } from '../src/store/queue-store.js';
import type { Store } from '../src/store/whole-store.js';
import { Worker, type WorkerSummary } from '../src/worker/worker.js';
import { drainLean, writeDoorLean, type LeanOptions, type LeanSet } from './bench-lean.js';
import { BENCH_DRAIN, seedBenchItems } from './bench-seed.js';

/**
 * Parts f, g and h of `npm run bench` (scripts/bench.ts): full evaluations, the already-answered
 * skip path, and the write door's cost to the tracker, each beside the lean reference
 * (scripts/bench-lean.ts) in the same run, as jobs/s and CPU µs per job (`process.cpuUsage`, user +
 * system: steady on a loaded machine, where wall time is not). They reach the store only through its
 * public methods (the Store interface and the SqliteStore constructor), so they keep measuring the
 * same thing when the store's internals change.
 */

/**
 * The sets the evaluation parts owe: the fixed-question production sets, which read the same state,
 * so co-asking asks both in one call per item (the conventions sets would complete without a call
 * in a workspace with no conventions, which would measure claims, not evaluations).
 */
const EVAL_SETS: readonly QuestionSet[] = [attentionSet, effortSet];

interface TempDb {
  file: string;
  done(): void;
}

function tempDb(): TempDb {
  const dir = mkdtempSync(join(tmpdir(), 'verdict-bench-'));
  return { file: join(dir, 'bench.db'), done: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A SQLite store whose write doors owe `EVAL_SETS`, one workspace, one `task` collection with a terminal status. */
interface Seeded {
  db: TempDb;
  store: Store;
  registry: Registry;
  itemIds: string[];
  close(): Promise<void>;
}

async function openSeeded(items: number, registry: Registry): Promise<Seeded> {
  const db = tempDb();
  const store = new SqliteStore({ url: db.file, registry });
  const itemIds = await seedBenchItems(store, items);
  return seededOn(db, store, registry, itemIds);
}

function seededOn(db: TempDb, store: Store, registry: Registry, itemIds: string[]): Seeded {
  return {
    db,
    store,
    registry,
    itemIds,
    close: async () => {
      await store.close();
      db.done();
    },
  };
}

/**
 * One seeded database (every job owed), closed, copied for each run: every run starts from the
 * same bytes, and seeding is paid once.
 */
class Template {
  private constructor(
    private readonly db: TempDb,
    readonly itemIds: string[],
  ) {}

  static async make(items: number): Promise<Template> {
    const s = await openSeeded(items, new Registry([...EVAL_SETS]));
    await s.store.close();
    return new Template(s.db, s.itemIds);
  }

  /** A copy of the template's file, for a run to change. */
  copy(): TempDb {
    const t = tempDb();
    copyFileSync(this.db.file, t.file);
    return t;
  }

  /** A copy opened as a store. */
  open(): Seeded {
    const t = this.copy();
    const registry = new Registry([...EVAL_SETS]);
    return seededOn(t, new SqliteStore({ url: t.file, registry }), registry, this.itemIds);
  }

  done(): void {
    this.db.done();
  }
}

/** Drains every claimable job with the real Worker (`untilIdle`), fake provider at 0 ms; wall seconds and the process's CPU µs. */
async function drain(
  s: Seeded,
  concurrency: number,
  coAsk: boolean,
): Promise<{
  summary: WorkerSummary;
  seconds: number;
  cpuUs: number;
  reasons: Map<string, number>;
  provider: FakeProvider;
}> {
  // Keeps no request log: a running worker's fake (createProvider) keeps none, and 20,000 kept
  // states held about 40 MB that major GCs then walked inside the measured drain.
  const provider = new FakeProvider({ latencyMs: 0, keepRequests: false });
  const reasons = new Map<string, number>();
  const onOutcome = (r: RunReport) => {
    const k = `${r.outcome.kind}:${r.outcome.reason ?? ''}`;
    reasons.set(k, (reasons.get(k) ?? 0) + 1);
  };
  const worker = new Worker({
    store: s.store,
    registry: s.registry,
    provider,
    ...BENCH_DRAIN,
    workerId: 'bench',
    concurrency,
    coAsk,
    onOutcome,
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const summary = await worker.run();
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { summary, seconds, cpuUs: cpu.user + cpu.system, reasons, provider };
}

function describeReasons(reasons: Map<string, number>): string {
  return JSON.stringify(Object.fromEntries(reasons));
}

/** The evaluation sets as the lean reference answers them. */
function leanSets(): LeanSet[] {
  return EVAL_SETS.map((set) => ({
    name: set.name,
    keys: Object.entries(set.questions ?? {}).map(([key, q]) => ({ key, kind: q.kind })),
  }));
}

/** One measured drain: who ran it, how, and its rate and CPU per job. */
export interface Rate {
  /** `verdict` or `lean`. */
  who: 'verdict' | 'lean';
  /** `c1`, `c16` for Verdict's concurrency; `fused`, `group16` for the reference's variant. */
  how: string;
  coAsk: boolean;
  jobs: number;
  perSecond: number;
  /** Process CPU (user + system) µs per job. */
  cpuUsPerJob: number;
  seconds: number;
  /** Which of the paired rounds (`roundsAt`) this drain was, from 0. */
  round: number;
}

function rate(
  who: Rate['who'],
  how: string,
  coAsk: boolean,
  jobs: number,
  seconds: number,
  cpuUs: number,
  round: number,
): Rate {
  return { who, how, coAsk, jobs, perSecond: jobs / seconds, cpuUsPerJob: cpuUs / jobs, seconds, round };
}

/**
 * Paired rounds (a Verdict drain, then its lean peer's) at the concurrency the targets judge (the
 * last of `concurrencies`), one at the others. One pair of 20,000-job drains put the CPU ratio
 * anywhere between 1.55× and 1.67× from one run to the next on an idle machine (part f at c16,
 * co-asking off, three runs of the same commit), and single rounds of one run between 1.38× and
 * 2.11×: a swing as wide as the distance to the target. The median of five paired ratios is what
 * the summary judges.
 */
const JUDGED_ROUNDS = 5;
function roundsAt(concurrency: number, concurrencies: readonly number[]): number {
  return concurrency === concurrencies[concurrencies.length - 1] ? JUDGED_ROUNDS : 1;
}

/** The lean variant Verdict's run at `concurrency` is judged against: the fused one for one slot, group commit otherwise. */
export function leanPeer(concurrency: number): { how: string; opts: Omit<LeanOptions, 'coAsk'> } {
  return concurrency === 1
    ? { how: 'fused', opts: { variant: 'fused' } }
    : { how: `group${concurrency}`, opts: { variant: 'group', slots: concurrency } };
}

// ---------------------------------------------------------------------------------------- f

/**
 * Part f: `jobs` full evaluations (claim, item and state, idempotency read, liveness, a fake call at
 * 0 ms, answers, spend, complete), with co-asking on and off, through the real Worker at each
 * concurrency and through the lean reference's matching variant (`leanPeer`), each on its own copy
 * of one seeded database, Verdict and the reference interleaved. Each co-asking mode starts with
 * an untimed warm-up drain of both sides (`warmUpF`), so the figures are a running worker's.
 * @throws Error when a drain ran fewer jobs or another number of calls than it should.
 */
export async function benchFullEvaluations(jobs: number, concurrencies: readonly number[]): Promise<Rate[]> {
  const items = Math.ceil(jobs / EVAL_SETS.length);
  const total = items * EVAL_SETS.length;
  const template = await Template.make(items);
  const rates: Rate[] = [];
  try {
    for (const coAsk of [true, false]) {
      // Co-asking (DESIGN §7.2): an item's two sets read the same state, so one call answers both
      // of its jobs; without it, one call per job. Every job still completes answered on its own.
      const calls = coAsk ? items : total;
      await warmUpF(template, concurrencies, coAsk);
      for (const concurrency of concurrencies)
        for (let round = 0; round < roundsAt(concurrency, concurrencies); round++) {
          const s = template.open();
          try {
            const r = await drain(s, concurrency, coAsk);
            const completed = r.reasons.get('complete:answered') ?? 0;
            if (
              r.summary.claimed !== total ||
              r.summary.calls !== calls ||
              completed !== total ||
              r.provider.calls !== calls
            ) {
              throw new Error(
                `f: concurrency ${concurrency}, co-ask ${coAsk} ran ${r.summary.claimed} of ${total} jobs, ${r.summary.calls} calls, outcomes ${describeReasons(r.reasons)}`,
              );
            }
            rates.push(rate('verdict', `c${concurrency}`, coAsk, total, r.seconds, r.cpuUs, round));
          } finally {
            await s.close();
          }
          const peer = leanPeer(concurrency);
          const t = template.copy();
          try {
            const r = await drainLean(t.file, leanSets(), { ...peer.opts, coAsk });
            if (r.jobs !== total || r.calls !== calls)
              throw new Error(
                `f: the lean reference (${peer.how}, co-ask ${coAsk}) ran ${r.jobs} of ${total} jobs, ${r.calls} calls`,
              );
            rates.push(rate('lean', peer.how, coAsk, total, r.seconds, r.cpuUs, round));
          } finally {
            t.done();
          }
        }
    }
    return rates;
  } finally {
    template.done();
  }
}

/**
 * Part f's warm-up for one co-asking mode: Node 20's new-Worker cost first (`settleWorkers`), then
 * one untimed drain of Verdict at the judged (largest) concurrency and one of its lean peer, each on
 * a fresh copy of the template. A worker runs for hours, so what it costs per job is the cost once
 * V8 has compiled its path; the first drain of a process paid about twice that (measured over five
 * successive 2,000-job drains at c16: 540-680, then 220-270 CPU µs per job), while the lean
 * reference, a few plain functions, was steady from its first.
 * Without it the judged drain was only the process's second and measured part of the warm-up.
 */
async function warmUpF(template: Template, concurrencies: readonly number[], coAsk: boolean): Promise<void> {
  const judged = concurrencies[concurrencies.length - 1]!;
  await settleWorkers(judged, coAsk);
  await untimedPair(template, judged, coAsk);
}

/** One untimed drain of Verdict (a new Worker) and one of its lean peer, each on a fresh copy of `template`. */
async function untimedPair(template: Template, concurrency: number, coAsk: boolean): Promise<void> {
  const s = template.open();
  try {
    await drain(s, concurrency, coAsk);
  } finally {
    await s.close();
  }
  const t = template.copy();
  try {
    await drainLean(t.file, leanSets(), { ...leanPeer(concurrency).opts, coAsk });
  } finally {
    t.done();
  }
}

/**
 * Drains before a co-asking mode's judged rounds that each start a new Worker (and its lean peer
 * as many times, so both sides are treated alike).
 *
 * Why: on Node 20 no two AbortSignals share a hidden class (`%HaveSameMap` of two
 * `new AbortController().signal` is false; on Node 22 it is true), and every part builds a new
 * Worker, with new signals, per drain. Each new Worker's first drain deoptimises the functions
 * that read its signal once per job (`runOnce`, `sendCall`, the fake's `ask`) until their inline
 * caches have seen enough maps to go megamorphic, after about five Workers. A worker process
 * builds one Worker and runs it for hours. Measured, co-asking off, c16, 8,000-job drains, a new
 * Worker each, one process: 368, 279, 267, 320, 300, then 205, 203, 213 CPU µs per job; co-asking
 * on settled after its first drain (286, then 178-191). Before this, part f judged co-asking off
 * on drains 8 to 10 of the process after five co-asking-on drains, at 222 to 310 CPU µs per job
 * from one run to the next.
 */
const SETTLE_DRAINS = 6;
const SETTLE_ITEMS = 250;
async function settleWorkers(concurrency: number, coAsk: boolean): Promise<void> {
  const small = await Template.make(SETTLE_ITEMS);
  try {
    for (let i = 0; i < SETTLE_DRAINS; i++) await untimedPair(small, concurrency, coAsk);
  } finally {
    small.done();
  }
}

/** Re-owes every (item, set) of the store, with no quiet period and no debounce, as `verdict reask` does; @throws when fewer were owed. */
async function reoweAll(store: Store, itemIds: readonly string[], part: string): Promise<void> {
  let owed = 0;
  for (let i = 0; i < itemIds.length; i += 500) {
    const pairs = itemIds
      .slice(i, i + 500)
      .flatMap((itemId) => EVAL_SETS.map((set) => ({ itemId, questionSet: set.name })));
    owed += await store.oweJobs(pairs, { priority: PRIORITY_BACKFILL, quietPeriod: false, reaskDebounce: false });
  }
  const total = itemIds.length * EVAL_SETS.length;
  if (owed !== total) throw new Error(`${part}: re-owed ${owed} of ${total} jobs`);
}

// ---------------------------------------------------------------------------------------- g

/**
 * Part g: the idempotent skip path. One copy answered by Verdict and one by the lean reference
 * (untimed), then, for each concurrency and co-asking on and off, every job re-owed with the state
 * unchanged (`oweJobs` with no quiet period and no re-ask debounce, as `verdict reask` and the drift
 * sweep owe) and drained again: every job completes as already answered, with no provider call.
 * Each co-asking mode starts with one such drain of both sides, untimed (a warm-up, as part f's).
 * @throws Error when a drain ran fewer jobs, made a call or inserted an answer.
 */
export async function benchAlreadyAnswered(jobs: number, concurrencies: readonly number[]): Promise<Rate[]> {
  const items = Math.ceil(jobs / EVAL_SETS.length);
  const total = items * EVAL_SETS.length;
  const template = await Template.make(items);
  const s = template.open();
  const t = template.copy();
  const rates: Rate[] = [];
  try {
    const first = await drain(s, 16, true);
    if (first.summary.calls !== items)
      throw new Error(
        `g: the first drain made ${first.summary.calls} calls, outcomes ${describeReasons(first.reasons)}`,
      );
    const leanFirst = await drainLean(t.file, leanSets(), { variant: 'group', coAsk: true });
    if (leanFirst.jobs !== total)
      throw new Error(`g: the lean reference's first drain ran ${leanFirst.jobs} of ${total} jobs`);
    // The reference's copy is re-owed through a store of its own, closed while the reference drains.
    const leanOwe = async () => {
      const registry = new Registry([...EVAL_SETS]);
      const store = new SqliteStore({ url: t.file, registry });
      try {
        await reoweAll(store, template.itemIds, 'g');
      } finally {
        await store.close();
      }
    };
    for (const coAsk of [true, false]) {
      // Untimed warm-up of the skip path for this mode, both sides, as part f's (`warmUpF`).
      const judged = concurrencies[concurrencies.length - 1]!;
      await settleWorkers(judged, coAsk);
      await reoweAll(s.store, s.itemIds, 'g');
      await drain(s, judged, coAsk);
      await leanOwe();
      await drainLean(t.file, leanSets(), { ...leanPeer(judged).opts, coAsk });
      for (const concurrency of concurrencies)
        for (let round = 0; round < roundsAt(concurrency, concurrencies); round++) {
          await reoweAll(s.store, s.itemIds, 'g');
          const r = await drain(s, concurrency, coAsk);
          const skipped = r.reasons.get('complete:already_answered') ?? 0;
          if (r.summary.claimed !== total || r.summary.calls !== 0 || skipped !== total) {
            throw new Error(
              `g: concurrency ${concurrency}, co-ask ${coAsk} ran ${r.summary.claimed} of ${total} jobs, ${r.summary.calls} calls, outcomes ${describeReasons(r.reasons)}`,
            );
          }
          rates.push(rate('verdict', `c${concurrency}`, coAsk, total, r.seconds, r.cpuUs, round));
          await leanOwe();
          const peer = leanPeer(concurrency);
          const l = await drainLean(t.file, leanSets(), { ...peer.opts, coAsk });
          if (l.jobs !== total || l.inserted !== 0 || l.calls !== 0)
            throw new Error(
              `g: the lean skip drain (${peer.how}) ran ${l.jobs} of ${total} jobs and inserted ${l.inserted} answers`,
            );
          rates.push(rate('lean', peer.how, coAsk, total, l.seconds, l.cpuUs, round));
        }
    }
    return rates;
  } finally {
    await s.close();
    t.done();
    template.done();
  }
}

// ---------------------------------------------------------------------------------------- h

export interface WriteDoorCost {
  updates: number;
  /** Wall and CPU µs per `updateItem` with the production sets registered, median of the rounds. */
  production: { wallUs: number; cpuUs: number };
  /** The same with no set registered. */
  noSet: { wallUs: number; cpuUs: number };
  /** Jobs the production-set run owed per update (a sanity figure: 0 would mean nothing was measured). */
  owedPerUpdate: number;
  /** The raw reference (scripts/bench-lean.ts `writeDoorLean`): per update, with one job upsert per owed set, and the UPDATE alone. */
  raw: { owing: { wallUs: number; cpuUs: number }; none: { wallUs: number; cpuUs: number } };
}

/**
 * Part h: `updateItem` (a title edit, the door's defaults, as a tracker calls it) on items of a
 * `task` collection with the production sets registered (the CLI's registry, `buildRegistry()`),
 * against the same updates on a store with no set registered (`--provider none`), and the raw
 * reference of both on the same files. Each variant on its own database with the same items;
 * `rounds` alternating rounds after an untimed warm-up, the median wall and CPU µs per update.
 * Co-asking does not enter the write door (it is the worker's).
 */
export async function benchWriteDoor(updates: number, rounds: number): Promise<WriteDoorCost> {
  const items = 200;
  const variants = [
    { name: 'production', registry: buildRegistry() },
    { name: 'none', registry: new Registry([]) },
  ];
  const seeded = await Promise.all(variants.map((v) => openSeeded(items, v.registry)));
  try {
    const wall: number[][] = variants.map(() => []);
    const cpu: number[][] = variants.map(() => []);
    const owed: number[] = variants.map(() => 0);
    // The variants alternate so drift in the machine's speed hits both alike.
    for (let round = 0; round <= rounds; round++) {
      for (const [v, s] of seeded.entries()) {
        let roundOwed = 0;
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        for (let u = 0; u < updates; u++) {
          const w = await s.store.updateItem(s.itemIds[u % items], {
            title: `bench item ${u % items}, revision ${round}.${u}`,
          });
          if (!w.changed) throw new Error(`h: update ${u} changed nothing`);
          roundOwed += w.owed;
        }
        const elapsed = performance.now() - t0;
        const c = process.cpuUsage(cpu0);
        if (round > 0) {
          wall[v].push((elapsed * 1000) / updates);
          cpu[v].push((c.user + c.system) / updates);
          owed[v] += roundOwed;
        }
      }
    }
    if (owed[1] !== 0) throw new Error(`h: the store with no set owed ${owed[1]} jobs`);
    if (owed[0] === 0) throw new Error('h: the production sets owed nothing: the comparison would measure nothing');
    const owedPerUpdate = owed[0] / (updates * rounds);
    // The raw reference on the production store's file (the store closed), owing as many sets per
    // update as the production run did, then on the no-set store's file owing none.
    const owingSets = seeded[0].registry
      .setsFor('task')
      .slice(0, Math.round(owedPerUpdate))
      .map((set) => set.name);
    for (const s of seeded) await s.store.close();
    // Each file with its own items (ids are random per store).
    const raw = (s: Seeded, sets: string[]) => {
      const xs = Array.from({ length: rounds + 1 }, () =>
        writeDoorLean(s.db.file, s.itemIds.slice(0, items), sets, updates),
      ).slice(1);
      return { wallUs: median(xs.map((x) => x.wallUs)), cpuUs: median(xs.map((x) => x.cpuUs)) };
    };
    return {
      updates,
      production: { wallUs: median(wall[0]), cpuUs: median(cpu[0]) },
      noSet: { wallUs: median(wall[1]), cpuUs: median(cpu[1]) },
      owedPerUpdate,
      raw: { owing: raw(seeded[0], owingSets), none: raw(seeded[1], []) },
    };
  } finally {
    for (const s of seeded) s.db.done();
  }
}

/** The median of `xs` (the upper one of an even count). */
export const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
