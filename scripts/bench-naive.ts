import Database from 'better-sqlite3';
import { createHash, randomBytes } from 'node:crypto';

/**
 * The naive reference of `npm run bench` part f: what an ORM-free script gets when it runs a full
 * evaluation's steps through better-sqlite3 directly, every step its own statement and, for the
 * writes, its own commit (autocommit; no transaction spans two steps):
 *
 *   claim (one UPDATE … RETURNING), read the item, the idempotency read, the liveness read,
 *   insert the answers (one multi-row INSERT), insert the spend (one upsert), complete (one DELETE).
 *
 * Plain SQL on the schema the store's migrations create, run on a database the bench seeded through
 * the store (same items, same owed jobs). No provider is called: the answers are fixed, so the
 * figure is the floor the storage steps alone cost. It reads the schema, never the store's code;
 * when the schema changes, this file changes with it.
 */

/** The questions of a set, as the reference answers them: key and kind. */
export interface NaiveSet {
  name: string;
  keys: Array<{ key: string; kind: 'noul' | 'choice' | 'score' }>;
}

/**
 * Drains every owed job of `file` the naive way, one job at a time in one synchronous loop.
 * @returns jobs done, seconds taken (the loop only: opening the file is not counted), and answer rows inserted.
 */
export function drainNaive(file: string, sets: readonly NaiveSet[]): { jobs: number; seconds: number; inserted: number } {
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 1000');
    const byName = new Map(sets.map((s) => [s.name, s]));
    const claim = db.prepare(`
      UPDATE decision_jobs SET claimed_by = ?, claim_token = ?, lease_expires_at = ?, attempts = attempts + 1
      WHERE (item_id, question_set) = (
        SELECT item_id, question_set FROM decision_jobs
        WHERE state = 'owed' AND not_before <= ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
        ORDER BY priority, fair_tag, enqueued_at, item_id, question_set LIMIT 1)
      RETURNING item_id, question_set, workspace_id, claim_token`);
    const readItem = db.prepare(`
      SELECT i.id, i.title, i.content, i.fields, i.seq, c.slug AS collection, c.schema, c.settings
      FROM items i JOIN collections c ON c.id = i.collection_id WHERE i.id = ? AND i.deleted_at IS NULL`);
    const answered = db.prepare('SELECT question_key FROM item_decisions WHERE item_id = ? AND question_set = ? AND state_hash = ? AND question_hash = ?');
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
      ON CONFLICT (hour, question_set, provider, model, outcome) DO UPDATE
      SET calls = calls + 1, input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens`);
    const complete = db.prepare('DELETE FROM decision_jobs WHERE item_id = ? AND question_set = ? AND claim_token = ?');

    let jobs = 0;
    let inserted = 0;
    const t0 = performance.now();
    for (;;) {
      const now = Date.now();
      const job = claim.get('naive', randomBytes(16).toString('hex'), now + 60_000, now, now) as
        | { item_id: string; question_set: string; workspace_id: string; claim_token: string }
        | undefined;
      if (!job) break;
      const set = byName.get(job.question_set);
      if (!set) throw new Error(`naive reference: no questions for set ${job.question_set}`);
      const item = readItem.get(job.item_id) as { title: string; content: string; fields: string; seq: number; collection: string } | undefined;
      if (!item) throw new Error(`naive reference: item ${job.item_id} missing`);
      const state = JSON.stringify({ title: item.title, collection: item.collection, body: item.content, fields: item.fields });
      const stateHash = createHash('sha256').update(state).digest('hex');
      const questionHash = createHash('sha256').update(set.name).digest('hex');
      const done = new Set((answered.all(job.item_id, set.name, stateHash, questionHash) as Array<{ question_key: string }>).map((r) => r.question_key));
      const wanted = set.keys.filter((k) => !done.has(k.key));
      const live = liveness.get(set.name, job.item_id) as { seq: number; deleted_at: number | null; claim_token: string | null } | undefined;
      if (!live || live.deleted_at !== null || live.claim_token !== job.claim_token) throw new Error('naive reference: claim lost');
      if (wanted.length > 0) {
        let stmt = insertAnswers.get(wanted.length);
        if (!stmt) insertAnswers.set(wanted.length, (stmt = db.prepare(answerSql(wanted.length))));
        const evaluatedAt = Date.now();
        inserted += wanted.length;
        stmt.run(
          wanted.flatMap((k) => [
            job.workspace_id, job.item_id, set.name, k.key, k.kind,
            k.kind === 'noul' ? '{"type":"noul","value":"no"}' : '{"type":"score","level":"small"}',
            0.9, 'fake', 'fake-model-1', stateHash, questionHash, 1, '{}', 100, 10, live.seq, 0, evaluatedAt, null, '{}',
          ]),
        );
        spend.run(Math.floor(evaluatedAt / 3_600_000) * 3_600_000, set.name, 100, 10);
      }
      if (complete.run(job.item_id, job.question_set, job.claim_token).changes !== 1) throw new Error('naive reference: complete found no job');
      jobs++;
    }
    return { jobs, seconds: (performance.now() - t0) / 1000, inserted };
  } finally {
    db.close();
  }
}

/**
 * The naive reference of part h: the statements a tracker write and its owe need, run through
 * better-sqlite3 directly in one IMMEDIATE transaction per update: the item's UPDATE, and with
 * `sets` one plain upsert of its job per set (generation + 1, owed again; no fair tag, debounce or
 * delay cap). With no sets, the UPDATE alone. The ratio of the two is what the owe's extra rows
 * cost on this disk, whatever the code around them.
 * @returns µs per update.
 */
export function writeDoorNaive(file: string, itemIds: readonly string[], sets: readonly string[], updates: number): number {
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    const update = db.prepare('UPDATE items SET title = ?, seq = seq + 1, updated_at = ? WHERE id = ? RETURNING workspace_id');
    const owe = db.prepare(`
      INSERT INTO decision_jobs (item_id, question_set, workspace_id, priority, generation, enqueued_at, not_before, state, fair_tag, owed_at)
      VALUES (?, ?, ?, 0, 1, ?, ?, 'owed', 0, ?)
      ON CONFLICT (item_id, question_set) DO UPDATE SET generation = generation + 1, state = 'owed', owed_at = excluded.owed_at,
        not_before = max(not_before, excluded.not_before)`);
    const one = db.transaction((id: string, u: number) => {
      const now = Date.now();
      const row = update.get(`naive revision ${u}`, now, id) as { workspace_id: string };
      for (const s of sets) owe.run(id, s, row.workspace_id, now, now + 30_000, now);
    });
    const t0 = performance.now();
    for (let u = 0; u < updates; u++) one.immediate(itemIds[u % itemIds.length], u);
    return ((performance.now() - t0) * 1000) / updates;
  } finally {
    db.close();
  }
}
