/**
 * Embedding Verdict (README "Embedding Verdict", DESIGN §16.1): a tracker writes through Verdict's
 * store, an in-process worker answers with the offline fake provider, and the reader prints the
 * decisions. CI runs this against the packed tarball (scripts/pack-check.sh).
 *
 *   node embed.js [DATABASE]     # a SQLite path or postgres:// URL; default an in-memory SQLite
 */
import { choice, createVerdict, defineQuestionSet, noul, VerdictError } from 'verdict';

const triage = defineQuestionSet({
  name: 'triage',
  questions: {
    blocked: noul('Is the item blocked on something outside the team?'),
    kind: choice('What kind of work is it?', { bug: 'a defect to fix', feature: 'new behaviour', chore: 'upkeep' }),
  },
  quietPeriodMs: 0, // ask at once; the default waits 30 s after an item's latest write
});

const v = await createVerdict({
  database: process.argv[2] ?? ':memory:', // or 'postgres://…', { sqlite: db }, { postgres: pool }
  sets: [triage], // default: the production sets
  provider: 'fake', // or 'anthropic' | 'openai' | 'none' | a Provider object
  migrate: true, // false: leave migrations to `verdict migrate`
});
try {
  const ws = await v.store.createWorkspace({ slug: 'acme' });
  // Several write doors, one transaction: all or nothing.
  await v.store.transaction(async (tx) => {
    const col = await tx.createCollection({ workspaceId: ws.id, slug: 'task' });
    const it = await tx.createItem({ workspaceId: ws.id, collectionId: col.id, ref: 'T-1', title: 'Ship it' });
    await tx.addComment({ itemId: it.row.id, author: 'ann', body: 'Blocked on review' });
  });

  const worker = v.worker({ concurrency: 2 }); // in-process; events: 'outcome', 'error', 'idle'
  worker.on('outcome', (e) =>
    console.log(`outcome: ${e.questionSet} ${e.outcome.kind} (${e.stats.answersStored} answers stored)`),
  );
  const summary = await worker.runUntilIdle(); // or worker.start() … await worker.stop({ graceMs: 10_000 })
  console.log(`drained: ${summary.claimed} jobs, ${summary.calls} provider calls`);

  const read = await v.reader.item('T-1', { workspace: 'acme' }); // decisions with current / stale reasons
  for (const d of read?.decisions ?? []) {
    const answer =
      d.answer.type === 'noul'
        ? `p=${d.answer.noul.toFixed(2)}`
        : d.answer.type === 'choice'
          ? d.answer.choice
          : `score=${d.answer.score}`;
    console.log(
      `decision: ${d.questionSet}/${d.questionKey} ${answer} ${d.current ? 'current' : `stale (${d.staleReason})`} [${d.surfacing}]`,
    );
  }
} catch (err) {
  if (!(err instanceof VerdictError)) throw err;
  console.error(`verdict: ${err.code}: ${err.message}`); // every Verdict error has a stable code
  process.exitCode = 1;
} finally {
  await v.close();
}
