import { sql } from 'drizzle-orm';
import type { Claim, JobFinish, JobFinishResult } from '../store.js';
import { finishSteps } from './jobs.js';
import { countFinishes } from './throughput.js';
import { bind, exec, shape, write, type SqlContext, type Steps } from './steps.js';

/**
 * Group commit's store side (DESIGN §10.6): several slots' finishes (`Store.finishJob`'s answers,
 * spend, fenced completion and next claim) in ONE write transaction, so one commit (one fsync at
 * `synchronous = FULL`) serves all of them. Each entry runs `finishJob`'s own statements
 * (`finishSteps`), in order, each inside its own savepoint: an entry whose statements throw is
 * rolled back to its savepoint alone and reports its error, and the entries before and after it
 * commit. Later entries see the earlier ones' writes (one transaction), so two entries never claim
 * the same next job. Written once for both dialects: SQLite drives it synchronously inside one
 * IMMEDIATE transaction; PGlite and a handle bound to a host's transaction run it on one client in
 * one transaction. A PostgreSQL store on its own pool sends one statement per entry instead
 * (postgres/pg-store.ts `finishJobs`, DESIGN §10.6).
 *
 * When the transaction itself fails (BEGIN, COMMIT, or an error after which the savepoint is
 * gone, as SQLite's own rollback of the whole transaction on some I/O errors), nothing of any
 * entry is written and the call throws: every entry gets that error.
 * @returns one result per entry, in the order given.
 * @throws the transaction's error; nothing was written.
 */
export function finishJobs(
  c: SqlContext,
  entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>,
): Promise<JobFinishResult[]> {
  return write(c, () => finishManySteps(c, entries));
}

function* finishManySteps(
  c: SqlContext,
  entries: ReadonlyArray<{ claim: Claim; finish: JobFinish }>,
): Steps<JobFinishResult[]> {
  const results: JobFinishResult[] = [];
  for (const e of entries) {
    yield* exec(bind(savepointShape, {}));
    try {
      const finished = yield* finishSteps(c, e.claim, e.finish);
      yield* exec(bind(releaseShape, {}));
      results.push({ ok: true, finished });
    } catch (error) {
      // Undo this entry alone. When its savepoint is gone too (the database rolled the whole
      // transaction back), the transaction fails and every entry gets the original error.
      try {
        yield* exec(bind(rollbackShape, {}));
        yield* exec(bind(releaseShape, {}));
      } catch {
        throw error;
      }
      results.push({ ok: false, error });
    }
  }
  // The throughput count: one statement for the whole commit (DESIGN §2 job_throughput).
  yield* countFinishes(entries.map((e, i) => ({ finish: e.finish, done: results[i].ok ? results[i].finished : null })));
  return results;
}

// One savepoint name serves every entry: each is released (or rolled back and released) before the next opens.
const savepointShape = shape('finish entry savepoint', () => sql`SAVEPOINT finish_entry`);
const releaseShape = shape('finish entry release', () => sql`RELEASE SAVEPOINT finish_entry`);
const rollbackShape = shape('finish entry rollback', () => sql`ROLLBACK TO SAVEPOINT finish_entry`);
