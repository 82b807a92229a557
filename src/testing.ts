/**
 * `verdict/testing`: helpers for a host's own tests (DESIGN §16.1). The fake provider answers
 * offline and deterministically (DESIGN §9 "fake"); the fake Anthropic and OpenAI-compatible
 * servers speak the wire format on 127.0.0.1, so the real SDK paths can be exercised without a
 * network. test/api/public-api.test.ts pins this list.
 */
import { FakeAnthropicServer } from './testing/fake-anthropic-server.js';
import { FakeOpenAIServer } from './testing/fake-openai-server.js';

export { FakeProvider, type FakeFault, type FakeProviderOptions, type FakeRequest } from './providers/fake.js';
export type { FakeBatchFault } from './providers/fake-batches.js';
export type { FakeServerBatchFault } from './testing/fake-anthropic-batches.js';
export { FakeAnthropicServer, type MessageOptions } from './testing/fake-anthropic-server.js';
export { FakeOpenAIServer, type CompletionOptions } from './testing/fake-openai-server.js';
export type { RecordedRequest, Reply, Handler } from './testing/fake-server-core.js';

/**
 * Starts a fake Anthropic Messages API on 127.0.0.1 and a free port. Point the real provider at it
 * through `createVerdict`'s `env`: `{ provider: 'anthropic', env: { ANTHROPIC_BASE_URL: server.url,
 * ANTHROPIC_API_KEY: 'test' } }` (the CLI: the same two environment variables). By default it
 * answers every question with a valid answer; `script()` queues faults. Call `close()` when done.
 */
export function startFakeAnthropicServer(): Promise<FakeAnthropicServer> {
  return FakeAnthropicServer.start();
}

/** Starts a fake OpenAI-compatible chat-completions server on 127.0.0.1 (see startFakeAnthropicServer). */
export function startFakeOpenAIServer(): Promise<FakeOpenAIServer> {
  return new FakeOpenAIServer().listen();
}
