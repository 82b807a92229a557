/**
 * The table Verdict records its applied migrations in, on SQLite and on Postgres (in the `drizzle`
 * schema there): its own name, so a host that also migrates with drizzle keeps drizzle's default
 * `__drizzle_migrations` to itself (DESIGN §16.1). Databases migrated by older versions recorded
 * Verdict's migrations in the default table; each store's migrate step copies those rows over once.
 * Changing this name makes every existing database look unmigrated.
 */
export const MIGRATIONS_TABLE = 'verdict_migrations';

/** The table older versions recorded Verdict's migrations in (drizzle's default). */
export const LEGACY_MIGRATIONS_TABLE = '__drizzle_migrations';
