import type { MetaStore } from '../store/meta-store.js';
import type { TrackerStore } from '../store/tracker-store.js';

/**
 * Where batching is unavailable (DESIGN §7.4): an endpoint whose batch route answered 404, 405,
 * 400 or a 200 that is not a batch object (BatchUnsupported) is marked in `verdict_meta`, per
 * provider and base URL, so every later worker with `--batch auto` asks that endpoint's jobs
 * directly without trying a batch first, and `status` says so. `--batch on` tries again; a batch
 * it submits there clears the mark.
 */

/** `verdict_meta` keys of the marks: `batch-unavailable:<provider>:<endpoint>`. */
const BATCH_UNAVAILABLE_META_PREFIX = 'batch-unavailable:';

/** One endpoint without a batch API. `at` is epoch ms (the store's clock). */
export interface BatchUnavailable {
  provider: string;
  endpoint: string;
  /** The endpoint's host (or the endpoint itself when it is not a URL), for the status line. */
  host: string;
  /** The HTTP status its batch route answered (200: a body that is not a batch). */
  status: number;
  at: number;
}

function keyOf(provider: string, endpoint: string): string {
  return `${BATCH_UNAVAILABLE_META_PREFIX}${provider}:${endpoint}`;
}

/** The host of a base URL; the endpoint itself when it is not a URL (`fake`). */
export function endpointHost(endpoint: string): string {
  try {
    return new URL(endpoint).host || endpoint;
  } catch {
    return endpoint;
  }
}

/** Marks `endpoint` of `provider` as having no batch API. */
export async function markBatchUnavailable(
  store: Pick<TrackerStore, 'now'> & Pick<MetaStore, 'setMeta'>,
  provider: string,
  endpoint: string,
  status: number,
): Promise<BatchUnavailable> {
  const mark: BatchUnavailable = { provider, endpoint, host: endpointHost(endpoint), status, at: await store.now() };
  await store.setMeta(keyOf(provider, endpoint), JSON.stringify(mark));
  return mark;
}

/** Clears the mark of `endpoint` (a batch was created there). */
export function clearBatchUnavailable(
  store: Pick<MetaStore, 'deleteMeta'>,
  provider: string,
  endpoint: string,
): Promise<void> {
  return store.deleteMeta(keyOf(provider, endpoint));
}

/** Every mark; unreadable rows are skipped (a mark only saves a failed create). */
export async function listBatchUnavailable(store: Pick<MetaStore, 'listMeta'>): Promise<BatchUnavailable[]> {
  const out: BatchUnavailable[] = [];
  for (const r of await store.listMeta(BATCH_UNAVAILABLE_META_PREFIX)) {
    if (!r.key.startsWith(BATCH_UNAVAILABLE_META_PREFIX)) continue;
    try {
      const v = JSON.parse(r.value) as Partial<BatchUnavailable>;
      if (typeof v.provider !== 'string' || typeof v.endpoint !== 'string' || typeof v.status !== 'number') continue;
      out.push({
        provider: v.provider,
        endpoint: v.endpoint,
        host: endpointHost(v.endpoint),
        status: v.status,
        at: typeof v.at === 'number' ? v.at : 0,
      });
    } catch {
      /* skipped */
    }
  }
  return out;
}

/** Whether `endpoint` of `provider` is marked. */
export async function isBatchUnavailable(
  store: Pick<MetaStore, 'getMeta'>,
  provider: string,
  endpoint: string,
): Promise<boolean> {
  return (await store.getMeta(keyOf(provider, endpoint))) !== null;
}
