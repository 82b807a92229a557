/**
 * Test seam for the group-commit kill test (test/worker/committer-kill.test.ts), loaded with
 * `node --import` into the built CLI. It patches the built Committer (dist/), the one the built
 * worker loads: the first COMMIT_HOLD_AFTER group commits run; the next one is never run (its
 * promise never settles), so every slot hands in its finish and waits. Once COMMIT_HOLD_SLOTS
 * finishes wait, the file COMMIT_HOLD_FILE gets the waiting claims as JSON, and the test kills
 * the process there: between the slots handing in and the commit.
 */
import { writeFileSync } from 'node:fs';
import { Committer } from '../../dist/runner/committer.js';

const file = process.env.COMMIT_HOLD_FILE;
const slots = Number(process.env.COMMIT_HOLD_SLOTS);
let letThrough = Number(process.env.COMMIT_HOLD_AFTER ?? 0);

// Finishes handed in while the held commit waits (the committer keeps them for the next one).
let held = null;
const finishAll = Committer.prototype.finishAll;
Committer.prototype.finishAll = function (entries) {
  if (held) held.push(...entries);
  return finishAll.call(this, entries);
};

const commit = Committer.prototype.commit;
Committer.prototype.commit = function (entries) {
  if (letThrough-- > 0) return commit.call(this, entries);
  held = [...entries];
  const report = () => {
    // The held commit's finishes and whatever was handed in after them, until every slot (its
    // claims' holder) has handed in; a co-asked group's jobs travel together in one hand-in.
    if (new Set(held.map((e) => e.claim.claimedBy)).size < slots) return void setTimeout(report, 5);
    const claims = held.map((e) => ({
      itemId: e.claim.itemId,
      questionSet: e.claim.questionSet,
      claimToken: e.claim.claimToken,
      answers: e.finish.answers ? e.finish.answers.decisions.length : 0,
    }));
    writeFileSync(file, JSON.stringify(claims));
  };
  report();
  return new Promise(() => {});
};
