/**
 * Test seam for the poison-item test, loaded with `node --import` into the built CLI: a
 * fake-provider call whose state contains POISON kills its own process with SIGKILL, as a native
 * crash would. JavaScript, and it patches the built FakeProvider (dist/), the one the built CLI
 * loads: plain node cannot load a .ts preload.
 */
import { FakeProvider } from '../../dist/providers/fake.js';

const ask = FakeProvider.prototype.ask;
FakeProvider.prototype.ask = function (state, questions, opts) {
  if (state.includes('POISON')) process.kill(process.pid, 'SIGKILL');
  return ask.call(this, state, questions, opts);
};
