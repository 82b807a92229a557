/** A `verdict_meta` row: cursors (backfill) and process markers (worker heartbeats). */
export interface MetaRow {
  key: string;
  value: string;
  /** Epoch ms of the last write. */
  updatedAt: number;
}

/** The `verdict_meta` rows (statements in sql/operations.ts): cursors, markers and heartbeats by key. */
export interface MetaStore {
  /** One `verdict_meta` value, or null. */
  getMeta(key: string): Promise<string | null>;
  /** Inserts or replaces one `verdict_meta` row (updated_at = now). */
  setMeta(key: string, value: string): Promise<void>;
  deleteMeta(key: string): Promise<void>;
  /** `verdict_meta` rows whose key starts with `prefix` (compared byte for byte, no wildcards), by key. */
  listMeta(prefix: string): Promise<MetaRow[]>;
}
