/**
 * Test seam for the write doors' group-commit kill test (test/store/write-group-kill.test.ts),
 * loaded with `node --import` into the built CLI. It patches the built WriteGroup (dist/): once the
 * file WRITE_HOLD_ARM exists, the next group commit is never run (its promise never settles), so
 * every write handed in after it waits too. Once WRITE_HOLD_WRITES writes wait, the file
 * WRITE_HOLD_FILE gets their count as JSON, and the test kills the process there: between the
 * writes being handed in and their commit.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { WriteGroup } from '../../dist/store/sqlite/write-group.js';

const arm = process.env.WRITE_HOLD_ARM;
const file = process.env.WRITE_HOLD_FILE;
const want = Number(process.env.WRITE_HOLD_WRITES);
let held = null;

const write = WriteGroup.prototype.write;
WriteGroup.prototype.write = function (run) {
  if (held) held.writes++;
  return write.call(this, run);
};

const commitWrites = WriteGroup.prototype.commitWrites;
WriteGroup.prototype.commitWrites = function (writes) {
  if (held || !existsSync(arm)) return commitWrites.call(this, writes);
  held = { writes: writes.length };
  const report = () => {
    if (held.writes < want) return void setTimeout(report, 5);
    writeFileSync(file, JSON.stringify(held));
  };
  report();
  return new Promise(() => {});
};
