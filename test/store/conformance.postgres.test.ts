import { describe, it } from 'vitest';
import { runStoreConformance } from './conformance.js';
import { PG_SKIP_REASON, postgresBackend, TEST_PG_URL } from './conformance-backends.js';

/**
 * The store conformance suite on a real PostgreSQL server (VERDICT_TEST_PG_URL; .ci/run starts
 * one). Here claims really contend: several connection pools claim at once through SKIP LOCKED.
 */
if (TEST_PG_URL) runStoreConformance(postgresBackend(TEST_PG_URL));
else describe.skip(`postgres conformance: ${PG_SKIP_REASON}`, () => it.skip('needs a server', () => undefined));
