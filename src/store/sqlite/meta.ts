import { sql } from 'drizzle-orm';
import { writeTx, type SqliteContext } from './context.js';

/** Process-wide markers in `verdict_meta` (the drift sweep's per-set cursors). */

/** A marker of `verdict_meta`; null when unset. */
export function readMeta(ctx: SqliteContext, key: string): string | null {
  return ctx.db.get<{ value: string }>(sql`SELECT value FROM verdict_meta WHERE key = ${key}`)?.value ?? null;
}

/** Sets a marker of `verdict_meta`. */
export function writeMeta(ctx: SqliteContext, key: string, value: string): void {
  writeTx(ctx, (tx) =>
    tx.run(sql`
      INSERT INTO verdict_meta (key, value, updated_at) VALUES (${key}, ${value}, ${ctx.clock.now()})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`),
  );
}
