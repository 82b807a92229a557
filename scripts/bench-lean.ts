import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { canonicalJson } from '../src/decision/canonical-json.js';

/**
 * The lean reference of `npm run bench` parts f and g: the steps of one evaluation written straight
 * on better-sqlite3, on the schema the store's migrations create, with nothing between the loop and
 * the statements. Per job:
 *
 *   claim one job under a lease (UPDATE … RETURNING, a counter token, no random bytes),
 *   load item + collection + workspace (one join), its comments and its links,
 *   canonical JSON of the state and its SHA-256,
 *   the idempotency read (answers already stored for this state and question hash),
 *   the liveness re-check (item not deleted, job still ours),
 *   a fake provider call of 0 ms (one macrotask, as a resolved network call would take),
 *   the answers and the spend stored and the completion fenced by the claim token.
 *
 * Two variants:
 * - `fused`: one slot; each job's finish and the next claim in one transaction (one commit per job).
 * - `group`: `slots` slots and one committer: every slot hands in its finish and asks for its next
 *   claim, the committer runs everything waiting in one transaction as soon as the previous one
 *   ends, then hands each slot its claim. A slot never uses a claim before its commit.
 *
 * With `coAsk` the claim also takes the item's other due jobs (their sets read the same state), and
 * one call answers them all, as Verdict's co-asking does. The question hash is worked out once per
 * set, not per job. It reads the schema, never the store's code: when the schema changes, this file
 * changes with it. The figure is what these steps cost on this machine, the floor Verdict is judged
 * against (issue targets in scripts/bench.ts).
 */

/** The questions of a set, as the reference answers them: key and kind. */
export interface LeanSet {
  name: string;
  keys: Array<{ key: string; kind: 'noul' | 'choice' | 'score' }>;
}

/** How the reference drains. */
export interface LeanOptions {
  variant: 'fused' | 'group';
  /** Slots of the group variant (the fused variant has one). @defaultValue 16 */
  slots?: number;
  /** Claim an item's other due jobs with it and answer them in one call. */
  coAsk: boolean;
  /** `synchronous` pragma. @defaultValue 'FULL', as Verdict's store opens SQLite (src/store/sqlite/open.ts) */
  synchronous?: 'NORMAL' | 'FULL';
}

/** One drain: jobs completed, fake calls made, answer rows inserted, wall seconds, CPU µs (user + system) of the whole process. */
export interface LeanRun {
  jobs: number;
  calls: number;
  inserted: number;
  seconds: number;
  cpuUs: number;
}

interface Job {
  item_id: string;
  question_set: string;
  workspace_id: string;
  claim_token: string;
}

interface Claim {
  jobs: Job[];
}

interface Finish {
  jobs: Job[];
  stateHash: string;
  seq: number;
  /** Per job, the keys still unanswered for this state; empty when already answered. */
  wanted: Array<LeanSet['keys']>;
}

const LEASE_MS = 60_000;
/** A 0 ms provider call: one trip through the event loop, as the fake provider's resolved call takes. */
const fakeCall = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Drains every owed job of `file`.
 * @throws Error when a claim is lost (liveness) or a completion finds no job: neither happens in a lone drain.
 */
export async function drainLean(file: string, sets: readonly LeanSet[], opts: LeanOptions): Promise<LeanRun> {
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${opts.synchronous ?? 'FULL'}`);
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    const byName = new Map(sets.map((s) => [s.name, s]));
    // Worked out once per set: the question text does not change during a drain.
    const questionHash = new Map(
      sets.map((s) => [s.name, createHash('sha256').update(canonicalJson(s)).digest('hex')]),
    );

    // The claim order is DESIGN §3's (priority, fair tag, enqueue time, key), read through its index.
    const claimOne = db.prepare(`
      UPDATE decision_jobs SET claimed_by = ?, claim_token = ?, lease_expires_at = ?, attempts = attempts + 1
      WHERE (item_id, question_set) = (
        SELECT item_id, question_set FROM decision_jobs
        WHERE state = 'owed' AND not_before <= ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
        ORDER BY priority, fair_tag, enqueued_at, item_id, question_set LIMIT 1)
      RETURNING item_id, question_set, workspace_id, claim_token`);
    // Co-asking: the same item's other due jobs under the same token, found by the item's key. The
    // unary + keeps SQLite off the claim-order index (state = 'owed' is its first column): with it,
    // SQLite walked every owed job for each sibling claim (about 295 µs a claim at 20,000 owed,
    // 0.6 ms of CPU per job at full bench size), a cost of this file's SQL, not of co-asking.
    const claimSiblings = db.prepare(`
      UPDATE decision_jobs SET claimed_by = ?, claim_token = ?, lease_expires_at = ?, attempts = attempts + 1
      WHERE item_id = ? AND question_set <> ? AND +state = 'owed' AND not_before <= ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
      RETURNING item_id, question_set, workspace_id, claim_token`);
    const readItem = db.prepare(`
      SELECT i.id, i.ref, i.title, i.content, i.fields, i.seq, c.slug AS collection, c.schema, c.settings, w.slug AS workspace
      FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
      WHERE i.id = ? AND i.deleted_at IS NULL`);
    const readComments = db.prepare(
      'SELECT id, author, body, created_at FROM comments WHERE item_id = ? AND deleted_at IS NULL ORDER BY created_at, id',
    );
    const readLinks = db.prepare(
      'SELECT source_id, target_id, link_type FROM item_links WHERE source_id = ? OR target_id = ?',
    );
    const answered = db.prepare(
      'SELECT question_key FROM item_decisions WHERE item_id = ? AND question_set = ? AND state_hash = ? AND question_hash = ?',
    );
    const liveness = db.prepare(`
      SELECT i.seq, i.deleted_at, j.claim_token FROM items i JOIN decision_jobs j ON j.item_id = i.id AND j.question_set = ?
      WHERE i.id = ?`);
    const insertAnswers = new Map<number, Database.Statement>();
    const answerSql = (n: number) =>
      `INSERT INTO item_decisions (workspace_id, item_id, question_set, question_key, kind, answer, confidence, provider, model, state_hash,
         question_hash, state_version, state_parts, input_tokens, output_tokens, item_seq, state_truncated, evaluated_at, rationale, fingerprint_context)
       VALUES ${Array.from({ length: n }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}
       ON CONFLICT DO NOTHING`;
    const spend = db.prepare(`
      INSERT INTO decision_spend (hour, question_set, provider, model, outcome, calls, input_tokens, output_tokens)
      VALUES (?, ?, 'fake', 'fake-model-1', 'ok', 1, ?, ?)
      ON CONFLICT (hour, question_set, provider, model, outcome, shard) DO UPDATE
      SET calls = calls + 1, input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens`);
    const complete = db.prepare('DELETE FROM decision_jobs WHERE item_id = ? AND question_set = ? AND claim_token = ?');

    let tokens = 0;
    let jobsDone = 0;
    let calls = 0;
    let inserted = 0;

    const claim = (): Claim | undefined => {
      const now = Date.now();
      const token = `lean-${++tokens}`;
      const job = claimOne.get('lean', token, now + LEASE_MS, now, now) as Job | undefined;
      if (!job) return undefined;
      const jobs = [job];
      if (opts.coAsk)
        jobs.push(
          ...(claimSiblings.all('lean', token, now + LEASE_MS, job.item_id, job.question_set, now, now) as Job[]),
        );
      return { jobs };
    };

    const finish = (f: Finish): void => {
      const evaluatedAt = Date.now();
      let asked = false;
      for (const [n, job] of f.jobs.entries()) {
        const wanted = f.wanted[n];
        if (wanted.length > 0) {
          asked = true;
          let stmt = insertAnswers.get(wanted.length);
          if (!stmt) insertAnswers.set(wanted.length, (stmt = db.prepare(answerSql(wanted.length))));
          inserted += wanted.length;
          stmt.run(
            wanted.flatMap((k) => [
              job.workspace_id,
              job.item_id,
              job.question_set,
              k.key,
              k.kind,
              k.kind === 'noul' ? '{"type":"noul","value":"no"}' : '{"type":"score","level":"small"}',
              0.9,
              'fake',
              'fake-model-1',
              f.stateHash,
              questionHash.get(job.question_set)!,
              1,
              '{}',
              100,
              10,
              f.seq,
              0,
              evaluatedAt,
              null,
              '{}',
            ]),
          );
          spend.run(Math.floor(evaluatedAt / 3_600_000) * 3_600_000, job.question_set, 100, 10);
        }
        if (complete.run(job.item_id, job.question_set, job.claim_token).changes !== 1)
          throw new Error('lean reference: completion found no job');
        jobsDone++;
      }
      if (asked) calls++;
    };

    /** Load, hash, idempotency read, liveness, the call: everything between a claim and its finish. */
    const work = async (c: Claim): Promise<Finish> => {
      const first = c.jobs[0];
      const item = readItem.get(first.item_id) as
        | {
            ref: string;
            title: string;
            content: string;
            fields: string;
            seq: number;
            collection: string;
            schema: string;
            settings: string;
            workspace: string;
          }
        | undefined;
      if (!item) throw new Error(`lean reference: item ${first.item_id} missing`);
      const comments = readComments.all(first.item_id);
      const links = readLinks.all(first.item_id, first.item_id);
      const state = canonicalJson({
        workspace: item.workspace,
        collection: item.collection,
        ref: item.ref,
        title: item.title,
        body: item.content,
        fields: JSON.parse(item.fields),
        comments,
        links,
      });
      const stateHash = createHash('sha256').update(state).digest('hex');
      const wanted = c.jobs.map((job) => {
        const set = byName.get(job.question_set);
        if (!set) throw new Error(`lean reference: no questions for set ${job.question_set}`);
        const done = new Set(
          (
            answered.all(job.item_id, job.question_set, stateHash, questionHash.get(job.question_set)) as Array<{
              question_key: string;
            }>
          ).map((r) => r.question_key),
        );
        return set.keys.filter((k) => !done.has(k.key));
      });
      if (wanted.some((w) => w.length > 0)) {
        // One liveness read before the call, for the job the slot claimed (its siblings share its token).
        const live = liveness.get(first.question_set, first.item_id) as
          { seq: number; deleted_at: number | null; claim_token: string | null } | undefined;
        if (!live || live.deleted_at !== null || live.claim_token !== first.claim_token)
          throw new Error('lean reference: claim lost');
        await fakeCall();
      }
      return { jobs: c.jobs, stateHash, seq: item.seq, wanted };
    };

    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    if (opts.variant === 'fused') {
      const finishAndClaim = db.transaction((f: Finish | undefined) => {
        if (f) finish(f);
        return claim();
      });
      let c = finishAndClaim.immediate(undefined);
      while (c) c = finishAndClaim.immediate(await work(c));
    } else {
      const waiting: Array<{ f: Finish | undefined; resolve: (c: Claim | undefined) => void }> = [];
      let committing = false;
      const commitAll = db.transaction((batch: typeof waiting) =>
        batch.map((w) => {
          if (w.f) finish(w.f);
          return claim();
        }),
      );
      const commit = () => {
        committing = false;
        const batch = waiting.splice(0);
        const claims = commitAll.immediate(batch);
        for (const [n, w] of batch.entries()) w.resolve(claims[n]);
      };
      // Everything handed in before the committer's turn goes into one transaction.
      const handIn = (f: Finish | undefined) =>
        new Promise<Claim | undefined>((resolve) => {
          waiting.push({ f, resolve });
          if (!committing) {
            committing = true;
            setImmediate(commit);
          }
        });
      const slot = async () => {
        let c = await handIn(undefined);
        while (c) c = await handIn(await work(c));
      };
      await Promise.all(Array.from({ length: opts.slots ?? 16 }, slot));
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    return { jobs: jobsDone, calls, inserted, seconds, cpuUs: cpu.user + cpu.system };
  } finally {
    db.close();
  }
}

/**
 * The raw write door of part h, with its CPU: the item's UPDATE and, with `sets`, one plain upsert
 * of its job per set (generation + 1, owed again; no fair tag, debounce or delay cap), in one
 * IMMEDIATE transaction per update. The ratio of the two is what the owe's extra rows cost on this
 * disk, whatever the code around them.
 * @returns wall µs and CPU µs per update.
 */
export function writeDoorLean(
  file: string,
  itemIds: readonly string[],
  sets: readonly string[],
  updates: number,
): { wallUs: number; cpuUs: number } {
  const db = new Database(file);
  try {
    // The pragmas Verdict's store opens SQLite with (src/store/sqlite/open.ts): the same fsyncs.
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    const update = db.prepare(
      'UPDATE items SET title = ?, seq = seq + 1, updated_at = ? WHERE id = ? RETURNING workspace_id',
    );
    const owe = db.prepare(`
      INSERT INTO decision_jobs (item_id, question_set, workspace_id, priority, generation, enqueued_at, not_before, state, fair_tag, owed_at)
      VALUES (?, ?, ?, 0, 1, ?, ?, 'owed', 0, ?)
      ON CONFLICT (item_id, question_set) DO UPDATE SET generation = generation + 1, state = 'owed', owed_at = excluded.owed_at,
        not_before = max(not_before, excluded.not_before)`);
    const one = db.transaction((id: string, u: number) => {
      const now = Date.now();
      const row = update.get(`lean revision ${u}`, now, id) as { workspace_id: string } | undefined;
      // An update that finds no item would measure nothing.
      if (!row) throw new Error(`lean write door: no item ${id}`);
      for (const s of sets) owe.run(id, s, row.workspace_id, now, now + 30_000, now);
    });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let u = 0; u < updates; u++) one.immediate(itemIds[u % itemIds.length], u);
    const wallUs = ((performance.now() - t0) * 1000) / updates;
    const cpu = process.cpuUsage(cpu0);
    return { wallUs, cpuUs: (cpu.user + cpu.system) / updates };
  } finally {
    db.close();
  }
}
