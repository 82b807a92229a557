import { constants, createReadStream } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { z } from 'zod';
import { silentLogger, type Logger } from '../log.js';
import { repairCount, type NormaliseReport } from '../store/input-rules.js';
import { InvalidWrite } from '../store/store.js';
import { PRIORITY_BACKFILL, type OweOptions } from '../store/queue-store.js';
import type { CollectionRow, WorkspaceRow } from '../store/tracker-reads.js';
import type { WriteResult } from '../store/tracker-writes.js';
import type { TrackerStore } from '../store/tracker-store.js';
import type { QueueStore } from '../store/queue-store.js';
import type { TrackerReads } from '../store/tracker-reads.js';
import type { Store } from '../store/whole-store.js';
import { errCode, InputNotFound, InvalidInput, ownCode } from '../errors.js';
import {
  BEADS_COLLECTION_SCHEMA,
  BEADS_FIELD_RULES,
  BEADS_COLLECTION_SETTINGS,
  beadsBody,
  beadsFields,
  beadsLink,
  beadsRowSchema,
  classifyBeadsRow,
  deriveId,
  parseRfc3339,
  type BeadsDependency,
  type BeadsRow,
  type SkipReason,
} from './beads-format.js';

/**
 * The beads importer (DESIGN §15): one JSONL row becomes one item, in three steps.
 *
 * 1. Each line is parsed and validated whole (zod) before anything of it is written; a bad line
 *    is reported with its number and skipped, never half-written.
 * 2. Each work row is upserted as an item (derived id, ref = the beads id) with its comments.
 * 3. After every row is in, dependencies become links, since a row may depend on a later one.
 *
 * Every write goes through the Store's importer doors (`upsertItem`, `upsertComment`, `addLink`),
 * so a re-import of the same file changes nothing and owes nothing. Writes owe work at backfill
 * priority with no quiet period: an import is one write per item, so there is no burst to wait
 * out, and live writes stay ahead of it.
 *
 * Collections are created on demand, one per work type (`BEADS_COLLECTION_SCHEMA`,
 * `BEADS_COLLECTION_SETTINGS`); a collection of that slug already in the workspace is reused as
 * it is. The import never deletes: an item, comment or dependency that has left the file stays.
 */

/**
 * Lines per write transaction (our choice): a chunk is one fsync (DESIGN §3.9) and holds the
 * write lock for about 100 ms on this machine's disk, inside §3.3's 250 ms.
 */
const IMPORT_CHUNK = 100;

/** Every write of an import owes at backfill priority, due at once (DESIGN §15). */
export const IMPORT_OWE: Readonly<OweOptions> = Object.freeze({ priority: PRIORITY_BACKFILL, quietPeriod: false });

/** Why a line was rejected. */
export type RejectReason =
  /** Not JSON. */
  | 'bad_json'
  /** JSON, but not an object. */
  | 'not_an_object'
  /** An object that fails the row schema (see `beadsRowSchema`). */
  | 'invalid_row'
  /** An id already imported or skipped from an earlier line of this input. */
  | 'duplicate_id'
  /** The workspace holds another item (not derived from this id) with this ref. */
  | 'ref_taken';

/** One rejected line. `detail` names fields and rule codes, never row text. */
export interface RejectedLine {
  /** 1-based line number in the input. */
  line: number;
  reason: RejectReason;
  detail?: string;
}

/** Why a dependency did not become a link. */
export type LinkDropReason =
  /** The target row was skipped (orchestration, ephemeral, unknown type). */
  | 'target_skipped'
  /** The target row's line was rejected. */
  | 'target_rejected'
  /** No row of the input has the target id. */
  | 'target_not_found'
  /** The dependency's own row was skipped, so its dependencies go with it. */
  | 'source_skipped'
  /** Both ends are the same item. */
  | 'self_link';

/** What an import did. Counts are of this run only. */
export interface ImportReport {
  workspaceId: string;
  workspaceSlug: string;
  /** Non-blank lines read (every such line is imported, skipped or rejected). */
  rowsRead: number;
  /** Work rows written or found unchanged. `tombstones` counts the soft-deleted ones among them. */
  imported: { created: number; updated: number; unchanged: number; tombstones: number };
  /** Well-formed rows not imported, by reason. */
  skipped: Record<SkipReason, number>;
  /** Skipped rows (orchestration and unknown types, not ephemeral) by the type that decided it. */
  skippedTypes: Record<string, number>;
  /** Comments of imported rows: written (created or changed) or already so. */
  comments: { written: number; unchanged: number };
  /**
   * Dependencies: made into new links, found as existing links, or dropped by reason.
   * created + unchanged + the dropped counts = every dependency of every well-formed row.
   */
  links: { created: number; unchanged: number; dropped: Record<LinkDropReason, number> };
  /** Rejected lines: the total, and the first `maxRejectedListed` of them in line order. */
  rejected: { count: number; lines: RejectedLine[] };
  /** Slugs of the collections this run created. */
  collectionsCreated: string[];
  /** Job-row upserts owed by this run's writes (a row owed by several writes counts each time). */
  jobsOwed: number;
  /**
   * Distinct (item, question set) job rows of the workspace owed since this run began: what a
   * worker has to do. A row owed by several writes of the run counts once.
   */
  jobRowsOwed: number;
  /** Text normalised by the write doors (lone surrogates, NULs), summed. */
  normalised: NormaliseReport;
  /**
   * Lines whose text was repaired before it was stored (DESIGN §3.1): `count` lines in all, and
   * by repair (a line may count under several): bytes that were not UTF-8 (each sequence read as
   * U+FFFD), lone surrogates replaced by U+FFFD, NULs removed. `lines` lists the first
   * `maxRejectedListed` line numbers.
   */
  repairedLines: { count: number; invalidUtf8: number; loneSurrogates: number; nulsRemoved: number; lines: number[] };
}

/** Options of `importBeads`. */
export interface ImportBeadsOptions {
  /**
   * Slug of the workspace to import into; created (with an id derived from the slug) when absent.
   * @defaultValue 'beads'
   */
  workspaceSlug?: string;
  /** Receives ids, counts and line numbers only, never item text. @defaultValue silent */
  logger?: Logger;
  /** How many rejected lines the report lists (all are counted). @defaultValue 100 */
  maxRejectedListed?: number;
}

/**
 * Input of `importBeads`: a path to a JSONL file, or the lines themselves (one JSON object per
 * element, without its newline), sync or async.
 */
export type BeadsInput = string | Iterable<string> | AsyncIterable<string>;

/**
 * Imports a beads JSONL export into a workspace (DESIGN §15). See the file comment for the steps
 * and `ImportReport` for what is counted. Safe to re-run: a re-import of the same input changes
 * nothing and owes nothing.
 *
 * @param store any Store; only its public doors are used.
 * @param input a file path, or the lines (see `BeadsInput`).
 * @throws InvalidWrite when the workspace exists but is soft-deleted (restore it first).
 * @throws the file's error (ENOENT, EACCES, not a file) before anything is written.
 * @throws a read error mid-file, or a store error other than a rejected row (disk full, locked):
 *   what was written before stays, and a re-run completes it.
 */
export async function importBeads(
  store: Pick<Store, 'getWorkspaceBySlug' | 'listCollections' | 'listJobs' | 'now' | 'transaction'>,
  input: BeadsInput,
  opts: ImportBeadsOptions = {},
): Promise<ImportReport> {
  const slug = opts.workspaceSlug ?? 'beads';
  if (typeof slug !== 'string' || slug.trim() === '')
    throw new TypeError(`workspaceSlug must be a non-empty string, got ${JSON.stringify(slug)}`);
  const log = opts.logger ?? silentLogger;
  const maxListed = opts.maxRejectedListed ?? 100;

  if (typeof input === 'string') await assertReadableFile(input); // before any write: no empty workspace for a typo
  const startedAt = await store.now();
  const existing = await findWorkspace(store, slug);
  // The workspace is created at the first well-formed row, so input with none leaves nothing behind.
  let ws: WorkspaceRow | null = existing;
  const workspace = async (s: TrackerStore) =>
    (ws ??= await s.createWorkspace({ id: deriveId('workspace', slug), slug }));
  const report = emptyImportReport(existing ?? { id: deriveId('workspace', slug), slug });
  const collections = new Map<string, CollectionRow>(
    existing ? (await store.listCollections(existing.id)).map((c) => [c.slug, c]) : [],
  );
  let wellFormed = 0;
  let firstError: RejectedLine | null = null;

  /** Beads id → what became of its row. */
  const fate = new Map<string, { kind: 'imported'; itemId: string } | { kind: 'skipped' } | { kind: 'rejected' }>();
  /** First accepted line of each id, for the duplicate check. */
  const firstLine = new Map<string, number>();
  const pending: BeadsDependency[] = [];

  const reject = (line: number, reason: RejectReason, detail?: string, id?: string) => {
    firstError ??= detail ? { line, reason, detail } : { line, reason };
    report.rejected.count++;
    if (report.rejected.lines.length < maxListed)
      report.rejected.lines.push(detail ? { line, reason, detail } : { line, reason });
    if (id !== undefined && !fate.has(id)) fate.set(id, { kind: 'rejected' });
    if (report.rejected.count <= maxListed) log.warn({ workspace: slug, line, reason, detail }, 'beads line rejected');
  };
  const tally = <T>(r: WriteResult<T>) => {
    report.jobsOwed += r.owed;
    report.normalised.loneSurrogates += r.normalised.loneSurrogates;
    report.normalised.nulsRemoved += r.normalised.nulsRemoved;
    return r;
  };

  const repaired = (line: number, invalidUtf8: boolean, before: NormaliseReport) => {
    const r = report.normalised;
    if (!invalidUtf8 && repairCount(r) === repairCount(before)) return;
    const rl = report.repairedLines;
    rl.count++;
    if (invalidUtf8) rl.invalidUtf8++;
    if (r.loneSurrogates > before.loneSurrogates) rl.loneSurrogates++;
    if (r.nulsRemoved > before.nulsRemoved) rl.nulsRemoved++;
    if (rl.lines.length < maxListed) rl.lines.push(line);
    if (rl.count <= maxListed) log.warn({ workspace: slug, line, invalidUtf8 }, 'beads line repaired');
  };

  /** Imports one well-formed-or-not line through `s` (the chunk's transaction). */
  const importLine = async (s: TrackerStore, lineNo: number, source: SourceLine): Promise<void> => {
    const raw = source.text;
    const text = (lineNo === 1 ? raw.replace(/^\uFEFF/, '') : raw).trim();
    if (text === '') return;
    report.rowsRead++;

    const parsed = parseBeadsLine(text);
    if (!parsed.ok) {
      reject(lineNo, parsed.reason, parsed.detail, parsed.id);
      return;
    }
    const row = parsed.row;
    wellFormed++;
    const ws = await workspace(s);
    const first = firstLine.get(row.id);
    if (first !== undefined) {
      reject(lineNo, 'duplicate_id', `first on line ${first}`);
      return;
    }

    const cls = classifyBeadsRow(row);
    if (cls.kind === 'skip') {
      firstLine.set(row.id, lineNo);
      fate.set(row.id, { kind: 'skipped' });
      report.skipped[cls.reason]++;
      if (cls.reason !== 'ephemeral') report.skippedTypes[cls.type] = (report.skippedTypes[cls.type] ?? 0) + 1;
      report.links.dropped.source_skipped += row.dependencies?.length ?? 0;
      return;
    }

    const itemId = deriveId(ws.id, 'item', row.id);
    const holder = await s.getItemByRef(ws.id, row.id);
    if (holder && holder.id !== itemId) {
      reject(lineNo, 'ref_taken', undefined, row.id);
      return;
    }
    firstLine.set(row.id, lineNo);

    const collection = collections.get(cls.collection) ?? (await createCollection(s, ws, cls.collection, report));
    collections.set(cls.collection, collection);

    const createdAt = row.created_at ? parseRfc3339(row.created_at)! : undefined;
    const deletedAt = cls.tombstone ? await tombstoneTime(s, row) : null;
    const repairsBefore = { ...report.normalised };
    const r = tally(
      await s.upsertItem(
        {
          id: itemId,
          workspaceId: ws.id,
          collectionId: collection.id,
          ref: row.id,
          title: row.title,
          content: beadsBody(row),
          fields: beadsFields(row),
          createdAt,
          deletedAt,
        },
        IMPORT_OWE,
      ),
    );
    if (!r.changed) report.imported.unchanged++;
    else if (holder) report.imported.updated++;
    else report.imported.created++;
    if (cls.tombstone) report.imported.tombstones++;
    fate.set(row.id, { kind: 'imported', itemId });

    for (const c of row.comments ?? []) {
      const cr = tally(
        await s.upsertComment(
          {
            id: deriveId(ws.id, 'comment', row.id, String(c.id)),
            itemId,
            author: c.author ?? '',
            body: c.text,
            createdAt: c.created_at ? parseRfc3339(c.created_at)! : undefined,
          },
          IMPORT_OWE,
        ),
      );
      if (cr.changed) report.comments.written++;
      else report.comments.unchanged++;
    }
    repaired(lineNo, source.invalidUtf8, repairsBefore);
    pending.push(...(row.dependencies ?? []));
  };

  // Lines are written IMPORT_CHUNK at a time, each chunk one transaction: one fsync per chunk
  // instead of one per row and comment (DESIGN §3.9: every commit is fsynced).
  let lineNo = 0;
  let chunk: Array<{ lineNo: number; source: SourceLine }> = [];
  const flush = async () => {
    const todo = chunk;
    chunk = [];
    if (todo.length)
      await store.transaction(async (tx) => {
        for (const l of todo) await importLine(tx, l.lineNo, l.source);
      });
  };
  for await (const source of lines(input)) {
    chunk.push({ lineNo: ++lineNo, source });
    if (chunk.length >= IMPORT_CHUNK) await flush();
  }
  await flush();

  for (let at = 0; at < pending.length; at += IMPORT_CHUNK) {
    await store.transaction(async (tx) => {
      for (const dep of pending.slice(at, at + IMPORT_CHUNK)) {
        const target = fate.get(dep.depends_on_id);
        if (target?.kind !== 'imported') {
          const reason: LinkDropReason = !target
            ? 'target_not_found'
            : target.kind === 'skipped'
              ? 'target_skipped'
              : 'target_rejected';
          report.links.dropped[reason]++;
          continue;
        }
        const link = beadsLink(dep);
        if (link.source === link.target) {
          report.links.dropped.self_link++;
          continue;
        }
        const lr = tally(
          await tx.addLink(
            {
              id: deriveId(report.workspaceId, 'link', dep.issue_id, dep.depends_on_id, dep.type),
              workspaceId: report.workspaceId,
              sourceId: deriveId(report.workspaceId, 'item', link.source),
              targetId: deriveId(report.workspaceId, 'item', link.target),
              linkType: link.linkType,
              createdAt: dep.created_at ? parseRfc3339(dep.created_at)! : undefined,
            },
            IMPORT_OWE,
          ),
        );
        if (lr.changed) report.links.created++;
        else report.links.unchanged++;
      }
    });
  }

  if (wellFormed === 0) throw new InvalidInput(notBeadsMessage(report.rowsRead, firstError));
  report.jobRowsOwed = report.jobsOwed === 0 ? 0 : await countRowsOwedSince(store, report.workspaceId, startedAt);

  log.info(
    {
      workspace: slug,
      workspaceId: report.workspaceId,
      rowsRead: report.rowsRead,
      imported: report.imported,
      skipped: report.skipped,
      comments: report.comments,
      links: report.links,
      rejected: report.rejected.count,
      repairedLines: report.repairedLines.count,
      jobsOwed: report.jobsOwed,
      jobRowsOwed: report.jobRowsOwed,
    },
    'beads import finished',
  );
  return report;
}

/**
 * Path of the sample bundled with Verdict (`sample/beads-issues.jsonl`, a filtered copy of the
 * beads project's own tracker; see `sample/README.md`). Resolves from `src/importers/` and from
 * `dist/importers/` alike.
 */
export function bundledSamplePath(): string {
  return fileURLToPath(new URL('../../sample/beads-issues.jsonl', import.meta.url));
}

/** One line of input: its text, and whether its bytes were not all UTF-8 (each bad sequence is then U+FFFD in `text`). */
export interface SourceLine {
  text: string;
  invalidUtf8: boolean;
}

// ignoreBOM keeps a U+FEFF that starts a line (only line 1's is a byte-order mark, stripped by the caller).
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The lines of a UTF-8 file, without their line endings (`\n` or `\r\n`), streamed. A line whose
 * bytes are not UTF-8 is decoded with U+FFFD for each bad sequence and flagged, so the repair is
 * counted (DESIGN §3.1) instead of made silently.
 * @throws the read error (ENOENT, EISDIR …) on first iteration.
 */
export async function* readLines(path: string): AsyncGenerator<SourceLine> {
  let pending: Buffer[] = [];
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      pending.push(chunk.subarray(start, nl));
      yield decodeLine(Buffer.concat(pending));
      pending = [];
      start = nl + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  }
  if (pending.length) yield decodeLine(Buffer.concat(pending));
}

function decodeLine(bytes: Buffer): SourceLine {
  const line = bytes.length > 0 && bytes[bytes.length - 1] === 13 ? bytes.subarray(0, -1) : bytes;
  try {
    return { text: STRICT_UTF8.decode(line), invalidUtf8: false };
  } catch {
    return { text: line.toString('utf8'), invalidUtf8: true };
  }
}

// ------------------------------------------------------------------ helpers

async function* lines(input: BeadsInput): AsyncGenerator<SourceLine> {
  if (typeof input === 'string') {
    yield* readLines(input);
    return;
  }
  for await (const text of input) yield { text, invalidUtf8: false };
}

function emptyImportReport(ws: Pick<WorkspaceRow, 'id' | 'slug'>): ImportReport {
  return {
    workspaceId: ws.id,
    workspaceSlug: ws.slug,
    rowsRead: 0,
    imported: { created: 0, updated: 0, unchanged: 0, tombstones: 0 },
    skipped: { ephemeral: 0, orchestration: 0, unknown_type: 0 },
    skippedTypes: {},
    comments: { written: 0, unchanged: 0 },
    links: {
      created: 0,
      unchanged: 0,
      dropped: { target_skipped: 0, target_rejected: 0, target_not_found: 0, source_skipped: 0, self_link: 0 },
    },
    rejected: { count: 0, lines: [] },
    collectionsCreated: [],
    jobsOwed: 0,
    jobRowsOwed: 0,
    normalised: { loneSurrogates: 0, nulsRemoved: 0 },
    repairedLines: { count: 0, invalidUtf8: 0, loneSurrogates: 0, nulsRemoved: 0, lines: [] },
  };
}

/**
 * @throws InputNotFound when there is no file at `path` or it is a folder.
 * @throws InvalidInput when it cannot be read (permissions).
 */
async function assertReadableFile(path: string): Promise<void> {
  let s;
  try {
    s = await stat(path);
  } catch (err) {
    const code = ownCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new InputNotFound(`no file at ${path}; check the path`);
    throw new InvalidInput(`cannot read ${path} (${errCode(err)}); check its permissions`);
  }
  if (!s.isFile()) throw new InputNotFound(`${path} is not a file; pass the JSONL file itself`);
  try {
    await access(path, constants.R_OK);
  } catch (err) {
    throw new InvalidInput(`cannot read ${path} (${errCode(err)}); check its permissions`);
  }
}

/** The workspace of `slug`, or null. @throws InvalidWrite when it is soft-deleted. */
async function findWorkspace(
  store: Pick<TrackerReads, 'getWorkspaceBySlug'>,
  slug: string,
): Promise<WorkspaceRow | null> {
  const ws = await store.getWorkspaceBySlug(slug);
  if (ws && ws.deletedAt !== null)
    throw new InvalidWrite(`workspace "${slug}" is deleted; restore it before importing into it`);
  return ws;
}

/** Owed job rows of the workspace whose latest enqueue is at or after `since` (epoch ms). */
async function countRowsOwedSince(
  store: Pick<QueueStore, 'listJobs'>,
  workspaceId: string,
  since: number,
): Promise<number> {
  const rows = await store.listJobs({ workspaceId, state: 'owed', limit: Number.MAX_SAFE_INTEGER });
  return rows.filter((j) => j.owedAt >= since).length;
}

/** The one line for input with no well-formed row (`not beads JSONL: 0 of 182 lines parsed; …`). */
function notBeadsMessage(linesRead: number, first: RejectedLine | null): string {
  const where = first
    ? `; first error at line ${first.line}: ${first.detail ?? REJECT_WORDS[first.reason]}`
    : '; the input has no lines';
  return `not beads JSONL: 0 of ${linesRead} lines parsed${where}; nothing was imported (pass a beads export: one JSON object per line, see docs/guide.md)`;
}

/** Rejection reasons in words, for the one-line message. */
const REJECT_WORDS: Record<RejectReason, string> = {
  bad_json: 'not JSON',
  not_an_object: 'JSON, but not an object',
  invalid_row: 'not a beads row',
  duplicate_id: 'an id seen on an earlier line',
  ref_taken: 'the ref belongs to another item',
};

/** One line judged on its own: a well-formed row, or why not (never quoting the line). */
export type ParsedBeadsLine =
  | { ok: true; row: BeadsRow }
  | { ok: false; reason: 'bad_json' | 'not_an_object' | 'invalid_row'; detail?: string; id?: string };

/** Parses and validates one non-blank line of beads JSONL (see beadsRowSchema). Never throws. */
export function parseBeadsLine(text: string): ParsedBeadsLine {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'bad_json', detail: 'not JSON' }; // the parser's message quotes the line: never keep it
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    return {
      ok: false,
      reason: 'not_an_object',
      detail: Array.isArray(json) ? 'a JSON array, not one object per line' : 'JSON, but not an object',
    };
  }
  const rawId = (json as { id?: unknown }).id;
  const parsed = beadsRowSchema.safeParse(json);
  if (!parsed.success)
    return {
      ok: false,
      reason: 'invalid_row',
      detail: describeIssues(parsed.error.issues),
      id: typeof rawId === 'string' ? rawId : undefined,
    };
  return { ok: true, row: parsed.data };
}

/**
 * Reads a beads JSONL file up to its first well-formed row, without writing anything: the CLI
 * calls it before it opens (and so creates) a database.
 * @throws InputNotFound when there is no file at `path`.
 * @throws InvalidInput (`not beads JSONL: 0 of N lines parsed; first error at line L: …`) when no
 *   line is a well-formed beads row.
 */
export async function assertBeadsFile(path: string): Promise<void> {
  await assertReadableFile(path);
  let lineNo = 0;
  let read = 0;
  let first: RejectedLine | null = null;
  for await (const { text: raw } of readLines(path)) {
    lineNo++;
    const text = (lineNo === 1 ? raw.replace(/^\uFEFF/, '') : raw).trim();
    if (text === '') continue;
    read++;
    const parsed = parseBeadsLine(text);
    if (parsed.ok) return;
    first ??= { line: lineNo, reason: parsed.reason, detail: parsed.detail };
  }
  throw new InvalidInput(notBeadsMessage(read, first));
}

async function createCollection(
  store: TrackerStore,
  ws: WorkspaceRow,
  slug: string,
  report: ImportReport,
): Promise<CollectionRow> {
  const c = await store.createCollection({
    id: deriveId(ws.id, 'collection', slug),
    workspaceId: ws.id,
    slug,
    schema: BEADS_COLLECTION_SCHEMA,
    settings: BEADS_COLLECTION_SETTINGS,
  });
  report.collectionsCreated.push(slug);
  return c;
}

/** A tombstone's deletion time: `deleted_at`, else `updated_at`, else `created_at`, else now. */
async function tombstoneTime(
  store: TrackerStore,
  row: { deleted_at?: string | null; updated_at?: string | null; created_at?: string | null },
): Promise<number> {
  for (const t of [row.deleted_at, row.updated_at, row.created_at]) {
    if (t) return parseRfc3339(t)!;
  }
  return store.now();
}

/**
 * Each issue as `field: what it must hold` (`priority: expected an integer 0–4`, `title: missing`),
 * never the offending value. Rules come from BEADS_FIELD_RULES, else from the schema's type.
 */
function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  const shown = issues.slice(0, 3).map((i) => `${i.path.length ? i.path.join('.') : '(row)'}: ${describeIssue(i)}`);
  return issues.length > 3 ? `${shown.join(', ')}, +${issues.length - 3} more` : shown.join(', ');
}

function describeIssue(i: z.core.$ZodIssue): string {
  if (i.code === 'custom') return i.message;
  // zod's own message names the types only ("expected string, received undefined"), never values.
  if (i.code === 'invalid_type' && / received undefined$/.test(i.message)) return 'missing';
  const field = [...i.path].reverse().find((k): k is string => typeof k === 'string');
  const rule = field !== undefined ? BEADS_FIELD_RULES[field] : undefined;
  if (rule) return rule;
  if (i.code === 'invalid_type') return `expected ${i.expected}`;
  if (i.code === 'invalid_union') return 'expected an integer or a non-empty string';
  return i.message.toLowerCase();
}
