import { defineConfig } from 'drizzle-kit';

/** PostgreSQL migrations (DESIGN §13): their own folder, generated from the pg-core schema. */
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/store/postgres/schema.ts',
  out: './drizzle-pg',
});
