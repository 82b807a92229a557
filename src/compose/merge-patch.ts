import { fieldsForDisplay } from '../reads/reads.js';

/**
 * JSON Merge Patch (RFC 7396 §2, the MergePatch function): `PATCH /v1/items/{ref}` applies its
 * `fields` this way, as GitHub's and Stripe's object updates do. A patch that is not an object
 * replaces the target; in an object, null removes the member, an object merges recursively, and
 * anything else (arrays included) replaces it. Members the patch does not name are the target's
 * own values, untouched.
 */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  // A lossless-json LosslessNumber is an object but a scalar of JSON: it replaces, never merges.
  return v !== null && typeof v === 'object' && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;
}

/**
 * An item's stored `fields` JSON text with `patch` applied as a JSON Merge Patch (`mergePatch`),
 * read losslessly so members the patch does not name keep their number literals.
 * @returns the new fields object, for `updateItem`.
 */
export function patchItemFields(storedFields: string, patch: unknown): Record<string, unknown> {
  return mergePatch(fieldsForDisplay(storedFields), patch) as Record<string, unknown>;
}
