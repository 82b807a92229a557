import { runStoreConformance } from './conformance.js';
import { sqliteBackend } from './conformance-backends.js';

/** The store conformance suite on SQLite: a real file per test, a manual clock. */
runStoreConformance(sqliteBackend());
