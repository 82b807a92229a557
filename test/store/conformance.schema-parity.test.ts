import { getTableConfig as pgTable, PgTable } from 'drizzle-orm/pg-core';
import { getTableConfig as sqliteTable, SQLiteTable } from 'drizzle-orm/sqlite-core';
import { describe, expect, it } from 'vitest';
import * as pg from '../../src/store/postgres/schema.js';
import * as lite from '../../src/store/sqlite/schema.js';

/**
 * The Postgres schema is kept column for column identical to the SQLite one (DESIGN §13: "the
 * same schema in drizzle's pg dialect"): same tables, columns, nullability, defaults, primary
 * keys, and index names, columns and uniqueness. Only the dialect types differ. A column added to
 * one schema and not the other fails here.
 */

type Shape = {
  columns: Array<{ name: string; notNull: boolean; hasDefault: boolean; primary: boolean }>;
  primaryKeys: string[][];
  indexes: Array<{ name: string; unique: boolean; columns: string[] }>;
  foreignKeys: string[];
};

function shape(config: ReturnType<typeof pgTable> | ReturnType<typeof sqliteTable>): Shape {
  return {
    columns: config.columns
      .map((c) => ({ name: c.name, notNull: c.notNull, hasDefault: c.hasDefault, primary: c.primary }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    primaryKeys: config.primaryKeys.map((p) => p.columns.map((c) => c.name)),
    indexes: config.indexes
      .map((i) => ({
        name: i.config.name!,
        unique: i.config.unique,
        columns: i.config.columns.map((c) => (c as { name: string }).name),
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    foreignKeys: config.foreignKeys
      .map((f) => {
        const r = f.reference();
        return `${r.columns.map((c) => c.name).join(',')}->${r.foreignColumns.map((c) => c.name).join(',')}`;
      })
      .sort(),
  };
}

const liteTables = Object.entries(lite).filter(([, t]) => t instanceof SQLiteTable) as Array<[string, SQLiteTable]>;
const pgTables = Object.entries(pg).filter(([, t]) => t instanceof PgTable) as Array<[string, PgTable]>;

describe('schema parity: SQLite and Postgres', () => {
  it('have the same tables', () => {
    expect(pgTables.map(([k]) => k).sort()).toEqual(liteTables.map(([k]) => k).sort());
    expect(liteTables.length).toBeGreaterThanOrEqual(9);
  });

  for (const [key, table] of liteTables) {
    it(`${key}: same columns, keys and indexes`, () => {
      const other = pgTables.find(([k]) => k === key)?.[1];
      expect(other, `postgres schema lacks ${key}`).toBeDefined();
      const a = sqliteTable(table);
      const b = pgTable(other!);
      expect(b.name).toBe(a.name);
      expect(shape(b)).toEqual(shape(a));
    });
  }
});
