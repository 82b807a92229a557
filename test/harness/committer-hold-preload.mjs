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

const commit = Committer.prototype.commit;
Committer.prototype.commit = function (batch) {
  if (letThrough-- > 0) return commit.call(this, batch);
  const report = () => {
    // The held batch, and whatever was handed in after it (the committer keeps it waiting): one hand-in per slot.
    const waiting = [...batch, ...this.waiting];
    if (waiting.length < slots) return void setTimeout(report, 5);
    // Each slot's hand-in holds its group's finishes (a co-asked group's jobs together).
    const claims = waiting
      .flatMap((w) => w.entries)
      .map((e) => ({
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
