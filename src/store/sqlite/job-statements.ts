import Database from 'better-sqlite3';
import type { StateLink, TrailComment } from '../../decision/state.js';
import type { AnswerKey, Claim, ClaimCheck, ItemForEvaluation } from '../store.js';
import type { CollectionRow, ItemRow, WorkspaceRow } from '../tracker-reads.js';
import { livenessOf, type LivenessRow } from '../sql/decisions.js';
import type { RawItem } from '../write-rules.js';

/**
 * The job path's reads on SQLite (DESIGN §7 steps 1–6), each as SQL text in its own function with
 * its reason beside it, prepared once per connection (`prepared`) and run synchronously on
 * better-sqlite3: no statement builder, no step driver, no row mapping but the few lines here.
 * The same reads for both dialects are in ../sql/decisions.ts (Postgres runs those); the
 * conformance suite (test/store/conformance.ts) holds the two to the same answers.
 */

type Statement = Database.Statement<unknown[], unknown>;

/** Each connection's prepared statements by SQL text; a closed connection's go with it. */
const statements = new WeakMap<Database.Database, Map<string, Statement>>();

/**
 * The statement for `text` on `db`, prepared on its first use and kept for the connection's life:
 * a statement is compiled by SQLite once, and every later run only binds its values. Prepared past
 * the connection's text-keyed cache (open.ts `cacheStatements`), which drizzle shares: these
 * statements are this file's alone, so nothing else can switch one to raw (array) rows.
 */
function prepared(db: Database.Database, text: string): Statement {
  let byText = statements.get(db);
  if (!byText) statements.set(db, (byText = new Map()));
  let s = byText.get(text);
  if (!s) byText.set(text, (s = Database.prototype.prepare.call(db, text) as Statement));
  return s;
}

/**
 * The item, its collection and workspace in one statement (LEFT JOINs: a missing collection or
 * workspace row reads as null, and the load is null), by primary key. Its columns are flat so no
 * nested row is built. Comments and links are two more reads (`stateComments`, `stateLinks`).
 */
const LOAD_ITEM = `
  SELECT i.id, i.workspace_id, i.collection_id, i.ref, i.title, i.content, i.fields, i.seq,
         i.created_at, i.updated_at, i.deleted_at, i.source_url,
         c.id AS c_id, c.workspace_id AS c_workspace_id, c.slug AS c_slug, c.is_system AS c_is_system, c.schema AS c_schema, c.settings AS c_settings,
         c.created_at AS c_created_at, c.deleted_at AS c_deleted_at,
         w.id AS w_id, w.slug AS w_slug, w.created_at AS w_created_at, w.deleted_at AS w_deleted_at
  FROM items i
  LEFT JOIN collections c ON c.id = i.collection_id
  LEFT JOIN workspaces w ON w.id = i.workspace_id
  WHERE i.id = @itemId`;

/** The item's columns, then its collection's (`c_`) and workspace's (`w_`). */
interface LoadRow extends RawItem {
  c_id: string | null;
  c_workspace_id: string;
  c_slug: string;
  c_is_system: number;
  c_schema: string;
  c_settings: string;
  c_created_at: number;
  c_deleted_at: number | null;
  w_id: string | null;
  w_slug: string;
  w_created_at: number;
  w_deleted_at: number | null;
}

/** The item's live comments, oldest first (DESIGN §5: tombstones are never sent). */
const STATE_COMMENTS = `
  SELECT id, author, body, created_at AS createdAt FROM comments
  WHERE item_id = @itemId AND deleted_at IS NULL ORDER BY created_at, id`;

/**
 * The links the item's state shows, from its point of view (DESIGN §5): its parent, the items it
 * blocks, the items that block it; links to a deleted item or to an item of a deleted collection
 * are left out, so their titles are never sent.
 */
const STATE_LINKS = `
  SELECT 'parent' AS relation, t.ref AS ref, t.title AS title FROM item_links l JOIN items t ON t.id = l.target_id
    JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
    WHERE l.source_id = @itemId AND l.link_type = 'parent' AND t.deleted_at IS NULL
  UNION ALL
  SELECT 'blocks', t.ref, t.title FROM item_links l JOIN items t ON t.id = l.target_id
    JOIN collections tc ON tc.id = t.collection_id AND tc.deleted_at IS NULL
    WHERE l.source_id = @itemId AND l.link_type = 'blocks' AND t.deleted_at IS NULL
  UNION ALL
  SELECT 'blocked_by', s.ref, s.title FROM item_links l JOIN items s ON s.id = l.source_id
    JOIN collections sc ON sc.id = s.collection_id AND sc.deleted_at IS NULL
    WHERE l.target_id = @itemId AND l.link_type = 'blocks' AND s.deleted_at IS NULL`;

/**
 * Everything the state builder needs (Store.loadItemForEvaluation): null when the item, its
 * collection or its workspace row is missing. Not one snapshot: a write landing between the
 * statements bumps the job's generation, so an evaluation that read a torn state is superseded and
 * runs again.
 */
export function loadState(db: Database.Database, itemId: string): ItemForEvaluation | null {
  const r = prepared(db, LOAD_ITEM).get({ itemId }) as LoadRow | undefined;
  if (!r || r.c_id === null || r.w_id === null) return null;
  const item: ItemRow = {
    id: r.id,
    workspaceId: r.workspace_id,
    collectionId: r.collection_id,
    ref: r.ref,
    title: r.title,
    content: r.content,
    fields: r.fields,
    seq: r.seq,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    deletedAt: r.deleted_at,
    sourceUrl: r.source_url,
  };
  const collection: CollectionRow = {
    id: r.c_id,
    workspaceId: r.c_workspace_id,
    slug: r.c_slug,
    isSystem: r.c_is_system !== 0,
    schema: JSON.parse(r.c_schema) as CollectionRow['schema'],
    settings: JSON.parse(r.c_settings) as CollectionRow['settings'],
    createdAt: r.c_created_at,
    deletedAt: r.c_deleted_at,
  };
  const workspace: WorkspaceRow = { id: r.w_id, slug: r.w_slug, createdAt: r.w_created_at, deletedAt: r.w_deleted_at };
  const comments = prepared(db, STATE_COMMENTS).all({ itemId }) as TrailComment[];
  const links = prepared(db, STATE_LINKS).all({ itemId }) as StateLink[];
  return { item, collection, workspace, comments, links };
}

/**
 * The runner's one read before a call (DESIGN §7 step 6, §7.6): item, collection and workspace
 * live, the claim still held at its generation, and the lease it has left, in one statement, so a
 * lease is renewed (a write) only when less than half of it is left.
 */
const CHECK_CLAIM = `
  SELECT i.deleted_at AS i, c.deleted_at AS c, w.deleted_at AS w,
         j.claim_token AS token, j.generation AS generation, j.lease_expires_at - @now AS lease_left
  FROM items i JOIN collections c ON c.id = i.collection_id JOIN workspaces w ON w.id = i.workspace_id
  LEFT JOIN decision_jobs j ON j.item_id = i.id AND j.question_set = @questionSet
  WHERE i.id = @itemId`;

/**
 * Store.checkClaim on SQLite: `now` is the store's clock (epoch ms).
 * @returns `leaseLeftMs` ≤ 0 once the lease ran out; -Infinity when the row is gone or holds no lease.
 */
export function checkClaim(db: Database.Database, now: number, claim: Claim): ClaimCheck {
  const r = prepared(db, CHECK_CLAIM).get({ now, itemId: claim.itemId, questionSet: claim.questionSet }) as
    LivenessRow | undefined;
  const left = r?.lease_left;
  return {
    liveness: livenessOf(r, claim),
    leaseLeftMs: left === null || left === undefined ? -Infinity : Number(left),
  };
}

/**
 * The idempotency read for `n` keys (DESIGN §7 step 5): one exact-key term per key, ORed, each a
 * seek on item_decisions_idem_uq (a row-value `IN (VALUES …)` made SQLite build a temporary table:
 * 61 µs against 33 for three keys, measured). One text, so one prepared statement, per `n`.
 */
function answeredKeysSql(n: number): string {
  const term = '(question_key = ? AND state_hash = ? AND question_hash = ? AND state_version = ?)';
  return `SELECT question_key AS k FROM item_decisions WHERE item_id = ? AND question_set = ? AND (${Array.from({ length: n }, () => term).join(' OR ')})`;
}

/** Store.answeredKeys on SQLite: which wanted keys already have a row at exactly that key. */
export function answeredKeys(
  db: Database.Database,
  itemId: string,
  questionSet: string,
  keys: readonly AnswerKey[],
): Set<string> {
  if (keys.length === 0) return new Set();
  const values: unknown[] = [itemId, questionSet];
  for (const k of keys) values.push(k.questionKey, k.stateHash, k.questionHash, k.stateVersion);
  const hits = prepared(db, answeredKeysSql(keys.length)).all(...values) as Array<{ k: string }>;
  return new Set(hits.map((h) => h.k));
}
