import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRegistry } from '../src/compose/open.js';
import { attentionSet, effortSet } from '../src/decision/production-sets.js';
import { Registry, type QuestionSet } from '../src/decision/registry.js';
import { silentLogger } from '../src/log.js';
import { FakeProvider } from '../src/providers/fake.js';
import type { RunReport } from '../src/runner/run-once.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { PRIORITY_BACKFILL, type Store } from '../src/store/store.js';
import { Worker, type WorkerSummary } from '../src/worker/worker.js';
import { drainNaive, writeDoorNaive, type NaiveSet } from './bench-naive.js';

/**
 * Parts f, g and h of `npm run bench` (scripts/bench.ts): full evaluations per second, the
 * already-answered skip path, and the write door's cost to the tracker. They reach the store only
 * through its public methods (the Store interface and the SqliteStore constructor), so they keep
 * measuring the same thing when the store's internals change.
 */

/**
 * The sets the evaluation parts owe: the fixed-question production sets, asked together in one
 * provider call per open item (co-asking; the conventions sets would complete without a call in a workspace with no
 * conventions, which would measure claims, not evaluations).
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
export interface Seeded {
  db: TempDb;
  store: Store;
  registry: Registry;
  itemIds: string[];
  close(): Promise<void>;
}

async function openSeeded(items: number, registry: Registry): Promise<Seeded> {
  const db = tempDb();
  const store = new SqliteStore({ url: db.file, registry });
  const ws = await store.createWorkspace({ slug: 'bench' });
  const col = await store.createCollection({
    workspaceId: ws.id,
    slug: 'task',
    schema: { fields: [{ key: 'status', type: 'select', options: ['open', 'closed'], terminal_options: ['closed'] }] },
  });
  const itemIds: string[] = [];
  // Setup, not measured: 500 items per transaction, each owing its jobs at once (no quiet period).
  for (let i = 0; i < items; i += 500) {
    await store.transaction(async (tx) => {
      for (let j = i; j < Math.min(items, i + 500); j++) {
        const w = await tx.createItem(
          { workspaceId: ws.id, collectionId: col.id, ref: `B-${j}`, title: `bench item ${j}`, content: `body of bench item ${j}`, fields: { status: 'open' } },
          { priority: PRIORITY_BACKFILL, quietPeriod: false },
        );
        itemIds.push(w.row.id);
      }
    });
  }
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

/** Drains every claimable job with the real Worker (`untilIdle`), fake provider at 0 ms. */
async function drain(s: Seeded, concurrency: number): Promise<{ summary: WorkerSummary; seconds: number; reasons: Map<string, number>; provider: FakeProvider }> {
  const provider = new FakeProvider({ latencyMs: 0 });
  const reasons = new Map<string, number>();
  const onOutcome = (r: RunReport) => {
    const k = `${r.outcome.kind}:${r.outcome.reason ?? ''}`;
    reasons.set(k, (reasons.get(k) ?? 0) + 1);
  };
  const worker = new Worker({
    store: s.store,
    registry: s.registry,
    provider,
    logger: silentLogger,
    workerId: 'bench',
    concurrency,
    tickMs: 50,
    leaseMs: 60_000,
    passLimit: 1_000,
    abandonLimit: 8,
    untilIdle: true,
    onOutcome,
  });
  const t0 = performance.now();
  const summary = await worker.run();
  return { summary, seconds: (performance.now() - t0) / 1000, reasons, provider };
}

function describeReasons(reasons: Map<string, number>): string {
  return JSON.stringify(Object.fromEntries(reasons));
}

// ---------------------------------------------------------------------------------------- f

export interface EvalRates {
  jobs: number;
  /** Evaluations per second through the Worker, by concurrency. */
  byConcurrency: Array<{ concurrency: number; perSecond: number; seconds: number }>;
  naivePerSecond: number;
  naiveSeconds: number;
}

/**
 * Part f: `jobs` full evaluations (claim, item read and state, idempotency read, liveness, a fake
 * call at 0 ms, one per item as both sets are co-asked, answers, spend, complete) through the real Worker at each concurrency, each on a
 * freshly seeded database, and the naive raw-SQL reference (scripts/bench-naive.ts) on another.
 * `keep` receives the drained store of the first concurrency (every job answered), for part g.
 */
export async function benchFullEvaluations(jobs: number, concurrencies: readonly number[], keep?: (s: Seeded) => void): Promise<EvalRates> {
  const items = Math.ceil(jobs / EVAL_SETS.length);
  const total = items * EVAL_SETS.length;
  const byConcurrency: EvalRates['byConcurrency'] = [];
  for (const [n, concurrency] of concurrencies.entries()) {
    const s = await openSeeded(items, new Registry([...EVAL_SETS]));
    let kept = false;
    try {
      const r = await drain(s, concurrency);
      const completed = r.reasons.get('complete:answered') ?? 0;
      // Co-asking (on by default, DESIGN §16.18): an item's sets read the same state, so one call
      // answers both of its jobs; every job still completes answered on its own.
      if (r.summary.claimed !== total || r.summary.calls !== items || completed !== total || r.provider.requests.length !== items) {
        throw new Error(`f: concurrency ${concurrency} ran ${r.summary.claimed} of ${total} jobs, ${r.summary.calls} calls, outcomes ${describeReasons(r.reasons)}`);
      }
      byConcurrency.push({ concurrency, perSecond: total / r.seconds, seconds: r.seconds });
      if (n === 0 && keep) {
        keep(s);
        kept = true;
      }
    } finally {
      if (!kept) await s.close();
    }
  }
  const ref = await openSeeded(items, new Registry([...EVAL_SETS]));
  try {
    await ref.store.close(); // the reference has the file to itself
    const r = drainNaive(ref.db.file, naiveSets());
    if (r.jobs !== total) throw new Error(`f: the naive reference ran ${r.jobs} of ${total} jobs`);
    return { jobs: total, byConcurrency, naivePerSecond: total / r.seconds, naiveSeconds: r.seconds };
  } finally {
    ref.db.done();
  }
}

/** The evaluation sets as the naive reference answers them. */
function naiveSets(): NaiveSet[] {
  return EVAL_SETS.map((set) => ({ name: set.name, keys: Object.entries(set.questions ?? {}).map(([key, q]) => ({ key, kind: q.kind })) }));
}

/** Re-owes every (item, set) of `s`, with no quiet period and no debounce, as `verdict reask` does; @throws when fewer were owed. */
async function reoweAll(s: Seeded, part: string): Promise<void> {
  let owed = 0;
  for (let i = 0; i < s.itemIds.length; i += 500) {
    const pairs = s.itemIds.slice(i, i + 500).flatMap((itemId) => EVAL_SETS.map((set) => ({ itemId, questionSet: set.name })));
    owed += await s.store.oweJobs(pairs, { priority: PRIORITY_BACKFILL, quietPeriod: false, reaskDebounce: false });
  }
  const total = s.itemIds.length * EVAL_SETS.length;
  if (owed !== total) throw new Error(`${part}: re-owed ${owed} of ${total} jobs`);
}

// ---------------------------------------------------------------------------------------- g

export interface SkipRates {
  jobs: number;
  byConcurrency: Array<{ concurrency: number; perSecond: number; seconds: number }>;
  /** The naive reference's skip path on its own copy (claim, item read, idempotency read, liveness read, complete; each write its own commit). */
  naivePerSecond: number;
}

/**
 * Part g: the idempotent skip path. Every job answered once (`answered`, part f's drained store, or
 * a fresh one drained here untimed), then every job re-owed with the state unchanged
 * (`oweJobs` with no quiet period and no re-ask debounce, as `verdict reask` and the drift sweep
 * owe) and drained again: every job completes as already answered, with no provider call.
 */
export async function benchAlreadyAnswered(jobs: number, concurrencies: readonly number[], answered?: Seeded): Promise<SkipRates> {
  const s = answered ?? (await openSeeded(Math.ceil(jobs / EVAL_SETS.length), new Registry([...EVAL_SETS])));
  try {
    if (!answered) {
      const first = await drain(s, 4);
      if (first.summary.calls !== s.itemIds.length) throw new Error(`g: the first drain made ${first.summary.calls} calls, outcomes ${describeReasons(first.reasons)}`);
    }
    const total = s.itemIds.length * EVAL_SETS.length;
    const byConcurrency: SkipRates['byConcurrency'] = [];
    for (const concurrency of concurrencies) {
      await reoweAll(s, 'g');
      const r = await drain(s, concurrency);
      const skipped = r.reasons.get('complete:already_answered') ?? 0;
      if (r.summary.claimed !== total || r.summary.calls !== 0 || skipped !== total) {
        throw new Error(`g: concurrency ${concurrency} ran ${r.summary.claimed} of ${total} jobs, ${r.summary.calls} calls, outcomes ${describeReasons(r.reasons)}`);
      }
      byConcurrency.push({ concurrency, perSecond: total / r.seconds, seconds: r.seconds });
    }
    return { jobs: total, byConcurrency, naivePerSecond: await naiveSkipRate(s.itemIds.length) };
  } finally {
    await s.close();
  }
}

/**
 * The naive reference's skip path: a fresh copy drained once by the reference (its own answers),
 * every job re-owed through the store, then drained again by the reference, every job already
 * answered (no insert): the rate of that second drain.
 */
async function naiveSkipRate(items: number): Promise<number> {
  const ref = await openSeeded(items, new Registry([...EVAL_SETS]));
  try {
    await ref.store.close();
    const first = drainNaive(ref.db.file, naiveSets());
    const again = new SqliteStore({ url: ref.db.file, registry: ref.registry });
    await reoweAll({ ...ref, store: again }, 'g');
    await again.close();
    const r = drainNaive(ref.db.file, naiveSets());
    if (r.jobs !== first.jobs || r.inserted !== 0) throw new Error(`g: the naive skip drain ran ${r.jobs} of ${first.jobs} jobs and inserted ${r.inserted} answers`);
    return r.jobs / r.seconds;
  } finally {
    ref.db.done();
  }
}

// ---------------------------------------------------------------------------------------- h

export interface WriteDoorCost {
  updates: number;
  /** µs per `updateItem`, median of the rounds. */
  productionUs: number;
  noSetUs: number;
  /** Jobs the production-set run owed per update (a sanity figure: 0 would mean nothing was measured). */
  owedPerUpdate: number;
  /** The naive reference (scripts/bench-naive.ts `writeDoorNaive`): µs per update with one job upsert per owed set, and with none. */
  naive: { owingUs: number; noSetUs: number };
}

/**
 * Part h: `updateItem` (a title edit, the door's defaults, as a tracker calls it) on items of a
 * `task` collection with the production sets registered (the CLI's registry, `buildRegistry()`),
 * against the same updates on a store with no set registered (`--provider none`). Each variant on
 * its own database with the same items; `rounds` alternating rounds, the median µs per update.
 */
export async function benchWriteDoor(updates: number, rounds: number): Promise<WriteDoorCost> {
  const items = 200;
  const variants = [
    { name: 'production', registry: buildRegistry() },
    { name: 'none', registry: new Registry([]) },
  ];
  const seeded = await Promise.all(variants.map((v) => openSeeded(items, v.registry)));
  try {
    const us: number[][] = variants.map(() => []);
    const owed: number[] = variants.map(() => 0);
    // One untimed warm-up round, then the measured ones; the variants alternate so drift in the
    // machine's speed hits both alike.
    for (let round = 0; round <= rounds; round++) {
      for (const [v, s] of seeded.entries()) {
        let roundOwed = 0;
        const t0 = performance.now();
        for (let u = 0; u < updates; u++) {
          const w = await s.store.updateItem(s.itemIds[u % items], { title: `bench item ${u % items}, revision ${round}.${u}` });
          if (!w.changed) throw new Error(`h: update ${u} changed nothing`);
          roundOwed += w.owed;
        }
        const elapsed = performance.now() - t0;
        if (round > 0) {
          us[v].push((elapsed * 1000) / updates);
          owed[v] += roundOwed;
        }
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    if (owed[1] !== 0) throw new Error(`h: the store with no set owed ${owed[1]} jobs`);
    if (owed[0] === 0) throw new Error('h: the production sets owed nothing: the comparison would measure nothing');
    const owedPerUpdate = owed[0] / (updates * rounds);
    // The naive reference on the production store's file (the store closed), owing as many sets
    // per update as the production run did, then on the no-set store's file owing none.
    const owingSets = seeded[0].registry.setsFor('task').slice(0, Math.round(owedPerUpdate)).map((set) => set.name);
    for (const s of seeded) await s.store.close();
    const naiveUs = (file: string, sets: string[]) => {
      const xs = Array.from({ length: rounds }, () => writeDoorNaive(file, seeded[0].itemIds.slice(0, items), sets, updates));
      return median(xs);
    };
    const naive = { owingUs: naiveUs(seeded[0].db.file, owingSets), noSetUs: naiveUs(seeded[1].db.file, []) };
    return { updates, productionUs: median(us[0]), noSetUs: median(us[1]), owedPerUpdate, naive };
  } finally {
    for (const s of seeded) s.db.done();
  }
}
