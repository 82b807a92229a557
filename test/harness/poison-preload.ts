/**
 * Test seam for the poison-item test, loaded with `node --import`: a fake-provider call whose
 * state contains POISON kills its own process with SIGKILL, as a native crash would.
 */
import { FakeProvider } from '../../src/providers/fake.js';

const ask = FakeProvider.prototype.ask;
FakeProvider.prototype.ask = function (state, questions, opts) {
  if (state.includes('POISON')) process.kill(process.pid, 'SIGKILL');
  return ask.call(this, state, questions, opts);
};
