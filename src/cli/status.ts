import type { Command } from 'commander';
import type { Store } from '../store/store.js';
import { buildRegistry, configFrom, formatDuration, openStore } from './common.js';

/** The status document: queue by state and set, oldest owed age, parked reasons, spend. */
export async function statusReport(store: Store) {
  const q = await store.queueStats();
  const parked = (await store.listJobs({ state: 'parked', limit: 20 })).map((j) => ({ itemId: j.itemId, set: j.questionSet, reason: j.lastError }));
  const failing = [...new Set((await store.listJobs({ state: 'owed', limit: 10_000 })).filter((j) => j.lastError && j.attempts > 0).map((j) => j.questionSet))].sort();
  return {
    queue: { due: q.owedDue, waiting: q.owedWaiting, inFlight: q.inFlight, parked: q.parked },
    oldestOwedAgeMs: q.oldestOwedAgeMs,
    nextDueAt: q.nextDueAt,
    bySet: q.bySet,
    parked,
    failingSets: failing,
    spend: { lastHour: await store.spendSince(3_600_000), last24h: await store.spendSince(86_400_000) },
    answersStored: await store.countDecisions(),
  };
}

export function registerStatusCommand(program: Command): void {
  program
    .command('status')
    .description('jobs by state and set, the oldest owed age, parked jobs and provider spend')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const cfg = configFrom(cmd);
      const registry = buildRegistry(cfg);
      const store = openStore(cfg, registry);
      try {
        const s = await statusReport(store);
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(s, null, 2)}\n`);
          return;
        }
        const lines = [
          `jobs: ${s.queue.due} due, ${s.queue.waiting} waiting, ${s.queue.inFlight} in flight, ${s.queue.parked} parked`,
          `oldest owed: ${s.oldestOwedAgeMs === null ? 'none' : formatDuration(s.oldestOwedAgeMs)}`,
          ...s.bySet.map((b) => `  ${b.questionSet.padEnd(24)} ${b.state.padEnd(7)} ${b.count}`),
          `answers stored: ${s.answersStored}`,
          `spend, last hour: ${s.spend.lastHour.calls} calls, ${s.spend.lastHour.inputTokens} input / ${s.spend.lastHour.outputTokens} output tokens`,
          `spend, last 24 h: ${s.spend.last24h.calls} calls, ${s.spend.last24h.inputTokens} input / ${s.spend.last24h.outputTokens} output tokens`,
        ];
        if (s.failingSets.length) lines.push(`failing sets: ${s.failingSets.join(', ')}`);
        for (const p of s.parked) lines.push(`parked ${p.set} ${p.itemId}: ${p.reason ?? ''}`);
        process.stdout.write(`${lines.join('\n')}\n`);
      } finally {
        await store.close();
      }
    });
}
