// The runner's and the worker's modules name errCode through this path; it is defined once, in
// src/errors.ts, below every layer, so that the store and the importers can use it too.
export { errCode } from '../errors.js';
