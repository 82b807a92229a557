import { createRequire } from 'node:module';

/**
 * @fastify/rate-limit's in-memory store, answering with a copy of the counter.
 *
 * Why: its LocalStore hands every `incr` caller the same mutable `{current, ttl}` object, and the
 * plugin reads `current` only after an await. Requests whose hooks start in one tick (a burst
 * through `inject`, or a client pipelining faster than the event loop turns) all read the last
 * count: measured with 1,000 concurrent requests under a limit of 600, all 1,000 got 429 instead
 * of 400 (test/server/api-security.test.ts). A copy taken at increment time gives each request
 * its own count. Same window, same LRU size (5,000 keys) as the plugin's default.
 */
type Callback = (err: Error | null, res?: { current: number; ttl: number }) => void;
interface PluginStore {
  incr(key: string, cb: Callback, timeWindow: number, max: number): void;
  read(key: string, cb: Callback, timeWindow: number, max: number): void;
  child(routeOptions: StoreParams): PluginStore;
}
interface StoreParams {
  continueExceeding: boolean;
  exponentialBackoff: boolean;
  cache?: number;
}

// The plugin exports no store types; its LocalStore is a CommonJS file of the package.
const LocalStore = createRequire(import.meta.url)('@fastify/rate-limit/store/LocalStore.js') as new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  cache?: number,
) => PluginStore;

export class SnapshotLocalStore implements PluginStore {
  readonly #inner: PluginStore;

  constructor(params: StoreParams) {
    this.#inner = new LocalStore(params.continueExceeding, params.exponentialBackoff, params.cache);
  }

  incr(key: string, cb: Callback, timeWindow: number, max: number): void {
    this.#inner.incr(key, (err, res) => cb(err, res && { current: res.current, ttl: res.ttl }), timeWindow, max);
  }

  read(key: string, cb: Callback, timeWindow: number, max: number): void {
    this.#inner.read(key, cb, timeWindow, max);
  }

  child(routeOptions: StoreParams): PluginStore {
    return new SnapshotLocalStore(routeOptions);
  }
}
