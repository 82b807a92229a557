import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { noul } from '../src/decision/questions.js';
import { defineQuestionSet, Registry } from '../src/decision/registry.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

/**
 * Benchmark c, run as its own process so its RSS is its own:
 *
 *   npx tsx scripts/bench-claim.ts JOBS SAMPLE [--drain]
 *
 * Seeds JOBS owed jobs into a fresh SQLite file (setup: straight INSERTs in one transaction, the
 * items need not exist for the claim), then times SAMPLE claims (`claimNextJob`, each followed by
 * an untimed `completeJob`). With --drain it then claims and completes every remaining job,
 * sampling RSS every 1,000 jobs. Prints one JSON line.
 */

const [jobsArg, sampleArg] = process.argv.slice(2);
const jobs = Number(jobsArg);
const sample = Number(sampleArg);
const drain = process.argv.includes('--drain');

const dir = mkdtempSync(join(tmpdir(), 'verdict-bench-c-'));
const set = defineQuestionSet({ name: 'noop', questions: { q: noul('no-op') } });
const store = new SqliteStore({ url: join(dir, 'c.db'), registry: new Registry([set]) });
try {
  const db = store.ctx.db.$client;
  const seedStart = performance.now();
  const ins = db.prepare(
    `INSERT INTO decision_jobs (item_id, question_set, workspace_id, priority, generation, enqueued_at, not_before, state, fair_tag)
     VALUES (?, 'noop', 'ws', 1, 1, ?, 0, 'owed', ?)`,
  );
  const BATCH = 50_000;
  for (let from = 0; from < jobs; from += BATCH) {
    db.transaction(() => {
      for (let i = from; i < Math.min(jobs, from + BATCH); i++) ins.run(`item-${String(i).padStart(9, '0')}`, i, i + 1);
    })();
  }
  const seedMs = performance.now() - seedStart;

  const claimUs: number[] = [];
  for (let i = 0; i < sample; i++) {
    const t = performance.now();
    const c = await store.claimNextJob('bench', 600_000, 8);
    claimUs.push((performance.now() - t) * 1000);
    if (!c || (await store.completeJob(c)) !== 'applied') throw new Error('claim failed while sampling');
  }
  claimUs.sort((a, b) => a - b);

  let peakRss = process.memoryUsage().rss;
  let drained = sample;
  let drainMs = 0;
  if (drain) {
    const t = performance.now();
    for (let c = await store.claimNextJob('bench', 600_000, 8); c; c = await store.claimNextJob('bench', 600_000, 8)) {
      await store.completeJob(c);
      if (++drained % 1_000 === 0) peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }
    drainMs = performance.now() - t;
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    if (drained !== jobs) throw new Error(`drained ${drained} of ${jobs}`);
  }
  const mean = claimUs.reduce((a, b) => a + b, 0) / claimUs.length;
  process.stdout.write(
    `${JSON.stringify({
      jobs,
      sample,
      seedMs: Math.round(seedMs),
      claimMeanUs: Math.round(mean),
      claimMedianUs: Math.round(claimUs[Math.floor(claimUs.length / 2)]),
      claimP99Us: Math.round(claimUs[Math.floor(claimUs.length * 0.99)]),
      drained,
      drainMs: Math.round(drainMs),
      peakRssMb: Math.round(peakRss / 1e6),
      maxRssMb: Math.round((process.resourceUsage().maxRSS * 1024) / 1e6),
    })}\n`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
