import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { CONVENTIONS_ROLE } from '../decision/conventions.js';
import { parserProblem } from '../decision/config-file.js';
import { InvalidWrite } from '../store/store.js';
import { PRIORITY_BACKFILL } from '../store/queue-store.js';
import type { CollectionRow, CollectionSchema, CollectionSettings, WorkspaceRow } from '../store/tracker-reads.js';
import type { TrackerStore } from '../store/tracker-store.js';
import { deriveId } from './beads-format.js';
import { errCode, VerdictError } from '../errors.js';

/**
 * Imports a workspace's conventions from a file (JSON or YAML) as real items of its conventions
 * collection (DESIGN §6): a system collection whose settings have `role: "conventions"`. The
 * `conventions` and `conventions_comments` sets resolve their questions from those items at
 * evaluation time, so this file is just one way to write them; a tracker writes them through the
 * same store doors.
 *
 * ```yaml
 * collection: conventions        # optional slug, default "conventions"
 * conventions:
 *   - ref: CONV-1                # unique per workspace; no "@"
 *     title: Bugs say how to reproduce them
 *     body: |                    # at most 4,096 UTF-8 bytes, or the convention is skipped
 *       A bug report gives the steps ...
 *     status: active             # default active; anything else is not asked
 *     trigger: always            # default always; anything else is not asked
 *     decision_check: "on"       # default "on"; "off" switches the check off
 * ```
 *
 * Items get ids derived from (workspace, ref), so a re-import updates them in place and an
 * unchanged file changes nothing. The import never deletes: to retire a convention, set its
 * `status` or `decision_check: "off"`.
 */

/**
 * An import owes at backfill priority with no quiet period (DESIGN §15's rule for imports: one
 * write per item, nothing to coalesce). The owed jobs of a convention item itself drop at once
 * (its collection is a system one); other items learn of the change through the drift sweep.
 */
const CONVENTIONS_IMPORT_OWE = Object.freeze({ priority: PRIORITY_BACKFILL, quietPeriod: false });

/** Schema of the conventions collection the importer creates. */
export const CONVENTIONS_COLLECTION_SCHEMA: CollectionSchema = {
  fields: [
    { key: 'status', type: 'select', options: ['active', 'draft', 'retired'] },
    { key: 'trigger', type: 'select', options: ['always', 'manual'] },
    { key: 'decision_check', type: 'select', options: ['on', 'off'] },
  ],
};

/** Settings of the conventions collection: its role, and not work to track. */
export const CONVENTIONS_COLLECTION_SETTINGS: CollectionSettings = { role: CONVENTIONS_ROLE, tracks_work: false };

const conventionSchema = z
  .object({
    ref: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, 'a ref is letters, digits and . _ : - (no "@")'),
    title: z.string().refine((s) => s.trim() !== '', 'must not be blank'),
    body: z.string().default(''),
    status: z.string().default('active'),
    trigger: z.string().default('always'),
    decision_check: z.string().default('on'),
  })
  .strict();

/** zod schema of a conventions file. */
export const conventionsFileSchema = z
  .object({
    collection: z.string().min(1).default('conventions'),
    conventions: z.array(conventionSchema),
  })
  .strict();

export type ConventionsFile = z.infer<typeof conventionsFileSchema>;

/** Thrown for a conventions file that cannot be read or fails validation; names the file and the problem. */
export class InvalidConventionsFile extends VerdictError {
  readonly code = 'invalid_conventions_file';
  /** `problem` says what is wrong; the message adds where the file's shape is shown. */
  constructor(file: string, problem: string) {
    super(
      `conventions file ${file}: ${problem}; a conventions file is JSON or YAML with a \`conventions:\` list, as examples/beads-conventions.yaml shows`,
    );
  }
}

/**
 * Reads and validates a conventions file.
 * @throws InvalidConventionsFile
 */
export function readConventionsFile(file: string): ConventionsFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidConventionsFile(file, `cannot be read (${errCode(err)}), check the path`);
  }
  let doc: unknown;
  try {
    doc = extname(file).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text, { uniqueKeys: true });
  } catch (err) {
    throw new InvalidConventionsFile(
      file,
      `not valid ${extname(file).toLowerCase() === '.json' ? 'JSON' : 'YAML'}: ${parserProblem(err)}`,
    );
  }
  const r = conventionsFileSchema.safeParse(doc);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new InvalidConventionsFile(file, `${i.path.join('.') || '(file)'}: ${i.message}`);
  }
  const refs = new Set<string>();
  for (const c of r.data.conventions) {
    if (refs.has(c.ref)) throw new InvalidConventionsFile(file, `ref ${c.ref} appears twice`);
    refs.add(c.ref);
  }
  return r.data;
}

/** What an import of conventions did. */
export interface ConventionsImportReport {
  workspaceId: string;
  collectionId: string;
  created: number;
  updated: number;
  unchanged: number;
}

/**
 * Writes a conventions file's entries as items of the workspace's conventions collection,
 * creating the workspace (id derived from its slug, as the beads importer does) and the
 * collection when absent.
 * @throws InvalidWrite when a collection of that slug exists but is not a conventions collection,
 *   the workspace is deleted, or a ref is held by another item.
 */
export async function importConventions(
  store: Pick<
    TrackerStore,
    'createCollection' | 'createWorkspace' | 'getItemByRef' | 'getWorkspaceBySlug' | 'listCollections' | 'upsertItem'
  >,
  doc: ConventionsFile,
  workspaceSlug: string,
): Promise<ConventionsImportReport> {
  const ws = await openWorkspace(store, workspaceSlug);
  const collection = await conventionsCollection(store, ws, doc.collection);
  const report: ConventionsImportReport = {
    workspaceId: ws.id,
    collectionId: collection.id,
    created: 0,
    updated: 0,
    unchanged: 0,
  };
  for (const c of doc.conventions) {
    const id = deriveId(ws.id, 'convention', c.ref);
    const holder = await store.getItemByRef(ws.id, c.ref);
    if (holder && holder.id !== id)
      throw new InvalidWrite(`ref ${c.ref} is held by another item of workspace ${workspaceSlug}`);
    const r = await store.upsertItem(
      {
        id,
        workspaceId: ws.id,
        collectionId: collection.id,
        ref: c.ref,
        title: c.title,
        content: c.body,
        fields: { status: c.status, trigger: c.trigger, decision_check: c.decision_check },
        deletedAt: null,
      },
      CONVENTIONS_IMPORT_OWE,
    );
    if (!holder) report.created++;
    else if (r.changed) report.updated++;
    else report.unchanged++;
  }
  return report;
}

async function openWorkspace(
  store: Pick<TrackerStore, 'createWorkspace' | 'getWorkspaceBySlug'>,
  slug: string,
): Promise<WorkspaceRow> {
  const ws = await store.getWorkspaceBySlug(slug);
  if (ws && ws.deletedAt !== null) throw new InvalidWrite(`workspace "${slug}" is deleted; restore it first`);
  return ws ?? (await store.createWorkspace({ id: deriveId('workspace', slug), slug }));
}

async function conventionsCollection(
  store: Pick<TrackerStore, 'createCollection' | 'listCollections'>,
  ws: WorkspaceRow,
  slug: string,
): Promise<CollectionRow> {
  const existing = (await store.listCollections(ws.id)).find((c) => c.slug === slug);
  if (existing) {
    if (existing.settings.role !== CONVENTIONS_ROLE)
      throw new InvalidWrite(
        `collection "${slug}" exists and is not a conventions collection (settings.role is not "conventions")`,
      );
    if (existing.deletedAt !== null) throw new InvalidWrite(`collection "${slug}" is deleted; restore it first`);
    return existing;
  }
  return store.createCollection({
    id: deriveId(ws.id, 'collection', slug),
    workspaceId: ws.id,
    slug,
    isSystem: true,
    schema: CONVENTIONS_COLLECTION_SCHEMA,
    settings: CONVENTIONS_COLLECTION_SETTINGS,
  });
}
