import { runStoreConformance } from './conformance.js';
import { pgliteBackend } from './conformance-backends.js';

/** The store conformance suite on PGlite: in-process Postgres, the pg-core schema and its migrations. */
runStoreConformance(pgliteBackend());
